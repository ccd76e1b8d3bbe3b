"""Steps: the ProfilerStep#N ranges, stretched to cover the device work each step launched.

Why stretch: the host runs ahead of the device, so the kernels a step launched often finish
after its ProfilerStep#N event closed on the CPU. Per-step numbers (breakdown, GPU
utilization) would charge that work to the next step or to nothing. A device event
belongs to the step whose host range holds its launching runtime call; a step then ends
when its host range or its last device event ends, whichever is later, and starts no
earlier than the previous step ended, so steps never overlap (torch-tb-profiler's rule).

Kept from torch-tb-profiler, because users compare the numbers:
- the first step starts no earlier than the end of the last device event launched before
  any step that finished before the first step's own device work began;
- the trailing step is dropped when it launched less than 80% of the device events of the
  step before it (the profiler stopped before it captured the step's kernels), and so is
  every trailing step that launched none, when the trace has device work at all;
- a trace without ProfilerStep#N (legacy autograd profiler, a profile without schedule)
  is one step, from its first to its last host operator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import NO_ROW, device_mask, launch, launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.shared import device_work, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind, kind_mask

# Host events that bound a trace without ProfilerStep#N.
_HOST_OPS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
# A trailing step keeps its place only if it launched at least this share of the
# device events of the step before it.
TAIL_RATIO = 0.8

STEP_COLUMNS = ["step", "name", "start_ns", "end_ns", "host_start_ns", "host_end_ns", "dur_ns",
                "device_events", "event"]


@dataclass
class StepInfo:
    """The steps table plus what analyses need beside it (memoized per trace)."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    dropped: int = 0            # trailing steps removed (incomplete device work)
    fallback: bool = False      # no ProfilerStep#N: the whole trace is one step
    unlaunched: int = 0         # device events whose launch is not in the trace


def steps(trace) -> pd.DataFrame:
    """One row per step, in time order.

    step: N of ProfilerStep#N (0 for a trace without steps); name: the event name;
    start_ns/end_ns: the step including its device work; host_start_ns/host_end_ns: the
    ProfilerStep#N event itself; dur_ns = end_ns - start_ns; device_events: kernels,
    memcpys and memsets launched inside the step; event: the ProfilerStep row in
    ``trace.events`` (-1 for the whole-trace step).
    """
    return step_info(trace).frame.copy()


def step_notes(trace) -> list[str]:
    """Why the steps look the way they do (no ProfilerStep, dropped tail, ...)."""
    return list(step_info(trace).notes)


@per_trace
def step_info(trace) -> StepInfo:
    """Steps table and notes, computed once per trace."""
    host = _host_steps(trace)
    info = StepInfo(frame=_empty_frame())
    if host is None:
        host = _whole_trace_step(trace)
        if host is None:
            info.notes.append("no host events: the trace has no steps")
            return info
        info.fallback = True
        info.notes.append("no ProfilerStep#N events: the whole trace (first to last host operator) "
                          "is one step")
    number, name, hs, he, event = host
    dev_step, unlaunched = _device_event_host_step(trace, hs, he)
    info.unlaunched = unlaunched
    if unlaunched:
        info.notes.append(f"{unlaunched} device events have no launching call in the trace "
                          "(cut off by the profiling window?): they count by time only")
    start, end, count = _stretch(trace, hs, he, dev_step)
    keep = _keep_steps(count)
    if keep < len(hs):
        info.dropped = len(hs) - keep
        info.notes.append(f"dropped the last {info.dropped} step(s) ({', '.join(name[keep:])}): they launched "
                          "fewer device events than the step before, the profiler may not have captured "
                          "all their kernels")
    info.frame = pd.DataFrame({
        "step": number[:keep], "name": name[:keep], "start_ns": start[:keep], "end_ns": end[:keep],
        "host_start_ns": hs[:keep], "host_end_ns": he[:keep], "dur_ns": (end - start)[:keep],
        "device_events": count[:keep], "event": event[:keep]})
    return info


