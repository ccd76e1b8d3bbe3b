"""Grouping rows by several key columns: the "group by" under every analysis table.

numpy's row-wise ``np.unique(axis=0)`` sorts a structured view and is slow; hashing each
key column (pandas.factorize, O(n)) and folding the codes pairwise is many times faster.
Group numbers follow first appearance; callers that need an order sort their output.
"""
from __future__ import annotations

import numpy as np

_COUNT_SPAN = 1 << 16  # unique_ints counts values spanning up to this many + 4 per value
_FEW_RUNS = 64         # ... and sorts stably values of fewer sorted runs than this


def factorize(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group code per row (int64, dense from 0), first row index of each group)."""
    import pandas as pd  # on use: unique_ints and match need no pandas

    n = len(keys[0]) if keys else 0
    code = np.zeros(n, dtype=np.int64)
    groups = 1 if n else 0
    for i, key in enumerate(keys):
        inv, uniq = pd.factorize(np.asarray(key), sort=False)
        lo, hi = (int(inv.min()), int(inv.max())) if n else (0, 0)
        if i == 0 and lo >= 0:  # one key's codes are already dense, in order of first appearance
            code, groups = inv.astype(np.int64, copy=False), len(uniq)
        elif lo != hi or i == 0:  # (a key equal on every row splits no group: nothing to fold)
            code, combined = pd.factorize(code * max(len(uniq), 1) + inv, sort=False)
            groups = len(combined)
    code = code.astype(np.int64, copy=False)
    # codes count up in order of first appearance: a group starts where the running
    # maximum of the codes grows
    top = np.maximum.accumulate(code) if n else code
    first = np.flatnonzero(np.r_[True, top[1:] > top[:-1]]) if n else np.zeros(0, np.int64)
    return code, first[:groups]


def match(key: np.ndarray, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """A join on one key column: for each query value, the row whose key equals it (the
    first in input order when several do), else -1. Kineto links events by shared ids
    (correlation, External id, Python id); this is that link, vectorized."""
    out = np.full(len(queries), -1, dtype=np.int64)
    if not len(key) or not len(queries):
        return out
    order = np.argsort(key, kind="stable")
    k, r = key[order], np.asarray(rows)[order]
    pos = np.minimum(np.searchsorted(k, queries), len(k) - 1)
    hit = k[pos] == queries
    out[hit] = r[pos[hit]]
    return out


def unique_ints(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of an integer array, by counting or by one sort.

    Why: numpy 2's ``np.unique`` without inverse or counts goes through a hash table,
    which on hundreds of thousands of distinct int64 (time points) is an order of
    magnitude slower than sorting (20 ms for 100k), and slower than counting for a few
    distinct ones (device ids, stream ids, name ids); the result is the same sorted
    distinct values. Values spanning a range no wider than a few times their number are
    counted (``np.bincount``); others sorted: stably when they hold few sorted runs (linear
    time over the already sorted runs callers concatenate), else by numpy's default sort."""
    v = np.asarray(values).reshape(-1)
    if len(v) < 2:
        return v.copy()
    lo, hi = int(v.min()), int(v.max())
    if v.dtype.kind in "iu" and hi - lo <= _COUNT_SPAN + 4 * len(v):
        # offsets from the minimum in the unsigned type of the same width: modular, so
        # exact for any dtype (hi - lo fits it even where it does not fit a signed one)
        ut = np.dtype(f"u{v.dtype.itemsize}")
        base = ut.type(lo % (1 << (8 * v.dtype.itemsize)))
        present = np.flatnonzero(np.bincount((v.view(ut) - base).astype(np.intp)))
        return (present.astype(ut) + base).view(v.dtype)
    runs = int(np.count_nonzero(v[1:] < v[:-1]))
    s = np.sort(v, kind="stable" if runs < _FEW_RUNS else None)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
