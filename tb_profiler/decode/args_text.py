"""Where a trace's args text lives when it is not in memory: the trace file itself, or
zstd-compressed blocks of the cache entry.

Why: the args text is most of a trace (70 % of a 1 GB one) and is read one event at a
time, for a details panel.  Keeping it resident cost as much memory as the file, and
storing it raw made the cache as big as the trace.  Both classes here answer
``text[off:off + n]`` with bytes, as the in-memory blob (a bytes-like) does, so
``Table.args`` reads any of the three the same way.

- ``FileArgs``: a plain JSON trace the decoder read without writing it (keep_input):
  args_off are offsets into the file, read with pread from a descriptor opened before the
  file was decoded.  A file replaced by rename keeps its old bytes behind that descriptor;
  one truncated in place gives short reads (an args object that does not parse), never a
  crash as a memory map would (SIGBUS).
- ``BlockArgs``: the compacted args text cut into blocks of ``BLOCK`` bytes, each
  compressed with zstd on its own, so one event's args costs one block's inflate.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover - a dependency; without it the cache stores args raw
    _zstd = None

__all__ = ["BLOCK", "BlockArgs", "FileArgs", "compress_blocks", "have_zstd", "resident_nbytes"]

BLOCK = 256 << 10   # raw bytes per compressed block: ~0.1 ms to inflate one
_LEVEL = 1          # zstd level: ~1 GB/s on one core, 40-50x smaller on real traces' args
_KEPT_BLOCKS = 8    # inflated blocks kept (a details panel reads neighbours)


def have_zstd() -> bool:
    return _zstd is not None


def resident_nbytes(text) -> int:
    """Bytes of memory an args text holds (a file or compressed blocks: next to nothing)."""
    own = getattr(text, "resident_nbytes", None)
    return own() if callable(own) else len(text)


def _slice_bounds(key, length: int) -> tuple[int, int]:
    if not isinstance(key, slice) or key.step not in (None, 1):
        raise TypeError("args text supports only [start:stop] slices")
    start, stop, _ = key.indices(length)
    return start, max(start, stop)


class FileArgs:
    """Args text read from the trace file on demand (see the module docstring)."""

    def __init__(self, fd: int, size: int):
        self._fd = fd
        self._size = size
        self._closing = threading.Lock()

    @classmethod
    def open(cls, path: str, size: int, stamp: int | str | None = None) -> "FileArgs | None":
        """The file's args text if the file is still the version (size, and
        ``io.read.stat_key``'s stamp) the offsets were taken from, else None."""
        from tb_profiler.io.read import local_stamp, open_regular

        try:
            f = open_regular(path)
        except OSError:
            return None
        st = os.fstat(f.fileno())
        if st.st_size != size or (stamp is not None and local_stamp(st) != stamp):
            f.close()
            return None
        fd = os.dup(f.fileno())
        f.close()
        return cls(fd, size)

    def close(self) -> None:
        """Let the file go now (its disk space comes back once deleted); reads answer b""
        from then on.  Why not wait for the garbage collector: a server holds a trace of a
        deleted file as long as anything refers to it (plugin.state closes it when
        discovery sees the file gone)."""
        with self._closing:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key) -> bytes:
        start, stop = _slice_bounds(key, self._size)
        with self._closing:  # never a read of a descriptor closed (and its number reused) meanwhile
            if self._fd < 0:
                return b""
            try:
                return os.pread(self._fd, stop - start, start)
            except OSError:
                return b""

    def __bytes__(self) -> bytes:
        return self[0:self._size]

    def resident_nbytes(self) -> int:
        return 0

    def __del__(self):
        try:
            self.close()
        except (OSError, AttributeError, TypeError):
            pass


def compress_blocks(blob) -> tuple[np.ndarray, np.ndarray]:
    """(compressed bytes, start of each block in them + the end): blob cut into BLOCK-byte
    pieces, each a zstd frame with its checksum (damage reads as an error, not as text)."""
    view = memoryview(blob).cast("B") if not isinstance(blob, np.ndarray) else memoryview(blob)
    comp = _zstd.ZstdCompressor(level=_LEVEL, write_checksum=True, write_content_size=True)
    parts = [comp.compress(view[at:at + BLOCK]) for at in range(0, len(view), BLOCK)]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


class BlockArgs:
    """Args text held as zstd blocks (compress_blocks), inflated block by block on demand.

    on_damage: called when a block does not inflate (a damaged cache entry); it returns
    the whole text from elsewhere (the trace decoded again), which answers from then on.
    """

    def __init__(self, data: np.ndarray, offsets: np.ndarray, raw_len: int, on_damage=None):
        self._data, self._offsets, self._len = data, offsets, int(raw_len)
        self.on_damage = on_damage
        self._fallback = None
        self._kept: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._len

    def _block(self, k: int) -> bytes:
        with self._lock:
            got = self._kept.get(k)
            if got is not None:
                self._kept.move_to_end(k)
                return got
        a, b = int(self._offsets[k]), int(self._offsets[k + 1])
        raw = _zstd.ZstdDecompressor().decompress(memoryview(self._data)[a:b])
        want = min(BLOCK, self._len - k * BLOCK)
        if len(raw) != want:
            raise ValueError(f"args block {k}: {len(raw)} bytes, expected {want}")
        with self._lock:
            self._kept[k] = raw
            while len(self._kept) > _KEPT_BLOCKS:
                self._kept.popitem(last=False)
        return raw

    def __getitem__(self, key) -> bytes:
        start, stop = _slice_bounds(key, self._len)
        if self._fallback is not None:
            return bytes(self._fallback[start:stop])
        try:
            out = [self._block(k)[max(start - k * BLOCK, 0):stop - k * BLOCK]
                   for k in range(start // BLOCK, (stop - 1) // BLOCK + 1)] if stop > start else []
        except (ValueError, _zstd.ZstdError if _zstd else ValueError):
            if self.on_damage is None:
                raise
            self._fallback = self.on_damage()
            return bytes(self._fallback[start:stop])
        return b"".join(out)

    def __bytes__(self) -> bytes:
        return self[0:self._len]

    def resident_nbytes(self) -> int:
        return BLOCK * len(self._kept)
