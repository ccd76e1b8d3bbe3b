"""Diff: what changed between two traces or runs, first in the step-time breakdown, then
operator by operator, kernel by kernel and module by module.

Each side is one Trace or a list of them (a run's workers, or several spans), or their
TraceSummaries (tb_profiler.summary: a run's sides never need its events in memory): its
tables are the operators/kernels/modules/steps analyses of each trace, as its summary
keeps them, summed.  Rows are aligned
by operator name, kernel name and module path; a row present on one side only shows zeros
on the other (``side`` says "a", "b" or "both").

Why the breakdown first: a change of the step time has a cause in one of the breakdown's
categories (DataLoader from 35.5 ms to 0.3 ms per step with 4 workers) that the operator
and kernel rows show in pieces at best: data loading is mostly Python, or other processes.

Why per step: two profiles rarely cover the same number of steps (a different schedule,
a trailing step left out, two workers against one), so every count and time is divided by
its own side's number of steps (summed over its traces) before subtracting.  Where the two
sides' steps differ (other ProfilerStep numbers, or another count of them), the notes say
so, with the steps each side left out and why: an average over other steps is not the
same step measured twice.  Only what
lies inside the steps is counted (``steps.in_steps``: a kernel launched outside every
step would otherwise inflate each step's share).  Deltas are b - a: positive means B
spends more.  Every table is sorted by the size of the change, never by its sign: a
large saving matters as much as a large loss.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tb_profiler.analysis.breakdown import CATEGORIES, LABELS, NS_COLUMNS
from tb_profiler.analysis.summarize import summarize_trace
from tb_profiler.analysis.trace_summary import TraceSummary, stack

__all__ = ["KERNEL_SUMS", "MODULE_SUMS", "OPERATOR_SUMS", "by_change", "diff"]

# Columns compared per table (each gets _a, _b and _delta, per step).
OPERATOR_SUMS = ("calls", "host_self_ns", "host_total_ns", "device_self_ns", "device_total_ns")
KERNEL_SUMS = ("calls", "total_ns")
MODULE_SUMS = ("calls", "host_self_ns", "host_total_ns", "device_self_ns", "device_total_ns")


def _summaries(side) -> list:
    """A side as a list of TraceSummaries: a Trace or a TraceSummary, a sequence of them, or
    anything with summaries() (a Run: its workers' latest spans)."""
    if side is None:
        return []
    if hasattr(side, "events") or isinstance(side, TraceSummary):
        side = [side]
    elif hasattr(side, "summaries") and callable(side.summaries):
        side = side.summaries()
    return [s if isinstance(s, TraceSummary) else summarize_trace(s) for s in side]


def _summed(summaries: list, frame: str, keys: list[str], sums: Sequence[str]) -> pd.DataFrame:
    """One table of a side's summaries added up by key (the side's aggregate)."""
    both, _ = stack(summaries, frame, [*keys, *sums])
    if not len(both):
        return pd.DataFrame({c: pd.Series(dtype=object if c in keys else "int64") for c in [*keys, *sums]})
    return both.groupby(keys, sort=False, dropna=False)[list(sums)].sum().reset_index()


def _align(a: pd.DataFrame, b: pd.DataFrame, keys: list[str], sums: Sequence[str],
           steps_a: int, steps_b: int, order_by: Sequence[str]) -> pd.DataFrame:
    """Outer join on keys; per-step values of each side, delta = b - a, largest change first."""
    m = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    out = m[keys].copy()
    out["side"] = m["_merge"].map({"left_only": "a", "right_only": "b", "both": "both"}).astype(object)
    for c in sums:
        va = m[f"{c}_a"].fillna(0).to_numpy(np.float64) / max(steps_a, 1)
        vb = m[f"{c}_b"].fillna(0).to_numpy(np.float64) / max(steps_b, 1)
        out[f"{c}_a"], out[f"{c}_b"], out[f"{c}_delta"] = va, vb, vb - va
    return by_change(out, [f"{c}_delta" for c in order_by], keys)


def by_change(frame: pd.DataFrame, deltas: Sequence[str], keys: Sequence[str] = ()) -> pd.DataFrame:
    """Rows by the size of their change, largest first: the sum of |delta| over the given
    delta columns, ties by keys (else kept in order), unknown (NaN) changes last.  The
    one ordering of every diff table: a saving is as much a change as a loss."""
    if not len(frame):
        return frame.reset_index(drop=True)
    weight = sum(frame[c].abs() for c in deltas)
    return (frame.assign(_w=weight)
            .sort_values(["_w", *keys], ascending=[False] + [True] * len(keys), kind="stable", na_position="last")
            .drop(columns="_w").reset_index(drop=True))


def _breakdown_per_step(traces: list) -> np.ndarray | None:
    """ns per step of each breakdown category and the step time (NS_COLUMNS + total_ns),
    over every step of a side's traces: the per-trace averages weighted by their steps,
    from the steps themselves so nothing is rounded twice; None without steps."""
    table, counts = stack(traces, "breakdown", [*NS_COLUMNS, "total_ns"])
    steps = np.ones(len(table), dtype=bool)
    steps[np.cumsum(counts)[counts > 0] - 1] = False  # each summary's last row: its average
    if not steps.any():
        return None
    rows = table.to_numpy(np.float64)[steps]
    return rows.sum(axis=0) / len(rows)


def _breakdown_table(ta: list, tb: list) -> pd.DataFrame:
    """Step-time breakdown per step of A and B by category: time_ns_a/_b/_delta and
    delta_pct (the delta as % of A's step time); a side without steps has nulls."""
    nan = np.full(len(CATEGORIES) + 1, np.nan)
    a, b = (_breakdown_per_step(t) for t in (ta, tb))
    a, b = (nan if v is None else v for v in (a, b))
    step_a = a[-1] if a[-1] > 0 else np.nan
    out = pd.DataFrame({"category": list(CATEGORIES), "label": [LABELS[c] for c in CATEGORIES],
                        "time_ns_a": a[:-1], "time_ns_b": b[:-1], "time_ns_delta": (b - a)[:-1]})
    out["delta_pct"] = 100.0 * out["time_ns_delta"] / step_a
    return by_change(out, ["time_ns_delta"])


def _side_steps(traces: list) -> tuple[int, int]:
    """(number of steps, summed step time in ns) over a side's traces."""
    table, counts = stack(traces, "steps", ["dur_ns"])
    return int(counts.sum()), int(table["dur_ns"].sum()) if len(table) else 0


def _summary(ta: list, tb: list) -> tuple[dict, int, int]:
    (na, dur_a), (nb, dur_b) = _side_steps(ta), _side_steps(tb)
    avg_a = round(dur_a / na) if na else None  # whole ns, as overview's step_time_avg_ns
    avg_b = round(dur_b / nb) if nb else None
    return {"traces_a": len(ta), "traces_b": len(tb), "num_steps_a": na, "num_steps_b": nb,
            "step_time_avg_ns_a": avg_a, "step_time_avg_ns_b": avg_b,
            "step_time_avg_ns_delta": (avg_b - avg_a) if avg_a is not None and avg_b is not None else None,
            }, na, nb


# Runs of step numbers named in a note at most.
_RANGES = 6


def _step_numbers(traces: list) -> np.ndarray:
    """The ProfilerStep numbers of a side's steps, every trace's (0: a whole-trace step)."""
    table, _ = stack(traces, "steps", ["step"])
    return table["step"].to_numpy(np.int64) if len(table) else np.zeros(0, np.int64)


def _describe_steps(numbers: np.ndarray, traces: int) -> str:
    """"2 steps (ProfilerStep#1009-#1010)": how many steps, and their numbers as runs."""
    distinct = np.unique(numbers)
    runs = np.split(distinct, np.flatnonzero(np.diff(distinct) != 1) + 1)  # consecutive numbers together
    named = [f"#{r[0]}" if len(r) == 1 else f"#{r[0]}-#{r[-1]}" for r in runs[:_RANGES]]
    more = ", ..." if len(runs) > _RANGES else ""
    over = f" in {traces} traces" if traces > 1 else ""
    return f"{len(numbers)} step{'s' if len(numbers) != 1 else ''}{over} (ProfilerStep{', '.join(named)}{more})"


def _step_set_notes(ta: list, tb: list) -> list[str]:
    """Where the sides' steps differ: which steps each covers, and what each left out."""
    na, nb = _step_numbers(ta), _step_numbers(tb)
    if not len(na) or not len(nb) or np.array_equal(np.sort(na), np.sort(nb)):
        return []
    notes = [f"the sides cover different steps: A {_describe_steps(na, len(ta))}, B "
             f"{_describe_steps(nb, len(tb))}; each side's figures are per step of its own steps"]
    for label, traces in (("A", ta), ("B", tb)):
        for s in traces:
            who = f"side {label} ({s.worker})" if len(traces) > 1 else f"side {label}"
            notes += [f"{who} {n}" for n in s.step_notes if n.startswith("left out ")]
    return notes


def _notes(ta: list, tb: list, na: int, nb: int, present: dict) -> list[str]:
    """Why a table is empty or one-sided, or a number is not per step."""
    notes = []
    for label, traces, n in (("A", ta, na), ("B", tb, nb)):
        if not traces:
            notes.append(f"side {label} has no traces")
        elif not n:
            notes.append(f"side {label} has no steps: its values are totals, not per step")
    notes += _step_set_notes(ta, tb)
    what = {"operators": "operators", "kernels": "kernels",
            "modules": "nn.Module information (profile with with_stack=True)"}
    for table, (in_a, in_b) in present.items():
        if not (ta and tb) or (in_a and in_b):
            continue
        if not in_a and not in_b:
            notes.append(f"neither side has {what[table]}: the {table} table is empty")
        else:
            notes.append(f"only side {'A' if in_a else 'B'} has {what[table]}: the {table} table "
                         "compares against nothing")
    return notes


def diff(a, b) -> dict:
    """The step-time breakdown, operators, kernels and modules of A against B, per step.

    a, b: a Trace or TraceSummary, a list of them (aggregated), or a Run (its workers'
    summaries of their latest spans).
    Returns {"breakdown": category (of ``breakdown.CATEGORIES``), label, time_ns_a/_b/
    _delta (ns per step of each side: its traces' breakdowns averaged over all their
    steps) and delta_pct (delta as % of A's step time); the categories add up to the
    summary's step_time_avg_ns of each side;
    "operators": name, side, calls/host_self_ns/host_total_ns/device_self_ns/
    device_total_ns each as _a, _b, _delta; "kernels": name, side, calls and total_ns as
    _a/_b/_delta; "modules": path (module names from the root), side, calls and
    host/device self/total as _a/_b/_delta, only modules both sides can name;
    "summary": {traces_a/b, num_steps_a/b, step_time_avg_ns_a/b/delta};
    "notes": reasons for empty tables or non-per-step values, and, where the sides' steps
    differ (numbers or count), which steps each covers and the steps each left out}.  All
    values per step of
    their own side, counting only what lies inside the steps; every table sorted by the
    size of the change (``by_change``): operators and modules by |delta host total| +
    |delta device total|, kernels by |delta total|, the breakdown by |delta|.
    """
    ta, tb = _summaries(a), _summaries(b)
    summary, na, nb = _summary(ta, tb)

    tables, present = {"breakdown": _breakdown_table(ta, tb)}, {}
    for label, keys, sums, order_by in (
            ("operators", ["name"], OPERATOR_SUMS, ("host_total_ns", "device_total_ns")),
            ("kernels", ["name"], KERNEL_SUMS, ("total_ns",)),
            ("modules", ["path"], MODULE_SUMS, ("host_total_ns", "device_total_ns"))):
        sa, sb = _summed(ta, label, keys, sums), _summed(tb, label, keys, sums)
        tables[label] = _align(sa, sb, keys, sums, na, nb, order_by)
        present[label] = (len(sa) > 0, len(sb) > 0)
    return {**tables, "summary": summary, "notes": _notes(ta, tb, na, nb, present)}
