"""Read a trace file's bytes (local or any fsspec URL), gunzipped, into one bytearray.

Why a bytearray: the decoder consumes its input in place (it compacts the args text to
the front of the buffer), so the whole pipeline holds one copy of the JSON text.  Gzip
is inflated chunk by chunk straight into a buffer preallocated from the gzip ISIZE
trailer, so peak memory is the compressed bytes plus the inflated text plus one chunk,
never two full copies of the text (a short hint grows the buffer in place).

Files are untrusted, so reading is bounded: only regular files are opened (a FIFO or a
device would block or never end), the text may not exceed ``max_trace_bytes()`` (a
gzip bomb stops there instead of exhausting memory), text whose first MiB is only
whitespace is rejected as soon as that MiB is read, and gzip text past PADDING_FREE bytes
that inflates more than MAX_INFLATION x the compressed bytes read is refused as padding
(the padding rule: a bomb costs what its file holds, not what it inflates to).

What a path names (a URL or not, a regular file, a link loop) is io/paths.py; which
version of a file it is (``stat_key``, for every cache) is io/identity.py.  Both are
importable from here too, as before they moved.
"""
from __future__ import annotations

import errno
import mmap
import os
import re
import zlib

import numpy as np

from tb_profiler.errors import TraceFormatError
from tb_profiler.io.identity import (  # noqa: F401 - re-exported
    DIGEST_BYTES,
    local_stamp,
    local_tag,
    remote_identity,
    remote_stamp,
    remote_tag,
    stat_key,
)
from tb_profiler.io.paths import (  # noqa: F401 - re-exported (tests patch read.open_regular)
    LINK_LOOP,
    NotARegularFile,
    is_link_loop,
    is_url,
    local_path,
    open_regular,
    source_id,
    url_fs,
)

# The inflaters that can read gzip, by name; ``inflater`` is the one used.  python-isal
# inflates 2-3x faster than zlib with the same API (not the same end-of-stream
# behaviour: both paths are tested by swapping ``inflater``).
INFLATERS: dict[str, object] = {"zlib": zlib}
INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error,)
try:
    from isal import isal_zlib as _isal_zlib

    INFLATERS["isal"] = _isal_zlib
    INFLATE_ERRORS += (_isal_zlib.error,)
except ImportError:  # pragma: no cover - isal is an optional speed-up
    pass
inflater = INFLATERS.get("isal", zlib)

__all__ = ["INFLATE_ERRORS", "LINK_LOOP", "MAX_BYTES_ENV", "NotARegularFile", "is_link_loop", "is_url", "local_stamp",
           "local_tag", "map_plain_trace", "max_trace_bytes", "open_regular", "read_head", "read_trace_bytes",
           "remote_identity", "remote_stamp", "remote_tag", "source_id", "stat_key", "text_size_hint", "url_fs"]

_GZIP_MAGIC = b"\x1f\x8b"
# Why small chunks (issue 22; measured by benchmarks/profile_open.py, its "load: read"
# row): a call that stops at _OUT_CHUNK leaves the rest of its input in a new
# ``unconsumed_tail`` (a copy), so each output chunk costs a copy of what is left of the
# input chunk: at 1 MB in for ~30 MB out that was a dozen 1 MB copies per input chunk. And
# an output chunk under 128 KB-ish is heap memory reused call after call, still in cache
# when it is copied to the text, where 1 MB pieces were fresh pages each time (page
# faults). 32 KB in / 128 KB out: the 35 MB V100 trace inflates in 24.6 ms, not 34.7.
_IN_CHUNK = 1 << 15   # compressed bytes fed per call
_OUT_CHUNK = 1 << 17   # most inflated bytes per call
_HEAD = 1 << 20       # text that must show a JSON value before more is read
_PROGRESS_STEP = 32 << 20  # inflated bytes between two progress calls
_DOWNLOAD_CHUNK = 8 << 20  # bytes of a URL read (and reported) at a time when progress is asked for
_HEAD_BLOCK = 64 << 10    # bytes a URL's head is fetched by
_GZIP_GUESS = 10  # text per gzip byte, where no trailer was read (trace JSON deflates 9-17x)
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\r\n")] = True
_ALL_WHITESPACE = re.compile(rb"[ \t\r\n]*")  # the same four bytes
MAX_BYTES_ENV = "TB_PROFILER_MAX_TRACE_BYTES"
# The padding rule: past PADDING_FREE bytes of text, a gzip file may inflate at most
# MAX_INFLATION x (text per compressed byte read so far); real Kineto traces inflate
# 18-30x.  Why: what a .gz costs must follow what the file holds, not what it inflates to
# (2 MB of gzip inflate to 2 GiB of whitespace, a 0.5 MB one to a 500 MB event name).
PADDING_FREE = 64 << 20
MAX_INFLATION = 256
_MEMORY_FRACTION = 2  # default limit: 1/2 of the available memory (decoding needs about as much again)


