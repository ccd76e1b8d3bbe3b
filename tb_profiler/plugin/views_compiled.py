"""The ``compiled_kernels`` route's body: torch.compile's generated kernels for the Kernel view.

Why a module of its own: views.py holds the other per-trace routes and is near its size
limit.  Pure function from a parsed Trace to JSON data (docs/api.md, "Compiled kernels").
"""
from __future__ import annotations

from typing import Any, Callable

from tb_profiler.analysis.compiled import compiled_kernels as _kernels
from tb_profiler.analysis.compiled import compiled_notes, compiled_regions
from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.analysis.provenance import kernel_provenance
from tb_profiler.analysis.sources import source_resolver

MAX_ROWS = 2000         # compiled kernels sent, most device time first (all are counted)
MAX_REGION_OPS = 50     # operators under the compiled regions sent, most host time first


def compiled_kernels(trace) -> dict:
    """{"rows": [COMPILED_COLUMNS + "kernel_path", "provenance"], "total", "regions": {"regions",
    "compiled_functions", "ops"}, "provenance_files", "notes"}."""
    df = _kernels(trace)
    regions = compiled_regions(trace)
    prov = kernel_provenance(trace)
    notes = compiled_notes(trace, df, regions) + prov["notes"]
    rows = to_jsonable(df.head(MAX_ROWS))
    found = prov["kernels"]
    resolve = source_resolver(trace).resolve
    for r in rows:
        r["kernel_path"] = resolve(r["kernel_file"]) if r["kernel_file"] else None  # an existing file here
        info = found.get(r["name"]) or found.get(r.get("kernel_name") or "")
        r["provenance"] = {k: info[k] for k in ("post_grad_nodes", "pre_grad_nodes", "frames")} if info else None
    ops = regions["ops"]
    return {"rows": rows, "total": int(len(df)),
            "regions": {"regions": regions["regions"], "compiled_functions": regions["compiled_functions"],
                        "ops": to_jsonable(ops.head(MAX_REGION_OPS)), "ops_total": int(len(ops))},
            "provenance_files": prov["files"], "notes": notes}


# Registered by plugin/app.py (as views_counters' routes): the query names the route reads.
ROUTE_PARAMS: dict[str, frozenset[str]] = {"compiled_kernels": frozenset(("run", "worker", "span"))}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {"compiled_kernels": lambda request: app.one(request, compiled_kernels)}


__all__ = ["ROUTE_PARAMS", "compiled_kernels", "routes"]
