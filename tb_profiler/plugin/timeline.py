"""The trace view's data: a time window of a trace, per track, bounded for drawing.

The browser never receives a whole trace (DESIGN.md, "The trace view"). Per trace we
build once an index: each complete event's track (pid, tid), nesting depth on that track,
and its end; and the level-of-detail index of ``timeline_lod`` over (track, depth) rows.
Both are kept beside the trace's cache entry (analysis.stored): a reopened trace reads
them instead of building them again (the server builds them right after a load). A request for ``[start, end)`` at ``width``
pixels returns the events at least one pixel wide as they are (the longest first when
there are more than ``max_events``) and merges the rest into busy blocks per (track,
depth), so the answer is bounded by tracks x depth x width whatever the trace size.
Below the index's finest bin (a microsecond per pixel) the window's events are read
through the index's interval lookup and merged per pixel column, each block spanning
its events exactly; coarser windows read the precomputed busy bins of the widest level
within a pixel, so their blocks are the level's bins the small events touch. Either
way no request reads the events before its window, nor the small ones inside a wide
one.

Times in and out are relative to the trace's origin (its first event), because
absolute Kineto timestamps (~1.6e18 ns) do not fit a JavaScript number exactly.

The window also carries, bounded, the flows (arrows) touching it — CPU launch ->
device event from the correlation links of ``analysis.links``, forward -> backward
and other recorded flows from the trace's flows table — and, per device that ran
kernels, a utilization counter binned to the request's pixels; flows (``flow_index``)
and counters (running sums, a pyramid of queue maxima) are found without reading the
whole trace either. ``search`` finds events
by name through the string table, so the browser never needs the whole trace to find
one. ``merged_window`` puts several ranks' windows on one clock (trace/ranks).

Where the parts live (this module: the window, its busy blocks, the level-of-detail
index, the wire format and several ranks' windows on one clock):

    timeline_tracks.py    the per-trace index (track, depth, end; the tracks) and the origin
    timeline_lod.py       the level-of-detail index over (track, depth) rows
    timeline_flows.py     flows: their index and the flows touching a window
    timeline_counters.py  counter tracks: device utilization, launch queues, the trace's own
    timeline_events.py    one event's detail (trace/event) and search by name (trace/search)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tb_profiler.analysis.stored import per_trace_stored
from tb_profiler.plugin.timeline_counters import (  # noqa: F401 - re-exported
    bin_edges,
    kernel_busy,
    queue_counters,
    range_max,
    utilization,
    window_counters,
    window_queue_bins,
)
from tb_profiler.plugin.timeline_events import (  # noqa: F401 - re-exported
    MAX_STACK_FRAMES,
    STACK_ARGS,
    event_args,
    event_detail,
    event_names,
    search,
)
from tb_profiler.plugin.timeline_flows import (  # noqa: F401 - re-exported
    FLOW_KINDS,
    FlowIndex,
    FlowPairs,
    flow_index,
    flow_pairs,
    recorded_flow_links,
    window_flows,
)
from tb_profiler.plugin.timeline_lod import LodIndex
from tb_profiler.plugin.timeline_lod import build as lod_build
from tb_profiler.plugin.timeline_lod import from_arrays as lod_from_arrays
from tb_profiler.plugin.timeline_tracks import TimelineIndex, origin, timeline_index, wall_origin
from tb_profiler.trace.categories import KIND_NAMES
from tb_profiler.trace.strings import bounded, shown_all

# Busy blocks sent in one window at most (the shallowest kept): one per (track, depth) row
# and pixel column, so a trace nested 10^6 deep would otherwise send a million of them.
MAX_BUSY = 50_000


def window(trace, start_ns: int | None, end_ns: int | None, width: int, max_events: int,
           max_flows: int = 2000) -> dict:
    """The events of ``[start_ns, end_ns)`` (relative ns) for ``width`` pixels, the flows
    touching them and the device utilization counters; see module doc."""
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
    ts, dur = ev["ts"], ev["dur"]
    lod = lod_index(trace)
    level = lod.level_for(ns_per_px)
    # the events of the classes not binned at this level (all of them below the finest bin)
    cand = lod.overlapping(ts, dur, abs_a, abs_b, min_class=level + 1)
    wide = cand[dur[cand] >= ns_per_px]
    truncated = False
    if len(wide) > max_events:
        keep = np.argsort(-dur[wide], kind="stable")[:max_events]
        wide = np.sort(wide[keep])
        truncated = True
    narrow_mask = np.ones(len(cand), dtype=bool)
    narrow_mask[np.searchsorted(cand, wide)] = False
    narrow = cand[narrow_mask]

    names = shown_all(trace.str(ev["name"][wide])) if len(wide) else []
    cats = shown_all(trace.str(ev["cat"][wide])) if len(wide) else []
    kinds = ev["kind"][wide]
    w_ts = (ts[wide] - t0).tolist()
    w_dur = dur[wide].tolist()
    w_track = idx.track[wide].tolist()
    w_depth = idx.depth[wide].tolist()
    events = [{"i": int(i), "track": tr, "depth": d, "name": nm, "cat": ct if ct is not None else KIND_NAMES[k],
               "ts_ns": t, "dur_ns": du}
              for i, tr, d, nm, ct, k, t, du in zip(wide.tolist(), w_track, w_depth, names, cats, kinds.tolist(),
                                                    w_ts, w_dur)]
    if level < 0:
        busy, busy_all, _ = _pixel_busy(trace, idx, narrow, abs_a, ns_per_px, width, MAX_BUSY)
        in_window = len(cand)
    else:
        row = lod.row_start[idx.track[narrow]] + idx.depth[narrow]
        busy, busy_all, busy_events = _level_busy(lod, level, abs_a, abs_b, ns_per_px, dur, row, ts[narrow],
                                                  idx.end[narrow], t0, MAX_BUSY)
        in_window = len(events) + busy_events
    flows, flows_in_window = window_flows(trace, abs_a, abs_b, wide, max_flows)
    return {
        "origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)),
        "span": {"start_ns": 0, "end_ns": span_end},
        "window": {"start_ns": a, "end_ns": b},
        "ns_per_px": ns_per_px,
        "tracks": bounded(idx.tracks),
        "events": events,
        "busy": busy,
        "flows": flows,
        "counters": window_counters(trace, abs_a, abs_b, width),
        "counts": {"events": len(events), "busy": len(busy), "in_window": int(in_window),
                   "flows": len(flows), "flows_in_window": flows_in_window, "busy_in_window": busy_all},
        "truncated": truncated,
        "busy_truncated": busy_all > len(busy),
        "flows_truncated": flows_in_window > len(flows),
    }


def _busy_dicts(track: np.ndarray, depth: np.ndarray, start: np.ndarray, end: np.ndarray, count: np.ndarray,
                t0: int, limit: int) -> tuple[list[dict], int, int]:
    """(at most ``limit`` busy blocks, the shallowest first kept, as dicts; how many there
    were; the events they all hold).  Why a limit: a trace nested 10^6 deep has a busy row
    per depth, and the reply must stay a few thousand items whatever the nesting."""
    total, events = len(track), int(count.sum())
    if total > limit:
        keep = np.sort(np.lexsort((start, track, depth))[:limit])
        track, depth, start, end, count = track[keep], depth[keep], start[keep], end[keep], count[keep]
    return ([{"track": int(t), "depth": int(d), "start_ns": int(s) - t0, "end_ns": int(e) - t0, "count": int(c)}
             for t, d, s, e, c in zip(track.tolist(), depth.tolist(), start.tolist(), end.tolist(), count.tolist())],
            total, events)


def _pixel_busy(trace, idx: TimelineIndex, narrow: np.ndarray, abs_a: int, ns_per_px: float,
                width: int, limit: int) -> tuple[list[dict], int, int]:
    """The busy blocks of events narrower than a pixel, merged per (track, depth, pixel
    column) and then with neighbours less than a pixel apart: each block spans its
    events exactly (windows finer than the level-of-detail index's finest bin); at most
    ``limit`` of them (``_busy_dicts``)."""
    if not len(narrow):
        return [], 0, 0
    ts = trace.events["ts"]
    t0 = origin(trace)
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
    return _busy_dicts(b_track, b_depth, b_start, b_end, b_count, t0, limit)


def _level_busy(lod: LodIndex, level: int, abs_a: int, abs_b: int, ns_per_px: float, dur: np.ndarray,
                row: np.ndarray, ts: np.ndarray, end: np.ndarray, t0: int, limit: int) -> tuple[list[dict], int, int]:
    """The busy blocks of a window at a level of the index: its bins touched by events
    narrower than a pixel (clipped to the window), neighbours less than a pixel apart
    merged; dur: the trace's durations; (row, ts, end): the narrow events the level
    does not hold; at most ``limit`` of them (``_busy_dicts``)."""
    r, s, e, c = lod.busy(level, abs_a, abs_b, ns_per_px, dur, row, ts, end)
    track = np.searchsorted(lod.row_start, r, side="right") - 1
    depth = r - lod.row_start[track]
    return _busy_dicts(track, depth, np.asarray(s), np.asarray(e), np.asarray(c), t0, limit)


@per_trace_stored("timeline-lod", 1, lambda lod: (lod.arrays(), {}), lambda arrays, meta: lod_from_arrays(arrays))
def lod_index(trace) -> LodIndex:
    """The trace's level-of-detail index (timeline_lod), built once per trace."""
    idx = timeline_index(trace)
    ev = trace.events
    return lod_build(idx.track, idx.depth, ev["ts"], ev["dur"], origin(trace),
                     np.array([t["max_depth"] for t in idx.tracks], dtype=np.int64))


BUSY_FIELDS = ("track", "depth", "start_ns", "end_ns", "count")


def on_the_wire(reply: dict) -> dict:
    """A window (window, merged_window) as the HTTP routes send it: the busy blocks as
    columns, one list per field of BUSY_FIELDS (thousands of blocks repeating the same five
    keys were most of a whole-trace reply)."""
    rows = reply["busy"]
    return {**reply, "busy": {f: [b[f] for b in rows] for f in BUSY_FIELDS}}


def merged_window(ranks: list[tuple[str, Any, int]], start_ns: int | None, end_ns: int | None, width: int,
                  max_events: int, max_flows: int) -> dict:
    """One window over several ranks' traces, each rank's clock put on one axis: ranks is
    [(worker, trace, offset_ns)], offset_ns the clock correction that puts the rank's ts on
    the common clock (the cross-rank analysis' clock_offset_ns).  Times in and out are
    relative to the common origin (the earliest aligned start among these ranks); each
    rank's window comes from ``window`` (its share of max_events and max_flows), shifted,
    its track ids moved after the previous rank's and its processes named by its worker."""
    starts = [origin(t) + off for _, t, off in ranks]
    t0 = min(starts)
    a = 0 if start_ns is None else int(start_ns)
    b = max(int(t.span[1]) + off for _, t, off in ranks) - t0 if end_ns is None else int(end_ns)
    b = max(b, a + 1)
    parts, out = [], {"tracks": [], "events": [], "busy": [], "flows": [], "counters": []}
    for worker, trace, off in ranks:
        shift = origin(trace) + off - t0  # the rank's relative times -> the common ones
        w = window(trace, a - shift, b - shift, width, max(1, max_events // len(ranks)),
                   max_flows // len(ranks))
        base = len(out["tracks"])
        out["tracks"] += [{**tr, "id": tr["id"] + base, "process": f"{worker}: {tr['process']}", "worker": worker}
                          for tr in w["tracks"]]
        out["events"] += [{**e, "track": e["track"] + base, "ts_ns": e["ts_ns"] + shift} for e in w["events"]]
        out["busy"] += [{**x, "track": x["track"] + base, "start_ns": x["start_ns"] + shift,
                         "end_ns": x["end_ns"] + shift} for x in w["busy"]]
        out["flows"] += [{**f, "from_track": f["from_track"] + base, "to_track": f["to_track"] + base,
                          "from_ts_ns": f["from_ts_ns"] + shift, "to_ts_ns": f["to_ts_ns"] + shift}
                         for f in w["flows"]]
        out["counters"] += [{**c, "name": f"{worker}: {c['name']}", "worker": worker, "start_ns": a, "end_ns": b}
                            for c in w["counters"]]
        parts.append({"worker": worker, "offset_ns": int(shift), "clock_offset_ns": int(off),
                      "origin_ns": str(origin(trace)), "tracks": [base, len(w["tracks"])], "counts": w["counts"],
                      "truncated": w["truncated"], "flows_truncated": w["flows_truncated"]})
    _, first, first_off = ranks[0]
    return {
        "origin_ns": str(t0), "wall_origin_ns": str(wall_origin(first) + t0 - origin(first) - first_off),
        "span": {"start_ns": 0, "end_ns": max(int(t.span[1]) + off for _, t, off in ranks) - t0},
        "window": {"start_ns": a, "end_ns": b},
        "ns_per_px": (b - a) / width,
        **out,
        "workers": parts,
        "counts": {k: sum(p["counts"][k] for p in parts) for k in parts[0]["counts"]},
        "truncated": any(p["truncated"] for p in parts),
        "flows_truncated": any(p["flows_truncated"] for p in parts),
    }


__all__ = ["BUSY_FIELDS", "FLOW_KINDS", "FlowIndex", "FlowPairs", "MAX_BUSY", "MAX_STACK_FRAMES", "STACK_ARGS", "TimelineIndex", "bin_edges", "event_args", "event_detail", "event_names", "flow_index", "flow_pairs", "kernel_busy", "lod_index", "merged_window", "on_the_wire", "origin", "queue_counters", "range_max", "recorded_flow_links", "search", "timeline_index", "utilization", "wall_origin", "window", "window_counters", "window_flows", "window_queue_bins"]