def max_trace_bytes() -> int:
    """Most bytes of JSON text one trace may hold: $TB_PROFILER_MAX_TRACE_BYTES, else half
    the memory available now (at least 64 MiB).

    Why: a gzip bomb (2 MB inflating to 2 GiB) must fail with a message, not take the
    machine's memory; and a trace bigger than this could not be decoded anyway.
    """
    raw = os.environ.get(MAX_BYTES_ENV)
    if raw:
        try:
            return max(1, int(float(raw)))
        except ValueError:
            pass  # a malformed override: the default below
    return max(1 << 26, _available_memory() // _MEMORY_FRACTION)


def _available_memory() -> int:
    """MemAvailable (Linux), else physical memory; a large number when neither is known."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 1 << 40


def _limit_text(limit: int, explicit: bool) -> str:
    """The limit and where it comes from, for error messages."""
    if explicit:
        origin = "the max_bytes given"
    elif os.environ.get(MAX_BYTES_ENV):
        origin = f"from ${MAX_BYTES_ENV}"
    else:
        origin = f"half the memory available now; set ${MAX_BYTES_ENV} to change it"
    return f"{limit} bytes ({limit / (1 << 30):.2f} GiB: {origin})"


def read_trace_bytes(path_or_url: str | os.PathLike, max_bytes: int | None = None,
                     progress=None, *, and_decode: bool = False) -> np.ndarray:
    """The (gunzipped) bytes of a trace file, as a writable uint8 array for the decoder.

    Why not a bytearray: bytearray(n) zero-fills its memory, which for a big trace costs
    as much as inflating it; np.empty leaves pages untouched until the data lands.

    Gzip is recognised by its magic bytes, not the file name; every member of a
    multi-member gzip is read, zero padding after the last is ignored.  max_bytes bounds
    the text (default: ``max_trace_bytes()``).

    progress(done, total): called now and then with the work done and in all, in bytes:
    a URL's gzip bytes as they download, then the text as it downloads (a plain URL), is
    read (a plain local file, counted at the end) or is inflated (gzip; the trailer's size
    is the estimate, grown if short); and_decode: total also counts the text once more, for
    the decode the caller does next (it goes on from the last ``done``, which is reported
    when the read ends).  Any failure (missing, unreadable, not a regular file, empty,
    corrupt or truncated gzip, over the limit, only whitespace; for a URL, whatever its
    filesystem raises) raises TraceFormatError naming the file.
    """
    source = os.fspath(path_or_url) if not isinstance(path_or_url, bytes) else os.fsdecode(path_or_url)
    limit = max_trace_bytes() if max_bytes is None else int(max_bytes)
    over = _limit_text(limit, max_bytes is not None)
    meter = _Meter(progress, and_decode)
    try:
        raw = _read_all(path_or_url, source, limit, over, meter)
    except TraceFormatError:
        raise
    except FileNotFoundError:
        raise TraceFormatError(source, "file not found") from None
    except PermissionError:
        raise TraceFormatError(source, "permission denied") from None
    except (IsADirectoryError, NotADirectoryError):
        raise TraceFormatError(source, "is a directory, not a trace file") from None
    except NotARegularFile as e:
        raise TraceFormatError(source, str(e)) from None
    except OSError as e:
        raise TraceFormatError(source, LINK_LOOP if e.errno == errno.ELOOP else f"cannot read: {e.strerror or e}") from None
    except (ImportError, ValueError) as e:  # e.g. an fsspec protocol whose package is missing
        raise TraceFormatError(source, f"cannot read: {type(e).__name__}: {e}") from None
    except Exception as e:  # a remote filesystem's own errors (botocore's credentials, ...)
        if not is_url(path_or_url):
            raise
        raise TraceFormatError(source, f"cannot read: {type(e).__name__}: {e}") from None
    if len(raw) == 0:
        raise TraceFormatError(source, "empty file")
    if bytes(raw[:2]) == _GZIP_MAGIC:
        raw = _gunzip(raw, source, limit, over, meter.inflating() if progress else None)
        if len(raw) == 0:
            raise TraceFormatError(source, "empty file (gzip holds no data)")
        meter.phase_done(len(raw))
    elif not is_url(path_or_url):
        meter.phase_done(len(raw))  # a plain local file: its text, read just now
    meter.finish(len(raw))
    return raw


class _Meter:
    """read_trace_bytes's progress, phase after phase (a URL's download, inflating gzip):
    each phase's work is added to what the phases before it did, and ``done`` never goes
    back."""

    def __init__(self, progress, and_decode: bool):
        self.progress, self.and_decode = progress, and_decode
        self.base = 0   # work of the phases over
        self.last = 0

    def _send(self, done: int, total: int, text: int) -> None:
        """total: of the read; text: bytes of text expected (counted again for the decode)."""
        if self.progress is None:
            return
        done = self.last = max(done, self.last)
        try:
            self.progress(done, max(total + (text if self.and_decode else 0), done))
        except Exception:  # noqa: BLE001 - a caller's progress callback never breaks a read
            pass

    def downloading(self, size: int, text_hint: int | None):
        """f(bytes so far, gzip) reporting a URL's bytes as they arrive: the text itself, or
        gzip whose text (text_hint bytes, else a guess) is inflated next."""
        def on_bytes(pos: int, gzip: bool) -> None:
            if gzip:
                text = text_hint if text_hint else _GZIP_GUESS * size
                self._send(pos, size + text, text)
            else:
                self._send(pos, size, size)
        return on_bytes

    def phase_done(self, work: int) -> None:
        self.base += work

    def inflating(self):
        """The _Sink's progress(text so far, text expected), after what came before."""
        base = self.base
        return lambda done, expected: self._send(base + done, base + expected, expected)

    def finish(self, text: int) -> None:
        """The read is over: all its work is done (the decode's share, when counted, is ahead)."""
        self._send(self.base, self.base, text)


