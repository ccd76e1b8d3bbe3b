"""Route ``kernel_counters``: each device counter's time-weighted average per kernel name.

Why a module of its own: plugin/views.py holds the older views; the counters Kineto now
records (``hardware_counters``, ``mtia_counters``; analysis.hw_counters) get their route
here, registered by plugin/app.py from ``ROUTE_PARAMS`` and ``routes``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tb_profiler.analysis.hw_counters import counter_series
from tb_profiler.analysis.hw_counters import kernel_counters as _kernel_counters
from tb_profiler.trace.strings import shown_all

_SEL = ("run", "worker", "span")
ROUTE_PARAMS: dict[str, frozenset[str]] = {"kernel_counters": frozenset(_SEL)}


def kernel_counters(trace) -> dict:
    """{counters: [{track, counter, category, device, samples}], rows: [{name, counter, track,
    calls, covered_ns, avg}]}: rows empty when the trace records no device counters."""
    series = [{"track": s.track, "counter": s.counter, "category": s.category, "device": s.device,
               "samples": len(s.ts)} for s in counter_series(trace)]
    from tb_profiler.plugin.views import _page

    for s in series:
        s["track"], s["counter"] = shown_all([s["track"], s["counter"]])
    rows, count = _page(_kernel_counters(trace))
    notes = [] if series else ["this trace records no device counters (hardware_counters, mtia_counters)"]
    return {"counters": series, "rows": rows, **count, "notes": notes}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {"kernel_counters": lambda request: app.one(request, kernel_counters)}


__all__ = ["ROUTE_PARAMS", "kernel_counters", "routes"]
