"""Trace decoding: the JSON text of a trace file -> the columns of ``schema.Decoded``.

    decode(buf, source)        buf: a bytearray (or other writable buffer) holding the whole
                               decompressed JSON text; it is reused for the args blob, so its
                               content is destroyed (also when decoding fails): a bytearray
                               is shrunk to the blob, and the memory past the blob is given
                               back to the OS
    decode_bytes(data, source) the same from read-only bytes (costs one copy)
    DECODER_VERSION            changes whenever the decoded output may change (cache key)

The work is done in one pass by the native decoder (native/, built as
``tb_profiler._native``); the output contract is ``tb_profiler/decode/schema.py``. A big
events array is split between threads (``decode_threads()``, at least ``MIN_PART`` bytes
each); the output is the same for any split.
Malformed input raises ``tb_profiler.errors.TraceFormatError`` with the byte offset.
"""
from __future__ import annotations

import os

import numpy as np

from tb_profiler.decode import schema
from tb_profiler.decode.extension import extension
from tb_profiler.decode.schema import Decoded
from tb_profiler.errors import TraceFormatError

__all__ = ["DECODER_VERSION", "MIN_PART", "STRING_MAX", "decode", "decode_bytes", "decode_threads", "new_progress", "walked",
           "Decoded"]

# Bump whenever the decoder's output changes for some input (the decode cache keys on it).
DECODER_VERSION = 7  # 5: the "flops" arg; 6: strings over STRING_MAX are cut; 7: graph id, graph node id
# The most bytes any string of the string table keeps (native/intern.h): a longer one (a
# name, a category, an args text) is kept as its first bytes, cut at a character
# boundary, then " [... cut: first K of N bytes]" (trace.strings.cut_length reads N back).
STRING_MAX = 1 << 20

_FORMAT_DTYPE = {"q": np.dtype(np.int64), "i": np.dtype(np.int32), "B": np.dtype(np.uint8),
                 "d": np.dtype(np.float64)}
_EXCERPT_BYTES = 40
_native_module = None
# JSON bytes per decoding thread at least: below this, starting a thread costs more than
# it saves.
MIN_PART = 8 << 20
MAX_THREADS = 8


def decode_threads() -> int:
    """Threads for one decode: $TB_PROFILER_DECODE_THREADS, else the CPUs this process may
    run on (at most MAX_THREADS)."""
    env = os.environ.get("TB_PROFILER_DECODE_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus))


def _native():
    """The extension, imported on first use (so that schema.py imports without a build)
    and checked once against the schema: a mismatch is a build from other sources."""
    global _native_module
    if _native_module is None:
        native = extension()
        dense = {name: _FORMAT_DTYPE[fmt] for name, fmt in native.DENSE_COLUMNS}
        sparse = {name: _FORMAT_DTYPE[fmt] for name, fmt in native.SPARSE_COLUMNS}
        if (dense != schema.dense_dtypes() or sparse != schema.sparse_dtypes()
                or getattr(native, "STRING_MAX", None) != STRING_MAX):
            raise ImportError("tb_profiler._native does not match tb_profiler/decode/schema.py: "
                              "rebuild it (python setup.py build_ext --inplace)")
        _native_module = native
    return _native_module


def _excerpt(buf, offset: int) -> str:
    # Text before the offset may already hold compacted args: show what follows it.
    return bytes(memoryview(buf).cast("B")[offset:offset + _EXCERPT_BYTES]).decode("utf-8", "replace")


def _args_blob(buf, n: int):
    """buf[:n] without a copy: a bytearray is shrunk in place (giving its tail back to the
    allocator), a numpy buffer is sliced (the decoder already gave the pages past the blob
    back to the OS), anything else (or a bytearray with live exports) by a memoryview."""
    if isinstance(buf, np.ndarray):
        return buf[:n]
    if isinstance(buf, bytearray):
        try:
            del buf[n:]
            return buf
        except BufferError:
            pass
    return memoryview(buf).cast("B")[:n]


def new_progress() -> np.ndarray:
    """A counter for decode(progress=...): ``walked(counter)`` reads it from another thread."""
    return np.zeros(_native().PROGRESS_SLOTS, dtype=np.int64)


def walked(progress: np.ndarray, total: int) -> int:
    """Bytes of the text a running decode has walked (at most total)."""
    return min(int(progress.sum()), total)


def decode(buf, source: str = "<bytes>", *, threads: int | None = None, keep_input: bool = False,
           progress: np.ndarray | None = None) -> Decoded:
    """Decode the trace JSON text in ``buf`` into columns, with up to ``threads`` threads
    (default ``decode_threads()``).

    keep_input=False: buf must be writable and is overwritten (its front becomes the args
    blob, see the module docstring).  keep_input=True: buf (a read-only memory map of the
    file, say) is only read, and the args offsets address it: the blob is buf itself.
    progress: a ``new_progress()`` counter another thread may read while this runs."""
    native = _native()
    try:
        raw = native.decode(buf, threads=decode_threads() if threads is None else threads, min_part=MIN_PART,
                            keep_input=keep_input, progress=progress)
    except native.DecodeError as exc:
        message, offset = exc.args
        raise TraceFormatError(source, message, offset, _excerpt(buf, offset)) from None
    except (TypeError, BufferError) as exc:
        raise TypeError(f"decode() needs a writable buffer such as a bytearray ({exc}); "
                        "use decode_bytes() for bytes") from None
    dense = {name: np.frombuffer(raw["dense"][name], dtype) for name, dtype in schema.dense_dtypes().items()}
    sparse = {}
    for name, dtype in schema.sparse_dtypes().items():
        rows, values = raw["sparse"][name]
        sparse[name] = (np.frombuffer(rows, np.int32), np.frombuffer(values, dtype))
    blob = buf if keep_input else _args_blob(buf, raw["args_blob_len"])
    return Decoded(dense=dense, sparse=sparse, strings=raw["strings"], args_blob=blob, toplevel=raw["toplevel"],
                   source=source)


def decode_bytes(data: bytes, source: str = "<bytes>") -> Decoded:
    """Decode trace JSON text from read-only bytes (copies it into a bytearray first)."""
    return decode(bytearray(data), source)
