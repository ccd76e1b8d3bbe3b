"""Outlier steps: which steps took much longer than the typical one, and what made them slow.

Why the median, not the mean: one 10x step (a checkpoint, a recompilation, a data stall)
pulls the mean toward itself, and "longer than 1.5x the mean" then misses the steps it
should find; the median step is what the job does when nothing goes wrong.  The mean
stays beside it in every figure, since the mean is what the job's throughput pays.

What made a step slow is read from the step-time breakdown (analysis.breakdown, each ns
of a step in one category): the outlier's ns per category against the median step's
(the median of each category over the steps), and the category that grew most is its
``cause``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.breakdown import CATEGORIES, LABELS, breakdown
from tb_profiler.analysis.overhead import overhead_per_step
from tb_profiler.analysis.steps import steps

__all__ = ["DEFAULT_FACTOR", "STEP_COLUMNS", "step_outliers"]

DEFAULT_FACTOR = 1.5
STEP_COLUMNS = ["step", "name", "start_ns", "dur_ns", "ratio", "outlier", "profiler_overhead_ns"]


def step_outliers(trace, *, factor: float = DEFAULT_FACTOR) -> dict:
    """Per-step time with its statistics, and the steps that took more than ``factor`` x
    the median step.

    Returns {"steps": one row per step (STEP_COLUMNS; ratio = dur / median; profiler_overhead_ns:
    the profiler's own time inside the step, analysis.overhead, not subtracted from dur_ns),
    "stats": {steps, mean_ns, median_ns, p90_ns, min_ns, max_ns, factor} (None without
    steps), "outliers": per outlier step: step, name, dur_ns, ratio, cause (the breakdown
    category that grew most against the median step), cause_label, excess_ns (dur - median),
    and for every category <cat>_ns (the step's) and <cat>_delta_ns (against the median
    step's), slowest first, "median_step": {<cat>_ns: the median of each category},
    "notes": why the result is empty or partial}.
    """
    if not factor > 1:
        raise ValueError(f"factor {factor}: must be above 1")
    frame = breakdown(trace)
    rows = frame[frame["step"] != -1].reset_index(drop=True)  # the last row is the average
    if rows.empty:
        return _empty(factor, ["no steps (ProfilerStep#N) in this trace"])
    st = steps(trace).reset_index(drop=True)
    dur = rows["total_ns"].to_numpy(np.int64)
    median = float(np.median(dur))
    ratio = dur / median if median > 0 else np.zeros(len(dur))
    outlier = (ratio > factor) if median > 0 else np.zeros(len(dur), bool)
    table = pd.DataFrame({"step": rows["step"].to_numpy(np.int64), "name": rows["name"].to_numpy(object),
                          "start_ns": st["start_ns"].to_numpy(np.int64), "dur_ns": dur,
                          "ratio": ratio, "outlier": outlier})
    cats = [c + "_ns" for c in CATEGORIES]
    typical = {c: int(np.rint(np.median(rows[c].to_numpy(np.int64)))) for c in cats}
    # the profiler's own time in each step (analysis.overhead): shown beside the step, never subtracted
    table["profiler_overhead_ns"] = overhead_per_step(trace)["profiler_overhead_ns"].to_numpy(np.int64)
    notes = []
    if len(dur) < 3:
        notes.append(f"only {len(dur)} step{'s' if len(dur) > 1 else ''}: too few to call one an outlier")
        table["outlier"] = False
    return {"steps": table, "stats": _stats(dur, factor), "outliers": _causes(rows[table["outlier"].to_numpy()],
                                                                             typical, median),
            "median_step": typical, "notes": notes}


def _stats(dur: np.ndarray, factor: float) -> dict:
    return {"steps": int(len(dur)), "mean_ns": int(np.rint(dur.mean())), "median_ns": int(np.rint(np.median(dur))),
            "p90_ns": int(np.rint(np.percentile(dur, 90))), "min_ns": int(dur.min()), "max_ns": int(dur.max()),
            "factor": factor}


def _causes(rows: pd.DataFrame, typical: dict[str, int], median: float) -> pd.DataFrame:
    """Each outlier step's breakdown against the median step's, slowest first."""
    cats = list(typical)
    out = pd.DataFrame({"step": rows["step"].to_numpy(np.int64), "name": rows["name"].to_numpy(object),
                        "dur_ns": rows["total_ns"].to_numpy(np.int64)})
    out["ratio"] = out["dur_ns"] / median if median > 0 else 0.0
    out["excess_ns"] = out["dur_ns"] - int(np.rint(median))
    deltas = np.column_stack([rows[c].to_numpy(np.int64) - typical[c] for c in cats]) if len(rows) else \
        np.zeros((0, len(cats)), np.int64)
    top = deltas.argmax(axis=1) if len(rows) else np.zeros(0, np.int64)
    out["cause"] = np.array([CATEGORIES[i] for i in top], dtype=object)
    out["cause_label"] = np.array([LABELS[CATEGORIES[i]] for i in top], dtype=object)
    for j, c in enumerate(cats):
        out[c] = rows[c].to_numpy(np.int64)
        out[c.replace("_ns", "_delta_ns")] = deltas[:, j]
    return out.sort_values(["dur_ns", "step"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _empty(factor: float, notes: list[str]) -> dict:
    table = pd.DataFrame({"step": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object),
                          "start_ns": pd.Series(dtype=np.int64), "dur_ns": pd.Series(dtype=np.int64),
                          "ratio": pd.Series(dtype=np.float64), "outlier": pd.Series(dtype=bool),
                          "profiler_overhead_ns": pd.Series(dtype=np.int64)})
    rows = pd.DataFrame({"step": [], "name": [], "total_ns": [], **{c + "_ns": [] for c in CATEGORIES}})
    return {"steps": table, "stats": None, "outliers": _causes(rows, {c + "_ns": 0 for c in CATEGORIES}, 0.0),
            "median_step": {}, "notes": notes}
