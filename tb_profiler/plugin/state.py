"""What the server knows about its logdir: discovered runs, each file's loading state,
each file's summary, and the parsed traces kept in memory.

- A discovery thread calls ``discover(logdir)`` every ``reload_s`` seconds (listing and
  stat only), so new runs and new files of existing runs appear without a restart, and
  a rewritten file is loaded again: a new size or mtime, or the same ones with another
  inode or ctime (``cp -p``, a restore) or, on an object store, another ETag (a file's
  ``key``, which every cache of the server follows).  A file gone is released
  (plugin.loading: its trace and its open file go at once).
- Runs of one worker: a fixed pool of loader threads parses every file in the background
  (first run first, latest span first; plugin.loading), through the on-disk cache, so
  broken files are found and listed with their reason early and the first run answers
  before the others have loaded. A request that needs a file jumps the queue.
- Runs of several workers (64 to 4,096 ranks of up to GBs each) never go into memory as
  a whole: a summary thread gets each file's TraceSummary (tb_profiler.summary: KBs per
  file), the stored one when its key matches, else built by ``summarize_files`` in a
  process pool (``jobs``) or on Dask (``dask``), run by run and a chunk of files at a
  time, the run a request asks for first. The run-level routes (views, distributed/*)
  read summaries only; a per-rank view loads that one rank's trace on demand.
- Parsed traces stay in an LRU keyed by file, capped by approximate bytes; an evicted
  trace reloads from the on-disk cache when asked for again.

Nothing here runs on a request thread for long: requests ask for loads or summaries and
wait on an event with a deadline. Every failure is caught and recorded per file; none
stops a thread or hides the other files.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

from tb_profiler.errors import ProcessExiting
from tb_profiler.io.discovery import natural_key
from tb_profiler.plugin.loading import (
    FAILED,
    LOADED,
    LOADING,
    PENDING,
    S_BUILDING,
    S_FAILED,
    S_PENDING,
    S_READY,
    FileEntry,
    LoadFailed,
    Loading,
    trace_nbytes,
)

__all__ = ["FAILED", "LOADED", "LOADING", "PENDING", "S_BUILDING", "S_FAILED", "S_PENDING", "S_READY", "FileEntry",
           "LoadFailed", "ProfilerState", "env_number", "trace_nbytes"]

logger = logging.getLogger("tb_profiler.plugin")

DEFAULT_MEMORY_MB = 2048
DEFAULT_RELOAD_S = 5.0
DEFAULT_THREADS = 2

CHUNK_BYTES = 512 << 20   # trace bytes per summary process per chunk
MAX_CHUNK = 256           # files per chunk
DASK_RETRY_S = 300.0      # after Dask fails, how long the local pool builds before Dask is tried again
SHARE = 4.0               # discovery and status wait at least this many times their own cost before running again
STATUS_EXACT_BELOW_S = 0.05  # a status document cheaper than this is always current


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


def _scan_problem(exc: BaseException, logdir: str, reload_s: float) -> str:
    """Why the logdir could not be scanned, for the page (which never sees its path)."""
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return f"the log directory does not exist (or is not a folder); it is looked at again every {reload_s:g} s"
    return f"the log directory cannot be read: {type(exc).__name__}: {exc}".replace(logdir, "the log directory")


def _cpus() -> int:
    """The CPUs this process may use: the default number of summary processes."""
    from tb_profiler.summary.pool import available_cpus

    return available_cpus()


def _reason(exc: BaseException, entry: "FileEntry") -> str:
    """Why a file has no summary, as the user reads it: the file named relative to the logdir."""
    from tb_profiler.errors import TraceFormatError

    if isinstance(exc, OSError):
        text = f"cannot be read: {exc.strerror or exc}"
    elif isinstance(exc, TraceFormatError):
        text = str(exc)
    else:
        text = f"not summarized: {type(exc).__name__}: {exc}"
    text = text.replace(entry.path, entry.rel)
    return text if entry.rel in text else f"{entry.rel}: {text}"


def _chunk_size(batch: list["FileEntry"], jobs: int) -> int:
    """How many files of the batch go to summarize_files at once: about CHUNK_BYTES of trace
    per process (a few seconds of work), at least two files per process and at most
    MAX_CHUNK files. Big enough that starting a pool is noise, small enough that a
    request for another run waits only seconds."""
    n, total = 0, 0
    for e in batch[:MAX_CHUNK]:
        n, total = n + 1, total + max(e.size, 0)
        if n >= 2 * jobs and total >= jobs * CHUNK_BYTES:
            break
    return n


def _first(e: "FileEntry", run_order: dict[str, int]) -> tuple:
    """Background order: runs as discovered, each worker's latest span first."""
    return run_order.get(e.run, 0), -e.index, natural_key(e.worker)


