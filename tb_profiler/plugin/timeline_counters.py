"""The trace's own device counters (hardware_counters, mtia_counters) as timeline counter tracks.

Why a module of its own: the timeline's window reply (plugin.timeline.window) sends counter
tracks binned to the request's pixels (device utilization, launch queues); the counters
Kineto records (``analysis.hw_counters``) join them here, in the same shape, so the
frontend draws them without knowing where they came from.  Each bin holds the counter's
time-weighted mean over the bin; a track covers only the part of the window its samples
span (no invented values before the first sample or after the last).
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.hw_counters import counter_series, window_means

MAX_TRACKS = 64  # counter tracks sent per window at most


def window_counters(trace, abs_a: int, abs_b: int, bins: int) -> list[dict]:
    """Every counter track of a window reply: device utilization, launch queues
    (plugin.timeline), then the trace's own counters."""
    from tb_profiler.plugin.timeline import origin, queue_counters, utilization

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


__all__ = ["MAX_TRACKS", "trace_counters", "window_counters"]
