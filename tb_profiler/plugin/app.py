"""The WSGI app behind every route of docs/api.md, for TensorBoard and for ``serve``.

Request threads only validate parameters, look names up, wait (bounded) for loads or
summaries and hand the work to a small thread pool; answers are cached as encoded JSON
keyed by the route, its parameters and the identity (path, size, mtime) of the files
used. Per-trace routes read the trace (the state's LRU); run-level routes (``views`` of a
run of several workers, ``distributed/*``) read the files' summaries only, and share one
cross-rank analysis per (run, span, files).

What lives where (a route is one hop from the analysis it sends):

    app.py                  ProfilerApp: the route table, lookups (run/worker/span -> files)
                            and the compute path (wait for loads or summaries, the pool,
                            the response cache, answers kept beside a trace's cache)
    wsgi.py                 the WSGI entry, JSON/error/text responses, security headers,
                            static files, the response cache (WsgiApp, ResponseCache)
    params.py               query parameters (Params, ApiError) and the declared-names check
    hosts.py                the Host / Origin policy (HostPolicy: DNS rebinding)
    routes_runs.py          runs, status, skipped, views, workers, spans
    routes_views.py         overview, operation*, kernel*, memory*, module, tree
    routes_why.py           idle, launches, memcpy, queue, roofline, critical_path, ...
    routes_timeline.py      trace, trace/event, trace/search, trace/raw, trace/ranks
    routes_distributed.py   distributed/*
    routes_diff.py          diff, diffnode
    views_*.py              newer views: their bodies and their routes together

Each route module holds its ``ROUTE_PARAMS`` (the query names each route reads: any other
is a 400 before the route runs) and ``routes(app)`` (its handlers bound to the app).
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.analysis import stored
from tb_profiler.io.discovery import natural_key
from tb_profiler.plugin import (
    ROUTE_PREFIX,
    routes_diff,
    routes_distributed,
    routes_runs,
    routes_timeline,
    routes_views,
    routes_why,
    views,
    views_compiled,
    views_counters,
    views_graphs,
    views_integrity,
    views_snapshot,
)
from tb_profiler.plugin.hosts import ALLOW_HOSTS_ENV, HostPolicy, host_name
from tb_profiler.plugin.params import ApiError, Params
from tb_profiler.plugin.state import (
    FAILED,
    LOADED,
    S_FAILED,
    FileEntry,
    LoadFailed,
    ProfilerState,
)
from tb_profiler.plugin.wsgi import (
    CSP,
    SECURITY_HEADERS,
    Loading,
    ResponseCache,
    WsgiApp,
    encode,
)

_encode = encode  # the old name (tests encode answers as the app does)

LOAD_WAIT_S = 5.0        # how long a request waits for a trace before answering 202
COMPUTE_WAIT_S = 60.0    # ... and for an analysis
STORE_AFTER_S = 0.5      # a single-trace route's JSON that took this long is kept with the trace's cache
RETRY_AFTER_MS = 500
SUMMARY_RETRY_MS = 1000  # a 202 while a run's summaries are built
RUNS_KEPT = 4            # cross-rank analyses kept in memory (each shared by the run-level routes)

# The modules whose routes the app serves: each has ROUTE_PARAMS and routes(app).
ROUTE_MODULES = (routes_runs, routes_views, routes_timeline, routes_distributed, routes_diff, routes_why,
                 views_counters, views_compiled, views_integrity, views_graphs, views_snapshot)
ROUTE_PARAMS: dict[str, frozenset[str]] = {}
for _module in ROUTE_MODULES:
    assert not set(_module.ROUTE_PARAMS) & set(ROUTE_PARAMS), _module.__name__
    ROUTE_PARAMS.update(_module.ROUTE_PARAMS)


class ProfilerApp(WsgiApp):
    """WSGI app for the routes under ROUTE_PREFIX (and, standalone, ``/``)."""

    route_params = ROUTE_PARAMS

    def __init__(self, state: ProfilerState, *, standalone: bool = False, hosts: HostPolicy | None = None):
        """``hosts``: the Host headers answered (default: this machine's loopback names,
        and $TB_PROFILER_ALLOW_HOSTS)."""
        self.state = state
        self.standalone = standalone
        self.hosts = hosts if hosts is not None else HostPolicy()
        self.pool = ThreadPoolExecutor(max_workers=max(2, state.threads), thread_name_prefix="tb_profiler-api")
        self.responses = ResponseCache(max(16 << 20, min(256 << 20, state.memory_bytes // 4)))
        self._inflight: dict[Any, Future] = {}
        self._inflight_lock = threading.Lock()
        self._runs: "OrderedDict[tuple, views.RunSummaries]" = OrderedDict()
        self.routes: dict[str, Callable[[Request], Response]] = {}
        for module in ROUTE_MODULES:
            self.routes.update(module.routes(self))

        assert set(self.routes) == set(ROUTE_PARAMS), set(self.routes) ^ set(ROUTE_PARAMS)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def wait_scanned(self) -> None:
        """Wait (at most LOAD_WAIT_S) for the logdir's first scan."""
        self.state.wait_scanned(LOAD_WAIT_S)

    # -- lookups -------------------------------------------------------------------------------
    def _run_entries(self, run: str) -> list[FileEntry]:
        entries = self.state.run_entries(run)
        if not entries:
            if not self.state.wait_scanned(0) and self.state.wait_scanned(LOAD_WAIT_S):
                entries = self.state.run_entries(run)
            if not entries:
                raise ApiError(404, f"no run named {run[:200]!r}")
        return entries

    def _run(self, p: Params) -> tuple[str, list[FileEntry]]:
        run = p.text("run", required=True)
        return run, self._run_entries(run)

    @staticmethod
    def _usable(entries: list[FileEntry]) -> list[FileEntry]:
        return [e for e in entries if e.state != FAILED]

    def _workers(self, entries: list[FileEntry]) -> list[str]:
        return sorted({e.worker for e in self._usable(entries)}, key=natural_key)  # discovery's order

    def _entry(self, p: Params, prefix: str = "", failed_ok: bool = False) -> FileEntry:
        """The file that run/worker/span (exp_run/... with prefix "exp_") name (one that
        could not be read: a 404 saying why, unless failed_ok)."""
        run = p.text(prefix + "run", required=True)
        entries = self._run_entries(run)
        worker = p.text(prefix + "worker")
        if worker in (None, "", "All"):
            workers = self._workers(entries) or sorted({e.worker for e in entries}, key=natural_key)
            worker = workers[0]
        mine = [e for e in entries if e.worker == worker]
        if not mine:
            raise ApiError(404, f"run {run[:200]!r} has no worker {worker[:200]!r}")
        span = p.integer(prefix + "span", None, 1, 1_000_000)
        if span is None:
            usable = self._usable(mine)
            entry = max(usable or mine, key=lambda e: e.index)
        else:
            entry = next((e for e in mine if e.index == span), None)
            if entry is None:
                raise ApiError(404, f"worker {worker[:200]!r} of run {run[:200]!r} has no span {span}")
        if entry.state == FAILED and not failed_ok:
            raise ApiError(404, entry.error or f"{entry.rel}: could not be read")
        return entry

    def _span_files(self, p: Params, prefix: str = "") -> list[FileEntry]:
        """Every worker's file of one span (default: each worker's latest), those that could
        not be read too: the run-level routes name them (info.excluded, a diff's notes)
        instead of hiding them."""
        run = p.text(prefix + "run", required=True)
        entries = self._run_entries(run)
        span = p.integer(prefix + "span", None, 1, 1_000_000)
        by_worker: dict[str, list[FileEntry]] = {}
        for e in entries:  # one pass: a run of 4,096 ranks is grouped in linear time
            by_worker.setdefault(e.worker, []).append(e)
        out = []
        for worker in sorted(by_worker, key=natural_key):
            mine = by_worker[worker]
            pick = max(mine, key=lambda e: e.index) if span is None else next(
                (e for e in mine if e.index == span), None)
            if pick is not None:
                out.append(pick)
        if not out or all(e.state == FAILED for e in out):
            raise ApiError(404, f"run {run[:200]!r} has no readable trace" +
                           (f" for span {span}" if span is not None else ""))
        return out

    # -- the compute path -----------------------------------------------------------------------
    @staticmethod
    def _key(request: Request, entries: list[FileEntry], key_extra: tuple) -> tuple:
        return (request.path.rsplit(ROUTE_PREFIX, 1)[-1], tuple(sorted(request.args.items(multi=True))),
                tuple(e.key for e in entries), key_extra)

    def compute(self, request: Request, entries: list[FileEntry], fn: Callable[[list], Any],
                key_extra: tuple = ()) -> Response:
        """fn(traces) on the pool, through the response cache, after the traces are loaded."""
        key = self._key(request, entries, key_extra)
        cached = self.responses.get(key)
        if cached is not None:
            return self.body(cached, request=request)
        self._await_loaded(entries)
        body = self._pooled(key, lambda: self._computed(key, entries, fn))
        return self.body(body, request=request)

    def _computed(self, key: tuple, entries: list[FileEntry], fn: Callable[[list], Any]) -> bytes:
        """fn's JSON; for one trace, kept beside its cache entry when it cost STORE_AFTER_S
        or more, and read from there by a later server (a reopen does not compute it again)."""
        traces = [self.state.trace(e) for e in entries]
        part = None
        if len(traces) == 1:
            part = "route-" + hashlib.sha256(repr((key[0], key[1], key[3])).encode()).hexdigest()[:24]
            kept = stored.read_bytes(traces[0], part)
            if kept is not None:
                self.responses.put(key, kept)
                return kept
        t0 = time.perf_counter()
        body = self._encoded(key, fn(traces))
        if part is not None and time.perf_counter() - t0 >= STORE_AFTER_S:
            stored.write_bytes_later(traces[0], part, body)
        return body

    def compute_run(self, request: Request, entries: list[FileEntry], fn: Callable[[views.RunSummaries], Any],
                    key_extra: tuple = ()) -> Response:
        """fn(the files' RunSummaries) on the pool, through the response cache, once every
        file's summary is ready or failed: no trace is loaded."""
        key = self._key(request, entries, key_extra)
        cached = self.responses.get(key)
        if cached is not None:
            return self.body(cached, request=request)
        run = self._run_summaries(entries)
        body = self._pooled(key, lambda: self._encoded(key, fn(run)))
        return self.body(body, request=request)

    def _encoded(self, key, data: Any) -> bytes:
        body = encode(data)
        self.responses.put(key, body)
        return body

    def _pooled(self, key, work: Callable[[], Any]) -> Any:
        """work() on the pool, once at a time per key (a second request waits for the same
        run of it); after COMPUTE_WAIT_S a 202 (computing) while it goes on."""
        with self._inflight_lock:
            fut = self._inflight.get(key)
            if fut is None:
                fut = self.pool.submit(self._run_pooled, key, work)
                self._inflight[key] = fut
        try:
            return fut.result(timeout=COMPUTE_WAIT_S)
        except FutureTimeout:
            raise Loading({"loading": True, "computing": True, "retry_after_ms": 2000}) from None

    def _run_pooled(self, key, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except LoadFailed as exc:
            raise ApiError(404, str(exc)) from None
        except views.NotFound as exc:
            raise ApiError(404, str(exc)) from None
        finally:
            with self._inflight_lock:
                self._inflight.pop(key, None)

    def _await_loaded(self, entries: list[FileEntry]) -> None:
        """Wait (bounded) until each file has been parsed once (then its columns are in the
        disk cache: the compute reloads an evicted one cheaply), else 202 with progress. Not
        all in memory at once: an LRU smaller than the files would never get there."""
        if all(self.state.resident(e) for e in entries):
            return
        self.state.wait_loaded(entries, LOAD_WAIT_S)
        failed = [e for e in entries if e.state == FAILED]
        if failed:
            raise ApiError(404, failed[0].error or f"{failed[0].rel}: could not be read")
        if not all(e.state == LOADED for e in entries):
            done, total = self.state.progress(entries)
            run_done, run_total = self.state.progress(self.state.run_entries(entries[0].run))
            raise Loading({"loading": True, "run": entries[0].run, "loaded_bytes": done, "total_bytes": total,
                           "run_loaded_bytes": run_done, "run_total_bytes": run_total,
                           "retry_after_ms": RETRY_AFTER_MS})

    def _run_summaries(self, entries: list[FileEntry]) -> views.RunSummaries:
        """The files' summaries (waiting, bounded, for them to be built: else 202 with the
        progress), as one RunSummaries per set of files, kept for the next routes."""
        self.state.request_summaries(entries)
        if not self.state.wait_summarized(entries, LOAD_WAIT_S):
            progress = self.state.summary_progress(entries)
            raise Loading({"loading": True, "summarizing": True, "run": entries[0].run, **progress,
                           "loaded_bytes": progress["summarized_bytes"], "retry_after_ms": SUMMARY_RETRY_MS})
        key = tuple((e.key, e.summary_state) for e in entries)
        with self._inflight_lock:
            run = self._runs.get(key)
            if run is None:
                run = views.RunSummaries([views.SummaryMissing(e.worker, e.summary_error or "not summarized")
                                          if e.summary_state == S_FAILED else e.summary for e in entries])
                self._runs[key] = run
                while len(self._runs) > RUNS_KEPT:
                    self._runs.popitem(last=False)
            self._runs.move_to_end(key)
            return run

    def one(self, request: Request, fn: Callable[..., Any], *args, **kw) -> Response:
        """fn(trace, *args) on the trace that run/worker/span name."""
        entry = self._entry(self.params(request))
        return self.compute(request, [entry], lambda traces: fn(traces[0], *args, **kw))


__all__ = ["ALLOW_HOSTS_ENV", "CSP", "LOAD_WAIT_S", "ROUTE_MODULES", "ROUTE_PARAMS", "SECURITY_HEADERS", "STORE_AFTER_S",
           "ApiError", "HostPolicy", "Loading", "Params", "ProfilerApp", "ResponseCache", "host_name"]
