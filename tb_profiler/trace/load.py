"""load(path) -> Trace: the cache first, else read + decode + build (and fill the cache).

Why here and not in cache.py: the cache only stores arrays; this module decides what a
valid key is (source identity, file size/mtime, decoder and model versions) and keeps
the load working whatever the cache does.
"""
from __future__ import annotations

import os
import time

from tb_profiler import cache as _cache
from tb_profiler import (
    decode as _decode,  # attribute lookups at call time: tests swap in tripwires
)
from tb_profiler.errors import TraceFormatError
from tb_profiler.io.read import read_trace_bytes, source_id, stat_key
from tb_profiler.trace.build import MODEL_VERSION, TraceState, build_state
from tb_profiler.trace.model import Trace


def load(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
         max_bytes: int | None = None) -> Trace:
    """Load one trace file (local path or fsspec URL, .json or .json.gz) as a Trace.

    cache: use the on-disk cache (see tb_profiler.cache): a hit costs a file open; a miss
        decodes and writes the entry.  A cache that cannot be written only warns.
    cache_dir: cache folder (default $TB_PROFILER_CACHE_DIR or the user cache dir).
    max_bytes: most bytes of JSON text (inflated) to accept; default
        $TB_PROFILER_MAX_TRACE_BYTES or half the available memory (io.read.max_trace_bytes).
    Raises TraceFormatError for an unreadable, malformed or too big file, and when memory
    runs out while decoding it.
    """
    t0 = time.perf_counter()
    source = source_id(path)
    key = entry_file = None
    if cache:
        try:
            size, mtime = stat_key(path)
            key = _cache.CacheKey(source, size, mtime, str(_decode.DECODER_VERSION), MODEL_VERSION)
            entry_file = _cache.entry_path(source, cache_dir)
            hit = _cache.read_entry(entry_file, key)
        except (OSError, ValueError):  # read_trace_bytes reports the real problem
            key = hit = None
        if hit is not None:
            trace = Trace(TraceState(hit.arrays, hit.strings, hit.args_blob, hit.meta), from_cache=True)
            trace.cache_path = hit.path
            trace.load_seconds = time.perf_counter() - t0
            return trace

    try:
        state = _decode_file(path, source, max_bytes, t0)
    except MemoryError:  # numpy's _ArrayMemoryError included: a message, not a traceback
        raise TraceFormatError(source, "out of memory while reading and decoding it (set "
                                       "TB_PROFILER_MAX_TRACE_BYTES lower to refuse such files early)") from None
    trace = Trace(state)
    if key is not None:
        if _cache.write_entry(entry_file, key, state.arrays, state.strings, state.args_blob, state.meta):
            trace.cache_path = entry_file
    trace.load_seconds = time.perf_counter() - t0
    return trace


def _decode_file(path: str | os.PathLike, source: str, max_bytes: int | None, t0: float) -> TraceState:
    """read -> decode -> build, with each stage's seconds in the meta."""
    buf = read_trace_bytes(path, max_bytes)
    t_read = time.perf_counter()
    decoded = _decode.decode(buf, source)
    t_decoded = time.perf_counter()
    state = build_state(decoded, buf)
    del decoded, buf
    state.meta["read_seconds"] = t_read - t0
    state.meta["decode_seconds"] = t_decoded - t_read
    state.meta["build_seconds"] = time.perf_counter() - t_decoded
    return state
