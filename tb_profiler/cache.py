"""On-disk cache of decoded traces: one memory-mappable file per trace source.

Why: decoding a big trace costs seconds; reopening it should cost a file open.  An entry
holds the Trace's arrays as raw bytes (each 64-byte aligned) after a small JSON header,
so a reopen is: read the header, mmap the file, wrap each array with np.frombuffer (no
copy, pages shared with the OS cache).  Nothing is trusted: the key (source, size,
version stamp, decoder and model versions), the file size, each array's bounds, the header's
CRC32 and one CRC32 per array are verified, and any mismatch means "miss, rebuild".
An array's CRC is checked when it is first read (``CheckedArrays``), not at the open:
a reopen then touches only what a view reads (checking a 1 GB trace's whole entry was
98 % of its reopen time).  A damaged array found then calls the loader's ``on_damage``,
which decodes the trace again and answers from that from then on.

The args text (most of a trace) is kept small: for a plain JSON trace on local disk the
entry stores nothing (the offsets address the trace file, read on demand); otherwise it
is stored as zstd blocks (``decode.args_text``).  Writes go to a temp file renamed over
the entry, so readers never see half an entry.  Any OS error (read-only or full disk)
turns the cache off for that call with a warning, never failing the load.

Layout:  b"TBPCACHE" | u32 format | u32 header crc | u64 header length | header JSON |
         padding | array bytes ...
"""
from __future__ import annotations

import json
import math
import mmap
import os
import struct
import tempfile
import warnings
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tb_profiler.cache_folder import FORMAT, MAGIC, PREFIX, CacheWarning, cache_dir, entry_source
from tb_profiler.decode.args_text import BlockArgs, FileArgs, compress_blocks, have_zstd
from tb_profiler.io.read import open_regular

try:
    from isal.isal_zlib import crc32 as _crc32  # ~20 GB/s vs zlib's ~3 GB/s
except ImportError:  # pragma: no cover
    _crc32 = zlib.crc32

__all__ = ["CacheKey", "CheckedArrays", "Entry", "EntryInfo", "clear", "entries", "entry_chunks", "entry_from_buffer",
           "read_entry", "write_entry"]

_ALIGN = 64
_STRINGS = "__strings.utf8"
_STRING_OFFSETS = "__strings.offsets"
_BLOB = "__args_blob"
_ZDATA = "__args_zdata"
_ZOFFSETS = "__args_zoffsets"
READ_BELOW = 1 << 20  # bytes: an entry this small is read, not mapped (read_entry)


@dataclass(frozen=True)
class CacheKey:
    """What makes a cached entry valid: the same source, file version and code versions.
    The file version is what changes with its content (io.read.stat_key), never the
    modification time alone: a file rewritten with the same size and mtime is another one."""

    source: str
    size: int
    mtime: int | str  # the version stamp of io.read.stat_key: mtime, inode and ctime locally; time and ETag remotely
    decoder_version: str
    model_version: int
    summary_version: int | None = None  # set for a trace summary's entry (tb_profiler.summary)
    part: str | None = None  # set for an entry of arrays derived from the trace (analysis.stored)

    def as_dict(self) -> dict:
        out = {"source": self.source, "size": self.size, "mtime": self.mtime,
               "decoder_version": str(self.decoder_version), "model_version": self.model_version,
               "format": FORMAT}
        if self.summary_version is not None:
            out["summary_version"] = self.summary_version
        if self.part is not None:
            out["part"] = self.part
        return out


@dataclass
class Entry:
    """A cache entry's content: named arrays, strings, args text and JSON metadata."""

    arrays: "Mapping[str, np.ndarray]"
    strings: np.ndarray
    args_blob: object
    meta: dict
    path: str = ""


class DamagedEntry(ValueError):
    """An array of a cache entry does not match its CRC (and nobody can rebuild it)."""


