"""Route body of ``integrity``: the trust report of one trace (analysis.integrity) as JSON.

Why its own module: every view's badge asks for it, and views.py is near its size limit.
Times are made relative to the trace's origin, as every route's (docs/api.md, "Times").
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tb_profiler.analysis.integrity import MAX_FINDINGS, integrity_json
from tb_profiler.plugin.timeline import origin

__all__ = ["ROUTE_PARAMS", "integrity", "routes"]

ROUTE_PARAMS: dict[str, frozenset[str]] = {"integrity": frozenset(("run", "worker", "span"))}


def integrity(trace) -> dict:
    """{"rules", "findings" (the first MAX_FINDINGS rows), "findings_total", "shares",
    "affects", "notes", "total"}; a finding's ts_ns from the trace's origin."""
    doc = integrity_json(trace, MAX_FINDINGS)
    t0 = origin(trace)
    for row in doc["findings"]:  # at most MAX_FINDINGS rows
        if row["ts_ns"] is not None:
            row["ts_ns"] = int(row["ts_ns"]) - t0
    return doc


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {"integrity": lambda request: app.one(request, integrity)}
