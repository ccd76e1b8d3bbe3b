"""The string table: names and categories are interned once, columns hold int ids.

Why: a trace repeats a few thousand names millions of times.  Anything that depends on
a name (its kind, "is it ProfilerStep#N?", "is this pid numeric?") is computed once per
*distinct used* string and broadcast back with a lookup table, never per event.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def as_string_array(strings) -> np.ndarray:
    """The string table as a 1-D numpy object array (cheap to index with id arrays)."""
    if isinstance(strings, np.ndarray) and strings.dtype == object:
        return strings
    out = np.empty(len(strings), dtype=object)
    out[:] = list(strings)
    return out


def used_ids(ids: np.ndarray, n_strings: int) -> np.ndarray:
    """The distinct valid ids (0 <= id < n_strings) occurring in ``ids``, ascending; O(n)."""
    ids = np.asarray(ids)
    valid = ids[(ids >= 0) & (ids < n_strings)] if len(ids) else ids
    if len(valid) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.bincount(valid, minlength=n_strings))


def map_string_ids(ids: np.ndarray, strings: np.ndarray, fn: Callable[[str], object], dtype,
                   default) -> np.ndarray:
    """fn(strings[id]) for every id of ``ids`` (``default`` for -1 / out of range).

    fn runs once per distinct used id; the result is a lookup-table gather.
    """
    ids = np.asarray(ids)
    n = len(strings)
    lut = np.full(n + 1, default, dtype=dtype)  # last slot: missing ids
    for i in used_ids(ids, n).tolist():
        lut[i] = fn(strings[i])
    safe = np.where((ids >= 0) & (ids < n), ids, n)
    return lut[safe]


def match_ids(strings: np.ndarray, predicate: Callable[[str], bool]) -> np.ndarray:
    """Ids of every string in the table for which predicate(s) is true (one pass)."""
    return np.fromiter((i for i, s in enumerate(strings) if predicate(s)), dtype=np.int64)


def resolve(ids: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """Object array of the strings for ``ids`` (None for -1 / out of range)."""
    ids = np.asarray(ids)
    n = len(strings)
    ext = np.empty(n + 1, dtype=object)
    ext[:n] = strings
    ext[n] = None
    return ext[np.where((ids >= 0) & (ids < n), ids, n)]
