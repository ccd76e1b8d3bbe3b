"""Launch queue length: per device stream, how many launched operations have not finished.

Why: the host runs ahead of the device by enqueueing work; while the queue holds work
the device never waits for the host (the ideal for throughput), and when it is full
(CUDA blocks a launch once about 1,024 operations are pending on a device) the host
stalls inside the launch call instead.  A queue near zero means a launch-bound step: the
device drains every kernel as soon as it arrives, and idle time follows.

What the queue holds: launches.  Each runtime call that launched device work (a kernel,
copy or fill: device work as ``trace.roles`` defines it, joined to its call by
``links.launch``) is one entry of each stream it launched work on: it joins when the call
starts and leaves when the last of its work on that stream ends.  A graph launch
(``cudaGraphLaunch``, ``hipGraphLaunch``) is one call whose many kernels share its
correlation id: one entry, not one per kernel (counted per kernel, a V100 trace of HTA's,
``trace_diff/test``, showed a queue of 1,338, above CUDA's ~1,024, and 3,594 "blocked"
calls that took their usual 7 us); an MTIA ``enqueueCommand memcpyHtoDAsync`` split into
several DMA requests is one entry too.  Work without a launch call in the trace (cut off
by the profiling window) is not counted, and a note says how much.

Blocked calls: a launch call that started while its stream's queue held ``full_at`` or
more entries, and that took more than ``BLOCKED_FACTOR`` times its usual time: the median
duration of the calls of the same name that started on a queue below ``full_at`` (a call
that waits for a free slot waits for an operation to finish; one that took its usual
time did not wait).  Calls of a name that never started on a queue below ``full_at``
have no usual time: they count as blocked, and a note says so.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import launch
from tb_profiler.analysis.memo import per_trace, per_trace_result
from tb_profiler.analysis.steps import valid_times
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

__all__ = ["BLOCKED_FACTOR", "DEFAULT_FULL_AT", "QUEUE_COLUMNS", "queue_bins", "queue_length", "queue_series"]

DEFAULT_FULL_AT = 1024
BLOCKED_FACTOR = 2  # a call blocked on a full queue took more than this times its usual time
QUEUE_COLUMNS = ["device", "stream", "operations", "max_len", "mean_len", "time_full_ns", "blocked_calls",
                 "blocked_ns"]


@per_trace
def _entries(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The queue entries: one per (launch call, stream it launched work on): (stream key =
    device << 32 | stream, call row, joins = the call's start, leaves = its last work's end
    on that stream), sorted by key then call."""
    ev = trace.events
    call = launch(trace)
    dev = trace.event_devices
    work = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK) & valid_times(trace) & (call >= 0) & (dev >= 0))
    key = dev[work].astype(np.int64) * (1 << 32) + trace.event_streams[work].astype(np.int64)
    end = (ev["ts"][work] + ev["dur"][work]).astype(np.int64)
    code, first = factorize(key, call[work])
    leave = np.full(len(first), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(leave, code, end)
    k, c = key[first], call[work][first].astype(np.int64)
    order = np.lexsort((c, k))
    return k[order], c[order], ev["ts"][c[order]].astype(np.int64), leave[order]


@per_trace
def queue_series(trace) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Per (device, stream): (times, queue length from each time to the next), the step
    function's change points in time order (the last length is 0)."""
    key, _, enq, deq = _entries(trace)
    out = {}
    for k in np.unique(key).tolist():  # a loop over streams, not events
        mine = key == k
        t = np.concatenate([enq[mine], deq[mine]])
        d = np.concatenate([np.ones(mine.sum(), np.int64), -np.ones(mine.sum(), np.int64)])
        order = np.lexsort((d, t))  # at one instant, leave before join: the length never overshoots
        t, length = t[order], np.cumsum(d[order])
        last = np.r_[t[1:] != t[:-1], True]  # one value per instant: the length after all its changes
        out[(int(k >> 32), int(k & 0xFFFFFFFF))] = (t[last], length[last])
    return out


@per_trace_result
def queue_length(trace, *, full_at: int = DEFAULT_FULL_AT) -> dict:
    """Per stream: operations launched, the longest and the time-weighted mean queue (of
    launches: a graph launch is one entry), the time it was at least ``full_at`` long, and
    the launch calls blocked on it (started while it was, and took more than
    BLOCKED_FACTOR x their usual time: see the module docstring; their time summed).

    Returns {"streams": QUEUE_COLUMNS per (device, stream), "full_at", "notes"}; the curves
    themselves come from ``queue_series`` (and ``queue_bins`` for a window)."""
    if full_at < 1:
        raise ValueError(f"full_at {full_at}: at least 1")
    series = queue_series(trace)
    ev = trace.events
    call = launch(trace)
    notes = []
    work = role_mask(trace.roles, DEVICE_WORK) & valid_times(trace)
    lost = int((work & (call < 0)).sum())
    if lost:
        notes.append(f"{lost} device operations have no launch call in the trace (cut off by the profiling window?): "
                     "not counted in the queues")
    if not series:
        notes.append("no launched device work: no queue")
        return {"streams": pd.DataFrame({c: pd.Series(dtype=np.float64 if c == "mean_len" else np.int64)
                                         for c in QUEUE_COLUMNS}), "full_at": full_at, "notes": notes}
    rows = []
    dev_rows = np.flatnonzero(work & (call >= 0))
    key = trace.event_devices[dev_rows].astype(np.int64) * (1 << 32) + trace.event_streams[dev_rows]
    e_key, e_call, e_join, _ = _entries(trace)
    on_full = np.zeros(len(e_key), dtype=bool)
    for (d, s), (t, length) in series.items():  # a loop over streams, not events
        mine = np.flatnonzero(e_key == d * (1 << 32) + s)
        at = np.searchsorted(t, e_join[mine], side="left") - 1  # the length just before each call
        on_full[mine] = (at >= 0) & (length[np.maximum(at, 0)] >= full_at)
    blocked, no_usual = _blocked(trace, e_call, on_full)
    if no_usual:
        notes.append(f"{no_usual} launch calls started on a full queue and no call of their name started on one "
                     f"below {full_at}: without a usual time to compare, they count as blocked")
    for (d, s), (t, length) in series.items():
        span = np.diff(t)
        held = length[:-1]
        total = int(t[-1] - t[0])
        full = held >= full_at
        mine = blocked & (e_key == d * (1 << 32) + s)
        rows.append({"device": d, "stream": s, "operations": int(np.sum(key == d * (1 << 32) + s)),
                     "max_len": int(length.max()), "mean_len": float((held * span).sum() / total) if total else 0.0,
                     "time_full_ns": int(span[full].sum()), "blocked_calls": int(mine.sum()),
                     "blocked_ns": int(ev["dur"][e_call[mine]].sum())})
    frame = pd.DataFrame(rows, columns=QUEUE_COLUMNS).sort_values(["device", "stream"]).reset_index(drop=True)
    return {"streams": frame, "full_at": full_at, "notes": notes}


def _blocked(trace, calls: np.ndarray, on_full: np.ndarray) -> tuple[np.ndarray, int]:
    """Per queue entry: its call was blocked (started on a full queue and took more than
    BLOCKED_FACTOR x the median duration of its name's calls started on a queue not full);
    and how many full-queue calls had no such median (counted as blocked)."""
    ev = trace.events
    if not on_full.any():
        return on_full, 0
    name = ev["name"][calls].astype(np.int64)
    dur = ev["dur"][calls].astype(np.int64)
    usual = pd.Series(dur[~on_full]).groupby(name[~on_full]).median()
    ref = usual.reindex(name).to_numpy(np.float64)
    known = np.isfinite(ref)
    blocked = on_full & (~known | (dur > BLOCKED_FACTOR * np.nan_to_num(ref)))
    return blocked, int((on_full & ~known).sum())


def queue_bins(trace, abs_a: int, abs_b: int, bins: int) -> list[tuple[int, int, np.ndarray]]:
    """Per (device, stream): the longest queue in each of ``bins`` equal bins of
    [abs_a, abs_b) (what a counter track draws: a short peak stays visible)."""
    edges = np.linspace(abs_a, abs_b, bins + 1).round().astype(np.int64)
    out = []
    for (d, s), (t, length) in queue_series(trace).items():
        # the length at each bin's start, then the maximum of every change inside the bin
        start = np.searchsorted(t, edges[:-1], side="right") - 1
        values = np.where(start >= 0, length[np.maximum(start, 0)], 0)
        inside = (t >= abs_a) & (t < abs_b)
        which = np.searchsorted(edges, t[inside], side="right") - 1
        which = np.clip(which, 0, bins - 1)
        np.maximum.at(values, which, length[inside])
        out.append((d, s, values))
    return out
