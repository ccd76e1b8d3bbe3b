"""Idle time: when each device, and each of its streams, ran nothing inside the steps, and why.

What is idle: device work is what ``trace.roles`` calls DEVICE_WORK (compute, copies,
fills, on every backend); a timeline is busy on the union of its work intervals and idle
on the rest. Two levels:
- device level (stream = -1): busy when ANY stream of the device runs something, so time
  during which several streams are idle together counts once (HTA adds the streams'
  idle time and counts it several times);
- stream level: each (device, stream) on its own.
A device is ``trace.event_devices``; a stream is the event's ``stream`` arg, else its
tid (Kineto writes device rows with the stream as tid).

Steps: idle time is counted inside the step windows of ``analysis.steps`` (the
ProfilerStep#N ranges stretched to their device work), by time: window_ns = the step's
duration, busy_ns = busy time inside it, idle_ns = window_ns - busy_ns. An idle stretch
that crosses a step boundary is cut there, each part counted in its own step. A trace
without ProfilerStep#N is one step 0 (steps.py's rule: first to last host operator, or
over all events when it has none).

Why a stretch is idle (the classification). Take an idle stretch [A, B) on a timeline
and the work that ends it at B (the work starting at B; several starting together: the
one launched first). Its launch is the runtime call joined to it by correlation
(``links.launch``; a graph launch for every kernel of the graph), from c to its return
at r. The work was issued at c, or at r when it started only after the call returned
(B >= r): until then the host was still inside the launch call (a 6.5 ms
``hipLaunchKernel`` in HTA's MI250 trace held 72 % of its stream's idle time) and the
device waited for the host. Work that started before its call returned (B < r: a
synchronous ``cudaMemcpy`` that waits for its own copy, a launch the device picked up
mid-call) was issued at c. The stretch is split at that issue time i:
- host_wait [A, i): nothing was issued yet, the device waited for the host to launch;
- the rest [max(A, i), B): the work was in flight (issued) and still did not run:
  kernel_wait when this in-flight part is shorter than ``kernel_wait_ns`` (launch
  latency between back-to-back work), other when it is as long or longer (the work
  waited on something else: a sync, an event, a copy, a dependency on another stream).
Why split rather than give the stretch one kind: both parts happen in one stretch (the
host comes back late, then the launch takes its usual few us) and each ns is counted
where it belongs, so host_wait_ns is exactly the time with no launch in flight.
Edge cases: i <= A: the whole stretch is in flight; c >= B (clock skew): all host_wait;
no work after the stretch on that timeline (the trailing stretch): all host_wait, nothing
was issued; the work at B has no launch call in the trace (cut off by the profiling
window, a backend that records none such as the CUPTI range profiler): when its launch
began is unknown, so the host cannot be blamed: the whole stretch is in flight, classed
by length (a stretch before the timeline's first work is then unbounded: other).

Sums are exact int64 ns: busy_ns + idle_ns == window_ns and host_wait_ns +
kernel_wait_ns + other_ns == idle_ns on every row. No loop over events: per timeline
(device or stream) the work is merged and classified by array operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.keys import factorize, unique_ints
from tb_profiler.analysis.links import launch
from tb_profiler.analysis.memo import per_trace, per_trace_result
from tb_profiler.analysis.steps import step_notes, steps_frame, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

IDLE_COLUMNS = ["device", "stream", "step", "window_ns", "busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns",
                "other_ns", "gaps"]
GAP_COLUMNS = ["device", "stream", "step", "start_ns", "end_ns", "dur_ns", "kind"]
KINDS = ("host_wait", "kernel_wait", "other")
DEFAULT_KERNEL_WAIT_NS = 30_000
TOTAL_STEP = -1   # the step of a totals row
DEVICE_LEVEL = -1  # the stream of a device-level row
_HOST, _KERNEL, _OTHER = range(3)
_NO_C = np.iinfo(np.int64).max


@dataclass
class _Stretches:
    """Threshold-free part of the analysis, memoized per trace.

    Timelines: device level first (stream -1), then streams. Stretches: every idle
    stretch of every timeline, as [a, b) split at h (host [a, h), in flight [h, b));
    a and b of the unbounded first and last stretches are set to the analysis span's
    ends, which is all the windows ever see of them.
    """

    tl_device: np.ndarray
    tl_stream: np.ndarray
    step: np.ndarray          # step number per window
    ws: np.ndarray            # window start/end per step
    we: np.ndarray
    busy: np.ndarray          # (timelines, windows) busy ns
    st_tl: np.ndarray         # per stretch: its timeline
    st_a: np.ndarray
    st_h: np.ndarray
    st_b: np.ndarray
    st_inflight: np.ndarray   # exact length of the in-flight part (unclipped)
    st_unbounded: np.ndarray  # the in-flight part has no start (first stretch, launch unknown)
    st_unknown: np.ndarray    # the work ending it has no launch call in the trace
    notes: list[str] = field(default_factory=list)


@per_trace_result
def idle_time(trace, *, kernel_wait_ns: int = DEFAULT_KERNEL_WAIT_NS) -> dict:
    """Idle time per device and per stream, per step and in total, classified.

    Returns {"devices": DataFrame (IDLE_COLUMNS, stream = -1): per device and step (in
    step order), then a row per device with step = -1 holding the totals over all
    steps; "streams": DataFrame (IDLE_COLUMNS): the same per device, stream and step
    (+ step -1 totals); "gaps": DataFrame (GAP_COLUMNS): every device-level (stream -1)
    and stream-level idle piece inside a step, sorted by start, kind "host_wait",
    "kernel_wait" or "other"; "threshold_ns": kernel_wait_ns; "notes": [str] (why empty
    or partial)}.

    Columns: window_ns: the step's duration (totals: summed over steps); busy_ns: time
    with work running on the device (stream) inside it; idle_ns = window_ns - busy_ns =
    host_wait_ns + kernel_wait_ns + other_ns (see the module docstring for the kinds);
    gaps: idle stretches inside the step. A stretch split at its launch gives two rows
    in "gaps" (adjacent, same device, stream and step) but counts as one gap; a stretch
    crossing a step boundary counts once in each step.
    """
    thr = int(kernel_wait_ns)
    if thr != kernel_wait_ns or thr < 0:
        raise ValueError(f"kernel_wait_ns must be a non-negative integer of ns, not {kernel_wait_ns!r}")
    raw = _stretches(trace)
    out = {"threshold_ns": thr, "notes": list(raw.notes)}
    if not len(raw.tl_device):
        return {"devices": _empty_idle(), "streams": _empty_idle(), "gaps": _empty_gaps(), **out}

    # the pieces of every stretch and their kinds
    in_flight_kind = np.where(~raw.st_unbounded & (raw.st_inflight < thr), _KERNEL, _OTHER)
    n_st = len(raw.st_tl)
    idx = np.arange(n_st)
    p_st = np.concatenate([idx, idx])
    p_lo = np.concatenate([raw.st_a, raw.st_h])
    p_hi = np.concatenate([raw.st_h, raw.st_b])
    p_kind = np.concatenate([np.full(n_st, _HOST), in_flight_kind])
    keep = p_hi > p_lo
    p_st, p_lo, p_hi, p_kind = p_st[keep], p_lo[keep], p_hi[keep], p_kind[keep]
    piece, win, lo, hi = _in_windows(p_lo, p_hi, raw.ws, raw.we)
    st, kind = p_st[piece], p_kind[piece]
    tl = raw.st_tl[st]
    dur = hi - lo

    n_tl, n_win = raw.busy.shape
    per_kind = np.bincount((tl * n_win + win) * 3 + kind, weights=dur,
                           minlength=n_tl * n_win * 3).astype(np.int64).reshape(n_tl, n_win, 3)
    pairs = unique_ints(st * n_win + win)
    gaps = np.bincount(raw.st_tl[pairs // n_win] * n_win + pairs % n_win,
                       minlength=n_tl * n_win).astype(np.int64).reshape(n_tl, n_win)

    window = np.broadcast_to(raw.we - raw.ws, (n_tl, n_win))
    table = _table(raw, window, raw.busy, window - raw.busy, per_kind, gaps)
    dev_level = raw.tl_stream == DEVICE_LEVEL
    cut = int(dev_level.sum()) * (n_win + 1)  # the device timelines' rows come first
    out["devices"] = pd.DataFrame({c: v[:cut] for c, v in table.items()})
    out["streams"] = pd.DataFrame({c: v[cut:] for c, v in table.items()})

    order = np.lexsort((raw.tl_stream[tl], raw.tl_device[tl], lo))
    out["gaps"] = pd.DataFrame({
        "device": raw.tl_device[tl][order], "stream": raw.tl_stream[tl][order], "step": raw.step[win][order],
        "start_ns": lo[order], "end_ns": hi[order], "dur_ns": dur[order],
        "kind": np.array(KINDS, dtype=object)[kind][order]})  # GAP_COLUMNS' order (a selection costs a copy)
    unknown = unique_ints(st[raw.st_unknown[st] & dev_level[tl]])
    if len(unknown):
        out["notes"].append(f"{len(unknown)} device-level gap(s) end at work whose launch call is not in the trace: "
                            "when it was issued is unknown, so none of their time is counted as host wait "
                            "(kernel wait or other by length)")
    return out


def _table(raw: _Stretches, window, busy, idle, per_kind, gaps) -> dict[str, np.ndarray]:
    """IDLE_COLUMNS' arrays, rows per timeline: one per step, then the totals (step -1)."""
    n_tl, n_win = busy.shape

    def with_total(x):
        return np.concatenate([x, x.sum(axis=1, keepdims=True)], axis=1).reshape(-1)

    cols = {
        "device": np.repeat(raw.tl_device, n_win + 1), "stream": np.repeat(raw.tl_stream, n_win + 1),
        "step": np.tile(np.append(raw.step, TOTAL_STEP), n_tl),
        "window_ns": with_total(window), "busy_ns": with_total(busy), "idle_ns": with_total(idle),
        "host_wait_ns": with_total(per_kind[..., _HOST]), "kernel_wait_ns": with_total(per_kind[..., _KERNEL]),
        "other_ns": with_total(per_kind[..., _OTHER]), "gaps": with_total(gaps)}
    return {c: np.asarray(cols[c], dtype=np.int64) for c in IDLE_COLUMNS}


