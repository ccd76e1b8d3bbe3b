"""The Diff view's routes: ``diff`` and ``diffnode`` (docs/api.md, "Diff").

Why a module of its own: a diff reads two sides, each one trace (run/worker/span, or
exp_run/exp_worker/exp_span) or a span's every worker; one trace against one is computed
from the traces, a side of several workers from their summaries, never from all their
events in memory.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import views
from tb_profiler.plugin.params import SEL, Params
from tb_profiler.plugin.state import FileEntry

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "diff": (*SEL, "exp_run", "exp_worker", "exp_span"),
    "diffnode": (*SEL, "exp_run", "exp_worker", "exp_span", "path"),
}.items()}


def _side(app, p: Params, prefix: str) -> list[FileEntry]:
    """One side: the trace run/worker/span name (prefix "exp_": exp_run/...), or with no
    worker (or "All") every worker's file of the span."""
    worker = p.text(prefix + "worker")
    if worker in (None, "", "All"):
        return app._span_files(p, prefix)
    return [app._entry(p, prefix)]


def _diff(app, request: Request, fn: Callable[[list, list], Any]) -> Response:
    """fn(side A, side B): one trace against one from their traces; a side of several
    workers from their summaries, never from all their events in memory."""
    p = app.params(request)
    a, b = _side(app, p, ""), _side(app, p, "exp_")
    n = len(a)
    if n == 1 and len(b) == 1:
        return app.compute(request, a + b, lambda traces: fn(traces[:n], traces[n:]))

    def body(run: views.RunSummaries) -> Any:
        sides = [[s for s in side if not isinstance(s, BaseException)]
                 for side in (run.summaries[:n], run.summaries[n:])]
        if not all(sides):
            raise views.NotFound("diff: a side has no readable trace: " + "; ".join(map(str, run.missing)))
        out = fn(*sides)
        if isinstance(out.get("notes"), list):  # the workers left out are named, never hidden
            out["notes"] = [f"left out, not summarized: {s}" for s in run.missing] + out["notes"]
        return out

    return app.compute_run(request, a + b, body)


def r_diff(app, request: Request) -> Response:
    return _diff(app, request, views.diff)


def r_diffnode(app, request: Request) -> Response:
    path = app.params(request).text("path") or ""
    return _diff(app, request, lambda a, b: views.diffnode(a, b, path))


_HANDLERS = {"diff": r_diff, "diffnode": r_diffnode}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {route: partial(fn, app) for route, fn in _HANDLERS.items()}


__all__ = ["ROUTE_PARAMS", "routes"]
