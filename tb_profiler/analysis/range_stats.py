"""Time-range statistics: the events of a time range aggregated by name, per kind of event.

What a user gets from Perfetto's area selection: drag over the timeline and see which
operators, kernels, copies and runtime calls fill that stretch, how often and for how long.
Each event's time counts only inside the range (an operator that began before it counts
from the range's start), so the totals of a kind never exceed what the range can hold on
its tracks; ``self`` is that time less its children's on the same track (an operator's
time not spent in the operators it called).  ``avg`` and ``max`` are of the events' whole
durations: what one call costs, wherever the range cut it.

The kinds are the roles of ``trace.roles`` (the one definition of device work), so a
kernel on MTIA or XPU is a kernel here as in every other view.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import parents
from tb_profiler.analysis.shared import threads
from tb_profiler.analysis.steps import valid_times
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import Role

__all__ = ["KIND_LABELS", "RANGE_COLUMNS", "range_stats", "track_nesting"]

RANGE_COLUMNS = ["kind", "name", "count", "total_ns", "self_ns", "avg_ns", "max_ns", "launched_by"]
KIND_LABELS = {
    Role.HOST_OP: ("operator", "Operators on the CPU"), Role.ANNOTATION: ("annotation", "Annotations"),
    Role.PYTHON: ("python", "Python"), Role.RUNTIME: ("runtime", "Runtime calls"),
    Role.COMPUTE: ("kernel", "Kernels"), Role.MEMCPY: ("memcpy", "Memcpy"), Role.MEMSET: ("memset", "Memset"),
    Role.DEVICE_MARK: ("device_mark", "Device annotations and syncs"), Role.OTHER: ("other", "Other"),
}
_KIND_OF_ROLE = np.array([KIND_LABELS[r][0] if r in KIND_LABELS else "other" for r in Role], dtype=object)
_ORDER = [Role.HOST_OP, Role.COMPUTE, Role.MEMCPY, Role.MEMSET, Role.RUNTIME, Role.ANNOTATION, Role.PYTHON,
          Role.DEVICE_MARK, Role.OTHER]


@per_trace
def track_nesting(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each event's track group (pid, tid), each group's first event, each event's
    innermost enclosing event on its track): the nesting the timeline draws, shared by its
    depths and by the range's self times."""
    ev = trace.events
    ts = ev["ts"]
    end = ts + np.maximum(ev["dur"], 0)
    if not len(ev):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    group, first = threads(trace)  # shared with the host call nesting (links.host_parent)
    return group, first, parents(group, ts, end)


