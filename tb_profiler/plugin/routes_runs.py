"""The discovery routes: ``runs``, ``status``, ``skipped``, ``views``, ``workers``, ``spans``
(docs/api.md, "Runs").

Why a module of its own: these answer what the logdir holds (the state's scan), before any
view; only ``views`` reads traces (one worker's) or summaries (several workers').  Each
handler takes the app (app.ProfilerApp) and the request; ``routes`` binds them.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.io.discovery import natural_key
from tb_profiler.plugin import views, views_snapshot
from tb_profiler.plugin.params import ApiError

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "runs": (), "status": (), "skipped": (),
    "views": ("run",), "workers": ("run", "view"), "spans": ("run", "worker"),
}.items()}


def r_runs(app, request: Request) -> Response:
    app.wait_scanned()
    return app.json({"runs": app.state.run_names(), "failed": app.state.failed_runs(),
                     "loading": app.state.loading})


def r_status(app, request: Request) -> Response:
    app.wait_scanned()
    return app.json(app.state.status(), request=request)


def r_skipped(app, request: Request) -> Response:
    app.wait_scanned()
    return app.json({"skipped": app.state.skipped()}, request=request)


def r_views(app, request: Request) -> Response:
    p = app.params(request)
    run, entries = app._run(p)
    usable = app._usable(entries)
    if not usable:  # say which files and why: the run stays listed for this
        why = "; ".join((e.error or f"{e.rel}: not read")[:300] for e in entries[:3])
        more = f" (and {len(entries) - 3} more files)" if len(entries) > 3 else ""
        raise ApiError(404, f"no trace of run {run[:200]!r} could be read: {why}{more}")
    latest = {}
    for e in usable:
        if e.worker not in latest or e.index > latest[e.worker].index:
            latest[e.worker] = e
    chosen = [latest[w] for w in sorted(latest, key=natural_key)]
    snaps = bool(app.state.run_snapshots(run))  # memory snapshots show in the Memory view
    if len(chosen) > 1:  # a run of several workers: from their summaries, no trace loaded
        return app.compute_run(request, chosen, lambda run: views_snapshot.with_memory(
            views.views(run.ok, len(chosen)), snaps), (snaps,))
    return app.compute(request, chosen, lambda traces: views_snapshot.with_memory(views.views(traces, 1), snaps),
                       (snaps,))


def r_workers(app, request: Request) -> Response:
    p = app.params(request)
    run, entries = app._run(p)
    view = p.text("view", max_len=64)
    if view == "Distributed":
        return app.json(["All"])
    return app.json(app._workers(entries))


def r_spans(app, request: Request) -> Response:
    p = app.params(request)
    run, entries = app._run(p)
    worker = p.text("worker")
    usable = app._usable(entries)
    if worker not in (None, "", "All"):
        if not any(e.worker == worker for e in entries):
            raise ApiError(404, f"run {run[:200]!r} has no worker {worker[:200]!r}")
        usable = [e for e in usable if e.worker == worker]
    return app.json([str(i) for i in sorted({e.index for e in usable})])


_HANDLERS = {"runs": r_runs, "status": r_status, "skipped": r_skipped,
             "views": r_views, "workers": r_workers, "spans": r_spans}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {route: partial(fn, app) for route, fn in _HANDLERS.items()}


__all__ = ["ROUTE_PARAMS", "routes"]