def step_of(trace, rows: np.ndarray | None = None) -> np.ndarray:
    """Index into ``steps(trace)`` for each event row (all events by default); -1 for none.

    A device event belongs to the step whose host range holds its launching runtime call
    (or, with no runtime call in the trace, the operator with its External id); a host
    event to the step whose host range holds its start. Dropped trailing steps map to -1.
    """
    out = _step_of_all(trace)
    return out if rows is None else out[np.asarray(rows, dtype=np.int64)]


def step_numbers(trace, rows: np.ndarray) -> np.ndarray:
    """N of ProfilerStep#N each event row belongs to (``step_of``), -1 for none; 0 for the
    whole-trace step of a trace without steps."""
    index = step_of(trace, rows)
    numbers = step_info(trace).frame["step"].to_numpy(np.int64)
    if not len(numbers):
        return np.full(len(index), -1, dtype=np.int64)
    return np.where(index >= 0, numbers[np.maximum(index, 0)], -1)


def in_steps(trace, rows: np.ndarray | None = None) -> np.ndarray:
    """Whether each event row (all events by default) counts in a per-step figure.

    Why: a per-step figure divides by the number of steps, so only what lies inside the
    steps may be counted; a kernel launched before the first step, or an operator after
    the last, would inflate every step's share. Inside means ``step_of`` >= 0: a device
    event by the step that launched it, a host event (an operator call, a module call)
    by the step holding its start, with all its time. A trace without ProfilerStep#N is
    one whole-trace step and a trace without steps has totals, not per-step values:
    there every event counts.
    """
    info = step_info(trace)
    if info.fallback or info.frame.empty:
        return np.ones(len(trace.events) if rows is None else len(rows), dtype=bool)
    return step_of(trace, rows) >= 0


@per_trace
def _step_of_all(trace) -> np.ndarray:
    frame = steps(trace)
    n = len(trace.events)
    if frame.empty:
        out = np.full(n, -1, dtype=np.int64)
        out.setflags(write=False)
        return out
    hs = frame["host_start_ns"].to_numpy()
    he = frame["host_end_ns"].to_numpy()
    ev = trace.events
    ok = valid_times(trace)
    out = _containing(hs, he, ev["ts"], ev["ts"], closed=False)
    dev = np.flatnonzero(device_mask(trace))
    anchor = _launch_anchor(trace)[dev]
    a_start, a_end = _span(trace, np.maximum(anchor, 0))
    out[dev] = np.where(anchor >= 0, _containing(hs, he, a_start, a_end), -1)
    out[~ok] = -1
    out.setflags(write=False)  # memoized: shared by every caller
    return out


def _span(trace, rows):
    """[start, end] of event rows (a missing dur reads as 0)."""
    ev = trace.events
    start = ev["ts"][rows]
    dur = ev["dur"][rows]
    return start, start + np.where(dur == MISSING_INT, 0, dur)


# -- pieces ------------------------------------------------------------------------------

def _empty_frame() -> pd.DataFrame:
    ints = {c: np.zeros(0, dtype=np.int64) for c in STEP_COLUMNS if c != "name"}
    return pd.DataFrame({**ints, "name": np.zeros(0, dtype=object)})[STEP_COLUMNS]


def _host_steps(trace):
    """ProfilerStep#N events in time order: (number, name, start, end, event row) or None."""
    st = trace.steps
    if not len(st):
        return None
    ok = (st["start"] != MISSING_INT) & (st["dur"] != MISSING_INT) & (st["dur"] >= 0)
    order = np.flatnonzero(ok)[np.argsort(st["start"][ok], kind="stable")]
    if not len(order):
        return None
    event = st["event"][order].astype(np.int64)
    names = trace.str(trace.events["name"][event]).astype(object)
    return (st["number"][order].astype(np.int64), names, st["start"][order].astype(np.int64),
            st["end"][order].astype(np.int64), event)