class CheckedArrays(Mapping):
    """An entry's arrays, each checked against its CRC when first read.

    on_damage() -> {name: array}: called once when a check fails; its arrays (the trace
    decoded again) answer every read from then on.  Without it a failed check raises
    DamagedEntry.  ``length``/``nbytes`` answer from the header, touching no data.
    """

    def __init__(self, views: dict[str, np.ndarray], crcs: dict[str, int], on_damage=None):
        self._views, self._crcs = views, crcs
        self._checked: set[str] = set()
        self.on_damage = on_damage
        self._fallback: dict | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        if self._fallback is not None:
            return self._fallback[name]
        arr = self._views[name]
        if name not in self._checked:
            if _crc32(memoryview(arr).cast("B")) != self._crcs[name]:
                return self._damaged(name)
            self._checked.add(name)
        return arr

    def _damaged(self, name: str) -> np.ndarray:
        if self.on_damage is None:
            raise DamagedEntry(f"cache entry array {name} does not match its checksum")
        self._fallback = self.on_damage()
        return self._fallback[name]

    def __iter__(self):
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, name) -> bool:
        return name in self._views

    def length(self, name: str) -> int:
        return len(self._views[name])

    def nbytes(self) -> int:
        return sum(v.nbytes for v in self._views.values())

    def check_all(self) -> None:
        """Read every array (each checked once)."""
        for name in self._views:
            self[name]


# -- reading ----------------------------------------------------------------------------
class _Invalid(Exception):
    pass


def read_entry(path: str, key: CacheKey, on_damage=None) -> Entry | None:
    """The entry at path if it is intact and matches key, else None (miss, stale or corrupt).
    Its arrays are checked when first read (CheckedArrays, which calls on_damage).

    An entry of up to READ_BELOW bytes is read into memory, a bigger one is mapped.  Why:
    a map holds a file descriptor as long as the arrays live (Python's mmap keeps one), and
    a server holding thousands of small traces would run out of descriptors (1,024 by
    default) for a saving of nothing."""
    try:
        with open_regular(path) as f:  # a FIFO planted at the entry path must not block the load
            size = os.fstat(f.fileno()).st_size
            if size < PREFIX.size:
                return None
            mm = f.read() if size <= READ_BELOW else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    entry = entry_from_buffer(mm, key, path, on_damage)
    if entry is not None:
        from tb_profiler.cache_limit import mark_used  # it lists entries with this module: imported late

        mark_used(path)
    return entry


def entry_from_buffer(buf, key: CacheKey, path: str = "", on_damage=None) -> Entry | None:
    """The entry held in buf (an mmap of the file, or its bytes fetched from a URL) if it is
    intact and matches key, else None.  The arrays are views of buf, checked on first read."""
    try:
        size = len(buf)
        if size < PREFIX.size:
            return None
        magic, fmt, header_crc, header_len = PREFIX.unpack_from(buf, 0)
        if magic != MAGIC or fmt != FORMAT or header_len > size - PREFIX.size:
            return None
        header_bytes = bytes(memoryview(buf)[PREFIX.size:PREFIX.size + header_len])
        if _crc32(header_bytes) != header_crc:
            return None
        header = json.loads(header_bytes)
        start = _pad(PREFIX.size + header_len)
        if header.get("key") != key.as_dict() or start + header.get("data_size", -1) != size:
            return None
        return _parse(header, buf, start, path, key, on_damage)
    except (_Invalid, ValueError, TypeError, KeyError, UnicodeDecodeError, AttributeError, struct.error):
        return None