def _in_windows(lo, hi, ws, we):
    """Pieces [lo, hi) cut by sorted disjoint windows [ws, we): (piece index, window index,
    start, end) of every non-empty intersection, a piece spanning k windows giving k."""
    first = np.searchsorted(we, lo, side="right")  # first window ending after lo
    stop = np.searchsorted(ws, hi, side="left")    # windows starting before hi
    count = np.maximum(stop - first, 0)
    piece = np.repeat(np.arange(len(lo)), count)
    offset = np.arange(len(piece)) - np.repeat(np.cumsum(count) - count, count)
    win = first[piece] + offset
    s = np.maximum(lo[piece], ws[win])
    e = np.minimum(hi[piece], we[win])
    ok = e > s
    return piece[ok], win[ok], s[ok], e[ok]


@per_trace
def _stretches(trace) -> _Stretches:
    ev = trace.events
    did = trace.event_devices
    rows = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK) & valid_times(trace) & (did >= 0) & (ev["dur"] > 0))
    e0 = np.zeros(0, dtype=np.int64)
    if not len(rows):
        return _Stretches(e0, e0, e0, e0, e0, np.zeros((0, 0), np.int64), e0, e0, e0, e0, e0,
                          np.zeros(0, bool), np.zeros(0, bool),
                          ["no device work (kernels, memory copies or fills) in the trace: no device idle time"])
    notes = [f"steps: {n}" for n in step_notes(trace)]
    s = ev["ts"][rows]
    e = s + ev["dur"][rows]
    dev = did[rows]
    stream = np.maximum(trace.event_streams[rows], 0)  # unknown stream: 0
    c = _issued(trace, rows, s)

    # never empty here: without ProfilerStep#N, steps makes the whole trace one step 0
    frame = steps_frame(trace)
    step = frame["step"].to_numpy(np.int64)
    ws, we = frame["start_ns"].to_numpy(np.int64), frame["end_ns"].to_numpy(np.int64)
    lo, hi = int(ws[0]), int(we[-1])

    # timelines: each device, then each (device, stream), in id order
    groups = []
    for keys in ((dev,), (dev, stream)):
        code, first = factorize(*keys)
        order = np.argsort(code, kind="stable")
        bounds = np.searchsorted(code[order], np.arange(len(first) + 1))
        ids = [(int(dev[f]), int(stream[f]) if len(keys) == 2 else DEVICE_LEVEL) for f in first.tolist()]
        for g in sorted(range(len(first)), key=lambda g: ids[g]):  # per timeline
            groups.append((ids[g], order[bounds[g]:bounds[g + 1]]))

    tl_device = np.array([g[0][0] for g in groups], dtype=np.int64)
    tl_stream = np.array([g[0][1] for g in groups], dtype=np.int64)
    busy = np.zeros((len(groups), len(ws)), dtype=np.int64)
    parts = []
    for i, (_, sel) in enumerate(groups):  # per timeline
        ms, me = merge_intervals(s[sel], e[sel])
        busy[i] = covered_in(ms, me, ws, we)
        parts.append((np.full(len(ms) + 1, i, dtype=np.int64), *_classify(ms, me, s[sel], c[sel], lo, hi)))
    cols = [np.concatenate(x) for x in zip(*parts)]
    return _Stretches(tl_device, tl_stream, step, ws, we, busy, *cols, notes=notes)


