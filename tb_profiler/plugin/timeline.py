"""The trace view's data: a time window of a trace, per track, bounded for drawing.

The browser never receives a whole trace (DESIGN.md, "The trace view"). Per trace we
build once (memoized with the trace) an index: each complete event's track (pid, tid),
nesting depth on that track, and its end. A request for ``[start, end)`` at ``width``
pixels returns the events at least one pixel wide as they are (the longest first when
there are more than ``max_events``) and merges the rest per (track, depth, pixel
column) into busy blocks, so the answer is bounded by tracks x depth x width whatever
the trace size.

Times in and out are relative to the trace's origin (its first event), because
absolute Kineto timestamps (~1.6e18 ns) do not fit a JavaScript number exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW, device_mask, launch, launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import depth as nesting_depth
from tb_profiler.analysis.nesting import parents
from tb_profiler.trace.categories import KIND_NAMES, Kind


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


@per_trace
def timeline_index(trace) -> TimelineIndex:
    ev = trace.events
    n = len(ev)
    ts, dur = ev["ts"], ev["dur"]
    end = ts + np.maximum(dur, 0)
    if not n:
        return TimelineIndex(np.zeros(0, np.int64), np.zeros(0, np.int64), end, [])
    group, first = factorize(ev["pid"], ev["tid"], ev["pid_str"], ev["tid_str"])
    group = np.asarray(group, dtype=np.int64).reshape(-1)
    first = np.asarray(first, dtype=np.int64).reshape(-1)
    par = parents(group, ts, end)
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


def window(trace, start_ns: int | None, end_ns: int | None, width: int, max_events: int) -> dict:
    """The events of ``[start_ns, end_ns)`` (relative ns) for ``width`` pixels; see module doc."""
    idx = timeline_index(trace)
    ev = trace.events
    t0 = origin(trace)
    first, last = trace.span
    span_end = int(last) - t0
    a = 0 if start_ns is None else int(start_ns)
    b = span_end if end_ns is None else int(end_ns)
    if b <= a:
        b = a + 1
    abs_a, abs_b = t0 + a, t0 + b
    ns_per_px = (b - a) / width
    ts = ev["ts"]
    stop = int(np.searchsorted(ts, abs_b, side="left")) if len(ts) else 0
    cand = np.flatnonzero(idx.end[:stop] > abs_a) if stop else np.zeros(0, np.int64)
    # zero-length events at the window start belong to it too
    if stop:
        zero = np.flatnonzero((idx.end[:stop] == abs_a) & (ts[:stop] == abs_a))
        if len(zero):
            cand = np.union1d(cand, zero)
    dur = ev["dur"][cand]
    wide = cand[dur >= ns_per_px]
    truncated = False
    if len(wide) > max_events:
        keep = np.argsort(-ev["dur"][wide], kind="stable")[:max_events]
        wide = np.sort(wide[keep])
        truncated = True
    narrow_mask = np.ones(len(cand), dtype=bool)
    narrow_mask[np.searchsorted(cand, wide)] = False
    narrow = cand[narrow_mask]

    names = trace.str(ev["name"][wide]) if len(wide) else []
    cats = trace.str(ev["cat"][wide]) if len(wide) else []
    kinds = ev["kind"][wide]
    w_ts = (ts[wide] - t0).tolist()
    w_dur = ev["dur"][wide].tolist()
    w_track = idx.track[wide].tolist()
    w_depth = idx.depth[wide].tolist()
    events = [{"i": int(i), "track": tr, "depth": d, "name": nm, "cat": ct if ct is not None else KIND_NAMES[k],
               "ts_ns": t, "dur_ns": du}
              for i, tr, d, nm, ct, k, t, du in zip(wide.tolist(), w_track, w_depth, names, cats, kinds.tolist(),
                                                    w_ts, w_dur)]

    busy = []
    if len(narrow):
        col = np.clip(((np.maximum(ts[narrow], abs_a) - abs_a) / ns_per_px).astype(np.int64), 0, width - 1)
        key_track, key_depth = idx.track[narrow], idx.depth[narrow]
        order = np.lexsort((col, key_depth, key_track))
        kt, kd, kc = key_track[order], key_depth[order], col[order]
        boundary = np.ones(len(order), dtype=bool)
        boundary[1:] = (kt[1:] != kt[:-1]) | (kd[1:] != kd[:-1]) | (kc[1:] != kc[:-1])
        starts = np.flatnonzero(boundary)
        s_ts = ts[narrow][order]
        s_end = idx.end[narrow][order]
        b_start = np.minimum.reduceat(s_ts, starts)
        b_end = np.maximum.reduceat(s_end, starts)
        b_count = np.diff(np.append(starts, len(order)))
        b_track, b_depth = kt[starts], kd[starts]
        # merge neighbouring columns of one (track, depth) less than a pixel apart
        run_start = np.ones(len(starts), dtype=bool)
        run_start[1:] = ((b_track[1:] != b_track[:-1]) | (b_depth[1:] != b_depth[:-1])
                         | (b_start[1:] - b_end[:-1] > ns_per_px))
        runs = np.flatnonzero(run_start)
        b_end = np.maximum.reduceat(b_end, runs)
        b_count = np.add.reduceat(b_count, runs)
        b_start, b_track, b_depth = b_start[runs], b_track[runs], b_depth[runs]
        busy = [{"track": int(t), "depth": int(d), "start_ns": int(s) - t0, "end_ns": int(e) - t0, "count": int(c)}
                for t, d, s, e, c in zip(b_track.tolist(), b_depth.tolist(), b_start.tolist(),
                                         b_end.tolist(), b_count.tolist())]
    return {
        "origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)),
        "span": {"start_ns": 0, "end_ns": span_end},
        "window": {"start_ns": a, "end_ns": b},
        "ns_per_px": ns_per_px,
        "tracks": idx.tracks,
        "events": events,
        "busy": busy,
        "counts": {"events": len(events), "busy": len(busy), "in_window": int(len(cand))},
        "truncated": truncated,
    }


def event_detail(trace, i: int) -> dict:
    """One event's columns, full args and linked events (launches)."""
    idx = timeline_index(trace)
    ev = trace.events
    t0 = origin(trace)
    events = {"i": i, "name": trace.str(ev["name"][i]), "cat": trace.str(ev["cat"][i]) or KIND_NAMES[ev["kind"][i]],
              "ts_ns": int(ev["ts"][i]) - t0, "dur_ns": int(ev["dur"][i]),
              "pid": idx.tracks[idx.track[i]]["pid"], "tid": idx.tracks[idx.track[i]]["tid"],
              "track": int(idx.track[i]), "depth": int(idx.depth[i])}
    links = []

    def link(j: int, relation: str) -> None:
        if j != NO_ROW and j >= 0:
            links.append({"i": int(j), "relation": relation, "name": trace.str(ev["name"][j]),
                          "cat": trace.str(ev["cat"][j]) or KIND_NAMES[ev["kind"][j]],
                          "ts_ns": int(ev["ts"][j]) - t0, "dur_ns": int(ev["dur"][j]),
                          "track": int(idx.track[j])})

    rt, op = launch(trace), launching_op(trace)
    link(int(rt[i]), "launched_by")
    link(int(op[i]), "operator")
    launched = np.flatnonzero(rt == i)
    if not len(launched):
        launched = np.flatnonzero(op == i)
    for j in launched[:1000].tolist():
        link(j, "launched")
    try:
        args = trace.args(i)
    except Exception as exc:  # args text the decoder kept but json cannot parse
        args = {"<error>": f"args could not be parsed: {exc}"}
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), "event": events, "args": args, "links": links,
            "links_truncated": bool(len(launched) > 1000)}
