"""load(path) -> Trace: the cache first, else read + decode + build (and fill the cache).

Why here and not in cache.py: the cache only stores arrays; this module decides what a
valid key is (source identity, file size/mtime, decoder and model versions) and keeps
the load working whatever the cache does.

A fresh decode returns as soon as the tables are built; the cache entry is written
meanwhile by the process's one cache writer (``tb_profiler.cache_writer``: a queue, one
thread, so a logdir of thousands of files never has thousands of writers), and when it
is written the trace moves onto it (``Trace.adopt``: its arrays memory-mapped from the
entry instead of anonymous memory).  A later load of the same file in this process
waits for that write.
A plain local JSON trace is decoded from a read-only map of the file (no copy), and its
args text stays in the file (read on demand), so neither memory nor the entry holds it;
one under ARGS_IN_MEMORY_BELOW (64 KiB) is read like a gzip file's text instead (its
args compacted in memory, stored compressed in the entry), so a small trace holds no
file open.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from tb_profiler import cache as _cache
from tb_profiler import cache_folder as _folder
from tb_profiler import cache_writer as _writer
from tb_profiler import (
    decode as _decode,  # attribute lookups at call time: tests swap in tripwires
)
from tb_profiler.decode.args_text import BlockArgs, FileArgs
from tb_profiler.errors import TraceFormatError
from tb_profiler.io.budget import reserve
from tb_profiler.io.heap import warm_heap
from tb_profiler.io.read import map_plain_trace, read_trace_bytes, source_id, stat_key, text_size_hint
from tb_profiler.trace.build import MODEL_VERSION, TraceState, build_state
from tb_profiler.trace.model import Trace

Progress = Callable[[int, int], None]
_PROGRESS_EVERY_S = 0.25
# bytes: a plain trace smaller than this is read (its args text compacted in memory, as a
# gzip file's), not mapped with its args left in the file: a file held open per trace would
# run a server of thousands of small traces out of descriptors (1,024 by default)
ARGS_IN_MEMORY_BELOW = 64 << 10


def load(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
         max_bytes: int | None = None, progress: Progress | None = None, background: bool = True,
         cls: type[Trace] = Trace) -> Trace:
    """Load one trace file (local path or fsspec URL, .json or .json.gz) as a Trace.

    cache: use the on-disk cache (see tb_profiler.cache): a hit costs a file open; a miss
        decodes and writes the entry.  A cache that cannot be written only warns.
    cache_dir: cache folder (default $TB_PROFILER_CACHE_DIR or the user cache dir).
    max_bytes: most bytes of JSON text (inflated) to accept; default
        $TB_PROFILER_MAX_TRACE_BYTES or half the available memory (io.read.max_trace_bytes).
    progress(done, total): called now and then (from another thread while the text is
        decoded) with the work done so far and in all, in bytes: the JSON text decoded; for
        a gzip file first inflated (then total is twice the text); for a URL first
        downloaded (its bytes: the text, or the gzip inflated next).
    background: write the cache entry on the cache writer's thread (``Trace.cache_path``
        waits for it); False writes it before returning.
    cls: the class of the trace made, Trace or a subclass (tb_profiler.api.Trace: with the
        analyses' methods, which this layer never imports).
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
            entry_file = _folder.entry_path(source, cache_dir)
            _writer.wait_for(entry_file)
            healer = _Healer(path, source, max_bytes, entry_file, key)
            hit = _cache.read_entry(entry_file, key, on_damage=healer.arrays)
        except (OSError, ValueError):  # read_trace_bytes reports the real problem
            key = hit = None
        trace = _from_entry(hit, healer, cls) if hit is not None else None
        if trace is not None:
            trace.cache_ref = (entry_file, key)
            trace.load_seconds = time.perf_counter() - t0
            return trace

    state = _fresh_state(path, source, max_bytes, progress)
    trace = cls(state)
    trace.load_seconds = time.perf_counter() - t0
    if key is not None:
        trace.cache_ref = (entry_file, key)
        _write_entry(trace, entry_file, key, background)
    return trace


def _from_entry(hit: _cache.Entry, healer: "_Healer", cls: type[Trace]) -> Trace | None:
    """The trace of a cache entry; None when its arrays do not make one (a header that
    passed its CRC but says something impossible: a miss like any other)."""
    if isinstance(hit.args_blob, BlockArgs):
        hit.args_blob.on_damage = healer.args
    try:
        trace = cls(TraceState(hit.arrays, hit.strings, hit.args_blob, hit.meta), from_cache=True)
    except (ValueError, KeyError, TypeError):
        return None
    trace._cache_path = hit.path
    return trace


def _fresh_state(path, source: str, max_bytes: int | None, progress: Progress | None = None) -> TraceState:
    warm_heap()  # once per process: the open's arrays from reused heap, not fresh pages (io.heap)
    try:  # the text it expects held of the budget every load of this machine shares (io.budget)
        with reserve(text_size_hint(path, max_bytes)):
            return _decode_file(path, source, max_bytes, time.perf_counter(), progress)
    except MemoryError:  # numpy's _ArrayMemoryError included: a message, not a traceback
        raise TraceFormatError(source, "out of memory while reading and decoding it (set "
                                       "TB_PROFILER_MAX_TRACE_BYTES lower to refuse such files early)") from None


def _decode_file(path: str | os.PathLike, source: str, max_bytes: int | None, t0: float,
                 progress: Progress | None = None) -> TraceState:
    """read -> decode -> build, with each stage's seconds in the meta."""
    mapped = map_plain_trace(path, max_bytes)
    if mapped is not None and len(mapped[0]) < ARGS_IN_MEMORY_BELOW:  # small: read like a gzip file's text
        mapped[1].close()
        mapped = None
    if mapped is not None:
        buf, file = mapped
    else:  # gzip or a URL: downloading and inflating come first, then the decode of the text
        read = [0]

        def reading(done: int, total: int) -> None:
            read[0] = done
            _report(progress, done, total)

        buf = read_trace_bytes(path, max_bytes, progress=reading if progress else None, and_decode=True)
        file, already = None, read[0]
    t_read = time.perf_counter()
    try:
        with _Reporter(progress, len(buf), already=0 if file is not None else already) as counter:
            decoded = _decode.decode(buf, source, keep_input=file is not None, progress=counter)
        t_decoded = time.perf_counter()
        if file is not None:
            # The args are read from the file from now on, not from the map, which goes
            # now: its pages (the whole file) would count in this process's memory while
            # the tables are built.
            decoded.args_blob = FileArgs(os.dup(file.fileno()), os.fstat(file.fileno()).st_size)
            buf = None
        state = build_state(decoded, buf)
    finally:
        if file is not None:
            file.close()
    del decoded, buf
    state.meta["read_seconds"] = t_read - t0
    state.meta["decode_seconds"] = t_decoded - t_read
    state.meta["build_seconds"] = time.perf_counter() - t_decoded
    return state


def _report(progress: Progress, done: int, total: int) -> None:
    try:
        progress(done, total)
    except Exception:  # a caller's progress callback never breaks a load
        pass


class _Reporter:
    """Calls progress(already + walked, already + total) every quarter second while a
    decode runs (in a thread: the decoder runs without the GIL and publishes how far it got)."""

    def __init__(self, progress: Progress | None, total: int, already: int = 0):
        self.progress, self.total, self.already = progress, total, already
        self.counter = _decode.new_progress() if progress is not None else None
        self.done = threading.Event()

    def __enter__(self):
        if self.counter is not None:
            threading.Thread(target=self._run, name="tb_profiler-progress", daemon=True).start()
        return self.counter

    def _run(self) -> None:
        while not self.done.wait(_PROGRESS_EVERY_S):
            self._send(_decode.walked(self.counter, self.total))

    def _send(self, walked: int) -> None:
        _report(self.progress, self.already + walked, self.already + self.total)

    def __exit__(self, *exc):
        self.done.set()
        if self.counter is not None and exc[0] is None:
            self._send(self.total)
        return False


# -- the cache entry, written after the load ------------------------------------------------------
def _write_entry(trace: Trace, entry_file: str, key: _cache.CacheKey, background: bool) -> None:
    state = trace._state

    def write() -> None:
        if _cache.write_entry(entry_file, key, state.arrays, state.strings, state.args_blob, state.meta):
            trace._cache_path = entry_file
            entry = _cache.read_entry(entry_file, key)
            if entry is not None:  # serve from the mapped entry: its pages are the OS's to drop
                trace.adopt(entry.arrays, entry.args_blob)
                entry.arrays.on_damage = lambda: state.arrays  # what was just written, still here
                _give_back_freed_memory()

    if not background:
        write()
        return
    trace._writer = _writer.later(write, key=entry_file)


def _give_back_freed_memory() -> None:
    """Hand the heap's free pages back to the OS (glibc keeps what numpy freed below its
    mmap threshold, up to 32 MiB an array: after a trace moves onto its entry, that is
    most of its old columns)."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


class _Healer:
    """A damaged cache entry found after the open (an array's CRC checked on first read):
    decode the trace again, once, and answer from that; the entry is rewritten."""

    def __init__(self, path, source: str, max_bytes: int | None, entry_file: str, key: _cache.CacheKey):
        self.path, self.source, self.max_bytes = path, source, max_bytes
        self.entry_file, self.key = entry_file, key
        self.lock = threading.Lock()
        self.state: TraceState | None = None
        self.healed = False

    def _fresh(self) -> TraceState:
        with self.lock:
            if self.state is None:
                self.state = _fresh_state(self.path, self.source, self.max_bytes)
                self.healed = True
                _cache.write_entry(self.entry_file, self.key, self.state.arrays, self.state.strings,
                                   self.state.args_blob, self.state.meta)
            return self.state

    def arrays(self):
        return self._fresh().arrays

    def args(self):
        return self._fresh().args_blob
