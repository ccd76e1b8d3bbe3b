"""The "why is this step slow" routes (issue 9): ``idle``, ``launches``, ``memcpy``,
``queue``, ``roofline``, ``critical_path``, ``annotations``, ``steps/outliers`` and
``trace/range_stats`` (docs/api.md).

Why a module of its own: the diagnosis views' handlers, each reading its query
(params.py) and handing one function of views.py to the app's compute path
(``app.one``) for the trace that run/worker/span select.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import views
from tb_profiler.plugin.params import NS_MAX, SEL, WINDOW, ApiError

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "idle": (*SEL, "kernel_wait_ns"), "launches": SEL, "steps/outliers": (*SEL, "factor_pct"),
    "memcpy": (*SEL, "bins"), "annotations": SEL, "queue": (*SEL, "full_at"),
    "roofline": SEL, "critical_path": (*SEL, "step"),
    "trace/range_stats": (*SEL, *WINDOW),
}.items()}


def r_idle(app, request: Request) -> Response:
    p = app.params(request)
    kernel_wait_ns = p.integer("kernel_wait_ns", 30_000, 0, 10_000_000_000)
    return app.one(request, views.idle, kernel_wait_ns)


def r_launches(app, request: Request) -> Response:
    return app.one(request, views.launches)


def r_memcpy(app, request: Request) -> Response:
    bins = app.params(request).integer("bins", 200, 1, 2000)
    return app.one(request, views.memcpy, bins)


def r_queue(app, request: Request) -> Response:
    full_at = app.params(request).integer("full_at", 1024, 1, 1 << 20)
    return app.one(request, views.queue, full_at)


def r_roofline(app, request: Request) -> Response:
    return app.one(request, views.roofline)


def r_critical_path(app, request: Request) -> Response:
    step = app.params(request).integer("step", None, -NS_MAX, NS_MAX)
    return app.one(request, views.critical_path, step)


def r_annotations(app, request: Request) -> Response:
    return app.one(request, views.annotations)


def r_step_outliers(app, request: Request) -> Response:
    p = app.params(request)
    factor_pct = p.integer("factor_pct", 150, 101, 10_000)
    return app.one(request, views.step_outliers, factor_pct / 100)


def r_range_stats(app, request: Request) -> Response:
    p = app.params(request)
    a = p.integer("start_ns", None, -NS_MAX, NS_MAX)
    b = p.integer("end_ns", None, -NS_MAX, NS_MAX)
    if a is None or b is None:
        raise ApiError(400, "start_ns and end_ns are both required")
    if b <= a:
        raise ApiError(400, "end_ns must be greater than start_ns")
    return app.one(request, views.range_stats, a, b)


_HANDLERS = {
    "idle": r_idle, "launches": r_launches, "steps/outliers": r_step_outliers,
    "memcpy": r_memcpy, "annotations": r_annotations, "queue": r_queue,
    "roofline": r_roofline, "critical_path": r_critical_path,
    "trace/range_stats": r_range_stats,
}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {route: partial(fn, app) for route, fn in _HANDLERS.items()}


__all__ = ["ROUTE_PARAMS", "routes"]
