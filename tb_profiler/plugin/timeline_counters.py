"""The trace view's counter tracks: device utilization, launch queues and the trace's own
device counters (hardware_counters, mtia_counters), binned to a window's pixels.

Why a module of its own: the timeline's window reply (plugin.timeline.window) sends counter
tracks binned to the request's pixels, all in one shape, so the frontend draws them without
knowing where they came from; none reads the whole trace per request.  Utilization: the
share of each bin a kernel ran (running sums of the merged kernel intervals, per trace).
Launch queues: the longest queue per bin (a pyramid of maxima over analysis.queue's
series).  The trace's own counters (``analysis.hw_counters``): each bin holds the counter's
time-weighted mean over the bin; a track covers only the part of the window its samples
span (no invented values before the first sample or after the last).
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.gpu import device_ids
from tb_profiler.analysis.hw_counters import counter_series, window_means
from tb_profiler.analysis.intervals import merge_intervals
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.steps import valid_times
from tb_profiler.plugin.timeline_tracks import origin
from tb_profiler.trace.roles import Role

MAX_TRACKS = 64  # counter tracks sent per window at most


def window_counters(trace, abs_a: int, abs_b: int, bins: int) -> list[dict]:
    """Every counter track of a window reply: device utilization, launch queues
    (below), then the trace's own counters."""
    return (utilization(trace, abs_a, abs_b, bins) + queue_counters(trace, abs_a, abs_b, bins)
            + trace_counters(trace, abs_a, abs_b, bins, origin(trace)))


def trace_counters(trace, abs_a: int, abs_b: int, bins: int, t0: int) -> list[dict]:
    """Counter tracks of [abs_a, abs_b) (absolute ns) in at most ``bins`` bins, times relative
    to ``t0``: {name, kind, device, counter, start_ns, end_ns, bins, values}."""
    out = []
    width = max(int(abs_b) - int(abs_a), 1)
    for s in counter_series(trace)[:MAX_TRACKS]:  # a loop over counter series, not samples
        a, b = max(int(abs_a), int(s.ts[0])), min(int(abs_b), int(s.ts[-1]))
        if b <= a:
            continue
        n = max(1, min(int(bins), int(np.ceil(bins * (b - a) / width))))
        values = window_means(s, a, b, n)
        out.append({"name": f"{s.track}: {s.counter}", "kind": s.category,
                    "device": "" if s.device is None else str(s.device), "counter": s.counter,
                    "start_ns": a - t0, "end_ns": b - t0, "bins": n,
                    "values": np.round(np.nan_to_num(values), 6).tolist()})
    return out


