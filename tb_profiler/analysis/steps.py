"""Steps: the ProfilerStep#N ranges, stretched to cover the device work each step launched.

Why stretch: the host runs ahead of the device, so the kernels a step launched often finish
after its ProfilerStep#N event closed on the CPU. Per-step numbers (breakdown, GPU
utilization) would charge that work to the next step or to nothing. A device event
belongs to the step whose host range holds its launching runtime call; a step then ends
when its host range or its last device event ends, whichever is later, and starts no
earlier than the previous step ended, so steps never overlap (torch-tb-profiler's rule).

Device work whose launch is not in the trace (cut off by the profiling window, or a trace
trimmed to a sample) tells nothing of who launched it: it neither stretches nor shrinks a
step, and counts in the step its own start falls in (``step_of``). torch-tb-profiler took
it for work "launched before the steps" and started the first step after it: HTA's
``trace_compare/base`` step 1009 (host 100.3 ms) shrank to 0.135 ms that way.

Kept from torch-tb-profiler, because users compare the numbers:
- the first step starts no earlier than the end of the last device event launched before
  it that finished before the first step's own device work began. Launched before it: its
  launching call starts before the first step's host range or, without its launch in the
  trace, the device event itself does (it cannot have been launched later than it ran);
- a trace without ProfilerStep#N (legacy autograd profiler, a profile without schedule)
  is one step, from its first to its last host operator.

Trailing steps left out (``StepInfo.left_out`` says which and why), only on evidence in
the trace, never on a ratio of event counts (torch-tb-profiler dropped a last step that
launched under 80 % of the step before's device events: a step of 1 kernel after one of 2):
- a step that launched device work the trace lacks: a runtime call of a name that
  launches device work elsewhere in the trace, with no device event of its correlation
  (the profiler stopped before it recorded the step's kernels, so the step's end is not
  known);
- a step that launched no device work, in a trace whose steps launched some, and in
  whose host range no device work without a launch runs either.
Only a trailing run of such steps is left out; where every step is such, none is.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import unique_ints
from tb_profiler.analysis.links import NO_ROW, device_mask, launch, launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.shared import device_work, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.roles import DEVICE_WORK, Role, role_mask

# Host events that bound a trace without ProfilerStep#N.
_HOST_OPS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
# Steps named in one note at most (a trace may hold thousands).
_NAMED = 5

STEP_COLUMNS = ["step", "name", "start_ns", "end_ns", "host_start_ns", "host_end_ns", "dur_ns",
                "device_events", "event"]


@dataclass
class StepInfo:
    """The steps table plus what analyses need beside it (memoized per trace)."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    dropped: int = 0            # trailing steps left out (their device work is incomplete)
    fallback: bool = False      # no ProfilerStep#N: the whole trace is one step
    unlaunched: int = 0         # device events whose launch is not in the trace
    # the steps left out, in time order: {"step": N, "name": "ProfilerStep#N", "reason": "..."}
    left_out: list[dict] = field(default_factory=list)


def steps(trace) -> pd.DataFrame:
    """One row per step, in time order.

    step: N of ProfilerStep#N (0 for a trace without steps); name: the event name;
    start_ns/end_ns: the step including its device work; host_start_ns/host_end_ns: the
    ProfilerStep#N event itself; dur_ns = end_ns - start_ns; device_events: kernels,
    memcpys and memsets launched inside the step; event: the ProfilerStep row in
    ``trace.events`` (-1 for the whole-trace step).
    """
    return steps_frame(trace).copy()


def steps_frame(trace) -> pd.DataFrame:
    """``steps(trace)`` without the copy: the table kept for the trace, for an analysis
    that only reads it (a dozen do, for every overview), never to be changed."""
    return step_info(trace).frame


def step_notes(trace) -> list[str]:
    """Why the steps look the way they do (no ProfilerStep, steps left out, ...)."""
    return list(step_info(trace).notes)


def left_out_steps(trace) -> list[dict]:
    """The ProfilerStep#N ranges the steps table leaves out, each with its reason:
    [{"step": N, "name": "ProfilerStep#N", "reason": "..."}], in time order."""
    return [dict(d) for d in step_info(trace).left_out]


