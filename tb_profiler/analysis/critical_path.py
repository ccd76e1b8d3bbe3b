"""Critical path of a step: the chain of host and device work that set the step's length,
and how much of it the host (launching) and the device (executing) held.

Walked backwards from the end of the step, one dependency at a time:

- at device work (a kernel, copy or fill): it started when both its stream was free and
  its launch call had been made.  If the launch call started after the previous work on
  that stream had ended, the host held it back: the path goes to the launch call (the
  wait from the call to the start is "launch").  Otherwise the stream was busy: the path
  goes to the previous work on the stream ("device").
- at a runtime call: the host issued it when its thread got there.  If the call before it
  on the thread was a synchronization (cudaDeviceSynchronize, a blocking cudaMemcpy, ...),
  the host waited for the device: the path goes to the device work that ended last before
  the synchronization did ("sync").  Otherwise the host was busy with its own work from the
  previous call to this one: "host" time, and the path goes to the previous call.
- the tail: when the host part of the step ends after its last device work, that tail is
  host time on the path.

Dependencies the trace does not record (events waited on across streams, collectives on
another rank) are not followed: the path then stays on the stream.  The walk visits only
the events on the path (per step, at most its events); everything it looks up is
precomputed with vectorized passes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import NO_ROW, launch, launching_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace_result
from tb_profiler.analysis.recommendations import SYNC_CALL_RE
from tb_profiler.analysis.steps import steps_frame, valid_times
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, Role, role_mask
from tb_profiler.trace.strings import map_string_ids

__all__ = ["PATH_COLUMNS", "critical_path"]

PATH_COLUMNS = ["step", "kind", "start_ns", "end_ns", "dur_ns", "row", "name", "operator"]  # operator: charged to
_HOST_KINDS = ("host", "launch", "runtime", "tail")


@per_trace_result
def critical_path(trace, *, max_segments: int = 100_000) -> dict:
    """Per step: the critical path's segments (PATH_COLUMNS: kind device / launch / host /
    runtime / sync / tail, the event row or -1 for a gap, its name, the operator that issued
    it), and a summary per step: length_ns (the step), path_ns, device_ns (the device held
    it), host_ns (the host held it: host work, runtime calls, launch waits, the tail),
    sync_ns, other_ns (before the first dependency the trace shows), and the top names on
    the path by time.

    Returns {"steps": one row per step, "segments": every step's segments (at most
    ``max_segments``, the rest counted in "truncated"), "top": per (kind, name) time on
    the path over all steps, "notes"}."""
    st = steps_frame(trace)
    dev = _device_side(trace)
    if st.empty or dev is None:
        why = "no steps" if st.empty else "no launched device work"
        empty = pd.DataFrame({c: pd.Series(dtype=object if c in ("kind", "name", "operator") else np.int64)
                              for c in PATH_COLUMNS})
        return {"steps": pd.DataFrame(columns=["step", "length_ns", "path_ns", "device_ns", "host_ns", "sync_ns",
                                               "other_ns", "device_share"]),
                "segments": empty, "top": pd.DataFrame(columns=["kind", "name", "ns", "count"]), "truncated": 0,
                "notes": [f"{why}: no critical path"]}
    host = _Host(trace)
    rows, summary = [], []
    for number, a, b in zip(st["step"].tolist(), st["start_ns"].tolist(), st["end_ns"].tolist()):
        segs = _walk(trace, dev, host, a, b)
        summary.append(_summary(number, a, b, segs))
        rows += [(number, *s) for s in segs]
    truncated = max(len(rows) - max_segments, 0)
    seg = pd.DataFrame(rows[:max_segments], columns=["step", "kind", "start_ns", "end_ns", "row", "context"])
    seg["dur_ns"] = seg["end_ns"] - seg["start_ns"]
    ev = trace.events
    has = seg["row"].to_numpy(np.int64) >= 0
    names = np.full(len(seg), None, dtype=object)
    names[has] = trace.str(ev["name"][seg["row"].to_numpy(np.int64)[has]])
    seg["name"] = names
    seg["operator"] = _operators(trace, seg["context"].to_numpy(np.int64))
    seg = seg[PATH_COLUMNS]
    # events by name; a gap by the operator it is charged to (host code before a launch)
    top = (seg.assign(label=seg["name"].fillna(seg["operator"]).fillna(seg["kind"]))
           .groupby(["kind", "label"], sort=False).agg(ns=("dur_ns", "sum"), count=("dur_ns", "size")).reset_index()
           .rename(columns={"label": "name"}).sort_values("ns", ascending=False, kind="stable").reset_index(drop=True))
    notes = [] if not truncated else [f"{truncated} path segments beyond the first {max_segments} are left out"]
    return {"steps": pd.DataFrame(summary), "segments": seg, "top": top, "truncated": truncated, "notes": notes}


class _Device:
    """Device work sorted by (device, stream, start): each one's previous work on its
    stream and its launch call; and every work's end, sorted, to find what a sync waited for."""

    def __init__(self, trace, rows: np.ndarray):
        ev = trace.events
        key = trace.event_devices[rows].astype(np.int64) * (1 << 32) + trace.event_streams[rows]
        order = np.lexsort((ev["ts"][rows], key))
        self.rows = rows[order]
        self.start = ev["ts"][self.rows].astype(np.int64)
        self.end = self.start + ev["dur"][self.rows].astype(np.int64)
        same = np.r_[False, key[order][1:] == key[order][:-1]]
        self.prev = np.where(same, np.arange(len(self.rows)) - 1, -1)
        self.call = launch(trace)[self.rows]
        by_end = np.argsort(self.end, kind="stable")
        self.by_end, self.sorted_end = by_end, self.end[by_end]


