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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_profiler.analysis.gpu import device_ids
from tb_profiler.analysis.intervals import merge_intervals
from tb_profiler.analysis.links import NO_ROW, device_mask, launch, launched_by_graph, launching_op, recorded_flows
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import depth as nesting_depth
from tb_profiler.analysis.range_stats import track_nesting
from tb_profiler.analysis.stacks import forward_stack, is_source_frame, trace_frame
from tb_profiler.analysis.stored import per_trace_stored
from tb_profiler.analysis.steps import valid_times
from tb_profiler.decode import STRING_MAX
from tb_profiler.decode.schema import TIME_LIMIT_NS
from tb_profiler.plugin.timeline_counters import window_counters
from tb_profiler.plugin.timeline_lod import LodIndex
from tb_profiler.plugin.timeline_lod import build as lod_build
from tb_profiler.plugin.timeline_lod import concat_ranges as _ranges
from tb_profiler.plugin.timeline_lod import from_arrays as lod_from_arrays
from tb_profiler.trace.categories import KIND_NAMES, Kind
from tb_profiler.trace.hsa_queues import track_queues, with_queue
from tb_profiler.trace.roles import Role
from tb_profiler.trace.strings import SHOW_MAX, bounded, shown, shown_all, used_ids

# Args holding a ";"-separated stack (as util/frames.ts isStackArg), and the most frames sent.
STACK_ARGS = frozenset({"call stack", "python stack", "stack"})
MAX_STACK_FRAMES = 512
# Busy blocks sent in one window at most (the shallowest kept): one per (track, depth) row
# and pixel column, so a trace nested 10^6 deep would otherwise send a million of them.
MAX_BUSY = 50_000
# Flow kinds as the API names them (index = the code stored per flow).
FLOW_KINDS: tuple[str, ...] = ("launch", "fwdbwd", "flow")
_LAUNCH, _FWDBWD, _FLOW = 0, 1, 2
# A flow's relation, seen from its source and from its destination (trace/event links).
_FLOW_RELATIONS = {_FWDBWD: ("backward", "forward"), _FLOW: ("flow_to", "flow_from")}


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
            links.append({"i": int(j), "relation": relation, "name": shown(trace.str(ev["name"][j])),
                          "cat": shown(trace.str(ev["cat"][j])) or KIND_NAMES[ev["kind"][j]],
                          "ts_ns": int(ev["ts"][j]) - t0, "dur_ns": int(ev["dur"][j]),
                          "track": int(idx.track[j]), "depth": int(idx.depth[j])})

    rt, op = launch(trace), launching_op(trace)
    events["launched_by_graph"] = bool(launched_by_graph(trace)[i])
    link(int(rt[i]), "launched_by")
    link(int(op[i]), "operator")
    launched = np.flatnonzero(rt == i)
    if not len(launched):
        launched = np.flatnonzero(op == i)
    for j in launched[:1000].tolist():
        link(j, "launched")
    for j, relation in recorded_flow_links(trace, i):
        link(j, relation)
    args = event_args(trace, i)
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), "event": events, "args": args, "links": links,
            "links_truncated": bool(len(launched) > 1000), **_source_frames(trace, i, events["name"], args)}


def event_args(trace, i: int) -> dict:
    """Event i's args object; an args text over STRING_MAX bytes is not parsed (its first
    SHOW_MAX bytes are shown, and its length): what trace/event sends stays bounded."""
    n = int(trace.events["args_len"][i])
    if n > STRING_MAX:
        off = int(trace.events["args_off"][i])
        head = bytes(trace.args_blob[off:off + SHOW_MAX]).decode("utf-8", "ignore")
        return {"<cut>": f"{shown(head)} [args text of {n} bytes, over {STRING_MAX}: not parsed]"}
    try:
        return trace.args(i)
    except Exception as exc:  # args text the decoder kept but json cannot parse
        return {"<error>": f"args could not be parsed: {exc}"}