def text_size_hint(path_or_url: str | os.PathLike, max_bytes: int | None = None) -> int:
    """The bytes of text a trace file is expected to hold, before reading it (what a load
    reserves of the shared budget, io.budget): a plain file's size; a gzip file's ISIZE
    trailer (30x its size where the trailer is shorter than the file: wrapped or damaged),
    at most MAX_INFLATION x its size; capped at the limit.  0 when it cannot be told (the
    read then says what is wrong)."""
    limit = max_trace_bytes() if max_bytes is None else int(max_bytes)
    try:
        if is_url(path_or_url):
            fs, path = url_fs(os.fspath(path_or_url))
            size = int(fs.size(path) or 0)
            gz = str(path).endswith(".gz")
            return min(limit, size * (_GZIP_GUESS * 3 if gz else 1))
        with open_regular(local_path(path_or_url)) as f:
            size = os.fstat(f.fileno()).st_size
            if size < 18 or f.read(2) != _GZIP_MAGIC:
                return min(limit, size)
            f.seek(size - 4)
            isize = int.from_bytes(f.read(4), "little")
    except Exception:  # noqa: BLE001 - only an estimate: the read reports any real problem
        return 0
    return min(limit, MAX_INFLATION * size, isize if isize >= size else _GZIP_GUESS * 3 * size)


def map_plain_trace(path_or_url: str | os.PathLike, max_bytes: int | None = None):
    """(a read-only map of the text, the open file) for a plain (not gzip) local trace
    within the limit; None for anything else (a URL, gzip, empty, over the limit,
    unreadable: read_trace_bytes reads those, or says what is wrong with them).

    Why: the decoder can read the text where the OS already holds it (decode's
    keep_input): no copy into fresh memory, whose page faults cost more than decoding.
    The file stays open so the args text can be read from it later (decode.args_text.FileArgs).
    """
    if is_url(path_or_url):
        return None
    limit = max_trace_bytes() if max_bytes is None else int(max_bytes)
    try:
        f = open_regular(local_path(path_or_url))
    except OSError:
        return None
    try:
        size = os.fstat(f.fileno()).st_size
        if size == 0 or size > limit or f.read(2) == _GZIP_MAGIC:
            f.close()
            return None
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        f.close()
        return None
    data = np.frombuffer(mm, dtype=np.uint8)
    try:
        _check_head(data, size, os.fspath(path_or_url), True)
    except TraceFormatError:
        f.close()
        raise
    return data, f


