"""Which event encloses which: the call-stack shape of host events, per thread.

Self time, call stacks, the module tree and "which op allocated this memory" all come
from one relation: each event's innermost enclosing event on the same thread. The stack
walk runs in C (tb_profiler._native.nest_parents); everything around it is numpy.
"""
from __future__ import annotations

import numpy as np

from tb_profiler import _native


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
    order = np.lexsort((-end, start, group))  # stable: equal keys keep input order
    sorted_parent = np.empty(n, dtype=np.int64)
    _native.nest_parents(group[order], start[order], end[order], sorted_parent)
    out = np.full(n, -1, dtype=np.int64)
    has = sorted_parent >= 0
    out[order[has]] = order[sorted_parent[has]]
    return out


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


def subtree_sum(values: np.ndarray, parent: np.ndarray, level: np.ndarray | None = None) -> np.ndarray:
    """Each node's value plus all its descendants' (parent indexes the same arrays, -1 at a
    root): one vectorized add per nesting level, deepest first."""
    total = np.asarray(values).astype(np.int64, copy=True)
    if not len(total):
        return total
    level = depth(parent) if level is None else level
    order = np.argsort(-level, kind="stable")
    for chunk in np.split(order, np.flatnonzero(np.diff(level[order])) + 1):
        chunk = chunk[parent[chunk] >= 0]
        if len(chunk):
            np.add.at(total, parent[chunk], total[chunk])
    return total


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
