"""The string table: names and categories are interned once, columns hold int ids.

Why: a trace repeats a few thousand names millions of times.  Anything that depends on
a name (its kind, "is it ProfilerStep#N?", "is this pid numeric?") is computed once per
*distinct used* string and broadcast back with a lookup table, never per event.
"""
from __future__ import annotations

import re
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
    return _used_of_safe(safe_ids(ids, n_strings), n_strings)


def safe_ids(ids: np.ndarray, n_strings: int) -> np.ndarray:
    """ids with every invalid one (-1, out of range) as n_strings: a lookup table's last slot."""
    ids = np.asarray(ids)
    return np.where((ids >= 0) & (ids < n_strings), ids, n_strings)


def _used_of_safe(safe: np.ndarray, n_strings: int) -> np.ndarray:
    """The distinct valid ids of ``safe_ids``' output, counted (no masked copy of the ids)."""
    if not len(safe):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.bincount(safe, minlength=n_strings + 1)[:n_strings])


def map_string_ids(ids: np.ndarray, strings: np.ndarray, fn: Callable[[str], object], dtype,
                   default) -> np.ndarray:
    """fn(strings[id]) for every id of ``ids`` (``default`` for -1 / out of range).

    fn runs once per distinct used id; the result is a lookup-table gather.
    """
    ids = np.asarray(ids)
    n = len(strings)
    lut = np.full(n + 1, default, dtype=dtype)  # last slot: missing ids
    safe = safe_ids(ids, n)
    used = _used_of_safe(safe, n)
    if len(used):  # map() over the names, one store: no Python indexing per name
        lut[used] = mapped(fn, strings[used], dtype)
    return lut.take(safe)  # take, not lut[safe]: an int32 index is gathered without numpy's slow cast path


def mapped(fn: Callable[[str], object], names: np.ndarray, dtype) -> np.ndarray:
    """fn of each name as a 1-d array of dtype (fn's tuples stay objects, never a 2-d array)."""
    return np.fromiter(map(fn, names), dtype=dtype, count=len(names))


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
    return ext.take(safe_ids(ids, n))  # take: int32 ids, no slow cast path


# -- long strings -----------------------------------------------------------------------------
# The decoder keeps at most decode.STRING_MAX bytes of a string and marks a cut one with the
# tail below (native/intern.c); a reply that lists strings shows at most SHOW_MAX bytes of
# each, marked the same way.  Why: a name is untrusted text of any length (one 500 MB event
# name in a half-megabyte .gz file); what the server keeps and sends must not follow it.
SHOW_MAX = 4096
_CUT_TAIL = re.compile(r" \[\.\.\. cut: first (\d+) of (\d+) bytes\]\Z")
_FAST = SHOW_MAX // 4  # characters that cannot exceed SHOW_MAX bytes in UTF-8


def cut_length(s: str | None) -> int | None:
    """The full length in bytes of a string the decoder (or ``shown``) cut; None for a
    string kept whole."""
    if not isinstance(s, str) or not s.endswith("bytes]"):
        return None
    m = _CUT_TAIL.search(s)
    return int(m.group(2)) if m else None


def shown(s, limit: int = SHOW_MAX):
    """s when its UTF-8 form is at most ``limit`` bytes, else its first bytes (whole
    characters) and the tail `` [... cut: first K of N bytes]`` with N its full length
    (a cut string's original one); anything not a str as it is."""
    if not isinstance(s, str) or len(s) <= limit // 4:
        return s
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return s
    full = cut_length(s) or len(raw)
    kept = raw[:max(0, limit - 64)].decode("utf-8", "ignore")
    return f"{kept} [... cut: first {len(kept.encode('utf-8', 'surrogatepass'))} of {full} bytes]"


def shown_all(values) -> list:
    """``shown`` over a list (or array) of strings: what a reply lists."""
    return [v if not isinstance(v, str) or len(v) <= _FAST else shown(v) for v in values]


def bounded(doc, limit: int = SHOW_MAX):
    """A JSON-like document (dicts, lists, scalars) with every string ``shown``: the last
    word on how long a string a reply may carry, whatever view built it."""
    kind = type(doc)
    if kind is str:
        return doc if len(doc) <= _FAST else shown(doc, limit)
    if kind is dict:
        return {k if type(k) is not str or len(k) <= _FAST else shown(k, limit): bounded(v, limit)
                for k, v in doc.items()}
    if kind is list or kind is tuple:
        return [bounded(v, limit) for v in doc]
    return doc
