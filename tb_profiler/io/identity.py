"""Which version of a file: ``stat_key`` (size, stamp) keys every cache (decoded columns,
summaries, discovery's results, the server's answers).

Why a module of its own: what tells one version of a file from another differs between
a local file (mtime, inode, ctime) and an object store (time, ETag or generation, else a
digest of head and tail), and every cache must agree on it; reading the bytes
(io/read.py) does not need it.
"""
from __future__ import annotations

import datetime as _dt
import os

from tb_profiler.io.paths import is_url, local_path, url_fs

def stat_key(path_or_url: str | os.PathLike) -> tuple[int, int | str]:
    """(size in bytes, version stamp) identifying one version of a file, for every cache.

    Why more than the mtime: a file rewritten with the same size and the same mtime
    (``cp -p``, ``rsync -t``, a restore from backup, a tool that keeps times) would keep
    its key and be served stale from the cache while its bytes are new.  So the stamp
    holds what changes with the content:

    - local files: ``"<mtime_ns>:<inode>:<ctime_ns>"`` (``local_tag``): writing a file
      sets its ctime, and so does setting its mtime back; a file replaced by a rename
      is another inode.  Nothing a user can do keeps the ctime of a rewritten file.
    - fsspec URLs, from the store now (cached listings forgotten, see url_fs): the
      modification time in ns and the store's content tag (S3's ETag, GCS's
      generation, ...) ``"<ns>:<tag>"`` (S3's LastModified has whole seconds);
      where the store gives no tag, a digest of the object's head and tail
      (``remote_identity``).
    Raises OSError (FileNotFoundError, ...) like os.stat.
    """
    if not is_url(path_or_url):
        st = os.stat(local_path(path_or_url))
        return int(st.st_size), local_stamp(st)
    try:
        fs, path = url_fs(os.fspath(path_or_url))
        info = fs.info(path)
        stamp = remote_stamp(info)
        if not remote_tag(info):
            stamp = f"{stamp}:{remote_identity(fs, path, info)}"
    except (OSError, ValueError):
        raise
    except Exception as e:  # a remote filesystem's own (botocore: no endpoint, no credentials), or
        raise OSError(f"{type(e).__name__}: {e}") from e  # its package missing (ImportError: Install s3fs ...)
    return int(info.get("size") or 0), stamp


def local_stamp(st: os.stat_result) -> str:
    """stat_key's stamp of a local file from its stat: ``"<mtime_ns>:<inode>:<ctime_ns>"``."""
    return f"{st.st_mtime_ns}:{local_tag(st)}"


def local_tag(st: os.stat_result) -> str:
    """What tells one local version of a file from another beyond size and mtime:
    ``"<inode>:<ctime_ns>"`` (see stat_key).  Discovery keys its results on it too."""
    return f"{st.st_ino}:{st.st_ctime_ns}"


DIGEST_BYTES = 32 << 10  # of the head and of the tail, hashed where a store has no content tag


def remote_identity(fs, path: str, info: dict) -> str:
    """The content tag of an object (``remote_tag``), or where the store gives none,
    ``"#"`` and a digest of its first and last DIGEST_BYTES bytes (as stored: for a gzip
    file the tail holds the CRC32 of the whole text).  Two reads of 32 KiB: what a store
    without ETag or version costs to tell a rewrite that kept size and time."""
    tag = remote_tag(info)
    if tag:
        return tag
    import hashlib

    size = int(info.get("size") or 0)
    h = hashlib.sha256(fs.cat_file(path, start=0, end=min(size, DIGEST_BYTES)))
    if size > DIGEST_BYTES:
        h.update(fs.cat_file(path, start=max(size - DIGEST_BYTES, DIGEST_BYTES), end=size))
    return "#" + h.hexdigest()[:32]


_TIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created", "timeCreated")


_TAG_KEYS = ("ETag", "etag", "generation", "VersionId", "version_id", "md5Hash", "content_md5", "crc32c")


def remote_tag(info: dict) -> str:
    """The content tag an fsspec ``info`` (or listing entry) gives, '' where none."""
    for key in _TAG_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return str(value).strip('"')
    return ""


def remote_stamp(info: dict) -> int | str:
    """The modification stamp of stat_key from an fsspec info: time in ns, plus the content
    tag where there is one."""
    when: int | str = ""
    for key in _TIME_KEYS:
        if info.get(key) is not None:
            when = _stamp(info[key])
            break
    tag = remote_tag(info)
    return f"{when}:{tag}" if tag else when


def _stamp(value) -> int | str:
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, (int, float)):
        return int(value * 1e9) if value < 1e11 else int(value)
    return str(value)


__all__ = ["DIGEST_BYTES", "local_stamp", "local_tag", "remote_identity", "remote_stamp", "remote_tag", "stat_key"]
