"""The allocator's state (segments and their blocks) at the end, or at a point of the history.

Why: memory_viz's "Allocator State History" (MemoryView's ``simulate_memory`` in
torch/utils/viz/MemoryViz.js) shows the segments and blocks at any entry by undoing, from
the snapshot's segments, every entry after it. Here the same is done over columns:

- blocks: the allocations live at that position (replay.DeviceHistory's elements with
  ``start <= pos < end``; pending where their free_requested came before), the gaps
  between them inside a segment being inactive blocks. An allocation known only from the
  history has no rounded size: its block is its requested size, as memory_viz draws it.
- segments: the address space is cut at every boundary (the segments at the end, the
  segment entries after the position); an interval was reserved at the position when the
  first segment entry after it that covers it frees / unmaps it, or, with none, when a
  segment at the end covers it. Reserved intervals then join into segments: an expandable
  segment's mapped ranges of one stream merge (as memory_viz's ``map_segment`` merges
  them), any other segment is the range one cudaMalloc gave.

The per-segment accounting is ``_memory_viz.segsum``'s: allocated = requested bytes of
``active_allocated`` blocks, free internal = their size minus that, free external = every
other block; plus ``active`` (``calc_active``: the active_allocated blocks' sizes), the
largest inactive block and fragmentation = 1 - largest inactive block / inactive bytes.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.decode.snapshot_schema import MISSING
from tb_profiler.snapshot.replay import (
    A_SEG_ALLOC,
    A_SEG_FREE,
    A_SEG_MAP,
    A_SEG_UNMAP,
    S_ALLOCATED,
    S_INACTIVE,
    S_PENDING,
    DeviceHistory,
    requested,
)

_SEG_ACTIONS = (A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP)
_NONE = np.iinfo(np.int64).max

__all__ = ["account", "end_state", "state_at"]


def _nz(a: np.ndarray) -> np.ndarray:
    return np.where(a == MISSING, 0, a)


def end_state(cols, device: int | None) -> tuple[dict, dict]:
    """The snapshot's own segments (of one device, or all) and their blocks, as arrays;
    a block's ``segment`` is its segment's index in the returned segments."""
    segs, blocks = cols.tables["segments"], cols.tables["blocks"]
    rows = np.arange(len(segs["address"])) if device is None else np.flatnonzero(segs["device"] == device)
    s = {k: segs[k][rows] for k in ("device", "address", "total_size", "stream", "segment_type", "pool_a",
                                    "pool_b", "is_expandable", "stack")}
    local = np.full(len(segs["address"]), -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    bseg = local[blocks["segment"].astype(np.int64)] if len(blocks["segment"]) else np.zeros(0, np.int64)
    b = np.flatnonzero(bseg >= 0)
    seg = bseg[b]
    out_b = {"segment": seg, "addr": s["address"][seg] + blocks["offset"][b], "size": blocks["size"][b],
             "requested": requested(blocks)[b] if len(b) else blocks["size"][b], "state": blocks["state"][b],
             "stack": blocks["stack"][b]}
    return s, out_b


def account(segs: dict, blocks: dict) -> dict[str, np.ndarray]:
    """Per segment: allocated, active, free external / internal, largest inactive block,
    inactive bytes, fragmentation (see the module docstring)."""
    m = len(segs["address"])
    seg = blocks["segment"]
    ok = seg >= 0
    seg, size, req, state = seg[ok], _nz(blocks["size"][ok]), _nz(blocks["requested"][ok]), blocks["state"][ok]
    alloc = state == S_ALLOCATED

    def tot(weights):
        return np.bincount(seg, weights=weights.astype(np.float64), minlength=m).astype(np.int64)

    allocated, active = tot(np.where(alloc, req, 0)), tot(np.where(alloc, size, 0))
    inactive = state == S_INACTIVE
    largest = np.zeros(m, dtype=np.int64)
    np.maximum.at(largest, seg[inactive], size[inactive])
    inactive_bytes = tot(np.where(inactive, size, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        frag = np.where(inactive_bytes > 0, 1.0 - largest / np.maximum(inactive_bytes, 1), 0.0)
    return {"allocated_bytes": allocated, "active_bytes": active, "free_external_bytes": tot(np.where(alloc, 0, size)),
            "free_internal_bytes": active - allocated, "largest_free_block": largest,
            "inactive_bytes": inactive_bytes, "fragmentation": frag}


def _expand(lo: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """concat(arange(lo[i], lo[i] + cnt[i]) for i), without a loop."""
    total = int(cnt.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(lo, cnt)


def _segments_at(cols, h: DeviceHistory, pos: int, end: dict) -> dict:
    """The segments of h's device at position pos (module docstring)."""
    hist = cols.tables["history"]
    r = h.rows
    act = hist["action"][r]
    evp = np.flatnonzero(np.isin(act, _SEG_ACTIONS))
    evp = evp[evp > pos]
    if not len(evp):
        return end
    e_act, e_lo, e_stream = act[evp], hist["addr"][r][evp], hist["stream"][r][evp]
    e_hi = e_lo + _nz(hist["size"][r][evp])
    s_lo = end["address"]
    s_hi = s_lo + _nz(end["total_size"])
    bounds = np.unique(np.concatenate([e_lo, e_hi, s_lo, s_hi]))
    m = len(bounds) - 1
    first = np.full(max(m, 0), _NONE, dtype=np.int64)
    lo, hi = np.searchsorted(bounds, e_lo), np.searchsorted(bounds, e_hi)
    cnt = np.maximum(hi - lo, 0)
    np.minimum.at(first, _expand(lo, cnt), np.repeat(np.arange(len(evp)), cnt))
    owner = np.full(max(m, 0), -1, dtype=np.int64)
    lo, hi = np.searchsorted(bounds, s_lo), np.searchsorted(bounds, s_hi)
    cnt = np.maximum(hi - lo, 0)
    owner[_expand(lo, cnt)] = np.repeat(np.arange(len(s_lo)), cnt)

    has_ev = first != _NONE
    fe = np.where(has_ev, first, 0)
    fa = e_act[fe] if len(evp) else fe
    own = np.maximum(owner, 0)
    end_exp = end["is_expandable"][own] == 1 if len(s_lo) else np.zeros(m, bool)
    reserved = np.where(has_ev, np.isin(fa, (A_SEG_FREE, A_SEG_UNMAP)), owner >= 0)
    expandable = np.where(has_ev, fa == A_SEG_UNMAP, (owner >= 0) & end_exp)
    stream = np.where(has_ev, e_stream[fe], end["stream"][own] if len(s_lo) else 0)
    kind = np.where(expandable, 1, np.where(has_ev, 2, 3))
    kid = np.where(expandable, stream, np.where(has_ev, fe, owner))

    ri = np.flatnonzero(reserved)
    if not len(ri):
        return {k: v[:0] for k, v in end.items()}
    brk = np.ones(len(ri), bool)
    brk[1:] = (ri[1:] != ri[:-1] + 1) | (kind[ri][1:] != kind[ri][:-1]) | (kid[ri][1:] != kid[ri][:-1])
    starts = np.flatnonzero(brk)
    widths = bounds[ri + 1] - bounds[ri]
    run_owner = np.maximum.reduceat(owner[ri], starts)
    ro = np.maximum(run_owner, 0)
    known = run_owner >= 0

    def from_end(col: str, default) -> np.ndarray:
        return np.where(known, end[col][ro], default) if len(s_lo) else np.full(len(starts), default)

    first_i = ri[starts]
    exp_run = expandable[first_i]
    return {"device": np.full(len(starts), h.device, dtype=np.int32), "address": bounds[first_i],
            "total_size": np.add.reduceat(widths, starts), "stream": stream[first_i],
            "segment_type": from_end("segment_type", -1).astype(np.int32),
            "pool_a": from_end("pool_a", MISSING), "pool_b": from_end("pool_b", MISSING),
            "is_expandable": np.where(exp_run, 1, from_end("is_expandable", 0)).astype(np.int8),
            "stack": np.where(kind[first_i] == 3, from_end("stack", -1), -1).astype(np.int32)}


