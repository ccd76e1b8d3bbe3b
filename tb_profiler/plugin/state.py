"""What the server knows about its logdir: discovered runs, each file's loading state,
and the parsed traces kept in memory.

- A discovery thread calls ``discover(logdir)`` every ``reload_s`` seconds (listing and
  stat only), so new runs and new files of existing runs appear without a restart, and
  a rewritten file (new size or mtime) is loaded again.
- Loader threads parse every discovered file in the background (first run first, each
  worker's latest span first), through the on-disk cache, so broken files are found and
  listed with their reason early and the first run answers before the others have
  loaded. A request that needs a file jumps the queue.
- Parsed traces stay in an LRU keyed by file, capped by approximate bytes; an evicted
  trace reloads from the on-disk cache when asked for again.

Nothing here runs on a request thread for long: requests ask for loads and wait on an
event with a deadline. Every failure is caught and recorded; none stops a thread.
"""
from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from tb_profiler.io.discovery import natural_key

logger = logging.getLogger("tb_profiler.plugin")

DEFAULT_MEMORY_MB = 2048
DEFAULT_RELOAD_S = 5.0
DEFAULT_THREADS = 2

PENDING, LOADING, LOADED, FAILED = "pending", "loading", "loaded", "failed"


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

    @property
    def key(self) -> tuple:
        return (self.path, self.size, self.mtime)


def env_number(name: str, default: float, lo: float, hi: float) -> float:
    """A bounded number from the environment; the default when unset or malformed."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        logger.warning("ignoring %s=%r: not a number", name, raw)
        return default
    return min(max(value, lo), hi)


def trace_nbytes(trace: Any) -> int:
    """Approximate memory held by a Trace: its arrays, args text and strings, plus half
    again for the analyses' memoized columns."""
    state = getattr(trace, "_state", None)
    total = 0
    if state is not None:
        total += sum(getattr(a, "nbytes", 0) for a in state.arrays.values())
        blob = state.args_blob
        total += len(blob) if blob is not None else 0
    strings = getattr(trace, "strings", None)
    if strings is not None:
        total += sum(len(s) + 56 for s in strings if s is not None)
    return int(total * 1.5) + 4096


def _relative(path: str, logdir: str) -> str:
    root = logdir.rstrip("/" + os.sep)
    if path.startswith(root + "/") or path.startswith(root + os.sep):
        return path[len(root) + 1:].replace(os.sep, "/")
    return os.path.basename(path)


