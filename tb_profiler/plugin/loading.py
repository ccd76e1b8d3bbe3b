"""Loading single-worker traces for the server: a bounded pool of loader threads, one
thread that prepares what a loaded trace's first view needs, and the in-memory LRU of
parsed traces (``ProfilerState`` mixes this in; it owns discovery and summaries).

Why a fixed pool and queues: a logdir may hold thousands of files (a long job writing a
span every few minutes, thousands of one-file runs).  Loading is queued by priority (a
request first, then the background in discovery order) onto ``threads`` loader threads;
the cache entries they produce are written by the process's one cache writer
(``tb_profiler.cache_writer``); the Trace view's index of each loaded trace is built by
one preparer thread.  So the thread count stays the same whatever the number of files,
and loading N files costs N loads (nothing per load grows with the number of files:
``cache_limit``'s picture of the cache folder).

A file discovery no longer sees (deleted), or sees as another version, is released:
its trace leaves the LRU and the trace's hold on the file (a plain JSON trace's args text
is read from the file: ``decode.args_text.FileArgs``) is closed at once, so a deleted
file's disk space comes back without waiting for the last reference to the trace.
"""
from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from tb_profiler.analysis import memo
from tb_profiler.decode.args_text import FileArgs, resident_nbytes

logger = logging.getLogger("tb_profiler.plugin")

PENDING, LOADING, LOADED, FAILED = "pending", "loading", "loaded", "failed"
# A file's summary: not built yet, being built (or read), in memory, could not be built.
S_PENDING, S_BUILDING, S_READY, S_FAILED = "pending", "building", "ready", "failed"



class LoadFailed(Exception):
    """A trace file that could not be read; the message is the reason, for the user."""


@dataclass(eq=False)
class FileEntry:
    """One discovered trace file and its loading state."""

    run: str
    worker: str
    index: int             # 1-based span index among the worker's spans
    suffix: str | None     # the numeric span suffix of the file name
    path: str              # absolute path or URL (never sent to clients)
    rel: str               # path relative to the logdir (what clients see)
    size: int
    mtime: float
    state: str = PENDING
    error: str | None = None
    loading: bool = False   # queued or being loaded
    running: bool = False   # a loader thread is on it
    done: threading.Event = field(default_factory=threading.Event)
    summary_state: str = S_PENDING
    summary_error: str | None = None
    summary: Any = None           # its TraceSummary once S_READY
    summary_queued: bool = False  # in the summary thread's queue
    fraction: float = 0.0         # of its text decoded so far, while it loads (progress inside one file)
    tag: str = ""                 # what changes with the content (discovery's: inode:ctime, an ETag, a digest)

    @property
    def key(self) -> tuple:
        return (self.path, self.size, self.mtime, self.tag)


PER_TRACE_BYTES = 192 << 10  # what a loaded trace costs beyond its arrays (see trace_nbytes)


def trace_nbytes(trace: Any) -> int:
    """Approximate memory held by a Trace: its arrays, args text and strings, plus half
    again for the analyses' memoized columns, plus PER_TRACE_BYTES for what every trace
    costs whatever its size (its Python objects, tables, header, the Trace view's index):
    measured at 130 KB loaded and 210 KB prepared for a 15 KB trace, which the arrays
    alone put at 16 KB, so a logdir of thousands of small traces overran the memory cap
    ten times over."""
    state = getattr(trace, "_state", None)
    total = 0
    if state is not None:
        total += _arrays_nbytes(state.arrays)
        blob = state.args_blob
        total += resident_nbytes(blob) if blob is not None else 0
    strings = getattr(trace, "strings", None)
    if strings is not None:
        total += sum(len(s) + 56 for s in strings if s is not None)
    return int(total * 1.5) + PER_TRACE_BYTES