def _source_frames(trace, i: int, name: str, args: dict) -> dict:
    """The event's frames with their resolved ``path`` (analysis/sources.py), for jump to
    source: ``source``, a python_function event's own frame; ``stacks``, per stack arg
    (PyTorch 1.8-1.10's ``Call stack``) its frames, innermost first; ``forward_stack``, a
    backward op's stack, its forward op's (analysis/stacks.py: forward_stack)."""
    out: dict = {}
    if trace.events["kind"][i] == Kind.PYTHON_FUNCTION and is_source_frame(name):
        out["source"] = trace_frame(trace, name)
    stacks = {k: [trace_frame(trace, f) for f in v.split(";")[:MAX_STACK_FRAMES] if f.strip()]
              for k, v in args.items() if k.lower() in STACK_ARGS and isinstance(v, str) and is_source_frame(v.split(";")[0])}
    if stacks:
        out["stacks"] = stacks
    out.update(forward_stack(trace, i, MAX_STACK_FRAMES))
    return out


# -- flows ------------------------------------------------------------------------------------
@dataclass
class FlowPairs:
    """Every arrow of a trace as event rows, sorted by ``lo`` (the earlier endpoint's start)."""

    src: np.ndarray    # event row the arrow leaves
    dst: np.ndarray    # event row it points to
    kind: np.ndarray   # code into FLOW_KINDS
    lo: np.ndarray     # min(ts) of both endpoints, absolute ns
    hi: np.ndarray     # max(end) of both endpoints


@per_trace
def flow_pairs(trace) -> FlowPairs:
    """Launch arrows (runtime call -> device event, from the correlation links; the
    launching operator where the trace has no runtime call) and the trace's recorded
    flows other than ac2g (forward -> backward, ...), whose ac2g twins the correlation
    links already give."""
    l_src, l_dst = _launch_pairs(trace)
    r_src, r_dst, r_kind = _recorded_pairs(trace)
    src = np.concatenate([l_src, r_src]).astype(np.int64)
    dst = np.concatenate([l_dst, r_dst]).astype(np.int64)
    kind = np.concatenate([np.full(len(l_src), _LAUNCH, np.int64), r_kind]).astype(np.int64)
    ts, end = trace.events["ts"], timeline_index(trace).end
    lo = np.minimum(ts[src], ts[dst])
    hi = np.maximum(end[src], end[dst])
    order = np.argsort(lo, kind="stable")
    return FlowPairs(src[order], dst[order], kind[order], lo[order], hi[order])


def _launch_pairs(trace) -> tuple[np.ndarray, np.ndarray]:
    rt, op = launch(trace), launching_op(trace)
    dst = np.flatnonzero((rt >= 0) | (op >= 0))
    return np.where(rt[dst] >= 0, rt[dst], op[dst]), dst


def _recorded_pairs(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, kind code) of the trace's recorded flows other than ac2g."""
    src, dst, fwdbwd = recorded_flows(trace)
    return src, dst, np.where(fwdbwd, _FWDBWD, _FLOW).astype(np.int64)


def recorded_flow_links(trace, i: int) -> list[tuple[int, str]]:
    """(event row, relation) of the recorded flows (not launches) that start or end at i."""
    f = flow_pairs(trace)
    rec = f.kind != _LAUNCH
    out = [(int(j), _FLOW_RELATIONS[int(k)][0]) for j, k in zip(f.dst[rec & (f.src == i)][:100].tolist(),
                                                               f.kind[rec & (f.src == i)][:100].tolist())]
    out += [(int(j), _FLOW_RELATIONS[int(k)][1]) for j, k in zip(f.src[rec & (f.dst == i)][:100].tolist(),
                                                                f.kind[rec & (f.dst == i)][:100].tolist())]
    return out


