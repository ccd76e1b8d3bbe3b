"""The history of one device replayed over the columns: its allocations and its curves.

Why this shape: memory_viz's "Active Memory Timeline" (``process_alloc_data`` in
torch/utils/viz/MemoryViz.js) does not start from zero: an allocation whose ``alloc``
entry fell out of the history ring (or came before ``_record_memory_history``) shows up
either as a ``free_completed`` with no ``alloc`` before it, or as an ``active_allocated``
block of the snapshot's segments that no live ``alloc`` of the history accounts for.
Both were live when the history starts. Every other allocation is an ``alloc`` entry
paired with the next ``free_completed`` of the same address (``free_requested`` only marks
it pending). The allocated bytes after each entry are then that baseline plus a
cumulative sum of +size at each alloc and -size at each free: the curve memory_viz
draws, and ``_memory_viz.trace``'s running count (alloc +size, free_completed -size)
shifted by the baseline. The reserved bytes are replayed backwards from the segments at
the end (segment_alloc / segment_map add, segment_free / segment_unmap remove).

Everything is numpy over the device's rows: the pairing is a sort by (address, entry),
each free matched with the alloc right before it at the same address.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.decode.snapshot_schema import ACTIONS, BLOCK_STATES, MISSING

A_ALLOC, A_FREE_REQ, A_FREE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_SNAPSHOT, A_OOM = range(len(ACTIONS))
S_ALLOCATED, S_PENDING, S_INACTIVE = range(len(BLOCK_STATES))

__all__ = ["DeviceHistory", "device_history", "end_blocks", "position_at", "requested"]


@dataclass
class DeviceHistory:
    """One device's history: its rows, times, allocations ("elements") and curves.

    Positions are entry indexes within the device's history (0..n-1); -1 is "before the
    first entry". An element is live at position p when ``start <= p < end``."""

    device: int
    rows: np.ndarray          # global history rows, in order
    time_us: np.ndarray       # per position; filled forward where missing; positions when no times
    has_time: bool
    # elements (allocations)
    addr: np.ndarray
    size: np.ndarray          # requested bytes (alloc entry's size, block's requested_size)
    block_size: np.ndarray    # the block's size where known (end-state blocks), else size
    stream: np.ndarray
    stack: np.ndarray
    start: np.ndarray         # position of its alloc; -1: allocated before the history
    end: np.ndarray           # position of its free_completed; n: live at the end
    pending_from: np.ndarray  # position of its free_requested (pending from there); n: never
    in_timeline: np.ndarray   # bool: counted by the timeline (not a block pending at the end)
    # curves, value after each position
    allocated: np.ndarray
    reserved: np.ndarray
    base_allocated: int
    base_reserved: int

    @property
    def n(self) -> int:
        return len(self.rows)

    def allocated_at(self, pos: int) -> int:
        return int(self.base_allocated if pos < 0 else self.allocated[min(pos, self.n - 1)])

    def reserved_at(self, pos: int) -> int:
        return int(self.base_reserved if pos < 0 else self.reserved[min(pos, self.n - 1)])

    def peak(self) -> tuple[int, int]:
        """(position, allocated bytes) of the highest point, -1 when nothing beats the start."""
        if self.n == 0 or int(self.allocated.max()) <= self.base_allocated:
            return -1, self.base_allocated
        p = int(np.argmax(self.allocated))
        return p, int(self.allocated[p])

    def time_of(self, pos: int) -> int | None:
        if not self.has_time or self.n == 0:
            return None
        return int(self.time_us[min(max(pos, 0), self.n - 1)])


def requested(blocks: dict) -> np.ndarray:
    """A block's requested bytes: ``requested_size``, its ``size`` where absent (as
    ``_memory_viz._block_extra`` reads legacy blocks)."""
    req = blocks["requested_size"]
    return np.where(req == MISSING, blocks["size"], req)


def end_blocks(cols, device: int | None) -> dict[str, np.ndarray]:
    """The snapshot's own blocks (of one device, or all): global block rows with their
    address (segment address + offset), size, requested bytes, state, stack, stream."""
    segs, blocks = cols.tables["segments"], cols.tables["blocks"]
    seg = blocks["segment"].astype(np.int64)
    rows = np.arange(len(seg)) if device is None else np.flatnonzero(segs["device"][seg] == device)
    seg = seg[rows]
    return {"row": rows, "segment": seg, "addr": segs["address"][seg] + blocks["offset"][rows],
            "size": blocks["size"][rows], "requested": requested(blocks)[rows] if len(rows) else blocks["size"][rows],
            "state": blocks["state"][rows], "stack": blocks["stack"][rows], "stream": segs["stream"][seg]}


def _times(t: np.ndarray) -> tuple[np.ndarray, bool]:
    """Times filled forward (backward before the first) where missing; positions if none."""
    valid = t != MISSING
    if not valid.any():
        return np.arange(len(t), dtype=np.int64), False
    idx = np.where(valid, np.arange(len(t)), 0)
    np.maximum.accumulate(idx, out=idx)
    first = int(np.argmax(valid))
    idx[:first] = first
    return t[idx], True


def position_at(h: DeviceHistory, time_us: int) -> int:
    """The last position at or before time_us (entries in the ring are in time order;
    out-of-order ones are read as the running maximum), -1 before the first."""
    if h.n == 0:
        return -1
    mono = np.maximum.accumulate(h.time_us)
    return int(np.searchsorted(mono, int(time_us), side="right")) - 1


def _dense_key(addr_a: np.ndarray, pos_a: np.ndarray, addr_b: np.ndarray, pos_b: np.ndarray, n: int):
    """Sortable int64 keys (address rank, position) for two sets of (address, position)."""
    _, inv = np.unique(np.concatenate([addr_a, addr_b]), return_inverse=True)
    key = inv.astype(np.int64) * (n + 2) + np.concatenate([pos_a, pos_b]) + 1
    return key[:len(addr_a)], key[len(addr_a):]