# -- device utilization ----------------------------------------------------------------------
@per_trace
def kernel_busy(trace) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per device that ran kernels: (device id, merged kernel intervals as starts, ends).
    Kernels only, like the overview's utilization (analysis.gpu); memcpy/memset do not
    count as the device computing."""
    ev = trace.events
    did = device_ids(trace)
    rows = np.flatnonzero((trace.roles == Role.COMPUTE) & valid_times(trace) & (did >= 0))
    out = []
    for dev in np.unique(did[rows]).tolist():  # one pass per device (a handful)
        r = rows[did[rows] == dev]
        ms, me = merge_intervals(ev["ts"][r], ev["ts"][r] + ev["dur"][r])
        out.append((int(dev), ms, me))
    return out


def bin_edges(a: int, b: int, bins: int) -> np.ndarray:
    """bins + 1 integer edges splitting [a, b) as evenly as integers allow (bin k starts
    at a + floor(k * (b - a) / bins)), without overflowing int64 for any window."""
    q, r = divmod(int(b) - int(a), bins)
    k = np.arange(bins + 1, dtype=np.int64)
    return int(a) + k * q + (k * r) // bins


@per_trace
def _kernel_busy_sums(trace) -> list[np.ndarray]:
    """Per device of ``kernel_busy``: the busy time before each of its intervals."""
    return [np.concatenate([[0], np.cumsum(me - ms)]) for _, ms, me in kernel_busy(trace)]


def _covered_before(ms: np.ndarray, me: np.ndarray, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
    """intervals.covered_before with the running sums computed once per trace."""
    if not len(ms):
        return np.zeros(t.shape, dtype=np.int64)
    idx = np.searchsorted(ms, t, side="right") - 1
    safe = np.maximum(idx, 0)
    part = np.clip(t - ms[safe], 0, me[safe] - ms[safe])
    return np.where(idx >= 0, cum[safe] + part, 0)


def utilization(trace, abs_a: int, abs_b: int, bins: int) -> list[dict]:
    """Per device, the fraction of each of ``bins`` equal bins of [abs_a, abs_b) during
    which at least one kernel ran (a bin narrower than 1 ns looks at the ns it starts in)."""
    busy = kernel_busy(trace)
    if not busy:
        return []
    edges = bin_edges(abs_a, abs_b, bins)
    lo = edges[:-1]
    hi = np.maximum(edges[1:], lo + 1)
    word = trace.device_word or "GPU"
    t0 = origin(trace)
    return [{"name": f"{word} {dev} utilization", "kind": "utilization", "device": str(dev),
             "start_ns": int(abs_a) - t0, "end_ns": int(abs_b) - t0, "bins": bins,
             "values": np.round((_covered_before(ms, me, cum, hi) - _covered_before(ms, me, cum, lo))
                                / (hi - lo), 4).tolist()}
            for (dev, ms, me), cum in zip(busy, _kernel_busy_sums(trace))]


# -- launch queues ---------------------------------------------------------------------------
def queue_counters(trace, abs_a: int, abs_b: int, bins: int) -> list[dict]:
    """Per device stream, the longest launch queue in each bin (analysis.queue)."""
    word = trace.device_word or "GPU"
    t0 = origin(trace)
    return [{"name": f"{word} {dev} stream {stream} queue", "kind": "queue", "device": str(dev), "stream": stream,
             "start_ns": int(abs_a) - t0, "end_ns": int(abs_b) - t0, "bins": bins, "values": values.tolist()}
            for dev, stream, values in window_queue_bins(trace, abs_a, abs_b, bins)]


# Each level of a queue's maxima pyramid holds the maxima of this many values of the one below.
_PYRAMID_FANOUT = 8


@per_trace
def _queue_pyramids(trace) -> dict[tuple[int, int], list[np.ndarray]]:
    """Per stream of ``analysis.queue.queue_series``: its lengths, then the maxima of
    blocks of 8, of 64, ... (until a level has at most 8)."""
    from tb_profiler.analysis.queue import queue_series

    out = {}
    for key, (_, length) in queue_series(trace).items():
        levels = [np.asarray(length, np.int64)]
        while len(levels[-1]) > _PYRAMID_FANOUT:
            x = levels[-1]
            pad = -len(x) % _PYRAMID_FANOUT
            if pad:
                x = np.concatenate([x, np.full(pad, np.iinfo(np.int64).min, np.int64)])
            levels.append(x.reshape(-1, _PYRAMID_FANOUT).max(axis=1))
        out[key] = levels
    return out


def range_max(levels: list[np.ndarray], s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """max(levels[0][s[i]:e[i]]) per i (each range non-empty), reading at most 2 x 7 values
    per range and level of the pyramid (levels[k]: maxima of blocks of 8**k)."""
    k = _PYRAMID_FANOUT
    out = np.full(len(s), np.iinfo(np.int64).min, np.int64)
    s, e = np.asarray(s, np.int64).copy(), np.asarray(e, np.int64).copy()
    steps = np.arange(k, dtype=np.int64)
    for n, arr in enumerate(levels):
        live = np.flatnonzero(s < e)
        if not len(live):
            break
        ls, le = s[live], e[live]
        if n == len(levels) - 1:  # the top: at most 8 values left
            head_end, tail_start = le, le
        else:
            head_end = np.minimum(-(-ls // k) * k, le)
            tail_start = np.maximum(le // k * k, head_end)
        for lo, hi in ((ls, head_end), (tail_start, le)):
            at = lo[:, None] + steps[None, :]
            ok = at < hi[:, None]
            vals = np.where(ok, arr[np.minimum(at, len(arr) - 1)], np.iinfo(np.int64).min)
            out[live] = np.maximum(out[live], vals.max(axis=1))
        s[live] = -(-ls // k)
        e[live] = le // k
    return out


def window_queue_bins(trace, abs_a: int, abs_b: int, bins: int) -> list[tuple[int, int, np.ndarray]]:
    """analysis.queue.queue_bins (the same values), without reading every change inside
    the window: per bin the changes inside it are a range of positions, whose maximum the
    pyramid of ``_queue_pyramids`` gives."""
    from tb_profiler.analysis.queue import queue_series

    edges = np.linspace(abs_a, abs_b, bins + 1).round().astype(np.int64)
    pyramids = _queue_pyramids(trace)
    out = []
    for (d, s), (t, length) in queue_series(trace).items():
        start = np.searchsorted(t, edges[:-1], side="right") - 1
        values = np.where(start >= 0, length[np.maximum(start, 0)], 0)
        # the changes in [abs_a, abs_b) go to the bin whose edges hold them (the first and last bins
        # also take those beyond the rounded edges)
        i0, i1 = np.searchsorted(t, [abs_a, abs_b], side="left").tolist()
        cut = np.clip(np.searchsorted(t, edges[1:-1], side="left"), i0, i1)
        lo, hi = np.r_[i0, cut], np.r_[cut, i1]
        has = np.flatnonzero(hi > lo)
        if len(has):
            values[has] = np.maximum(values[has], range_max(pyramids[(d, s)], lo[has], hi[has]))
        out.append((d, s, values))
    return out


__all__ = ["MAX_TRACKS", "bin_edges", "kernel_busy", "queue_counters", "range_max", "trace_counters", "utilization",
           "window_counters", "window_queue_bins"]
