"""The ``graphs`` route's body: CUDA/HIP graph replays for the Kernel view's "CUDA graphs" section.

Why a module of its own: views.py holds the other per-trace routes and is near its size
limit.  Pure function from a parsed Trace to JSON data (docs/api.md, "Graphs"); the
annotations pickle is only the one beside the trace (analysis.graph_annotations), never a
path from the query.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tb_profiler.analysis.graphs import graphs as _graphs
from tb_profiler.analysis.jsonable import to_jsonable

MAX_ROWS = 2000  # graph ids and annotations sent each, most device time first (all are counted)


def graphs(trace) -> dict:
    """{"graphs": [GRAPH_COLUMNS], "graphs_total", "attribution": [ATTRIBUTION_COLUMNS],
    "attribution_total", "kernels", "device_ns", "share", "annotated", "annotations":
    {"file", "from_args"}, "device_word", "notes"}; empty lists for a trace without graphs."""
    out = _graphs(trace)
    g, a = out["graphs"], out["attribution"]
    ann = dict(out["annotations"])
    hide = _relative(getattr(trace, "data_root", None))
    if ann.get("file"):
        ann["file"] = hide(ann["file"])
    return {"graphs": to_jsonable(g.head(MAX_ROWS)), "graphs_total": len(g),
            "attribution": to_jsonable(a.head(MAX_ROWS)), "attribution_total": len(a),
            "kernels": out["kernels"], "device_ns": out["device_ns"], "share": out["share"],
            "annotated": out["annotated"], "annotations": ann, "device_word": trace.device_word,
            "notes": [hide(n) for n in out["notes"]]}


def _relative(root: str | None) -> Callable[[str], str]:
    """A text with the server's logdir taken out of the paths it names: clients see paths
    relative to the logdir, never where it lies on the server."""
    if not root:
        return lambda text: text
    top = root if root.endswith(os.sep) else root + os.sep
    return lambda text: text.replace(top, "")


# Registered by plugin/app.py (as views_counters' routes): the query names the route reads.
ROUTE_PARAMS: dict[str, frozenset[str]] = {"graphs": frozenset(("run", "worker", "span"))}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {"graphs": lambda request: app.one(request, graphs)}


__all__ = ["ROUTE_PARAMS", "graphs", "routes"]