def trace_handles(trace: Any) -> int:
    """Files a loaded trace may hold open: its args text read from the trace file, and
    maps of its cache entry and stored parts once written (an entry under cache.READ_BELOW
    is read, not mapped)."""
    from tb_profiler.cache import READ_BELOW

    state = getattr(trace, "_state", None)
    if state is None:
        return 0
    return int(isinstance(state.args_blob, FileArgs)) + (2 if _arrays_nbytes(state.arrays) >= READ_BELOW // 2 else 0)


def _arrays_nbytes(arrays) -> int:
    own = getattr(arrays, "nbytes", None)  # a cache entry's: sized from its header, not read
    return own() if callable(own) else sum(getattr(a, "nbytes", 0) for a in arrays.values())


def handle_budget() -> int:
    """How many files the LRU's traces may hold open together: half the descriptors this
    process may open (the soft RLIMIT_NOFILE, 1,024 by default on Linux), the rest left to
    sockets, the cache and everything else."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 512
    if soft == getattr(resource, "RLIM_INFINITY", -1) or soft <= 0:
        return 1 << 16
    return max(16, soft // 2)


def _prepare(trace: Any) -> None:
    """Build what the Trace view needs first (its index), right after a load, so the view
    opens without waiting for it; it is kept with the trace's cache (analysis.stored), so
    a later server reads it instead."""
    from tb_profiler.plugin import timeline

    try:
        timeline.lod_index(trace)
    except Exception:  # the view builds it again when asked, and reports what fails then
        logger.debug("tb_profiler: preparing the trace view index failed", exc_info=True)


def release_file(trace: Any) -> None:
    """Close what a trace holds open on its trace file (a plain JSON trace's args text):
    reads of its args answer empty from then on."""
    close = getattr(getattr(trace, "args_blob", None), "close", None)
    if callable(close):
        close()


class Loading:
    """The loading half of ProfilerState (see the module docstring).  The state provides
    ``_lock``, ``_entries``, ``_stop``, ``memory_bytes``, ``threads``, ``cache`` and
    ``cache_dir``; ``_init_loading`` sets up the rest."""

    def _init_loading(self) -> None:
        self._lru: "OrderedDict[str, tuple[Any, int, int]]" = OrderedDict()  # path -> (trace, bytes, handles)
        self._lru_bytes = 0
        self._lru_handles = 0
        self.snapshot_bytes = 0     # what the snapshot routes keep (views_snapshot.SnapshotCache), same cap
        self.snapshots_in_memory = 0
        self.max_handles = handle_budget()
        self._queue: "queue.PriorityQueue[tuple]" = queue.PriorityQueue()
        self._seq = itertools.count()
        self._to_prepare: "queue.SimpleQueue[tuple | None]" = queue.SimpleQueue()
        self.changes = 0            # bumps whenever a file's state or the LRU changes (status is built again)
        self.lru_loads = 0          # traces ever put into the LRU
        self.lru_peak_bytes = 0     # the most bytes the LRU ever held
        self._memo_counted: dict[str, int] = {}  # path -> its analyses' kept bytes counted so far
        self._lru_path_of: dict[int, str] = {}   # id(trace) -> its path, for the traces in the LRU
        memo.on_growth(self._memo_grew)

    def _loading_threads(self) -> list[threading.Thread]:
        out = [threading.Thread(target=self._loader, name=f"tb_profiler-loader-{i}", daemon=True)
               for i in range(self.threads)]
        out.append(threading.Thread(target=self._preparer, name="tb_profiler-prepare", daemon=True))
        return out

    def _stop_loading(self) -> None:
        for _ in range(self.threads):
            self._queue.put((-1, -1, None))
        self._to_prepare.put(None)

    def request_load(self, entry: FileEntry, priority: int = 0) -> threading.Event | None:
        """Queue a load of ``entry`` unless it is in memory; None when it is ready now.

        Raises LoadFailed for a file known to be unreadable."""
        with self._lock:
            if entry.path in self._lru and self._entries.get(entry.path) is entry:
                self._lru.move_to_end(entry.path)
                return None
            if entry.state == FAILED:
                raise LoadFailed(entry.error or "could not be read")
            if not entry.loading:
                entry.loading = True
                entry.done = threading.Event()
                self._queue.put((priority, next(self._seq), entry))
            elif priority == 0:  # already queued in the background: jump the queue
                self._queue.put((0, next(self._seq), entry))
            return entry.done

    def _loader(self) -> None:
        while not self._stop.is_set():
            _, _, entry = self._queue.get()
            if entry is None:
                return
            with self._lock:
                if not entry.loading or entry.running:
                    continue  # a duplicate queue item (it jumped the queue)
                if self._entries.get(entry.path) is not entry:  # rediscovered as a new file, or gone
                    entry.loading = False
                    entry.done.set()
                    continue
                entry.running = True
                if entry.state == PENDING:
                    entry.state = LOADING  # first load (a reload after eviction stays "loaded")
            self._load(entry)

    def _load(self, entry: FileEntry) -> None:
        from tb_profiler.errors import TraceFormatError
        from tb_profiler.api import load

        trace, error = None, None

        def progress(done: int, total: int) -> None:
            entry.fraction = done / total if total else 1.0

        try:
            trace = load(entry.path, cache=self.cache, cache_dir=self.cache_dir, progress=progress)
            # files a trace reads beside it (graph annotations) are looked for inside the logdir only
            trace.data_root = (entry.path[: len(entry.path) - len(entry.rel)] if entry.path.endswith(entry.rel)
                               else os.path.dirname(entry.path))
        except TraceFormatError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"{entry.path}: cannot be read: {exc.strerror or exc}"
        except MemoryError:
            error = f"{entry.path}: out of memory while loading"
        except Exception as exc:  # a decoder or model bug must not take the server down
            logger.exception("tb_profiler: loading %s failed", entry.path)
            error = f"{entry.path}: {type(exc).__name__}: {exc}"
        kept = False
        with self._lock:
            if error is not None:
                entry.state, entry.error = FAILED, error.replace(entry.path, entry.rel)
            else:
                entry.state, entry.error = LOADED, None
                if self._entries.get(entry.path) is entry:
                    self._insert(entry.path, trace)
                    kept = True
            entry.loading = entry.running = False
            self.changes += 1
            entry.done.set()
        if kept:
            self._prepare_later(entry.path, trace)
        elif trace is not None:  # the file went (or changed) while it loaded: nobody reads this one
            release_file(trace)

    def _insert(self, path: str, trace: Any) -> None:
        """Keep a loaded trace, evicting the least recently used while the LRU is over its
        memory cap or holds more open files than handle_budget()."""
        size, handles = trace_nbytes(trace), trace_handles(trace)
        if path in self._lru:
            self._evict(path)
        self._lru[path] = (trace, size, handles)
        self._lru_path_of[id(trace)] = path
        self._lru_bytes += size
        self._lru_handles += handles
        self.lru_loads += 1
        while ((self._lru_bytes + self.snapshot_bytes > self.memory_bytes or self._lru_handles > self.max_handles)
               and len(self._lru) > 1):
            self._evict(next(iter(self._lru)))
        self.lru_peak_bytes = max(self.lru_peak_bytes, self._lru_bytes)

    def _memo_grew(self, trace: Any) -> None:
        """A trace's analyses kept more (analysis.memo): what it holds beyond what was counted
        counts against the cap too, and the least recently used other traces go while the
        LRU is over it (--memory-mb holds what analyses keep as it holds loaded traces)."""
        with self._lock:
            path = self._lru_path_of.get(id(trace))
            if path is None or self._lru[path][0] is not trace:
                return
            kept = memo.memo_nbytes(trace)
            extra = kept - self._memo_counted.get(path, 0)
            if extra <= 0:
                return
            t, size, handles = self._lru[path]
            self._lru[path] = (t, size + extra, handles)
            self._lru_bytes += extra
            self._memo_counted[path] = kept
            while self._lru_bytes + self.snapshot_bytes > self.memory_bytes and len(self._lru) > 1:  # the others
                self._evict(next(p for p in self._lru if p != path))
            self.lru_peak_bytes = max(self.lru_peak_bytes, self._lru_bytes)

    @property
    def trace_bytes(self) -> int:
        """Bytes the traces' LRU holds (its count, as --memory-mb caps it)."""
        return self._lru_bytes

    def note_snapshot_bytes(self, size: int, count: int) -> None:
        """What the snapshot routes now keep: counted with the traces against the cap."""
        with self._lock:
            self.snapshot_bytes, self.snapshots_in_memory = int(size), int(count)
            self.changes += 1

    def _evict(self, path: str) -> None:
        self._memo_counted.pop(path, None)
        item = self._lru.pop(path, None)
        if item is not None:
            self._lru_path_of.pop(id(item[0]), None)
            self._lru_bytes -= item[1]
            self._lru_handles -= item[2]
            self.changes += 1

    def trace(self, entry: FileEntry, timeout: float = 600.0) -> Any:
        """The parsed trace of ``entry``, loading it if needed (blocking: worker threads only).

        Raises LoadFailed with the reason for a file that cannot be read."""
        for _ in range(3):
            done = self.request_load(entry, priority=0)
            if done is not None and not done.wait(timeout):
                raise LoadFailed(f"{entry.rel}: still loading after {timeout:.0f} s")
            with self._lock:
                if entry.state == FAILED:
                    raise LoadFailed(entry.error or "could not be read")
                item = self._lru.get(entry.path)
                if item is not None and self._entries.get(entry.path) is entry:
                    self._lru.move_to_end(entry.path)
                    return item[0]
        # Evicted as soon as loaded (a memory cap smaller than the traces in use): load
        # this one outside the LRU rather than loop.
        from tb_profiler.api import load

        try:
            return load(entry.path, cache=self.cache, cache_dir=self.cache_dir)
        except Exception as exc:
            raise LoadFailed(str(exc).replace(entry.path, entry.rel)) from None

    def wait_loaded(self, entries: Iterable[FileEntry], deadline_s: float) -> bool:
        """Ask for every entry and wait until all are in memory or failed, or the deadline."""
        events = [ev for ev in (self._try_request(e) for e in entries) if ev is not None]
        end = time.monotonic() + deadline_s
        for ev in events:
            if not ev.wait(max(0.0, end - time.monotonic())):
                return False
        return True

    def _try_request(self, entry: FileEntry) -> threading.Event | None:
        try:
            return self.request_load(entry, priority=0)
        except LoadFailed:
            return None

    def _prepare_later(self, path: str, trace: Any) -> None:
        """Queue the trace's Trace-view index for the preparer thread (a weak reference: a
        trace evicted meanwhile is not kept alive for it, nor prepared)."""
        self._to_prepare.put((path, weakref.ref(trace)))

    def _preparer(self) -> None:
        while not self._stop.is_set():
            item = self._to_prepare.get()
            if item is None:
                return
            path, ref = item
            trace = ref()
            with self._lock:
                resident = trace is not None and self._lru.get(path, (None,))[0] is trace
            if resident:
                _prepare(trace)
            del trace

    def _release(self, path: str) -> None:
        """The file at path is gone or is another version now (lock held): its trace leaves
        the LRU and lets the file go (see the module docstring)."""
        item = self._lru.get(path)
        self._evict(path)
        if item is not None:
            release_file(item[0])

    def resident(self, entry: FileEntry) -> bool:
        with self._lock:
            return entry.path in self._lru and self._entries.get(entry.path) is entry

    def memory_used(self) -> int:
        with self._lock:
            return self._lru_bytes

