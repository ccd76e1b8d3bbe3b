"""The trace view's flows (arrows): CPU launch -> device event from the correlation links
of ``analysis.links``, forward -> backward and other recorded flows from the trace's
flows table; and the flows touching a window, bounded.

Why a module of its own: flows have their own index (``flow_index``: classes of extent,
so a window finds the flows straddling its start without reading those before it), and
an event's detail lists its recorded flows (``recorded_flow_links``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.links import launch, launching_op, recorded_flows
from tb_profiler.analysis.memo import per_trace
from tb_profiler.decode.schema import TIME_LIMIT_NS
from tb_profiler.plugin.timeline_lod import concat_ranges as _ranges
from tb_profiler.plugin.timeline_tracks import origin, timeline_index

# Flow kinds as the API names them (index = the code stored per flow).
FLOW_KINDS: tuple[str, ...] = ("launch", "fwdbwd", "flow")
_LAUNCH, _FWDBWD, _FLOW = 0, 1, 2
# A flow's relation, seen from its source and from its destination (trace/event links).
_FLOW_RELATIONS = {_FWDBWD: ("backward", "forward"), _FLOW: ("flow_to", "flow_from")}


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


__all__ = ["FLOW_KINDS", "FlowIndex", "FlowPairs", "flow_index", "flow_pairs", "recorded_flow_links", "window_flows"]
