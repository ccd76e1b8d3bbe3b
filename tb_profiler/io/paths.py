"""What a path names, before anything is read: a local path or an fsspec URL, its stable
identity (``source_id``), a local file opened only if it is a regular one, a symbolic
link loop told from a missing file, and a URL's filesystem with its stale listings
forgotten.

Why a module of its own: discovery, loading, the caches, the writer and the CLI all ask
these questions of a path; io/read.py reads the bytes, io/identity.py versions the file.
"""
from __future__ import annotations

import errno
import os
import stat as _stat

# What a symbolic link that leads back to itself is called, wherever one is met (discovery,
# loading, the CLI): the OS says "too many levels of symbolic links".
LINK_LOOP = "symbolic link loop: the link leads (through other links) back to itself"


def is_link_loop(path: str | os.PathLike) -> bool:
    """Whether following the symbolic links of a local path loops (ELOOP), rather than
    ending nowhere (a broken link) or somewhere."""
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    return False


class NotARegularFile(OSError):
    """A path that is a FIFO, device or socket: reading it could block or never end."""


_FILE_TYPES = ((_stat.S_ISFIFO, "a FIFO"), (_stat.S_ISSOCK, "a socket"),
               (_stat.S_ISCHR, "a character device"), (_stat.S_ISBLK, "a block device"))


def open_regular(path: str | os.PathLike):
    """An unbuffered binary file object for ``path``, which must be a regular file.

    Why O_NONBLOCK: opening a FIFO for reading blocks until a writer appears; opened
    non-blocking it returns at once and fstat then says what it is (no race between a
    stat and the open).  Raises NotARegularFile (IsADirectoryError for a folder), or
    OSError like open().
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if _stat.S_ISDIR(mode):  # what open() says of a folder
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not _stat.S_ISREG(mode):
            what = next((word for test, word in _FILE_TYPES if test(mode)), "not a plain file")
            raise NotARegularFile(f"not a regular file: {what}")
        return open(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def is_url(path_or_url: str | os.PathLike) -> bool:
    """True for 'proto://...' strings other than file://, which is read as a local path."""
    s = os.fspath(path_or_url)
    return isinstance(s, str) and "://" in s and not s.startswith("file://")


def local_path(path_or_url: str | os.PathLike) -> str:
    """The local path a path or file:// URL names."""
    s = os.fspath(path_or_url)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    return s[len("file://"):] if s.startswith("file://") else s


def source_id(path_or_url: str | os.PathLike) -> str:
    """A stable identity for a trace: the absolute local path, or the URL as given."""
    if is_url(path_or_url):
        return os.fspath(path_or_url)
    return os.path.abspath(local_path(path_or_url))


def url_fs(url: str):
    """(filesystem, path) of an fsspec URL, with the filesystem's cached listings of that
    path forgotten: what it says of the object (size, ETag) is the store's now.

    Why: fsspec keeps filesystems (and with them their listings) for the life of the
    process, and s3fs answers ``info`` from the listing of the last ``find``; an object
    rewritten by another process since would be stat'ed, keyed in the cache and read as
    the old version (wrong size, or served stale).
    """
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(url)
    try:
        fs.invalidate_cache(path)
    except Exception:  # noqa: BLE001 - a filesystem without listings to forget
        pass
    return fs, path


__all__ = ["LINK_LOOP", "NotARegularFile", "is_link_loop", "is_url", "local_path", "open_regular", "source_id", "url_fs"]