def _issued(trace, rows: np.ndarray, start: np.ndarray) -> np.ndarray:
    """When each work row was issued (module docstring): its launch call's return when the
    work started at or after it, else the call's start; _NO_C without a launch call."""
    ev = trace.events
    call = launch(trace)[rows]
    at = np.maximum(call, 0)
    c = np.where(call >= 0, ev["ts"][at], MISSING_INT)
    dur = np.where(call >= 0, ev["dur"][at], MISSING_INT)
    has = c != MISSING_INT
    ret = c + np.where(has & (dur != MISSING_INT) & (dur > 0), dur, 0)  # no usable dur: the start
    c = np.where(has & (ret <= start), ret, c)
    return np.where(has, c, _NO_C)


def _classify(ms, me, s, c, lo, hi):
    """Idle stretches of one timeline (busy = merged ms, me; its work starts s and launch
    starts c, _NO_C for none): a, h, b, in-flight length, unbounded, unknown (see
    _Stretches). There are len(ms) + 1: before the first work, between, after the last."""
    n = len(ms)
    # the first launch of the work that starts each busy piece (ends the stretch before it)
    j = np.minimum(np.searchsorted(ms, s), n - 1)
    at = ms[j] == s
    cmin = np.full(n, _NO_C, dtype=np.int64)
    np.minimum.at(cmin, j[at], c[at])
    a = np.concatenate([[min(lo, int(ms[0]))], me])
    b = np.concatenate([ms, [max(hi, int(me[-1]))]])
    c_next = np.append(cmin, _NO_C)
    known = c_next != _NO_C
    first = np.zeros(n + 1, dtype=bool)  # n >= 1: a timeline exists because it has work
    first[0] = True
    last = np.zeros(n + 1, dtype=bool)
    last[-1] = True
    # in flight from max(a, c) (from c before the first work: a is only the span's start
    # there), never after b; unknown launch: from a; the last stretch: nothing in flight
    start = np.where(first, np.where(known, c_next, a), np.maximum(a, np.where(known, c_next, a)))
    h = np.where(last, b, np.minimum(start, b))
    inflight = b - h
    unbounded = first & ~known & ~last
    unknown = ~known & ~last
    return a, np.clip(h, a, b), b, inflight, unbounded, unknown


def _empty_idle() -> pd.DataFrame:
    return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in IDLE_COLUMNS})


def _empty_gaps() -> pd.DataFrame:
    cols = {c: np.zeros(0, dtype=np.int64) for c in GAP_COLUMNS}
    cols["kind"] = np.zeros(0, dtype=object)
    return pd.DataFrame(cols)[GAP_COLUMNS]


__all__ = ["DEFAULT_KERNEL_WAIT_NS", "GAP_COLUMNS", "IDLE_COLUMNS", "KINDS", "idle_time"]