def _alloc(n: int) -> np.ndarray:
    """Writable, uninitialized bytes."""
    return np.empty(n, dtype=np.uint8)


def _check_head(buf: np.ndarray, n: int, source: str, whole: bool) -> None:
    """Raise unless the first min(n, 1 MiB) bytes hold something other than JSON whitespace
    (whole: buf[:n] is all the text there is).

    Why: a gzip bomb of whitespace would otherwise be inflated to the limit (gigabytes)
    before the decoder sees that no JSON value ever starts.
    """
    head = buf[:min(n, _HEAD)]
    # a regular expression over the bytes: stops at the first non-whitespace byte (the
    # first of a real trace), where a lookup over the whole MiB took 6 ms every load
    if len(head) and _ALL_WHITESPACE.fullmatch(memoryview(head)) is not None:
        where = "the file" if whole and n <= _HEAD else f"the first {_HEAD >> 20} MiB"
        raise TraceFormatError(source, f"no JSON value in {where}: only whitespace")


def _check_plain_head(buf: np.ndarray, n: int, source: str, whole: bool) -> None:
    """The head check for text read as is (gzip text is checked while inflating)."""
    if bytes(buf[:2]) != _GZIP_MAGIC:
        _check_head(buf, n, source, whole)


def _read_all(path_or_url: str | os.PathLike, source: str, limit: int, over: str,
              meter: "_Meter | None" = None) -> np.ndarray:
    """All bytes of the file (at most ``limit``), read into a buffer of the file's size."""
    if not is_url(path_or_url):
        with open_regular(local_path(path_or_url)) as f:
            size = os.fstat(f.fileno()).st_size
            _check_size(size, limit, source, over)
            return _readinto_all(f, size, source)
    fs, path = url_fs(os.fspath(path_or_url))
    with fs.open(path, "rb", block_size=_DOWNLOAD_CHUNK) as f:
        size = getattr(f, "size", None)
        if size is None:
            try:
                size = f.fs.size(f.path)
            except Exception:
                size = None
        if size is None or not hasattr(f, "readinto"):
            data = f.read(limit + 1)
            _check_size(len(data), limit, source, over)
            buf = np.frombuffer(bytearray(data), dtype=np.uint8)
            _check_plain_head(buf, len(buf), source, True)
        else:
            size = int(size)
            _check_size(size, limit, source, over)
            wanted = meter is not None and meter.progress is not None
            on_bytes = meter.downloading(size, _gzip_size_hint(f, size, path)) if wanted else None
            buf = _readinto_all(f, size, source, on_bytes)
    if meter is not None:
        meter.phase_done(len(buf))
    return buf


def _gzip_size_hint(f, size: int, path: str) -> int | None:
    """The text size a gzip object's trailer announces (ISIZE), read before the download so
    its progress has a total; None for a name not ending in .gz (not read: a plain object
    costs no extra request) or when the file cannot seek."""
    if size < 18 or not str(path).endswith(".gz"):
        return None
    try:
        f.seek(size - 4)
        tail = f.read(4)
        f.seek(0)
    except Exception:  # noqa: BLE001 - only an estimate; the read reports any real problem
        try:
            f.seek(0)
        except Exception:  # noqa: BLE001
            pass
        return None
    return int.from_bytes(tail, "little") if len(tail) == 4 else None


def _check_size(size: int, limit: int, source: str, over: str) -> None:
    """Raise for a file bigger than the limit (a gzip file that big inflates to more still)."""
    if size > limit:
        raise TraceFormatError(source, f"the file is {size} bytes, over the limit of {over}")