def _pair(act: np.ndarray, addr: np.ndarray, n: int):
    """Allocs paired with frees: (alloc positions, their end), (unmatched free positions),
    addresses whose last alloc/free is an alloc (live at the end)."""
    a_pos, f_pos = np.flatnonzero(act == A_ALLOC), np.flatnonzero(act == A_FREE)
    pos = np.concatenate([a_pos, f_pos])
    typ = np.concatenate([np.zeros(len(a_pos), np.int8), np.ones(len(f_pos), np.int8)])
    ad = addr[pos]
    order = np.lexsort((pos, ad))
    ps, ts, asr = pos[order], typ[order], ad[order]
    prev_alloc = np.zeros(len(ps), bool)
    if len(ps) > 1:
        prev_alloc[1:] = (asr[1:] == asr[:-1]) & (ts[:-1] == 0)
    matched = np.flatnonzero((ts == 1) & prev_alloc)
    end = np.full(len(ps), n, dtype=np.int64)
    end[matched - 1] = ps[matched]
    is_alloc = ts == 0
    last = np.ones(len(ps), bool)
    if len(ps) > 1:
        last[:-1] = asr[:-1] != asr[1:]
    live_addrs = asr[last & is_alloc]
    return ps[is_alloc], end[is_alloc], ps[(ts == 1) & ~prev_alloc], live_addrs


def _pending(act, addr, el_addr, el_start, el_end, n) -> np.ndarray:
    """Position of the last free_requested at an element's address before its end and
    after its start (n when there is none: never pending)."""
    fr = np.flatnonzero(act == A_FREE_REQ)
    out = np.full(len(el_addr), n, dtype=np.int64)
    if not len(fr) or not len(el_addr):
        return out
    fr_key, q_key = _dense_key(addr[fr], fr, el_addr, el_end, n)
    order = np.argsort(fr_key, kind="stable")
    fr_key, fr_pos = fr_key[order], fr[order]
    i = np.searchsorted(fr_key, q_key, side="left") - 1
    ok = i >= 0
    ic = np.clip(i, 0, None)
    # same address: the key's address rank part equal; after the start
    same = ok & ((fr_key[ic] // (n + 2)) == (q_key // (n + 2))) & (fr_pos[ic] > el_start)
    out[same] = fr_pos[ic][same]
    return out


def device_history(cols, device: int) -> DeviceHistory:
    """Replay one device's history (see the module docstring)."""
    hist = cols.tables["history"]
    rows = np.flatnonzero(hist["device"] == device)
    n = len(rows)
    act, addr, size = hist["action"][rows], hist["addr"][rows], hist["size"][rows]
    stream, stack = hist["stream"][rows], hist["stack"][rows]
    times, has_time = _times(hist["time_us"][rows])
    a_pos, a_end, uf_pos, live_addrs = _pair(act, addr, n)

    blk = end_blocks(cols, device)
    active = (blk["state"] == S_ALLOCATED) | (blk["state"] == S_PENDING)
    keep = active & ~np.isin(blk["addr"], live_addrs)
    k = np.flatnonzero(keep)
    nb = len(k)
    el_addr = np.concatenate([addr[a_pos], addr[uf_pos], blk["addr"][k]])
    el_size = np.concatenate([size[a_pos], size[uf_pos], blk["requested"][k]])
    el_bsize = np.concatenate([size[a_pos], size[uf_pos], blk["size"][k]])
    el_stream = np.concatenate([stream[a_pos], stream[uf_pos], blk["stream"][k]])
    el_stack = np.concatenate([stack[a_pos], stack[uf_pos], blk["stack"][k]]).astype(np.int32)
    el_start = np.concatenate([a_pos, np.full(len(uf_pos) + nb, -1, np.int64)]).astype(np.int64)
    el_end = np.concatenate([a_end, uf_pos, np.full(nb, n, np.int64)]).astype(np.int64)
    in_tl = np.concatenate([np.ones(len(a_pos) + len(uf_pos), bool), blk["state"][k] == S_ALLOCATED])
    pending = _pending(act, addr, el_addr, el_start, el_end, n)
    end_pending = np.flatnonzero(~in_tl)  # pending at the snapshot's end since before the history
    pending[end_pending] = np.minimum(pending[end_pending], -1)

    sizes = np.where(el_size == MISSING, 0, el_size).astype(np.int64)
    delta = np.zeros(n, dtype=np.int64)
    s = (el_start >= 0) & in_tl
    delta[el_start[s]] += sizes[s]
    e = (el_end < n) & in_tl
    delta[el_end[e]] -= sizes[e]
    base = int(sizes[(el_start < 0) & in_tl].sum())
    allocated = base + np.cumsum(delta)

    seg = cols.tables["segments"]
    seg_size = np.where(size == MISSING, 0, size)
    sd = np.where(np.isin(act, (A_SEG_ALLOC, A_SEG_MAP)), seg_size, 0) - np.where(
        np.isin(act, (A_SEG_FREE, A_SEG_UNMAP)), seg_size, 0)
    mine = seg["device"] == device
    reserved_end = int(np.where(seg["total_size"][mine] == MISSING, 0, seg["total_size"][mine]).sum())
    total = int(sd.sum())
    reserved = reserved_end - total + np.cumsum(sd)
    return DeviceHistory(device, rows, times, has_time, el_addr, el_size, el_bsize, el_stream, el_stack,
                         el_start, el_end, pending, in_tl, allocated, reserved, base, reserved_end - total)