def range_stats(trace, start_ns: int, end_ns: int) -> dict:
    """The events overlapping [start_ns, end_ns) (absolute ns, as ``trace.events["ts"]``),
    by kind and name.

    Returns {"start_ns", "end_ns", "rows": RANGE_COLUMNS, one row per (kind, name) (for
    device work, ``launched_by``: the operator that launched most of its time in the range,
    so the kernels of a window name what ran them on the CPU; None for host rows), kinds
    in a fixed order (operators, kernels, copies, fills, runtime, annotations, Python,
    device marks, other) and names by total time, largest first; "kinds": per kind: kind,
    label, count, total_ns, self_ns; "events": how many events overlap the range; "notes":
    how many self times were clamped at 0 (never negative), if any}.
    Trace-wide spans ("PyTorch Profiler (0)") are left out.
    """
    if end_ns <= start_ns:
        raise ValueError(f"empty range: end {end_ns} <= start {start_ns}")
    ev = trace.events
    ts = ev["ts"]
    end = ts + np.maximum(ev["dur"], 0)
    hit = valid_times(trace) & (ev["kind"] != Kind.TRACE) & (ts < end_ns) & ((end > start_ns) | (ts >= start_ns))
    rows = np.flatnonzero(hit)
    clipped = np.zeros(len(ev), dtype=np.int64)
    clipped[rows] = np.minimum(end[rows], end_ns) - np.maximum(ts[rows], start_ns)
    _, _, parent = track_nesting(trace)
    par = parent[rows]
    inside = np.bincount(par[par >= 0], weights=clipped[rows][par >= 0], minlength=len(ev)).astype(np.int64) \
        if len(ev) else np.zeros(0, np.int64)  # the children of a hit event overlap the range too
    own = clipped[rows] - inside[rows]
    negative = int((own < 0).sum())
    own = np.maximum(own, 0)  # children overlapping each other: see _clamp_note
    frame = pd.DataFrame({"role": trace.roles[rows].astype(np.int64), "name_id": ev["name"][rows],
                          "clipped": clipped[rows], "self": own, "dur": np.maximum(ev["dur"][rows], 0)})
    out = (frame.groupby(["role", "name_id"], sort=False)
           .agg(count=("dur", "size"), total_ns=("clipped", "sum"), self_ns=("self", "sum"),
                avg_ns=("dur", "mean"), max_ns=("dur", "max")).reset_index())
    out["launched_by_id"] = _launched_by(trace, rows, frame, out)
    rank = np.zeros(len(Role), dtype=np.int64)
    rank[[int(r) for r in _ORDER]] = np.arange(len(_ORDER))
    out["order"] = rank[out["role"].to_numpy(np.int64)]
    out = out.sort_values(["order", "total_ns", "count"], ascending=[True, False, False], kind="stable")
    out["kind"] = _KIND_OF_ROLE[out["role"].to_numpy(np.int64)]  # a lookup, not an Enum call per row
    out["name"] = trace.str(out["name_id"].to_numpy(np.int64)) if len(out) else np.zeros(0, object)
    out["avg_ns"] = np.rint(out["avg_ns"].to_numpy(np.float64)).astype(np.int64)
    lb = out["launched_by_id"].to_numpy(np.int64)
    out["launched_by"] = np.where(lb >= 0, trace.str(np.maximum(lb, 0)), None) if len(out) else np.zeros(0, object)
    result = out[RANGE_COLUMNS].reset_index(drop=True).astype({"count": np.int64, "total_ns": np.int64,
                                                               "self_ns": np.int64, "max_ns": np.int64})
    kinds = (result.groupby("kind", sort=False).agg(count=("count", "sum"), total_ns=("total_ns", "sum"),
                                                    self_ns=("self_ns", "sum")).reset_index())
    labels = {k: label for k, label in KIND_LABELS.values()}
    kinds.insert(1, "label", [labels[k] for k in kinds["kind"]])
    return {"start_ns": int(start_ns), "end_ns": int(end_ns), "events": int(len(rows)), "rows": result,
            "kinds": kinds, "notes": _clamp_note(negative)}


def _launched_by(trace, rows: np.ndarray, frame: pd.DataFrame, out: pd.DataFrame) -> np.ndarray:
    """Per row of ``out`` (role, name_id), the name id of the operator that launched most of
    its time in the range (links.launching_op: the cpu_op around the launch call); -1 for
    host events and device work whose launch is not in the trace."""
    op = launching_op(trace)[rows]
    name = np.where(op >= 0, trace.events["name"][np.maximum(op, 0)], -1).astype(np.int64)
    by = (pd.DataFrame({"role": frame["role"], "name_id": frame["name_id"], "op": name, "t": frame["clipped"]})
          [name >= 0].groupby(["role", "name_id", "op"], sort=False)["t"].sum().reset_index())
    if not len(by):
        return np.full(len(out), -1, np.int64)
    top = by.sort_values(["t", "op"], ascending=[False, True], kind="stable").drop_duplicates(["role", "name_id"])
    got = out[["role", "name_id"]].merge(top, on=["role", "name_id"], how="left")["op"]
    return got.fillna(-1).to_numpy(np.int64)


def _clamp_note(negative: int) -> list[str]:
    """Why a self time can be clamped: children that overlap each other on their track
    (two ranges that each partly cover the other: neither nests in the other, so both are
    the parent's children) add up to more than the parent's time inside the range; its
    self time is then 0, never negative."""
    if not negative:
        return []
    return [f"{negative} event(s) have children on their track that overlap each other and add up to more "
            "than the event's own time in the range: their self time is counted as 0, not negative"]