def _readinto_all(f, size: int, source: str, on_bytes=None) -> np.ndarray:
    """The file's bytes; the head first, so a plain file of whitespace fails before the rest.

    on_bytes(bytes so far, gzip): a download's progress; the file is then read
    _DOWNLOAD_CHUNK bytes at a time (one request each at most, for an object store)."""
    buf = _alloc(size)
    view = memoryview(buf)
    pos = _fill(f, view, 0, min(size, _HEAD))
    _check_plain_head(buf, pos, source, pos < _HEAD)
    gzip = bytes(buf[:2]) == _GZIP_MAGIC
    if on_bytes is not None:
        on_bytes(pos, gzip)
    if pos == min(size, _HEAD):
        if on_bytes is None:
            pos = _fill(f, view, pos, size)
        else:
            while pos < size:
                got = _fill(f, view, pos, min(size, pos + _DOWNLOAD_CHUNK))
                if got == pos:
                    break
                pos = got
                on_bytes(pos, gzip)
    view.release()
    if pos < size:  # shrank while reading
        return buf[:pos]
    rest = f.read()  # grew while reading: take the rest too
    return np.concatenate([buf, np.frombuffer(rest, dtype=np.uint8)]) if rest else buf


def _fill(f, view: memoryview, pos: int, end: int) -> int:
    """Read into view[pos:end] until full or end of file; the new position."""
    while pos < end:
        n = f.readinto(view[pos:end])
        if not n:
            break
        pos += n
    return pos


def _gunzip(comp: np.ndarray, source: str, limit: int, over: str, progress=None) -> np.ndarray:
    """Inflate every gzip member of comp into a buffer sized from the ISIZE trailer."""
    # ISIZE is mod 2**32, the last member's only, and garbage in a damaged file: only a hint,
    # capped at 256x the compressed size (trace JSON deflates ~30x) and at the limit, grown if short.
    hint = int.from_bytes(comp[-4:], "little") if len(comp) >= 18 else 0
    sink = _Sink(min(hint, 256 * len(comp), limit), source, limit, over, progress)
    src = memoryview(comp)
    start = 0
    try:
        while start < len(src):
            start = _inflate_member(src, start, sink)
            if src[start:start + 2] != _GZIP_MAGIC:
                _check_padding(comp, start, source)
                break
    except INFLATE_ERRORS as e:
        raise TraceFormatError(source, f"corrupt gzip data ({e})", offset=sink.pos) from None
    finally:
        src.release()
    return sink.result()


def _inflate_member(src: memoryview, start: int, sink: _Sink) -> int:
    """Inflate the gzip member at ``start`` into sink; the offset just past its end.

    The member ends where the inflater reports eof: the bytes fed after that point are
    ``unused_data``.  Why the loop stops at eof: CPython's zlib also leaves them in
    ``unconsumed_tail``, and feeding that again returns nothing forever.
    """
    d = inflater.decompressobj(31)
    at = start
    while not d.eof:
        if at >= len(src):  # all input fed: what the inflater still holds, then it must be done
            sink.put(d.flush(), at)
            if not d.eof:
                raise TraceFormatError(sink.source, "truncated gzip stream", offset=sink.pos)
            break
        data = src[at:at + _IN_CHUNK]
        at += len(data)
        while data and not d.eof:
            piece = d.decompress(data, _OUT_CHUNK)
            tail = d.unconsumed_tail
            if not piece and len(tail) == len(data) and not d.eof:
                raise TraceFormatError(sink.source, "corrupt gzip data (the inflater makes no progress)",
                                       offset=sink.pos)
            sink.put(piece, at - len(tail))
            data = tail
    return at - len(d.unused_data)


