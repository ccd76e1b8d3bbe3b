"""The trace view's index of a trace: each complete event's track (pid, tid) and nesting
depth on it, its end, and the tracks' names and order; and the origin every relative time
of the trace counts from.

Why a module of its own: every part of the trace view (the window, flows, counters, an
event's detail, search) places events by this index; it is built once per trace and kept
beside the trace's cache entry (analysis.stored), so a reopened trace reads it back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.links import device_mask
from tb_profiler.analysis.nesting import depth as nesting_depth
from tb_profiler.analysis.range_stats import track_nesting
from tb_profiler.analysis.stored import per_trace_stored
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.hsa_queues import track_queues, with_queue


@dataclass
class TimelineIndex:
    track: np.ndarray     # per event: track id (position in ``tracks``)
    depth: np.ndarray     # per event: nesting depth on its track
    end: np.ndarray       # per event: ts + dur
    tracks: list[dict]    # id, kind, pid, tid, process, thread, max_depth


def origin(trace) -> int:
    """The absolute ns every relative time of this trace counts from."""
    return int(trace.span[0])


def wall_origin(trace) -> int:
    """The origin as wall-clock ns since the epoch: modern Kineto counts ts from
    baseTimeNanoseconds (older traces count from the epoch and have no base)."""
    base = trace.base_time_ns
    return origin(trace) + (int(base) if isinstance(base, (int, float)) else 0)


def _dump_index(idx: TimelineIndex) -> tuple[dict[str, np.ndarray], dict]:
    return {"track": idx.track, "depth": idx.depth, "end": idx.end}, {"tracks": idx.tracks}


def _load_index(arrays, meta: dict) -> TimelineIndex:
    return TimelineIndex(arrays["track"], arrays["depth"], arrays["end"], list(meta["tracks"]))


@per_trace_stored("timeline-index", 2, _dump_index, _load_index)
def timeline_index(trace) -> TimelineIndex:
    ev = trace.events
    n = len(ev)
    ts, dur = ev["ts"], ev["dur"]
    end = ts + np.maximum(dur, 0)
    if not n:
        return TimelineIndex(np.zeros(0, np.int64), np.zeros(0, np.int64), end, [])
    group, first, par = track_nesting(trace)
    dep = nesting_depth(par)
    n_groups = len(first)
    is_dev = device_mask(trace)
    dev_count = np.bincount(group, weights=is_dev, minlength=n_groups)
    max_depth = np.zeros(n_groups, dtype=np.int64)
    np.maximum.at(max_depth, group, dep)
    kinds = ev["kind"]
    trace_count = np.bincount(group, weights=(kinds == Kind.TRACE), minlength=n_groups)
    counts = np.bincount(group, minlength=n_groups)

    word = trace.device_word or "GPU"
    pnames, tnames = trace.process_names, trace.thread_names
    psort, tsort = trace.process_sort_index, trace.thread_sort_index
    queues = track_queues(trace, group, is_dev)  # ROCm: each stream's hsa_queue
    info = []
    for g in range(n_groups):
        r = int(first[g])
        pid, tid = int(ev["pid"][r]), int(ev["tid"][r])
        pid_s, tid_s = trace.str(ev["pid_str"][r]), trace.str(ev["tid_str"][r])
        kind = ("device" if dev_count[g] * 2 >= counts[g] else
                "other" if trace_count[g] == counts[g] else "host")
        pid_label = pid_s if pid_s is not None else str(pid)
        tid_label = tid_s if tid_s is not None else str(tid)
        if kind == "device":
            process = f"{word} {pid_label}"
            thread = tid_label if tid_s is not None and not tid_s.isdigit() else f"stream {tid_label}"
            thread = with_queue(thread, queues.get(g))
        else:
            process = pnames.get(pid) if pid_s is None else pid_s
            process = f"{process} ({pid_label})" if process and process != pid_label else f"process {pid_label}"
            thread = tnames.get((pid, tid)) or (tid_s if tid_s is not None and not tid_s.isdigit()
                                                else f"thread {tid_label}")
        order = (0 if kind == "host" else 1 if kind == "device" else 2,
                 _int(psort.get(pid, pid)), _int(tsort.get((pid, tid), tid)), pid_label, tid_label)
        info.append((order, g, {"kind": kind, "pid": pid_label, "tid": tid_label, "process": process,
                                "thread": thread, "max_depth": int(max_depth[g])}))
    info.sort(key=lambda x: x[0])
    remap = np.empty(n_groups, dtype=np.int64)
    tracks = []
    for new_id, (_, g, t) in enumerate(info):
        remap[g] = new_id
        tracks.append({"id": new_id, **t})
    return TimelineIndex(remap[group], dep.astype(np.int64), end, tracks)


def _int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


__all__ = ["TimelineIndex", "origin", "timeline_index", "wall_origin"]
