"""Interval arithmetic on half-open [start, end) int64 ns intervals, without loops.

Step breakdown, GPU utilization, idle gaps and the distributed overlap all ask the same
questions of sets of intervals: their union, how much of a window they cover, where two
sets intersect or differ. Sets are kept merged (sorted, disjoint) as (starts, ends).
"""
from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted disjoint ones (touching ones join).

    A new piece begins where an interval starts after every earlier one has ended: the
    running maximum of ends, shifted by one, tells that without a loop.
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def covered_before(ms: np.ndarray, me: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For merged intervals (ms, me): covered length in (-inf, t) for each t."""
    t = np.asarray(t, dtype=np.int64)
    if not len(ms):
        return np.zeros(t.shape, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(me - ms)])
    idx = np.searchsorted(ms, t, side="right") - 1
    safe = np.maximum(idx, 0)
    part = np.clip(t - ms[safe], 0, me[safe] - ms[safe])
    return np.where(idx >= 0, cum[safe] + part, 0)


def covered_in(ms: np.ndarray, me: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Covered length of merged intervals inside each window [lo, hi)."""
    hi = np.asarray(hi, dtype=np.int64)
    n = hi.size
    both = covered_before(ms, me, np.concatenate([hi.reshape(-1), np.asarray(lo, dtype=np.int64).reshape(-1)]))
    return (both[:n] - both[n:]).reshape(hi.shape)  # one running sum and one search for both edges


def _combine(a: tuple, b: tuple, keep) -> tuple[np.ndarray, np.ndarray]:
    """Set operation on two interval sets (each from merge_intervals): keep(in_a, in_b) -> bool
    arrays says which elementary pieces to keep (& intersection, a & ~b difference)."""
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    if not len(pts):
        return _EMPTY, _EMPTY
    na, nb = len(a[0]), len(b[0])
    da = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * nb)]).astype(np.int64)
    db = np.concatenate([np.zeros(2 * na), np.ones(nb), -np.ones(nb)]).astype(np.int64)
    u, inv = np.unique(pts, return_inverse=True)
    ca = np.cumsum(np.bincount(inv, weights=da, minlength=len(u)))[:-1] > 0
    cb = np.cumsum(np.bincount(inv, weights=db, minlength=len(u)))[:-1] > 0
    piece = keep(ca, cb)
    return merge_intervals(u[:-1][piece], u[1:][piece])


def intersect(a, b):
    """Intersection of two merged interval sets."""
    return _combine(a, b, lambda x, y: x & y)


def subtract(a, b):
    """a minus b, for merged interval sets."""
    return _combine(a, b, lambda x, y: x & ~y)


def per_group_subtract(s, e, group, cut_s, cut_e, cut_group) -> tuple[np.ndarray, np.ndarray]:
    """union(s,e) minus union(cut) within each group (thread), then the union over groups.

    Why the shift: placing each group on its own stretch of the axis turns "per thread"
    set arithmetic into one global sweep instead of a loop over threads.  The sweep runs
    on the ranks of the distinct time points (only their order matters), so the shifted
    values stay small whatever the timestamps are."""
    if not len(s):
        return _EMPTY, _EMPTY
    pts, inv = np.unique(np.concatenate([s, e, cut_s, cut_e]), return_inverse=True)
    n, m, width = len(s), len(cut_s), len(pts)
    rs, re_, rcs, rce = np.split(inv.reshape(-1).astype(np.int64), [n, 2 * n, 2 * n + m])
    a = merge_intervals(rs + group * width, re_ + group * width)
    b = merge_intervals(rcs + cut_group * width, rce + cut_group * width)
    ds, de = subtract(a, b)
    g = ds // width
    return merge_intervals(pts[ds - g * width], pts[de - g * width])