@per_trace
def step_info(trace) -> StepInfo:
    """Steps table and notes, computed once per trace."""
    host = _host_steps(trace)
    info = StepInfo(frame=None)  # the steps table, set below (an empty one only for a trace without steps)
    if host is None:
        host = _whole_trace_step(trace)
        if host is None:
            info.frame = _empty_frame()
            info.notes.append("no host events: the trace has no steps")
            return info
        info.fallback = True
        info.notes.append("no ProfilerStep#N events: the whole trace (first to last host operator) "
                          "is one step")
    number, name, hs, he, event = host
    dev_step, early, unlaunched = _device_event_host_step(trace, hs, he)
    info.unlaunched = len(unlaunched)
    if info.unlaunched:
        info.notes.append(f"{info.unlaunched} device events have no launching call in the trace (cut off by the "
                          "profiling window?): they count in the step their own start falls in and stretch "
                          "none; only those that ran before the first step began delay its start")
    start, end, count = _stretch(trace, hs, he, dev_step, early)
    lost = _per_step(hs, he, *_span(trace, np.flatnonzero(lost_launches(trace))))
    hosted = _per_step(hs, he, *_span(trace, unlaunched), closed=False)
    keep = _keep_steps(count, lost, hosted)
    info.left_out = [{"step": int(number[i]), "name": str(name[i]), "reason": _why_left_out(count, lost, i)}
                     for i in range(keep, len(hs))]  # the trailing steps left out, a few
    info.dropped = len(info.left_out)
    info.notes += _left_out_notes(info.left_out) + _lost_notes(name[:keep], lost[:keep])
    info.frame = pd.DataFrame({
        "step": number[:keep], "name": name[:keep], "start_ns": start[:keep], "end_ns": end[:keep],
        "host_start_ns": hs[:keep], "host_end_ns": he[:keep], "dur_ns": (end - start)[:keep],
        "device_events": count[:keep], "event": event[:keep]})
    return info


def step_of(trace, rows: np.ndarray | None = None) -> np.ndarray:
    """Index into ``steps(trace)`` for each event row (all events by default); -1 for none.

    A device event belongs to the step whose host range holds its launching runtime call
    (or, with no runtime call in the trace, the operator with its External id); device
    work with neither, to the step whose range [start_ns, end_ns) holds its start; a host
    event to the step whose host range holds its start. Steps left out map to -1.
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
    event by the step that launched it (device work without its launch in the trace by
    its start), a host event (an operator call, a module call) by the step holding its
    start, with all its time. A trace without ProfilerStep#N is one whole-trace step and a
    trace without steps has totals, not per-step values: there every event counts.
    """
    info = step_info(trace)
    if info.fallback or info.frame.empty:
        return np.ones(len(trace.events) if rows is None else len(rows), dtype=bool)
    return step_of(trace, rows) >= 0


@per_trace
def lost_launches(trace) -> np.ndarray:
    """Per event: a runtime call whose device work the trace lacks.

    A call counts when its name launched device work elsewhere in this trace (so calls
    that never do, cudaEventQuery or cudaStreamSynchronize, never count, on any backend)
    and no device work (kernel, copy, fill) carries its correlation id: the profiler
    stopped before it recorded what the call launched. Read-only, memoized.
    """
    ev = trace.events
    rt = launch(trace)
    work = role_mask(trace.roles, DEVICE_WORK) & (rt >= 0)
    has_work = np.zeros(len(ev), dtype=bool)
    has_work[rt[work]] = True
    names = unique_ints(ev["name"][has_work])
    calls = (trace.roles == Role.RUNTIME) & (ev["correlation"] != MISSING_INT) & valid_times(trace)
    out = calls & ~has_work & np.isin(ev["name"], names)
    out.setflags(write=False)
    return out


@per_trace
def _step_of_all(trace) -> np.ndarray:
    frame = steps_frame(trace)
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
    orphan = dev[(anchor < 0) & device_work(trace)[dev]]  # by its own start, in the steps as they are
    out[orphan] = _containing(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy(),
                              ev["ts"][orphan], ev["ts"][orphan], closed=False)
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


def _per_step(hs, he, start, end, closed: bool = True) -> np.ndarray:
    """How many of the events [start, end] each step's host range holds (``_containing``)."""
    idx = _containing(hs, he, start, end, closed)
    return np.bincount(idx[idx >= 0], minlength=len(hs)).astype(np.int64)


