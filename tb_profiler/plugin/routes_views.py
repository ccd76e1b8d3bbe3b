"""The per-trace views' routes: Overview (``overview``), Operator (``operation``,
``operation/table``, ``operation/stack``), Kernel (``kernel``, ``kernel/table``,
``kernel/tc_pie``), Memory (``memory``, ``memory_curve``, ``memory_events``) and Module
(``module``, ``tree``) (docs/api.md).

Why a module of its own: each handler reads its query (params.py), names the trace that
run/worker/span select and hands one function of views.py to the app's compute path
(``app.one``): the route is one hop from the analysis it sends.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import views
from tb_profiler.plugin.params import NS_MAX, SEL, WINDOW, time_window

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "overview": SEL,
    "operation": (*SEL, "group_by", "top"), "operation/table": (*SEL, "group_by"),
    "operation/stack": (*SEL, "group_by", "op_name", "input_shape"),
    "kernel": (*SEL, "top"), "kernel/table": (*SEL, "group_by"), "kernel/tc_pie": SEL,
    # memory_metric: the old plugin's unit parameter, accepted and ignored (docs/api.md)
    "memory": (*SEL, "device", *WINDOW, "memory_metric"),
    "memory_curve": (*SEL, *WINDOW, "max_points"),
    "memory_events": (*SEL, "device", *WINDOW, "limit"),
    "module": SEL, "tree": (*SEL, "step"),
}.items()}


def r_overview(app, request: Request) -> Response:
    p = app.params(request)
    entry = app._entry(p)
    n_workers = len(app._workers(app.state.run_entries(entry.run)))
    return app.compute(request, [entry], lambda t: views.overview(t[0], n_workers), (n_workers,))


# -- Operator ----------------------------------------------------------------------------------
def r_operation(app, request: Request) -> Response:
    p = app.params(request)
    group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
    top = p.integer("top", 10, 1, 100)
    return app.one(request, views.operation_pie, group_by, top)


def r_operation_table(app, request: Request) -> Response:
    p = app.params(request)
    group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
    return app.one(request, views.operation_table, group_by)


def r_operation_stack(app, request: Request) -> Response:
    p = app.params(request)
    group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
    op_name = p.text("op_name", required=True)
    input_shape = p.text("input_shape")
    return app.one(request, views.operation_stack, group_by, op_name, input_shape)


# -- Kernel ------------------------------------------------------------------------------------
def r_kernel(app, request: Request) -> Response:
    p = app.params(request)
    top = p.integer("top", 10, 1, 100)
    return app.one(request, views.kernel_pie, top)


def r_kernel_table(app, request: Request) -> Response:
    p = app.params(request)
    group_by = p.choice("group_by", tuple(views.KERNEL_GROUPS), "KernelNameAndOp")
    return app.one(request, views.kernel_table, group_by)


def r_kernel_tc(app, request: Request) -> Response:
    return app.one(request, views.kernel_tc)


# -- Memory ------------------------------------------------------------------------------------
def r_memory(app, request: Request) -> Response:
    p = app.params(request)
    device = p.text("device", max_len=64) or None
    a, b = time_window(p)
    return app.one(request, views.memory_stats, device, a, b)


def r_memory_curve(app, request: Request) -> Response:
    p = app.params(request)
    a, b = time_window(p)
    max_points = p.integer("max_points", 2000, 10, 20000)
    return app.one(request, views.memory_curve, a, b, max_points)


def r_memory_events(app, request: Request) -> Response:
    p = app.params(request)
    device = p.text("device", max_len=64) or None
    a, b = time_window(p)
    limit = p.integer("limit", 10000, 1, 200000)
    return app.one(request, views.memory_events, device, a, b, limit)


# -- Module ------------------------------------------------------------------------------------
def r_module(app, request: Request) -> Response:
    return app.one(request, views.module)


def r_tree(app, request: Request) -> Response:
    p = app.params(request)
    step = p.integer("step", None, -NS_MAX, NS_MAX)
    return app.one(request, views.tree, step)


_HANDLERS = {
    "overview": r_overview,
    "operation": r_operation, "operation/table": r_operation_table, "operation/stack": r_operation_stack,
    "kernel": r_kernel, "kernel/table": r_kernel_table, "kernel/tc_pie": r_kernel_tc,
    "memory": r_memory, "memory_curve": r_memory_curve, "memory_events": r_memory_events,
    "module": r_module, "tree": r_tree,
}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {route: partial(fn, app) for route, fn in _HANDLERS.items()}


__all__ = ["ROUTE_PARAMS", "routes"]
