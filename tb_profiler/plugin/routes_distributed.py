"""The Distributed view's routes: ``distributed/gpuinfo``, ``overlap``, ``waittime``,
``commops``, ``ranks``, ``instances``, ``matrix`` and ``stragglers`` (docs/api.md,
"Distributed").

Why a module of its own: these read a span's per-rank summaries, never its traces: the
cross-rank analysis (views.RunSummaries) is computed once per (run, span, files) by the
app (``app.compute_run``) and shared by every route here; each handler picks its part.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import views
from tb_profiler.plugin.params import SPAN_FILES

MAX_MATRIX_CELLS = 1_000_000  # distributed/ranks' step_matrix

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "distributed/gpuinfo": SPAN_FILES, "distributed/overlap": SPAN_FILES,
    "distributed/waittime": SPAN_FILES, "distributed/commops": SPAN_FILES,
    "distributed/ranks": SPAN_FILES, "distributed/instances": (*SPAN_FILES, "sort", "limit", "offset"),
    "distributed/matrix": SPAN_FILES, "distributed/stragglers": SPAN_FILES,
}.items()}


def _dist(app, request: Request, fn: Callable[[views.RunSummaries], Any]) -> Response:
    """fn(the span's RunSummaries): the cross-rank analysis is computed once and shared."""
    entries = app._span_files(app.params(request))

    def body(run: views.RunSummaries) -> Any:
        if len(entries) < 2:
            only = run.summaries[0]
            if isinstance(only, views.SummaryMissing):
                raise views.NotFound(only.reason)
            info = only.distributed_info
            if not (isinstance(info, dict) and (info.get("world_size") or 1) > 1):
                raise views.NotFound("this run has a single worker and no distributed information")
        return fn(run)

    return app.compute_run(request, entries, body)


def r_dist_instances(app, request: Request) -> Response:
    p = app.params(request)
    sort = p.choice("sort", tuple(views.INSTANCE_SORTS), "skew")
    limit = p.integer("limit", 200, 1, 5000)
    offset = p.integer("offset", 0, 0, 1 << 40)
    return _dist(app, request, lambda run: views.dist_instances(run, sort, limit, offset))


# route -> the views.py function of the span's RunSummaries it sends (no query of its own)
_PLAIN: dict[str, Callable[[views.RunSummaries], Any]] = {
    "distributed/gpuinfo": lambda run: views.dist_gpuinfo(run),
    "distributed/overlap": lambda run: views.dist_overlap(run),
    "distributed/waittime": lambda run: views.dist_wait(run),
    "distributed/commops": lambda run: views.dist_commops(run),
    "distributed/ranks": lambda run: views.dist_ranks(run, MAX_MATRIX_CELLS),
    "distributed/matrix": lambda run: views.dist_matrix(run),
    "distributed/stragglers": lambda run: views.dist_stragglers(run),
}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    out: dict[str, Callable[[Any], Any]] = {route: partial(_dist, app, fn=fn) for route, fn in _PLAIN.items()}
    out["distributed/instances"] = partial(r_dist_instances, app)
    return out


__all__ = ["MAX_MATRIX_CELLS", "ROUTE_PARAMS", "routes"]
