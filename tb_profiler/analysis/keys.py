"""Grouping rows by several key columns: the "group by" under every analysis table.

numpy's row-wise ``np.unique(axis=0)`` sorts a structured view and is slow; hashing each
key column (pandas.factorize, O(n)) and folding the codes pairwise is many times faster.
Group numbers follow first appearance; callers that need an order sort their output.
"""
from __future__ import annotations

import numpy as np

_COUNT_SPAN = 1 << 16  # unique_ints counts values spanning up to this many + 4 per value
_FEW_RUNS = 64         # ... and sorts stably values of fewer sorted runs than this
_PACK_LIMIT = 1 << 62   # packed codes stay below this


def factorize(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group code per row (int64, dense from 0), first row index of each group).

    Each key becomes codes in [0, m): an integer key of a narrow range by its offset from
    its minimum (no hashing), any other by pandas.factorize (missing values one code of
    their own). The codes are packed into one int64 (mixed radix, compacted by a factorize
    whenever the next key would overflow it) and factorized once: one hash pass over the
    rows in all, not two per key."""
    import pandas as pd  # on use: unique_ints and match need no pandas

    n = len(keys[0]) if keys else 0
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if len(keys) == 1:  # one key: its factorize is the answer (missing values a group of their own)
        code, uniq = pd.factorize(np.asarray(keys[0]), sort=False, use_na_sentinel=False)
        return _with_firsts(code, len(uniq))
    packed, radix = None, 1
    for key in keys:
        codes, m = _key_codes(np.asarray(key))
        if m <= 1:  # a key equal on every row splits no group
            continue
        if packed is None:
            packed, radix = codes, m
            continue
        if radix * m >= _PACK_LIMIT:
            packed, uniq = pd.factorize(packed, sort=False)
            radix = len(uniq)
        packed, radix = packed * m + codes, radix * m
    if packed is None:  # every key constant: one group
        return np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64)
    code, uniq = pd.factorize(packed, sort=False)
    return _with_firsts(code, len(uniq))


def _key_codes(key: np.ndarray) -> tuple[np.ndarray, int]:
    """(codes in [0, m), m) of one key column."""
    import pandas as pd

    if key.dtype.kind == "b":
        return key.astype(np.int64), 2
    if key.dtype.kind in "iu":
        lo, hi = key.min(), key.max()
        span = int(hi) - int(lo) + 1
        if span <= _COUNT_SPAN + 4 * len(key):  # the span unique_ints counts: codes by offset
            return (key - lo).astype(np.int64), span  # in the key's own type first: no overflow
    codes, uniq = pd.factorize(key, sort=False)  # missing -> -1, moved to code 0
    return codes.astype(np.int64) + 1, len(uniq) + 1


def _with_firsts(code: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    code = code.astype(np.int64, copy=False)
    # codes count up in order of first appearance: a group starts where the running
    # maximum of the codes grows
    top = np.maximum.accumulate(code)
    first = np.flatnonzero(np.r_[True, top[1:] > top[:-1]])
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