class _Sink:
    """The inflated text so far, in an anonymous memory map grown up to the limit.

    Why a map: growing it is mremap on Linux, no copy, so a short ISIZE hint never holds
    the old and the new buffer at once (peak memory stays at the limit, not twice it);
    its pages, like np.empty's, cost nothing until written.
    """

    def __init__(self, capacity: int, source: str, limit: int, over: str, progress=None):
        self.mm = _anonymous_map(max(capacity, _OUT_CHUNK))
        self.pos, self.source, self.limit, self.over = 0, source, limit, over
        self.checked = False
        self.progress, self.expected, self.reported = progress, capacity, 0

    def put(self, piece: bytes, consumed: int) -> None:
        """Append piece, inflated from the first ``consumed`` compressed bytes."""
        end = self.pos + len(piece)
        if end > self.limit:
            raise TraceFormatError(self.source, f"gzip data inflates to more than the limit of {self.over}")
        if end > PADDING_FREE and end > MAX_INFLATION * consumed:
            raise TraceFormatError(self.source, padding_message(np.frombuffer(self.mm, np.uint8, self.pos), consumed))
        if end > len(self.mm):  # the ISIZE hint was short: grow geometrically, up to the limit
            self._grow(min(max(end, 2 * len(self.mm)), self.limit))
        self.mm[self.pos:end] = piece
        self.pos = end
        if self.progress is not None and end - self.reported >= _PROGRESS_STEP:
            self.reported = end
            self.progress(end, max(self.expected, end))
        if not self.checked and end >= _HEAD:
            _check_head(np.frombuffer(self.mm, np.uint8, _HEAD), end, self.source, False)
            self.checked = True

    def _grow(self, size: int) -> None:
        try:
            self.mm.resize(size)
        except (OSError, ValueError, SystemError):  # no mremap (macOS): copy into a bigger map
            bigger = _anonymous_map(size)
            with memoryview(bigger) as dst, memoryview(self.mm) as src:
                dst[:self.pos] = src[:self.pos]
            self.mm.close()
            self.mm = bigger

    def result(self) -> np.ndarray:
        out = np.frombuffer(self.mm, np.uint8, self.pos)
        if not self.checked:
            _check_head(out, self.pos, self.source, True)
        return out


def padding_message(text: np.ndarray, consumed: int) -> str:
    """Why a gzip file whose text inflates past MAX_INFLATION x is refused, with what its
    text holds (its share of whitespace, how rare its JSON objects are)."""
    n = max(len(text), 1)
    blank = int(np.count_nonzero(_WHITESPACE[text])) / n
    objects = int(np.count_nonzero(text == ord("{")))
    every = f"one per {n // objects} bytes" if objects else "none"
    return (f"refused: its gzip data inflates more than {MAX_INFLATION}x ({len(text)} bytes of text from the "
            f"first {consumed} compressed bytes; real Kineto traces inflate 18-30x): the text is mostly padding "
            f"({blank:.1%} whitespace, '{{' characters: {every}; real traces hold an event every few hundred bytes)")


def _anonymous_map(size: int) -> mmap.mmap:
    """Private anonymous memory: Python's default (shared) one cannot grow (SIGBUS past the
    old end after mremap)."""
    if not hasattr(mmap, "MAP_PRIVATE"):  # pragma: no cover - Windows
        return mmap.mmap(-1, size)
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):  # as numpy does for big arrays: far fewer page faults
        mm.madvise(mmap.MADV_HUGEPAGE)
    return mm


def _check_padding(comp: np.ndarray, start: int, source: str) -> None:
    """Bytes after the last gzip member: zero padding is fine (gzip ignores it), else raise."""
    rest = comp[start:]
    nonzero = np.flatnonzero(rest)
    if len(nonzero):
        at = start + int(nonzero[0])
        raise TraceFormatError(
            source, f"trailing garbage: the gzip data ends at compressed byte {start}, and the {len(rest)} bytes "
                    f"after it are neither another gzip member nor zero padding (first non-zero byte at "
                    f"{at}: {bytes(comp[at:at + 8]).hex(' ')})")


def read_head(path_or_url: str | os.PathLike, n: int) -> bytes:
    """The first n bytes of a file's text, inflating only the head of a gzip file.

    Why: discovery tells a trace from other JSON by its head, and must stay cheap on a
    folder of big files.  Raises OSError (NotARegularFile included) or INFLATE_ERRORS.
    """
    if is_url(path_or_url):
        fs, path = url_fs(os.fspath(path_or_url))
        # A small block: the default (s3fs: 50 MiB read ahead) would fetch that much of
        # every file sniffed.
        with fs.open(path, "rb", block_size=_HEAD_BLOCK) as f:
            return _head_of(f, n)
    with open_regular(local_path(path_or_url)) as f:
        return _head_of(f, n)


def _head_of(f, n: int) -> bytes:
    """At most n bytes of text from f: as is, or inflated from a gzip start."""
    first = f.read(min(n, 1 << 14))
    if first[:2] != _GZIP_MAGIC:
        return first + (f.read(n - len(first)) if len(first) < n and first else b"")
    d = inflater.decompressobj(31)
    out, data = [], first
    got = 0
    while data and got < n and not d.eof:
        piece = d.decompress(data, n - got)
        out.append(piece)
        got += len(piece)
        data = d.unconsumed_tail or (b"" if d.eof else f.read(1 << 14))
    return b"".join(out)[:n]