class _Host:
    """Runtime calls per thread in time order: each one's previous call, and whether that
    previous call was a synchronization."""

    def __init__(self, trace):
        ev = trace.events
        rows = np.flatnonzero((trace.roles == Role.RUNTIME) & valid_times(trace))
        order = np.lexsort((ev["ts"][rows], ev["tid"][rows], ev["pid"][rows]))
        self.rows = rows[order]
        self.start = ev["ts"][self.rows].astype(np.int64)
        self.end = self.start + ev["dur"][self.rows].astype(np.int64)
        thread = ev["pid"][self.rows].astype(np.int64) * (1 << 32) + ev["tid"][self.rows].astype(np.int64)
        same = np.r_[False, thread[1:] == thread[:-1]]
        self.prev = np.where(same, np.arange(len(self.rows)) - 1, -1)
        sync = map_string_ids(ev["name"], trace.strings, lambda s: bool(SYNC_CALL_RE.match(s)), bool, False)
        self.sync = sync[self.rows]
        self.index = np.full(len(ev), -1, dtype=np.int64)
        self.index[self.rows] = np.arange(len(self.rows))
        self.by_end = np.argsort(self.end, kind="stable")
        self.sorted_end = self.end[self.by_end]

    def before(self, i: int) -> int:
        """The call on any thread that ended last before call i started (-1: none): where a
        thread's first call of the step came from (the autograd thread after the forward)."""
        k = int(np.searchsorted(self.sorted_end, self.start[i], side="right")) - 1
        return int(self.by_end[k]) if k >= 0 else -1


def _device_side(trace):
    rows = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK) & valid_times(trace) & (trace.event_devices >= 0))
    return _Device(trace, rows) if len(rows) else None


