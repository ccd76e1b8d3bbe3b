"""Which event encloses which: the call-stack shape of host events, per thread.

Self time, call stacks, the module tree and "which op allocated this memory" all come
from one relation: each event's innermost enclosing event on the same thread. The stack
walk runs in C (tb_profiler._native.nest_parents); everything around it is numpy.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.keys import unique_ints
from tb_profiler.decode.extension import extension

_native = extension()  # the nesting walks are C


def parents(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For events in any order, the index of each one's innermost enclosing event in the same
    group (-1 for a root). Equal intervals nest in input order: the first one is the parent.

    An event that only partly overlaps an open one is not its child; a zero-length event
    on another's closing edge lies after it.
    """
    group = np.ascontiguousarray(group, dtype=np.int64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    n = len(group)
    order = nesting_order(group, start, -end)
    sorted_parent = np.empty(n, dtype=np.int64)
    _native.nest_parents(group[order], start[order], end[order], sorted_parent)
    out = np.full(n, -1, dtype=np.int64)
    has = sorted_parent >= 0
    out[order[has]] = order[sorted_parent[has]]
    return out


def nesting_order(group: np.ndarray, start: np.ndarray, neg_end: np.ndarray) -> np.ndarray:
    """``np.lexsort((neg_end, start, group))``, cheaply when it can be.

    Events usually come in time order already (a trace's events table is sorted by start,
    longest first), so a stable sort by group alone, which is a linear radix sort for a
    few thousand groups, often gives the lexsort's order. It is kept only when checked to
    be sorted by (group, start, neg_end): a stable sort's result is unique, so it is then
    the lexsort's, ties in input order included."""
    n = len(group)
    if n > 1:
        lo, hi = int(group.min()), int(group.max())
        if lo >= 0 and hi < (1 << 15):
            order = np.argsort(group.astype(np.int16), kind="stable")
            g, s, e = group[order], start[order], neg_end[order]
            same_g = g[1:] == g[:-1]
            same_s = s[1:] == s[:-1]
            ok = (g[1:] > g[:-1]) | (same_g & ((s[1:] > s[:-1]) | (same_s & (e[1:] >= e[:-1]))))
            if ok.all():
                return order
    return np.lexsort((neg_end, start, group))  # stable: equal keys keep input order


def depth(parent: np.ndarray) -> np.ndarray:
    """Nesting depth of each event (roots are 0), by pointer jumping: O(n log depth).

    dist[i] counts the hops from i to anc[i]; each round every event adds its ancestor's
    count and jumps to the ancestor's ancestor, so the chains halve each round.
    """
    anc = np.asarray(parent, dtype=np.int64).copy()
    dist = (anc >= 0).astype(np.int64)
    live = np.flatnonzero(anc >= 0)
    while len(live):
        j = anc[live]
        dist[live] += dist[j]
        anc[live] = anc[j]
        live = live[anc[live] >= 0]
    return dist


def level_chunks(parent: np.ndarray, level: np.ndarray | None = None) -> list[np.ndarray]:
    """The schedule of ``subtree_sum``: the non-root nodes, deepest level first (so every
    child comes before its parent). Several sums over one tree share it (the depth walk and
    the sort are most of a sum's cost)."""
    parent = np.asarray(parent)
    if not len(parent):
        return []
    level = depth(parent) if level is None else level
    # (a stable sort of small ints is a linear radix sort: the same order, cheaper)
    key = -level.astype(np.int16) if 0 <= level.min() and level.max() < (1 << 15) - 1 else -level
    order = np.argsort(key, kind="stable")
    order = order[parent[order] >= 0]
    return [order.astype(np.int64, copy=False)] if len(order) else []


def subtree_sum(values: np.ndarray, parent: np.ndarray, level: np.ndarray | None = None,
                chunks: list[np.ndarray] | None = None) -> np.ndarray:
    """Each node's value plus all its descendants' (parent indexes the same arrays, -1 at a
    root): one pass over the nodes, deepest first, in C (``_native.subtree_add``: a chain
    nested 10^6 deep is 10^6 levels, a numpy add per level was minutes). ``chunks``: the
    tree's ``level_chunks``, when several sums share one tree."""
    total = np.asarray(values).astype(np.int64, copy=True)
    if not len(total):
        return total
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    for chunk in level_chunks(parent, level) if chunks is None else chunks:
        _native.subtree_add(np.ascontiguousarray(chunk, dtype=np.int64), parent, total)
    return total


def marked_below(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Per node: some node below it (a descendant through ``parent``) is marked. Walks up
    from the marked nodes one level per round, stopping at ancestors already reached (a
    marked ancestor's own walk goes on from there)."""
    out = np.zeros(len(marked), dtype=bool)
    cur = parent[np.flatnonzero(marked)]
    cur = cur[cur >= 0]
    while len(cur):
        cur = unique_ints(cur[~out[cur]])
        out[cur] = True
        cur = parent[cur]
        cur = cur[cur >= 0]
    return out


def climb(parent: np.ndarray, start: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """From each start row (itself included), follow ``parent`` up to the first row where
    ``wanted`` holds; -1 where none (or where start is -1). One vectorized hop per level."""
    cur = np.asarray(start, dtype=np.int64).copy()
    out = np.full(len(cur), -1, dtype=np.int64)
    todo = np.flatnonzero(cur >= 0)
    while len(todo):
        c = cur[todo]
        found = wanted[c]
        out[todo[found]] = c[found]
        todo = todo[~found]
        cur[todo] = parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return out
