"""Profiler overhead: the time the profiler itself took, per step, never subtracted silently.

Why: CUPTI reports its own cost as ``overhead`` activities (libkineto
``CuptiActivityProfiler::handleOverheadActivity``; ``OverheadActivity`` writes them on pid
-1, named by ``overheadKindString``: "Buffer Flush", "Instrumentation", "Resource",
"Lazy Function Loading", ...; XPU's PTI writes the same category).  A step that held a
buffer flush is longer than the job's step; the figures here say by how much, so a reader
can judge, while every step time stays what the trace measured (no view subtracts it).

Per step the overhead is the time inside the step's range ([start_ns, end_ns) of
``analysis.steps``) covered by at least one overhead event (overlapping overhead events
count once; an event crossing a step boundary counts in each step for its part there).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.steps import steps_frame
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind

STEP_COLUMNS = ["step", "name", "dur_ns", "profiler_overhead_ns", "overhead_events", "overhead_pct"]
KIND_COLUMNS = ["name", "events", "total_ns"]


def _overhead_rows(trace) -> np.ndarray:
    ev = trace.events
    return np.flatnonzero((ev["kind"] == int(Kind.OVERHEAD)) & (ev["dur"] != MISSING_INT))


@per_trace
def _merged(trace) -> tuple[np.ndarray, np.ndarray]:
    ev = trace.events
    rows = _overhead_rows(trace)
    start = ev["ts"][rows]
    return merge_intervals(start, start + np.maximum(ev["dur"][rows], 0))


def overhead_per_step(trace) -> pd.DataFrame:
    """One row per step of ``analysis.steps.steps`` (same order): step, name, dur_ns,
    profiler_overhead_ns (step time covered by overhead events), overhead_events (those
    that start in the step), overhead_pct (of the step's dur_ns)."""
    st = steps_frame(trace)
    if st.empty:
        return pd.DataFrame({c: [] for c in STEP_COLUMNS})
    lo, hi = st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
    ms, me = _merged(trace)
    covered = covered_in(ms, me, lo, hi).astype(np.int64)
    starts = np.sort(trace.events["ts"][_overhead_rows(trace)])
    count = np.searchsorted(starts, hi, side="left") - np.searchsorted(starts, lo, side="left")
    dur = st["dur_ns"].to_numpy(np.int64)
    return pd.DataFrame({"step": st["step"].to_numpy(np.int64), "name": st["name"].to_numpy(object),
                         "dur_ns": dur, "profiler_overhead_ns": covered, "overhead_events": count.astype(np.int64),
                         "overhead_pct": np.where(dur > 0, covered / np.maximum(dur, 1) * 100.0, 0.0)})


def profiler_overhead(trace) -> dict:
    """{"steps": overhead_per_step, "kinds": per overhead name (events, total_ns, summed),
    "total_ns": time covered by overhead events in the whole trace, "share": of the trace's
    span (0..1), "notes"}."""
    ev = trace.events
    rows = _overhead_rows(trace)
    ms, me = _merged(trace)
    total = int((me - ms).sum()) if len(ms) else 0
    first, last = trace.span
    span = max(int(last) - int(first), 0)
    kinds = pd.DataFrame({"name": trace.str(ev["name"][rows]).astype(object), "dur": ev["dur"][rows]})
    kinds = (kinds.groupby("name", sort=False).agg(events=("dur", "size"), total_ns=("dur", "sum")).reset_index()
             .sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
             if len(rows) else pd.DataFrame({c: [] for c in KIND_COLUMNS}))
    notes = ([(f"profiler overhead ({len(rows)} overhead events) covers {total} ns; it stays inside the step "
              "and device times shown (subtracted nowhere)")] if len(rows) else [])
    return {"steps": overhead_per_step(trace), "kinds": kinds, "total_ns": total,
            "share": (total / span) if span else 0.0, "notes": notes}


__all__ = ["KIND_COLUMNS", "STEP_COLUMNS", "overhead_per_step", "profiler_overhead"]
