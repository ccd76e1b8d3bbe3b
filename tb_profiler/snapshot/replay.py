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


def _running_max(x: np.ndarray) -> np.ndarray:
    """x[i] -> max(x[:i]) (-1 for none): the last marked index strictly before each one."""
    out = np.full(len(x), -1, dtype=np.int64)
    if len(x) > 1:
        out[1:] = np.maximum.accumulate(x[:-1])
    return out


def _pair(act: np.ndarray, addr: np.ndarray, n: int):
    """One stable sort of the alloc / free_requested / free_completed entries by address
    (entries in order within an address). Each free_completed is matched with the alloc
    or free right before it at its address (free_requested skipped): an alloc there makes
    a pair, anything else leaves the free unmatched (allocated before the history). Returns
    (alloc positions, their end, their pending-from), (unmatched free positions, their
    pending-from), and the addresses whose last alloc/free is an alloc (live at the end).
    Pending-from: the last free_requested between the two (n: none)."""
    ev = np.flatnonzero((act == A_ALLOC) | (act == A_FREE) | (act == A_FREE_REQ))
    order = np.argsort(addr[ev], kind="stable")
    ps = ev[order]
    ty, asr = act[ps], addr[ps]
    m = len(ps)
    idx = np.arange(m)
    new_group = np.ones(m, bool)
    new_group[1:] = asr[1:] != asr[:-1]
    gs = np.maximum.accumulate(np.where(new_group, idx, 0)) if m else idx
    is_fr = ty == A_FREE_REQ
    prev_af = _running_max(np.where(is_fr, -1, idx))           # the previous alloc/free
    prev_af = np.where(prev_af >= gs, prev_af, -1)               # ... at the same address
    prev_fr = _running_max(np.where(is_fr, idx, -1))
    is_free, is_alloc = ty == A_FREE, ty == A_ALLOC
    matched = is_free & (prev_af >= 0) & (ty[np.maximum(prev_af, 0)] == A_ALLOC)
    end = np.full(m, n, dtype=np.int64)
    mi = np.flatnonzero(matched)
    end[prev_af[mi]] = ps[mi]
    # pending: a free's last free_requested after the previous alloc/free at its address
    fr_before = np.where((prev_fr > prev_af) & (prev_fr >= gs), prev_fr, -1)
    pend_sorted = np.where(fr_before >= 0, ps[np.maximum(fr_before, 0)], n)
    pending = np.full(m, n, dtype=np.int64)
    pending[prev_af[mi]] = pend_sorted[mi]
    # the last alloc/free of each address, and the last free_requested after it
    last_in_group = np.ones(m, bool)
    last_in_group[:-1] = new_group[1:]
    ge_idx = np.flatnonzero(last_in_group)
    last_af = np.where(is_fr[ge_idx], prev_af[ge_idx], ge_idx)
    live = last_af >= 0
    live &= is_alloc[np.maximum(last_af, 0)]
    live_idx = last_af[live]
    fr_after = np.where(is_fr[ge_idx], ge_idx, -1)[live]  # the address's last entry when it is one
    pending[live_idx] = np.where(fr_after > live_idx, ps[np.maximum(fr_after, 0)], n)
    unmatched = is_free & ~matched
    return (ps[is_alloc], end[is_alloc], pending[is_alloc], ps[unmatched], pend_sorted[unmatched],
            asr[live_idx])


def device_history(cols, device: int) -> DeviceHistory:
    """Replay one device's history (see the module docstring)."""
    hist = cols.tables["history"]
    rows = np.flatnonzero(hist["device"] == device)
    n = len(rows)
    # the schema keeps a device's rows together: slices (views) then, not copies
    sel = slice(int(rows[0]), int(rows[-1]) + 1) if n and int(rows[-1]) - int(rows[0]) + 1 == n else rows
    act, addr, size = hist["action"][sel], hist["addr"][sel], hist["size"][sel]
    stream, stack = hist["stream"][sel], hist["stack"][sel]
    times, has_time = _times(hist["time_us"][sel])
    a_pos, a_end, a_pend, uf_pos, uf_pend, live_addrs = _pair(act, addr, n)

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
    # an end block pending since before the history: pending from -1; active_allocated: never
    pending = np.concatenate([a_pend, uf_pend, np.where(blk["state"][k] == S_PENDING, -1, n)]).astype(np.int64)

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