class ProfilerState:
    """Discovery, loading and the in-memory trace LRU for one logdir."""

    def __init__(self, logdir: str, *, memory_bytes: int | None = None, reload_s: float | None = None,
                 threads: int | None = None, cache: bool = True, cache_dir: str | None = None):
        self.logdir = os.fspath(logdir)
        self.memory_bytes = int(memory_bytes if memory_bytes is not None else
                                env_number("TB_PROFILER_MEMORY_MB", DEFAULT_MEMORY_MB, 16, 1 << 22) * (1 << 20))
        self.reload_s = float(reload_s if reload_s is not None else
                              env_number("TB_PROFILER_RELOAD_S", DEFAULT_RELOAD_S, 0.2, 3600))
        self.threads = int(threads if threads is not None else
                           env_number("TB_PROFILER_THREADS", DEFAULT_THREADS, 1, 64))
        self.cache = cache
        self.cache_dir = cache_dir
        self._lock = threading.RLock()
        self._entries: dict[str, FileEntry] = {}
        self._root = self.logdir                    # the logdir as discovery spells it
        self._runs: list[Any] = []                  # RunInfo of the last discovery
        self._discovery_skipped: list[Any] = []
        self._scan_error: str | None = None
        self._scanned_at: float | None = None
        self._scanned = threading.Event()
        self._lru: "OrderedDict[str, tuple[Any, int]]" = OrderedDict()
        self._lru_bytes = 0
        self._queue: "queue.PriorityQueue[tuple]" = queue.PriorityQueue()
        self._seq = itertools.count()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.generation = 0   # bumps whenever the discovered set of files changes

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "ProfilerState":
        if self._threads:
            return self
        t = threading.Thread(target=self._watch, name="tb_profiler-discovery", daemon=True)
        self._threads.append(t)
        for i in range(self.threads):
            self._threads.append(threading.Thread(target=self._loader, name=f"tb_profiler-loader-{i}", daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for _ in range(self.threads):
            self._queue.put((-1, -1, None))

    def disable(self, reason: str) -> None:
        """No logdir to watch (e.g. TensorBoard started with --logdir_spec): say why, list nothing."""
        with self._lock:
            self._scan_error = reason
            self._scanned_at = time.time()
        self._scanned.set()

    def wait_scanned(self, timeout: float) -> bool:
        return self._scanned.wait(timeout)

    # -- discovery ------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self._stop.wait(self.reload_s)

    def scan(self) -> None:
        """Discover once and merge the result (never raises)."""
        from tb_profiler.io.discovery import discover

        try:
            found = discover(self.logdir)
        except Exception as exc:  # a vanished logdir, a flaky remote filesystem, ...
            with self._lock:
                self._scan_error = f"{type(exc).__name__}: {exc}".replace(self.logdir, "<logdir>")
                self._scanned_at = time.time()
            self._scanned.set()
            return
        try:
            self._merge(found)
        except Exception:  # pragma: no cover - a bug, not bad input; keep watching
            logger.exception("tb_profiler: merging discovery results failed")
        self._scanned.set()

    def _merge(self, found: Any) -> None:
        new: dict[str, FileEntry] = {}
        with self._lock:
            old = self._entries
            for run in found.runs:
                for worker, spans in run.workers.items():
                    for s in spans:
                        e = old.get(s.path)
                        if (e is not None and e.size == s.size and e.mtime == s.mtime
                                and e.run == run.name and e.worker == worker):
                            e.index, e.suffix = s.index, s.span
                        else:
                            e = FileEntry(run.name, worker, s.index, s.span, s.path,
                                          _relative(s.path, found.logdir), s.size, s.mtime)
                        new[s.path] = e
            changed = set(new) != set(old) or any(new[p] is not old.get(p) for p in new)
            for path in set(self._lru) - {p for p, e in new.items() if e is old.get(p)}:
                self._evict(path)
            self._entries = new
            self._root = found.logdir
            self._runs = list(found.runs)
            self._discovery_skipped = list(found.skipped)
            self._scan_error = None
            self._scanned_at = time.time()
            if changed:
                self.generation += 1
            order = {r.name: i for i, r in enumerate(found.runs)}
            todo = [e for e in new.values() if e.state == PENDING and not e.loading]
        for e in sorted(todo, key=lambda e: (order.get(e.run, 0), -e.index, e.worker)):
            self.request_load(e, priority=1)

    # -- loading --------------------------------------------------------------------------
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
        from tb_profiler.trace import load

        trace, error = None, None
        try:
            trace = load(entry.path, cache=self.cache, cache_dir=self.cache_dir)
        except TraceFormatError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"{entry.path}: cannot be read: {exc.strerror or exc}"
        except MemoryError:
            error = f"{entry.path}: out of memory while loading"
        except Exception as exc:  # a decoder or model bug must not take the server down
            logger.exception("tb_profiler: loading %s failed", entry.path)
            error = f"{entry.path}: {type(exc).__name__}: {exc}"
        with self._lock:
            if error is not None:
                entry.state, entry.error = FAILED, error.replace(entry.path, entry.rel)
            else:
                entry.state, entry.error = LOADED, None
                if self._entries.get(entry.path) is entry:
                    self._insert(entry.path, trace)
            entry.loading = entry.running = False
            entry.done.set()

    def _insert(self, path: str, trace: Any) -> None:
        size = trace_nbytes(trace)
        if path in self._lru:
            self._evict(path)
        self._lru[path] = (trace, size)
        self._lru_bytes += size
        while self._lru_bytes > self.memory_bytes and len(self._lru) > 1:
            self._evict(next(iter(self._lru)))

    def _evict(self, path: str) -> None:
        item = self._lru.pop(path, None)
        if item is not None:
            self._lru_bytes -= item[1]

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
        from tb_profiler.trace import load

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

    # -- queries --------------------------------------------------------------------------
    def entries(self) -> list[FileEntry]:
        with self._lock:
            return list(self._entries.values())

    def run_entries(self, run: str) -> list[FileEntry]:
        with self._lock:
            return [e for e in self._entries.values() if e.run == run]

    def run_names(self) -> list[str]:
        """Runs with at least one file not known to be broken, by name."""
        with self._lock:
            names = {e.run for e in self._entries.values() if e.state != FAILED}
            return [r.name for r in self._runs if r.name in names]

    @property
    def loading(self) -> bool:
        with self._lock:
            return not self._scanned.is_set() or any(e.state in (PENDING, LOADING) for e in self._entries.values())

    @property
    def has_runs(self) -> bool:
        with self._lock:
            return any(e.state != FAILED for e in self._entries.values())

    def resident(self, entry: FileEntry) -> bool:
        with self._lock:
            return entry.path in self._lru and self._entries.get(entry.path) is entry

    def progress(self, entries: Iterable[FileEntry]) -> tuple[int, int]:
        """(bytes of the files done, loaded or failed; bytes of all of them)."""
        with self._lock:
            entries = list(entries)
            return (sum(e.size for e in entries if e.state in (LOADED, FAILED)), sum(e.size for e in entries))

    def memory_used(self) -> int:
        with self._lock:
            return self._lru_bytes

    def skipped(self) -> list[dict]:
        with self._lock:
            out = [{"run": None, "path": _relative(s.path, self._root), "reason": s.reason}
                   for s in self._discovery_skipped]
            out += [{"run": e.run, "path": e.rel, "reason": e.error or "could not be read"}
                    for e in self._entries.values() if e.state == FAILED]
        return sorted(out, key=lambda s: s["path"])

    def status(self) -> dict:
        with self._lock:
            runs = []
            by_run: dict[str, list[FileEntry]] = {}
            for e in self._entries.values():
                by_run.setdefault(e.run, []).append(e)
            for info in self._runs:
                es = by_run.get(info.name, [])
                done, total = self.progress(es)
                states = [e.state for e in es]
                failed = states.count(FAILED)
                state = ("loading" if any(s in (PENDING, LOADING) for s in states)
                         else "failed" if es and failed == len(es) else "ready")
                workers: dict[str, list[dict]] = {}
                for e in sorted(es, key=lambda e: (natural_key(e.worker), e.index)):
                    workers.setdefault(e.worker, []).append(
                        {"span": str(e.index), "suffix": e.suffix, "size": e.size, "state": e.state,
                         "error": e.error})
                runs.append({"name": info.name, "state": state, "total_bytes": total, "loaded_bytes": done,
                             "files": len(es), "loaded_files": states.count(LOADED), "failed_files": failed,
                             "workers": workers})
            done, total = self.progress(self._entries.values())
            return {
                "loading": self.loading,
                "scanned_at": self._scanned_at,
                "scan_error": self._scan_error,
                "total_bytes": total, "loaded_bytes": done,
                "memory": {"used_bytes": self._lru_bytes, "cap_bytes": self.memory_bytes,
                           "traces_in_memory": len(self._lru)},
                "runs": runs,
                "skipped": self.skipped(),
            }