def _device_event_host_step(trace, hs, he):
    """Where each device-work event (valid times) was launched.

    Returns (host step index of its launch per event, -1 for none and for non-device rows;
    mask of device work launched before the first step: its launching call starts before
    the first host range, or, without its launch in the trace, it starts before that range
    itself; rows of device work whose launch is not in the trace). The launching call must
    lie wholly inside the step's host range, as in torch-tb-profiler.
    """
    ev = trace.events
    n = len(ev)
    out = np.full(n, -1, dtype=np.int64)
    early = np.zeros(n, dtype=bool)
    dev = np.flatnonzero(device_work(trace))
    anchor = _launch_anchor(trace)[dev]
    has = anchor >= 0
    a_start, a_end = _span(trace, anchor[has])
    out[dev[has]] = _containing(hs, he, a_start, a_end)
    early[dev[has][a_start < hs[0]]] = True
    early[dev[~has][ev["ts"][dev[~has]] < hs[0]]] = True  # it ran before the steps: launched before them
    return out, early, dev[~has]


def _stretch(trace, hs, he, dev_step, early):
    """Step ranges stretched to their device work, made non-overlapping.

    end_i = max(host_end_i, last device end_i, end_{i-1}) and start_i = max(host_start_i,
    end_{i-1}): a running maximum, so no loop over steps. ``early``: device work launched
    before the first step (the first step starts after what of it ended before its own
    device work began).
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
        ends = ev["ts"][early] + ev["dur"][early]
        before = ends[ends < dmin[0]]
        if len(before):
            first = max(first, int(before.max()))
    reach = np.maximum(he, dmax)
    reach[0] = max(int(reach[0]), max(first, int(hs[0])))
    end = np.maximum.accumulate(reach)
    prev = np.concatenate([[first], end[:-1]])
    start = np.maximum(hs, prev)
    return start, end, count


def _keep_steps(count: np.ndarray, lost: np.ndarray, hosted: np.ndarray) -> int:
    """How many leading steps to keep: all but the trailing run of incomplete steps.

    Incomplete: the step launched device work the trace lacks (``lost``), or it launched
    none (``count``) while other steps did and no device work without a launch starts in
    its host range (``hosted``). Where every step is incomplete, all are kept.
    """
    n = len(count)
    incomplete = (lost > 0) | ((count == 0) & (hosted == 0) & bool(count.any()))
    complete = np.flatnonzero(~incomplete)
    return int(complete[-1]) + 1 if len(complete) else n


def _why_left_out(count: np.ndarray, lost: np.ndarray, i: int) -> str:
    """The reason one trailing step is left out, in words."""
    if lost[i]:
        calls = f"{lost[i]} launch{'es' if lost[i] > 1 else ''}"
        return (f"{calls} in it ha{'ve' if lost[i] > 1 else 's'} no device event in the trace: the profiler "
                "stopped before it recorded the step's device work, so the step's end is unknown")
    return ("it launched no device work while earlier steps did: the profiler may have stopped before it "
            "recorded the step's launches")


def _left_out_notes(left_out: list[dict]) -> list[str]:
    """One note per step left out (the first few, then a count)."""
    notes = [f"left out {d['name']}: {d['reason']}" for d in left_out[:_NAMED]]
    if len(left_out) > _NAMED:
        notes.append(f"left out {len(left_out) - _NAMED} more trailing steps for the same reasons")
    return notes


def _lost_notes(names: np.ndarray, lost: np.ndarray) -> list[str]:
    """Kept steps with launches whose device work the trace lacks (their times are short)."""
    hit = np.flatnonzero(lost > 0)
    if not len(hit):
        return []
    listed = ", ".join(f"{names[i]} ({lost[i]})" for i in hit[:_NAMED]) + (" ..." if len(hit) > _NAMED else "")
    n, k = int(lost[hit].sum()), len(hit)
    return [f"{n} launch{'es' if n > 1 else ''} in {k} kept step{'s' if k > 1 else ''} ha{'ve' if n > 1 else 's'} "
            f"no device event in the trace ({listed}): the device work of {'those steps' if k > 1 else 'that step'} "
            "is incomplete"]