def _parse(header: dict, mm, start: int, path: str, key: CacheKey, on_damage) -> Entry:
    views, crcs = {}, {}
    for name, spec in header["arrays"].items():
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(x) for x in spec["shape"])
        off, nbytes = start + int(spec["offset"]), int(spec["nbytes"])
        count = math.prod(shape)
        if off < start or nbytes != count * dtype.itemsize or off + nbytes > len(mm) or dtype.hasobject:
            raise _Invalid(name)
        views[name] = np.frombuffer(memoryview(mm)[off:off + nbytes], dtype=dtype, count=count).reshape(shape)
        crcs[name] = int(spec["crc"])
    arrays = CheckedArrays(views, crcs)
    own = [n for n in views if n.startswith("__")]
    strings = _strings_from(arrays[_STRINGS], arrays[_STRING_OFFSETS] if _STRING_OFFSETS in views else None,
                            header["strings"])
    args = _args_from(header.get("args", {}), arrays, key)
    for name in own:  # the entry's own parts, read above: not the trace's arrays
        del views[name]
    arrays.on_damage = on_damage
    return Entry(arrays, strings, args, header["meta"], path)


def _args_from(spec: dict, arrays: CheckedArrays, key: CacheKey):
    """The args text as the header says it is stored (see the module docstring)."""
    mode = spec.get("mode")
    if mode == "file":
        text = FileArgs.open(key.source, key.size, key.mtime)
        if text is None:  # the trace file changed under the key just checked: rebuild
            raise _Invalid("args file")
        return text
    if mode == "zstd":
        if not have_zstd():
            raise _Invalid("zstandard is not installed")
        return BlockArgs(arrays[_ZDATA], arrays[_ZOFFSETS], int(spec["raw_len"]))
    if mode == "raw":
        return memoryview(arrays[_BLOB]).cast("B")  # stays mapped: args are read on demand
    raise _Invalid("args mode")