def _live_blocks(h: DeviceHistory, pos: int) -> dict:
    live = (h.start <= pos) & (h.end > pos)
    state = np.where(h.pending_from[live] <= pos, S_PENDING, S_ALLOCATED).astype(np.int8)
    return {"addr": h.addr[live], "size": _nz(h.block_size[live]), "requested": _nz(h.size[live]),
            "state": state, "stack": h.stack[live]}


def _place(segs: dict, live: dict) -> dict:
    """Live blocks put in their segments (sorted by address) and the gaps between them
    as inactive blocks; blocks outside every segment keep segment -1."""
    addr0, size0 = segs["address"], _nz(segs["total_size"])
    order = np.argsort(addr0, kind="stable")
    sa, se = addr0[order], addr0[order] + size0[order]
    i = np.searchsorted(sa, live["addr"], side="right") - 1
    ic = np.maximum(i, 0)
    inside = (i >= 0) & (live["addr"] < se[ic]) if len(sa) else np.zeros(len(i), bool)
    seg = np.where(inside, order[ic] if len(sa) else -1, -1).astype(np.int64)
    b_order = np.lexsort((live["addr"], seg))
    seg_s, a_s = seg[b_order], live["addr"][b_order]
    end_s = a_s + live["size"][b_order]
    ins = seg_s >= 0
    seg_i, a_i, e_i = seg_s[ins], a_s[ins], end_s[ins]
    same = np.zeros(len(seg_i), bool)
    same[1:] = seg_i[1:] == seg_i[:-1]
    prev_end = np.where(same, np.concatenate([[0], e_i[:-1]]), addr0[seg_i] if len(seg_i) else 0)
    gap_lo, gap_sz, gap_seg = prev_end, a_i - prev_end, seg_i
    last = np.ones(len(seg_i), bool)
    last[:-1] = seg_i[:-1] != seg_i[1:]
    tail_lo = e_i[last]
    tail_seg = seg_i[last]
    tail_sz = addr0[tail_seg] + size0[tail_seg] - tail_lo
    empty = np.setdiff1d(np.arange(len(addr0)), seg_i)
    g_lo = np.concatenate([gap_lo, tail_lo, addr0[empty]])
    g_sz = np.concatenate([gap_sz, tail_sz, size0[empty]])
    g_seg = np.concatenate([gap_seg, tail_seg, empty])
    g = g_sz > 0
    n_g = int(g.sum())
    out = {"segment": np.concatenate([seg, g_seg[g]]), "addr": np.concatenate([live["addr"], g_lo[g]]),
           "size": np.concatenate([live["size"], g_sz[g]]),
           "requested": np.concatenate([live["requested"], np.zeros(n_g, np.int64)]),
           "state": np.concatenate([live["state"], np.full(n_g, S_INACTIVE, np.int8)]),
           "stack": np.concatenate([live["stack"], np.full(n_g, -1, np.int32)])}
    o = np.lexsort((out["addr"], out["segment"]))
    return {k: v[o] for k, v in out.items()}


def state_at(cols, h: DeviceHistory, pos: int) -> tuple[dict, dict]:
    """(segments, blocks) of h's device after position pos; the snapshot's own at the end."""
    end_segs, end_blocks = end_state(cols, h.device)
    if pos >= h.n - 1:
        return end_segs, end_blocks
    segs = _segments_at(cols, h, pos, end_segs)
    return segs, _place(segs, _live_blocks(h, pos))