def _whole_trace_step(trace):
    """One step over the host operators (old plugin: first to last CPU op), else over
    every event; None for an empty trace."""
    ev = trace.events
    ok = valid_times(trace)
    for mask in (kind_mask(ev["kind"], _HOST_OPS), ev["kind"] != Kind.TRACE):
        m = ok & mask
        if m.any():
            lo = int(ev["ts"][m].min())
            hi = int((ev["ts"][m] + ev["dur"][m]).max())
            return (np.array([0]), np.array(["0"], dtype=object), np.array([lo]), np.array([hi]),
                    np.array([NO_ROW]))
    return None


@per_trace
def _launch_anchor(trace) -> np.ndarray:
    """Per event: the host row that launched it (runtime call, else the op with its
    External id) for device events; -1 otherwise."""
    anchor = launch(trace).copy()
    missing = anchor < 0
    anchor[missing] = launching_op(trace)[missing]
    return anchor


def _containing(hs, he, start, end, closed: bool = True) -> np.ndarray:
    """Index of the step (the last one starting at or before ``start``) that holds
    [start, end]: closed, end <= step end (a launch call, as torch-tb-profiler), or
    half-open, start < step end (a host event by its start); -1 where none does."""
    idx = np.searchsorted(hs, start, side="right") - 1
    safe = np.maximum(idx, 0)
    inside = (idx >= 0) & ((end <= he[safe]) if closed else (start < he[safe]))
    return np.where(inside, idx, -1).astype(np.int64)


def _device_event_host_step(trace, hs, he):
    """For each device-work event (valid times): host step index of its launch, or -1.

    Returns (array over all events, -1 for non-device rows; count of device work
    events with no launch in the trace). The launching call must lie wholly inside the
    step's host range, as in torch-tb-profiler.
    """
    ev = trace.events
    n = len(ev)
    out = np.full(n, -1, dtype=np.int64)
    dev = np.flatnonzero(device_work(trace))
    anchor = _launch_anchor(trace)[dev]
    has = anchor >= 0
    a_start, a_end = _span(trace, anchor[has])
    out[dev[has]] = _containing(hs, he, a_start, a_end)
    return out, int((~has).sum())


def _stretch(trace, hs, he, dev_step):
    """Step ranges stretched to their device work, made non-overlapping.

    end_i = max(host_end_i, last device end_i, end_{i-1}) and start_i = max(host_start_i,
    end_{i-1}): a running maximum, so no loop over steps.
    """
    ev = trace.events
    n = len(hs)
    rows = np.flatnonzero(dev_step >= 0)
    idx = dev_step[rows]
    d_start = ev["ts"][rows]
    d_end = d_start + ev["dur"][rows]
    count = np.bincount(idx, minlength=n).astype(np.int64)
    if not len(rows):  # no device work launched in any step: host ranges as they are
        return hs.copy(), he.copy(), count
    dmin = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    dmax = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(dmin, idx, d_start)
    np.maximum.at(dmax, idx, d_end)
    first = int(hs[0])
    if count[0]:
        # Device work launched outside every step that finished before step 0's own
        # device work began belongs to what came before: step 0 starts after it.
        other = device_work(trace) & (dev_step < 0)
        ends = ev["ts"][other] + ev["dur"][other]
        before = ends[ends < dmin[0]]
        if len(before):
            first = max(first, int(before.max()))
    reach = np.maximum(he, dmax)
    reach[0] = max(int(reach[0]), max(first, int(hs[0])))
    end = np.maximum.accumulate(reach)
    prev = np.concatenate([[first], end[:-1]])
    start = np.maximum(hs, prev)
    return start, end, count


def _keep_steps(count: np.ndarray) -> int:
    """How many leading steps to keep (torch-tb-profiler's trailing-step rule)."""
    n = len(count)
    if n <= 1 or not count.any():
        return n
    last = int(np.flatnonzero(count > 0)[-1])
    keep = last + 1
    if last > 0 and count[last - 1] * TAIL_RATIO > count[last]:
        keep = last
    return keep