@dataclass
class FlowIndex:
    """The flows of ``flow_pairs`` (rows of it: its positions, in ``lo`` order) indexed so a
    window finds its flows without reading the flows before it.

    A flow touching [a, b) either starts (``lo``) inside it, a range of positions, or
    straddles a: it starts before a and reaches past it, ``reach`` (the latest endpoint
    end, a zero-length endpoint counting as 1 ns) - ``lo`` at most its class's longest.
    Classes: that extent in powers of 4 ns; per class the flows sorted by lo.  A key holds
    lo's rank among the flows' lo (its first position in ``lo`` order), not lo in ns: any
    span fits (a flow at ts 0 among times of 2024)."""

    class_key: np.ndarray    # sorted: class << shift | the rank of lo
    class_pos: np.ndarray    # the flow position of each class_key
    class_start: np.ndarray  # per class, where its keys start (classes + 1 entries)
    class_max: np.ndarray    # per class, its longest extent (reach - lo)
    shift: int               # bits of the rank in class_key
    lo0: int                 # the earliest lo
    src_order: np.ndarray    # positions sorted by source event row
    src_sorted: np.ndarray   # their source rows
    dst_order: np.ndarray
    dst_sorted: np.ndarray


@per_trace
def flow_index(trace) -> FlowIndex:
    f = flow_pairs(trace)
    ts, end = trace.events["ts"], timeline_index(trace).end
    reach = np.maximum(np.maximum(end[f.src], ts[f.src] + 1), np.maximum(end[f.dst], ts[f.dst] + 1))
    ext = np.maximum(reach - f.lo, 1)
    cls = (np.log2(ext.astype(np.float64)) / 2).astype(np.int64)  # about log4: any split works (class_max is exact)
    n_cls = int(cls.max()) + 1 if len(cls) else 1
    lo0 = int(f.lo[0]) if len(f.lo) else 0
    rank = np.searchsorted(f.lo, f.lo, side="left")  # f.lo is sorted
    shift = (len(f.lo) + 1).bit_length() + 1
    key = (cls << shift) + rank
    order = np.argsort(key, kind="stable")
    key = key[order]
    class_start = np.searchsorted(key, np.arange(n_cls + 1, dtype=np.int64) << shift)
    class_max = np.zeros(n_cls, np.int64)
    nonempty = np.flatnonzero(np.diff(class_start) > 0)
    if len(nonempty):
        class_max[nonempty] = np.maximum.reduceat(ext[order], class_start[nonempty])
    so, do = np.argsort(f.src, kind="stable"), np.argsort(f.dst, kind="stable")
    return FlowIndex(key, order.astype(np.int64), class_start.astype(np.int64), class_max, shift, lo0,
                     so, f.src[so], do, f.dst[do])


def window_flows(trace, abs_a: int, abs_b: int, wide: np.ndarray, max_flows: int) -> tuple[list[dict], int]:
    """The flows with an endpoint event overlapping [abs_a, abs_b) and how many there are;
    when there are more than max_flows, at most max_flows of those with an end drawn as
    an event (``wide``), both ends drawn first.
    Reads the flows starting in the window only as far as it sends them, the flows
    straddling its start through ``flow_index`` and the drawn events' flows by row."""
    f = flow_pairs(trace)
    fi = flow_index(trace)
    ts, end = trace.events["ts"], timeline_index(trace).end
    a, b = (min(max(int(x), -TIME_LIMIT_NS), TIME_LIMIT_NS) for x in (abs_a, abs_b))  # no flow lies beyond
    i_a = int(np.searchsorted(f.lo, a, side="left"))
    i_b = int(np.searchsorted(f.lo, b, side="left"))
    # the flows starting before the window that reach into it
    classes = np.arange(len(fi.class_max), dtype=np.int64)
    lo_keys = (classes << fi.shift) + np.searchsorted(f.lo, a - fi.class_max, side="left")
    hi_keys = (classes << fi.shift) + i_a
    pos = fi.class_pos[_ranges(np.searchsorted(fi.class_key, lo_keys, side="left"),
                               np.searchsorted(fi.class_key, hi_keys, side="left"))]
    src, dst = f.src[pos], f.dst[pos]
    before = np.sort(pos[_overlaps(ts[src], end[src], a, b) | _overlaps(ts[dst], end[dst], a, b)])
    total = len(before) + (i_b - i_a)
    if total <= max_flows:
        return _flow_dicts(trace, f, np.concatenate([before, np.arange(i_a, i_b, dtype=np.int64)])), total
    # the drawn events' flows: 2 = both ends drawn, 1 = one
    wide = np.asarray(wide, np.int64)
    hits = np.concatenate([
        fi.src_order[_ranges(np.searchsorted(fi.src_sorted, wide, side="left"),
                             np.searchsorted(fi.src_sorted, wide, side="right"))],
        fi.dst_order[_ranges(np.searchsorted(fi.dst_sorted, wide, side="left"),
                             np.searchsorted(fi.dst_sorted, wide, side="right"))]])
    drawn, times = np.unique(hits, return_counts=True)
    two, one = drawn[times >= 2], drawn[times == 1]
    # Only flows with an end drawn as an event: at a zoom with more flows than are sent,
    # an arrow between two busy blocks shows nothing one could click (and the first
    # thousands of them, all near the window's start, made most of a whole-trace reply).
    sel = two[:max_flows] if len(two) >= max_flows else np.concatenate([two, one[:max_flows - len(two)]])
    return _flow_dicts(trace, f, np.sort(sel)), total


