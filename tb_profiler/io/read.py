"""Read a trace file's bytes (local or any fsspec URL), gunzipped, into one bytearray.

Why a bytearray: the decoder consumes its input in place (it compacts the args text to
the front of the buffer), so the whole pipeline holds one copy of the JSON text.  Gzip
is inflated chunk by chunk straight into a buffer preallocated from the gzip ISIZE
trailer, so peak memory is the compressed bytes plus the inflated text plus one chunk,
never two full copies of the text.
"""
from __future__ import annotations

import datetime as _dt
import os
import zlib

import numpy as np

from tb_profiler.errors import TraceFormatError

try:  # python-isal inflates 2-3x faster than zlib; same API and error type family.
    from isal import isal_zlib as _zlib

    _ZLIB_ERRORS: tuple[type[BaseException], ...] = (zlib.error, _zlib.error)
except ImportError:  # pragma: no cover - isal is an optional speed-up
    _zlib = zlib
    _ZLIB_ERRORS = (zlib.error,)

__all__ = ["read_trace_bytes", "stat_key", "is_url", "source_id"]

_GZIP_MAGIC = b"\x1f\x8b"
_IN_CHUNK = 1 << 20   # compressed bytes fed per call
_OUT_CHUNK = 1 << 20   # most inflated bytes per call: small enough to stay in cache before the copy


def is_url(path_or_url: str | os.PathLike) -> bool:
    """True for 'proto://...' strings other than file://, which is read as a local path."""
    s = os.fspath(path_or_url)
    return isinstance(s, str) and "://" in s and not s.startswith("file://")


def _local(path_or_url: str | os.PathLike) -> str:
    s = os.fspath(path_or_url)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    return s[len("file://"):] if s.startswith("file://") else s


def source_id(path_or_url: str | os.PathLike) -> str:
    """A stable identity for a trace: the absolute local path, or the URL as given."""
    if is_url(path_or_url):
        return os.fspath(path_or_url)
    return os.path.abspath(_local(path_or_url))


def read_trace_bytes(path_or_url: str | os.PathLike) -> np.ndarray:
    """The (gunzipped) bytes of a trace file, as a writable uint8 array for the decoder.

    Why not a bytearray: bytearray(n) zero-fills its memory, which for a big trace costs
    as much as inflating it; np.empty leaves pages untouched until the data lands.

    Gzip is recognised by its magic bytes, not the file name.  Any failure (missing,
    unreadable, empty, corrupt or truncated gzip) raises TraceFormatError naming the file.
    """
    source = os.fspath(path_or_url) if not isinstance(path_or_url, bytes) else os.fsdecode(path_or_url)
    try:
        raw = _read_all(path_or_url)
    except TraceFormatError:
        raise
    except FileNotFoundError:
        raise TraceFormatError(source, "file not found") from None
    except PermissionError:
        raise TraceFormatError(source, "permission denied") from None
    except IsADirectoryError:
        raise TraceFormatError(source, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceFormatError(source, f"cannot read: {e.strerror or e}") from None
    except (ImportError, ValueError) as e:  # e.g. an fsspec protocol whose package is missing
        raise TraceFormatError(source, f"cannot read: {type(e).__name__}: {e}") from None
    if len(raw) == 0:
        raise TraceFormatError(source, "empty file")
    if bytes(raw[:2]) == _GZIP_MAGIC:
        raw = _gunzip(raw, source)
        if len(raw) == 0:
            raise TraceFormatError(source, "empty file (gzip holds no data)")
    return raw


def _alloc(n: int) -> np.ndarray:
    """Writable, uninitialized bytes."""
    return np.empty(n, dtype=np.uint8)


def _read_all(path_or_url: str | os.PathLike) -> np.ndarray:
    """All bytes of the file, read into a buffer of the file's size (one copy)."""
    if not is_url(path_or_url):
        with open(_local(path_or_url), "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            return _readinto_all(f, size)
    import fsspec

    with fsspec.open(os.fspath(path_or_url), "rb") as f:
        size = getattr(f, "size", None)
        if size is None:
            try:
                size = f.fs.size(f.path)
            except Exception:
                size = None
        if size is None or not hasattr(f, "readinto"):
            return np.frombuffer(bytearray(f.read()), dtype=np.uint8)
        return _readinto_all(f, int(size))


def _readinto_all(f, size: int) -> np.ndarray:
    buf = _alloc(size)
    view = memoryview(buf)
    pos = 0
    while pos < size:
        n = f.readinto(view[pos:])
        if not n:
            break
        pos += n
    view.release()
    if pos < size:  # shrank while reading
        return buf[:pos]
    rest = f.read()  # grew while reading: take the rest too
    return np.concatenate([buf, np.frombuffer(rest, dtype=np.uint8)]) if rest else buf


def _gunzip(comp: np.ndarray, source: str) -> np.ndarray:
    """Inflate all gzip members of comp into a bytearray sized from the ISIZE trailer."""
    # ISIZE is mod 2**32, the last member's only, and garbage in a damaged file: only a hint,
    # capped at 256x the compressed size (trace JSON deflates ~30x), grown if short.
    hint = int.from_bytes(comp[-4:], "little") if len(comp) >= 18 else 0
    out = _alloc(min(hint, 256 * len(comp)))
    pos = 0
    src = memoryview(comp)
    start = 0
    try:
        while start < len(src):
            d = _zlib.decompressobj(31)
            at = start
            while not d.eof and at < len(src):
                data = src[at:at + _IN_CHUNK]
                at += len(data)
                while data:
                    piece = d.decompress(data, _OUT_CHUNK)
                    out, pos = _put(out, pos, piece)
                    data = d.unconsumed_tail
            if not d.eof:
                raise TraceFormatError(source, "truncated gzip stream", offset=pos)
            tail = d.unused_data
            start = len(src) - len(tail)
            if tail and tail[:2] != _GZIP_MAGIC:
                if tail.strip(b"\0"):  # zero padding after a member is tolerated, as gzip does
                    raise TraceFormatError(source, "trailing garbage after gzip data")
                break
    except _ZLIB_ERRORS as e:
        raise TraceFormatError(source, f"corrupt gzip data ({e})", offset=pos) from None
    finally:
        src.release()
    return out[:pos] if pos < len(out) else out


def _put(out: np.ndarray, pos: int, piece: bytes) -> tuple[np.ndarray, int]:
    end = pos + len(piece)
    if end > len(out):  # the ISIZE hint was short: grow geometrically
        bigger = _alloc(max(end, 2 * len(out)))
        bigger[:pos] = out[:pos]
        out = bigger
    out[pos:end] = np.frombuffer(piece, dtype=np.uint8)
    return out, end


def stat_key(path_or_url: str | os.PathLike) -> tuple[int, int | str]:
    """(size in bytes, modification stamp) identifying one version of a file, for the cache.

    The stamp is st_mtime_ns for local files; for fsspec URLs it is the backend's
    modification time in ns when it has one, else its ETag / created time as text.
    Raises OSError (FileNotFoundError, ...) like os.stat.
    """
    if not is_url(path_or_url):
        st = os.stat(_local(path_or_url))
        return int(st.st_size), int(st.st_mtime_ns)
    import fsspec

    fs, path = fsspec.core.url_to_fs(os.fspath(path_or_url))
    info = fs.info(path)
    size = int(info.get("size") or 0)
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "ETag", "etag",
                "md5Hash", "created"):
        if info.get(key) is not None:
            return size, _stamp(info[key])
    return size, ""


def _stamp(value) -> int | str:
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, (int, float)):
        return int(value * 1e9) if value < 1e11 else int(value)
    return str(value)