def _strings_from(utf8: np.ndarray, offsets: np.ndarray | None, spec: dict) -> np.ndarray:
    count = int(spec["count"])
    text = utf8.tobytes().decode("utf-8", "surrogatepass")
    if spec["mode"] == "nul":
        parts = text.split("\x00") if count else []
    else:
        if offsets is None or len(offsets) != count + 1:
            raise _Invalid("string offsets")
        b = utf8.tobytes()
        parts = [b[a:z].decode("utf-8", "surrogatepass") for a, z in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    if len(parts) != count:
        raise _Invalid("string count")
    out = np.empty(count, dtype=object)
    out[:] = parts
    return out


# -- inventory ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EntryInfo:
    """One file of the cache folder: its source as its header names it (None: not an entry,
    or unreadable), whether that source is still there, its size and last use."""

    path: str
    source: str | None
    kind: str            # "columns" or "summary"
    nbytes: int
    atime: float
    orphan: bool         # the source is gone (a local file no longer there), or not an entry


def entries(folder: str | os.PathLike | None = None) -> list[EntryInfo]:
    """Every entry of the cache folder and of its summaries folder, oldest use first."""
    root = cache_dir(folder)
    out = []
    for sub, kind in (("", "columns"), ("summaries", "summary")):
        base = os.path.join(root, sub) if sub else root
        try:
            names = [n for n in os.listdir(base) if n.endswith(".tbpc")]
        except OSError:
            continue
        for name in names:
            path = os.path.join(base, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            source = entry_source(path)
            gone = source is None or ("://" not in source and not os.path.exists(source))
            out.append(EntryInfo(path, source, kind, st.st_size, st.st_atime, gone))
    return sorted(out, key=lambda e: e.atime)


def clear(folder: str | os.PathLike | None = None, orphans_only: bool = False) -> tuple[int, int]:
    """Remove the cache's entries (only those whose source is gone with orphans_only);
    (files removed, bytes freed). Other files in the folder are left alone."""
    removed = freed = 0
    for e in entries(folder):
        if orphans_only and not e.orphan:
            continue
        try:
            os.unlink(e.path)
        except OSError:
            continue
        removed, freed = removed + 1, freed + e.nbytes
    return removed, freed


# -- writing ----------------------------------------------------------------------------
def write_entry(path: str, key: CacheKey, arrays: Mapping[str, np.ndarray], strings, args_blob, meta: dict) -> bool:
    """Write an entry atomically (temp file + rename), first making room for it under the
    cache's cap (tb_profiler.cache_limit: from its picture of the folder, so a write costs
    the same however many entries there are); False without writing when it alone is over
    the cap.  On any OS error: warn, return False."""
    folder = os.path.dirname(path) or "."
    tmp = None
    from tb_profiler import cache_limit  # it lists entries with this module: imported late

    try:
        chunks = entry_chunks(key, arrays, strings, args_blob, meta)
        nbytes = sum(len(memoryview(c).cast("B")) for c in chunks)
        if not cache_limit.would_fit(folder, nbytes):  # bigger than the whole cap (or the cap is 0)
            return False
        os.makedirs(folder, exist_ok=True)
        cache_limit.make_room(folder, incoming=nbytes, keep=(path,))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tbpc", dir=folder)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, path)
        tmp = None
        cache_limit.written(path, key.source)
        return True
    except (OSError, TypeError, ValueError) as e:
        warnings.warn(f"tb_profiler: trace cache disabled for this load ({path}: {e})", CacheWarning, stacklevel=3)
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def entry_chunks(key: CacheKey, arrays: Mapping[str, np.ndarray], strings, args_blob, meta: dict) -> list:
    """An entry's bytes, in pieces to write one after the other (to a file, or to a URL).
    Raises TypeError for an object array (nothing to write then)."""
    payload = dict(arrays)
    strings_spec, string_arrays = _strings_arrays(strings)
    payload.update(string_arrays)
    args_spec, args_arrays = _args_arrays(args_blob)
    payload.update(args_arrays)
    specs, offset = {}, 0
    for name, arr in payload.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject:
            raise TypeError(f"cannot cache object array {name}")
        payload[name] = arr
        specs[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset,
                       "nbytes": arr.nbytes, "crc": _crc32(memoryview(arr).cast("B"))}
        offset += _pad(arr.nbytes)
    header = {"key": key.as_dict(), "arrays": specs, "meta": meta, "strings": strings_spec, "args": args_spec,
              "data_size": offset}
    body = json.dumps(header, separators=(",", ":")).encode()
    start = _pad(PREFIX.size + len(body))
    chunks = [PREFIX.pack(MAGIC, FORMAT, _crc32(body), len(body)), body, b"\0" * (start - PREFIX.size - len(body))]
    for arr in payload.values():
        chunks += [memoryview(arr).cast("B"), b"\0" * (_pad(arr.nbytes) - arr.nbytes)]
    return chunks


def _args_arrays(text) -> tuple[dict, dict[str, np.ndarray]]:
    """How an entry stores the args text: not at all when it is read from the trace file,
    as zstd blocks when zstandard is there, else raw."""
    if isinstance(text, FileArgs):
        return {"mode": "file"}, {}
    if isinstance(text, BlockArgs):
        text = bytes(text)
    n = len(text) if text is not None else 0
    if n and have_zstd():
        data, offsets = compress_blocks(text)
        return {"mode": "zstd", "raw_len": n}, {_ZDATA: data, _ZOFFSETS: offsets}
    raw = np.frombuffer(text, dtype=np.uint8) if n else np.zeros(0, np.uint8)
    return {"mode": "raw"}, {_BLOB: raw}


def _pad(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _strings_arrays(strings) -> tuple[dict, dict[str, np.ndarray]]:
    """The string table as UTF-8: NUL-joined (split on read), or with offsets if a string has a NUL."""
    joined = "\x00".join(strings)
    if joined.count("\x00") == max(len(strings) - 1, 0):
        data = joined.encode("utf-8", "surrogatepass")
        return {"mode": "nul", "count": len(strings)}, {_STRINGS: np.frombuffer(data, dtype=np.uint8)}
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return ({"mode": "offsets", "count": len(strings)},
            {_STRINGS: np.frombuffer(b"".join(encoded), dtype=np.uint8), _STRING_OFFSETS: offsets})