def _overlaps(ts: np.ndarray, end: np.ndarray, a: int, b: int) -> np.ndarray:
    """[ts, end) meets [a, b); a zero-length event counts at its instant."""
    return (ts < b) & (np.maximum(end, ts + 1) > a)


def _flow_dicts(trace, f: FlowPairs, sel: np.ndarray) -> list[dict]:
    idx = timeline_index(trace)
    t0 = origin(trace)
    ts = trace.events["ts"]
    s, d = f.src[sel], f.dst[sel]
    cols = zip(f.kind[sel].tolist(), s.tolist(), (ts[s] - t0).tolist(), idx.track[s].tolist(), idx.depth[s].tolist(),
               d.tolist(), (ts[d] - t0).tolist(), idx.track[d].tolist(), idx.depth[d].tolist())
    return [{"kind": FLOW_KINDS[k], "from": a, "from_ts_ns": at, "from_track": atr, "from_depth": ad,
             "to": b, "to_ts_ns": bt, "to_track": btr, "to_depth": bd}
            for k, a, at, atr, ad, b, bt, btr, bd in cols]


# -- device utilization -------------------------------------------------------------------------
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


# -- search ----------------------------------------------------------------------------------
@per_trace
def event_names(trace) -> np.ndarray:
    """The string ids used as event names: a search scans the distinct names (thousands)
    instead of the events (millions)."""
    return used_ids(trace.events["name"], len(trace.strings))


def search(trace, q: str, limit: int, offset: int = 0) -> dict:
    """Events whose name contains q (case-insensitive), in time order: the count, and
    ``limit`` of them from ``offset`` with what the timeline needs to jump to each."""
    ev = trace.events
    ids = event_names(trace)
    # case-insensitive by the pattern, not by a lower-cased copy of every name (kept, that
    # was one more string per distinct name: 600 MB for 10 M names)
    found = re.compile(re.escape(q), re.IGNORECASE).search
    names = trace.strings[ids].tolist() if len(ids) else []
    hit = ids[np.fromiter(map(bool, map(found, names)), dtype=bool, count=len(names))] if len(ids) else ids
    rows = np.flatnonzero(np.isin(ev["name"], hit)) if len(hit) else np.zeros(0, np.int64)
    page = rows[offset:offset + limit]
    idx = timeline_index(trace)
    t0 = origin(trace)
    names = shown_all(trace.str(ev["name"][page])) if len(page) else []
    matches = [{"i": i, "ts_ns": t, "dur_ns": d, "track": tr, "depth": dp, "name": nm}
               for i, t, d, tr, dp, nm in zip(page.tolist(), (ev["ts"][page] - t0).tolist(), ev["dur"][page].tolist(),
                                              idx.track[page].tolist(), idx.depth[page].tolist(), names)]
    return {"q": q, "count": len(rows), "names": len(hit), "offset": offset, "limit": limit,
            "matches": matches, "truncated": offset + len(matches) < len(rows)}