def _walk(trace, dev: _Device, host: _Host, a: int, b: int) -> list[tuple[str, int, int, int, int]]:
    """(kind, start, end, row, context) segments of one step's path, in time order: row is
    the event (-1 for a gap), context the event whose operator the segment is charged to
    (a host gap: the call that ended it)."""
    segs: list[tuple[str, int, int, int, int]] = []
    inside = np.flatnonzero((dev.start >= a) & (dev.start < b))
    if not len(inside):
        return [("tail", a, b, -1, -1)]
    last = int(inside[np.argmax(dev.end[inside])])
    t = b
    if dev.end[last] < b:  # the host part of the step ends after the device: a host tail
        segs.append(("tail", int(dev.end[last]), b, -1, -1))
        t = int(dev.end[last])
    node, on_device = last, True
    seen: set[tuple[bool, int]] = set()  # zero-length work at one time can point back: each node is walked once
    while t > a and (on_device, node) not in seen:
        seen.add((on_device, node))
        if on_device:
            s, e = int(dev.start[node]), int(min(dev.end[node], t))
            segs.append(("device", max(s, a), e, int(dev.rows[node]), int(dev.rows[node])))
            t = max(s, a)
            p, c = int(dev.prev[node]), int(dev.call[node])
            call_at = host.index[c] if c >= 0 else -1
            prev_end = int(dev.end[p]) if p >= 0 else None
            if call_at >= 0 and (prev_end is None or host.start[call_at] >= prev_end):
                segs.append(("launch", max(int(host.end[call_at]), a), t, -1, int(host.rows[call_at])))
                node, on_device, t = call_at, False, max(min(int(host.end[call_at]), t), a)  # never forward
            elif p >= 0 and prev_end > a:
                if prev_end < t:
                    segs.append(("device_gap", max(prev_end, a), t, -1, int(dev.rows[node])))
                node, t = p, max(min(prev_end, t), a)
            else:
                break
        else:
            s, e = int(host.start[node]), int(host.end[node])
            segs.append(("runtime", max(s, a), min(e, t), int(host.rows[node]), int(host.rows[node])))
            t = max(s, a)
            p = int(host.prev[node])
            if p < 0 or host.end[p] <= a:  # the thread's first call of the step: another thread's before it
                p = host.before(node)
            if p < 0 or host.end[p] <= a:  # the step's host code ran before its first call
                segs.append(("host", a, t, -1, -1))
                t = a
                break
            if host.sync[p]:  # the host waited for the device: the work that ended last before the sync did
                k = np.searchsorted(dev.sorted_end, min(int(host.end[p]), t), side="right") - 1
                if k >= 0 and dev.sorted_end[k] > a:
                    w = int(dev.by_end[k])
                    segs.append(("sync", max(int(dev.end[w]), a), t, int(host.rows[p]), int(host.rows[p])))
                    node, on_device, t = w, True, max(min(int(dev.end[w]), t), a)
                    continue
            segs.append(("host", max(int(host.end[p]), a), t, -1, int(host.rows[node])))
            node, t = p, max(min(int(host.end[p]), t), a)
    if t > a:  # before the first dependency the trace shows: not attributed
        segs.append(("other", a, t, -1, -1))
    return [s for s in reversed(segs) if s[2] > s[1]]


def _summary(number: int, a: int, b: int, segs: list) -> dict:
    ns = {}
    for kind, s, e, _, _ in segs:
        ns[kind] = ns.get(kind, 0) + (e - s)
    device = ns.get("device", 0) + ns.get("device_gap", 0)
    host = sum(ns.get(k, 0) for k in _HOST_KINDS)
    return {"step": number, "length_ns": b - a, "path_ns": sum(ns.values()), "device_ns": device, "host_ns": host,
            "sync_ns": ns.get("sync", 0), "other_ns": ns.get("other", 0), "device_share": device / (b - a) if b > a else 0.0}


def _operators(trace, rows: np.ndarray) -> np.ndarray:
    """The operator that issued each path event (device work: its launching op; a runtime
    call: the op around it); None for gaps."""
    out = np.full(len(rows), None, dtype=object)
    has = rows >= 0
    if not has.any():
        return out
    ev = trace.events
    op = launching_op(trace)
    r = rows[has]
    is_dev = role_mask(trace.roles[r], DEVICE_WORK)
    owner = np.where(is_dev, op[r], NO_ROW)
    calls = ~is_dev
    if calls.any():  # a runtime call: the operator around it
        owner[calls] = nearest_ancestor(trace, r[calls], ev["kind"] == Kind.CPU_OP, include_self=False)
    named = owner >= 0
    vals = np.full(len(r), None, dtype=object)
    vals[named] = trace.str(ev["name"][owner[named]])
    out[has] = vals
    return out