def _relative(path: str, logdir: str) -> str:
    root = logdir.rstrip("/" + os.sep)
    if path.startswith(root + "/") or path.startswith(root + os.sep):
        return path[len(root) + 1:].replace(os.sep, "/")
    return os.path.basename(path)


@dataclass(frozen=True)
class _Snap:
    """What the status document says of one file, copied under the lock."""

    run: str
    worker: str
    index: int
    suffix: str | None
    size: int
    state: str
    error: str | None
    summary_state: str
    summary_error: str | None
    rel: str
    done: bool          # background work on it is over (ProfilerState._done)
    done_bytes: int     # its size when done, else the part its decoder walked

    @classmethod
    def of(cls, e: FileEntry, done: bool) -> "_Snap":
        walked = e.size if done else int(e.size * e.fraction) if e.running else 0
        return cls(e.run, e.worker, e.index, e.suffix, e.size, e.state, e.error, e.summary_state, e.summary_error,
                   e.rel, done, walked)


def _run_status(name: str, files: list[_Snap], multi: bool) -> dict:
    """One run's part of the status document."""
    states = [f.state for f in files]
    failed = states.count(FAILED)
    state = "loading" if not all(f.done for f in files) else "failed" if files and failed == len(files) else "ready"
    workers: dict[str, list[dict]] = {}
    for f in sorted(files, key=lambda f: (natural_key(f.worker), f.index)):
        workers.setdefault(f.worker, []).append(
            {"span": str(f.index), "suffix": f.suffix, "size": f.size, "state": f.state,
             "error": f.error, "summary": f.summary_state, "summary_error": f.summary_error})
    return {"name": name, "state": state, "total_bytes": sum(f.size for f in files),
            "loaded_bytes": sum(f.done_bytes for f in files), "files": len(files),
            "loaded_files": states.count(LOADED), "failed_files": failed, "summarized_in_background": multi,
            "summaries": _summary_counts(files), "workers": workers}


def _summary_counts(files: list) -> dict:
    """Files (FileEntry or _Snap) summarized or failed, of how many, and their bytes."""
    done = [f for f in files if f.summary_state in (S_READY, S_FAILED)]
    return {"summarized": len(done), "total": len(files), "failed": sum(f.summary_state == S_FAILED for f in files),
            "summarized_bytes": sum(f.size for f in done), "total_bytes": sum(f.size for f in files)}


def _skipped_rows(found: list, root: str, files: list[_Snap]) -> list[dict]:
    """Discovery's skipped files, files that failed to load, files whose summary failed."""
    out = [{"run": None, "path": _relative(s.path, root), "reason": s.reason} for s in found]
    out += [{"run": f.run, "path": f.rel, "reason": f.error or "could not be read"} for f in files if f.state == FAILED]
    out += [{"run": f.run, "path": f.rel, "reason": f.summary_error or "not summarized"}
            for f in files if f.summary_state == S_FAILED and f.state != FAILED]
    return sorted(out, key=lambda s: s["path"])


class ProfilerState(Loading):
    """Discovery, loading (plugin.loading), per-file summaries and the in-memory trace LRU
    for one logdir."""

    def __init__(self, logdir: str, *, memory_bytes: int | None = None, reload_s: float | None = None,
                 threads: int | None = None, cache: bool = True, cache_dir: str | None = None,
                 jobs: int | None = None, dask: str | None = None, summaries: str | None = None):
        self.logdir = os.fspath(logdir)
        self.memory_bytes = int(memory_bytes if memory_bytes is not None else
                                env_number("TB_PROFILER_MEMORY_MB", DEFAULT_MEMORY_MB, 16, 1 << 22) * (1 << 20))
        self.reload_s = float(reload_s if reload_s is not None else
                              env_number("TB_PROFILER_RELOAD_S", DEFAULT_RELOAD_S, 0.2, 3600))
        self.threads = int(threads if threads is not None else
                           env_number("TB_PROFILER_THREADS", DEFAULT_THREADS, 1, 64))
        self.cache = cache
        self.cache_dir = cache_dir
        self.jobs = int(jobs if jobs is not None else env_number("TB_PROFILER_JOBS", _cpus(), 1, 1024))
        self.dask = dask if dask is not None else (os.environ.get("TB_PROFILER_DASK") or None)
        self.summaries = summaries if summaries is not None else (os.environ.get("TB_PROFILER_SUMMARIES") or None)
        self._lock = threading.RLock()
        self._entries: dict[str, FileEntry] = {}
        self._root = self.logdir                    # the logdir as discovery spells it
        self._runs: list[Any] = []                  # RunInfo of the last discovery
        self._discovery_skipped: list[Any] = []
        self._scan_error: str | None = None
        self._scanned_at: float | None = None
        self._scanned = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.generation = 0   # bumps whenever the discovered set of files changes
        self._multi: set[str] = set()               # runs of more than one worker
        self._summary_queue: list[list[FileEntry]] = []
        self._summarized = threading.Condition(self._lock)  # notified as summaries finish
        self._dask_retry_at = 0.0   # after Dask failed, the local pool builds until then
        self._init_loading()
        self._status_kept: tuple | None = None  # (when, seconds it took, changes, document)
        self._merging = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "ProfilerState":
        if self._threads:
            return self
        t = threading.Thread(target=self._watch, name="tb_profiler-discovery", daemon=True)
        self._threads.append(t)
        self._threads += self._loading_threads()
        self._threads.append(threading.Thread(target=self._summarizer, name="tb_profiler-summaries", daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._stop_loading()
        with self._lock:
            self._summarized.notify_all()

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
        """Scan every reload_s seconds, and never more often than every SHARE times a scan's
        own duration: a logdir of 10,000 runs takes 1.5 s to list, which every 5 s would be
        a third of a core taken from loading and answering, for as long as the server runs."""
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.scan()
            self._stop.wait(max(self.reload_s, SHARE * (time.monotonic() - t0)))

    def scan(self) -> None:
        """Discover once and merge the result (never raises)."""
        from tb_profiler.io.discovery import discover

        try:
            found = discover(self.logdir)
        except Exception as exc:  # a vanished logdir, a flaky remote filesystem, ...
            with self._lock:
                self._scan_error = _scan_problem(exc, self.logdir, self.reload_s)
                self._scanned_at = time.time()
            self._scanned.set()
            return
        try:
            self._merge(found)
        except Exception:  # pragma: no cover - a bug, not bad input; keep watching
            logger.exception("tb_profiler: merging discovery results failed")
        self._scanned.set()

    def _merge(self, found: Any) -> None:
        with self._merging:  # one merge at a time; the entries are matched outside the state's lock
            self._merge_locked(found)

    def _merge_locked(self, found: Any) -> None:
        new: dict[str, FileEntry] = {}
        with self._lock:
            old = self._entries
        for run in found.runs:  # what is read of an entry here (path, size, times, tag, names) never changes
            for worker, spans in run.workers.items():
                for s in spans:
                    e = old.get(s.path)
                    if (e is not None and e.size == s.size and e.mtime == s.mtime and e.tag == s.tag
                            and e.run == run.name and e.worker == worker):
                        e.index, e.suffix = s.index, s.span
                    else:
                        e = FileEntry(run.name, worker, s.index, s.span, s.path,
                                      _relative(s.path, found.logdir), s.size, s.mtime, tag=s.tag)
                    new[s.path] = e
        with self._lock:
            changed = set(new) != set(old) or any(new[p] is not old.get(p) for p in new)
            for path in set(self._lru) - {p for p, e in new.items() if e is old.get(p)}:
                was, now = old.get(path), new.get(path)
                if now is None or was is None or now.key != was.key:  # deleted, or another version
                    self._release(path)
                else:  # the same file under another run or worker name: loaded again as such
                    self._evict(path)
            self._entries = new
            self._root = found.logdir
            self._runs = list(found.runs)
            self._discovery_skipped = list(found.skipped)
            self._scan_error = None
            self._scanned_at = time.time()
            self.changes += 1
            if changed:
                self.generation += 1
            self._multi = {r.name for r in found.runs if len(r.workers) > 1}
            order = {r.name: i for i, r in enumerate(found.runs)}
            todo = [e for e in new.values() if e.state == PENDING and not e.loading and e.run not in self._multi]
            self._queue_summaries(sorted((e for e in new.values() if e.run in self._multi),
                                         key=lambda e: _first(e, order)), front=False)
        for e in sorted(todo, key=lambda e: _first(e, order)):  # (a run of many ranks is summarized, not loaded)
            try:
                self.request_load(e, priority=1)  # which looks again, under the lock
            except LoadFailed:  # failed meanwhile (its summary found it unreadable)
                continue

    # -- summaries ------------------------------------------------------------------------
    def _queue_summaries(self, entries: list[FileEntry], front: bool) -> bool:
        """Queue the entries' summaries not built or queued yet (lock held); True when any was."""
        todo = [e for e in entries if e.summary_state == S_PENDING and (front or not e.summary_queued)]
        if not todo or (front and self._summary_queue and self._summary_queue[0] == todo):
            return False
        for e in todo:
            e.summary_queued = True
        if front:
            self._summary_queue.insert(0, todo)
        else:
            self._summary_queue.append(todo)
        self._summarized.notify_all()
        return True

    def request_summaries(self, entries: Iterable[FileEntry]) -> None:
        """Put these files' summaries first in the summary thread's queue (a request needs them)."""
        with self._lock:
            self._queue_summaries(list(entries), front=True)

    def summarized(self, entries: Iterable[FileEntry]) -> bool:
        """Whether every entry's summary is ready or failed."""
        with self._lock:
            return all(e.summary_state in (S_READY, S_FAILED) for e in entries)

    def wait_summarized(self, entries: Iterable[FileEntry], deadline_s: float) -> bool:
        """Wait until every entry's summary is ready or failed, or the deadline."""
        entries = list(entries)
        end = time.monotonic() + deadline_s
        with self._lock:
            while not all(e.summary_state in (S_READY, S_FAILED) for e in entries):
                left = end - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._summarized.wait(min(left, 1.0))
            return True

    def summary_progress(self, entries: Iterable[FileEntry]) -> dict:
        """Files summarized (or failed) of these entries, and their bytes: what a 202 shows."""
        with self._lock:
            return _summary_counts(list(entries))

    def _summarizer(self) -> None:
        while not self._stop.is_set():
            chunk = self._next_chunk()
            if chunk:
                try:
                    self._summarize(chunk)
                except ProcessExiting as exc:  # stopped while summarizing: said, not a traceback
                    logger.info("tb_profiler: summaries not made: %s", exc)
                    self._finish(chunk, [exc] * len(chunk))
                except Exception as exc:  # pragma: no cover - a bug, not bad input; keep going
                    logger.exception("tb_profiler: summarizing failed")
                    self._finish(chunk, [exc] * len(chunk))

    def _next_chunk(self) -> list[FileEntry]:
        """The next files to summarize (marked building): a chunk of the first queued batch,
        so a request for another run waits at most one chunk."""
        with self._lock:
            while not self._stop.is_set():
                while self._summary_queue:
                    batch = [e for e in self._summary_queue.pop(0)
                             if e.summary_state == S_PENDING and self._entries.get(e.path) is e]
                    if not batch:
                        continue
                    size = _chunk_size(batch, self.jobs)
                    chunk, rest = batch[:size], batch[size:]
                    if rest:
                        self._summary_queue.insert(0, rest)
                    for e in chunk:
                        e.summary_state, e.summary_queued = S_BUILDING, False
                    return chunk
                self._summarized.wait(1.0)
        return []

    def _summarize(self, chunk: list[FileEntry]) -> None:
        """Stored summaries first (a read each), the others built by summarize_files, without
        writing each rank's decoded columns (a per-rank view decodes its rank when opened)."""
        from tb_profiler.summary.ingest import stored_summary
        from tb_profiler.summary.pool import summarize_files

        def stored(e: FileEntry):
            try:
                return stored_summary(e.path, cache_dir=self.cache_dir, worker=e.worker, summaries=self.summaries)
            except (OSError, ValueError):  # building it names the problem
                return None

        for e in chunk:
            self._finish([e], [stored(e)])
        todo = [e for e in chunk if e.summary_state == S_BUILDING]
        if not todo:
            return
        by_path = {e.path: e for e in todo}

        def progress(done: int, total: int, path: str) -> None:  # as each file finishes
            e = by_path.get(path)
            if e is not None and e.summary_state == S_BUILDING:
                self._finish([e], [stored(e)])

        paths, workers = [e.path for e in todo], [e.worker for e in todo]
        dask = self.dask if time.monotonic() >= self._dask_retry_at else None
        try:
            outcomes = summarize_files(paths, jobs=self.jobs, dask=dask, cache_dir=self.cache_dir,
                                       workers=workers, progress=progress, columns=False, summaries=self.summaries)
        except Exception as exc:  # Dask unreachable or not installed: the local pool does it
            if dask is None:
                raise
            logger.warning("tb_profiler: summaries on Dask %s failed (%s); building them here for %.0f s",
                           dask, exc, DASK_RETRY_S)
            self._dask_retry_at = time.monotonic() + DASK_RETRY_S  # not a connect timeout per chunk
            outcomes = summarize_files(paths, jobs=self.jobs, cache_dir=self.cache_dir, workers=workers,
                                       progress=progress, columns=False, summaries=self.summaries)
        self._finish(todo, outcomes)

    def _finish(self, entries: list[FileEntry], outcomes: list) -> None:
        """Record outcomes (a TraceSummary, an exception, or None: not known yet) of entries
        still building. A file that cannot be read is failed for every view, as a load of it."""
        from tb_profiler.errors import TraceFormatError

        with self._lock:
            for e, out in zip(entries, outcomes):
                if out is None or e.summary_state != S_BUILDING:
                    continue
                if isinstance(out, BaseException):
                    e.summary_state = S_FAILED
                    e.summary_error = _reason(out, e)
                    if isinstance(out, (TraceFormatError, OSError)) and e.state != LOADED:
                        e.state, e.error = FAILED, e.summary_error
                else:
                    e.summary_state, e.summary, e.summary_error = S_READY, out.relabel(span=e.index), None
            self.changes += 1
            self._summarized.notify_all()

    # -- queries --------------------------------------------------------------------------
    def entries(self) -> list[FileEntry]:
        with self._lock:
            return list(self._entries.values())

    def run_entries(self, run: str) -> list[FileEntry]:
        with self._lock:
            return [e for e in self._entries.values() if e.run == run]

    def run_snapshots(self, run: str) -> list[Any]:
        """The memory snapshots (io.discovery.SnapshotFile) discovery found in a run's folder."""
        with self._lock:
            return next((list(r.snapshots) for r in self._runs if r.name == run), [])

    def run_names(self) -> list[str]:
        """Every run found, by name, those whose every file failed included: a run that
        vanished from the list once its files failed left its user guessing; listed, its
        views say which file failed and why (issue 21)."""
        with self._lock:
            names = {e.run for e in self._entries.values()}
            return [r.name for r in self._runs if r.name in names]

    def failed_runs(self) -> list[str]:
        """Runs whose every file failed: listed, but never the run a page opens on."""
        with self._lock:
            ok = {e.run for e in self._entries.values() if e.state != FAILED}
            return [r.name for r in self._runs if r.name not in ok and any(e.run == r.name for e in self._entries.values())]

    def _done(self, e: FileEntry) -> bool:
        """Background work on this file is over: loaded or failed, or, in a run of several
        workers (summarized, not loaded), its summary ready or failed."""
        return e.state in (LOADED, FAILED) or (e.run in self._multi and e.summary_state in (S_READY, S_FAILED))

    @property
    def loading(self) -> bool:
        with self._lock:
            return not self._scanned.is_set() or not all(self._done(e) for e in self._entries.values())

    @property
    def has_runs(self) -> bool:
        with self._lock:
            return any(e.state != FAILED for e in self._entries.values())

    def progress(self, entries: Iterable[FileEntry]) -> tuple[int, int]:
        """(bytes of the files done: loaded or failed, or summarized in a run of several
        workers, plus the part of the file being loaded its decoder has walked; bytes of
        all of them)."""
        with self._lock:
            entries = list(entries)
            return sum(_Snap.of(e, self._done(e)).done_bytes for e in entries), sum(e.size for e in entries)

    def skipped(self) -> list[dict]:
        with self._lock:
            found, root, files = list(self._discovery_skipped), self._root, [_Snap.of(e, False) for e in self._entries.values()]
        return _skipped_rows(found, root, files)

    def status(self) -> dict:
        """Every run's and file's state (the status route).  A document that cost
        STATUS_EXACT_BELOW_S or more to build (thousands of runs: 0.4 s for 10,000) is built
        again at most every SHARE times its own cost: the page polls it every second or two
        while loading, and a poll must not take the time of the loading it reports on.  A
        cheaper one is built again whenever a file changed state.  The document is shared:
        read it, do not change it."""
        now = time.monotonic()
        with self._lock:
            kept = self._status_kept
            if kept is not None and now - kept[0] < SHARE * kept[1] and (kept[2] == self.changes or
                                                                         kept[1] >= STATUS_EXACT_BELOW_S):
                return kept[3]
            doc = self._status()
            self._status_kept = (now, time.monotonic() - now, self.changes, doc)
            return doc

    def _status(self) -> dict:
        """The status document, built from a copy of what it needs taken under the lock (the
        copy is quick; the document, for thousands of runs, is not: loaders and requests do
        not wait for it)."""
        with self._lock:
            files = [_Snap.of(e, self._done(e)) for e in self._entries.values()]
            runs_info = [(r.name, r.name in self._multi) for r in self._runs]
            found, root = list(self._discovery_skipped), self._root
            head = {"loading": self.loading, "scanned_at": self._scanned_at, "scan_error": self._scan_error}
            memory = {"used_bytes": self._lru_bytes + self.snapshot_bytes, "cap_bytes": self.memory_bytes,
                      "traces_in_memory": len(self._lru), "traces_loaded": self.lru_loads,
                      "peak_bytes": max(self.lru_peak_bytes, self._lru_bytes + self.snapshot_bytes),
                      "snapshot_bytes": self.snapshot_bytes, "snapshots_in_memory": self.snapshots_in_memory}
        by_run: dict[str, list[_Snap]] = {}
        for f in files:
            by_run.setdefault(f.run, []).append(f)
        runs = [_run_status(name, by_run.get(name, []), multi) for name, multi in runs_info]
        memory["summaries_in_memory"] = sum(f.summary_state == S_READY for f in files)
        return {**head, "total_bytes": sum(f.size for f in files), "loaded_bytes": sum(f.done_bytes for f in files),
                "memory": memory, "runs": runs, "skipped": _skipped_rows(found, root, files)}
