"""Per-trace intermediates that many analyses share, computed once and kept read-only.

Why: the whole-trace analyses (overview, operators, kernels, memory, modules) ask the same
questions of every event again and again: which have usable times, which are device
work, which are kernels, what a predicate says of each event's name, each duration with
a missing one read as 0. On a trace of millions of events each question is a pass over
every row (and, for names, a bincount of the name ids to find the distinct ones); the
overview alone asked for the valid times a dozen times. Here each answer is one array
per trace, memoized with ``memo.per_trace`` and frozen (``writeable=False``): a caller
that wants to change one must copy it, so no analysis can spoil another's input.

Every function returns exactly what the expression in its docstring would; only the cost
changes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.memo import per_trace
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.roles import DEVICE_WORK, Role, role_mask
from tb_profiler.trace.strings import mapped, safe_ids


def frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only (memoized arrays are shared by every caller)."""
    a.setflags(write=False)
    return a


# -- masks over events ------------------------------------------------------------------------

@per_trace
def valid_times(trace) -> np.ndarray:
    """Events with a usable [ts, ts + dur): both present and dur >= 0."""
    ev = trace.events
    ts, dur = ev["ts"], ev["dur"]
    return frozen((ts != MISSING_INT) & (dur != MISSING_INT) & (dur >= 0))


@per_trace
def device_work(trace) -> np.ndarray:
    """``role_mask(trace.roles, DEVICE_WORK) & valid_times(trace)``: kernels, copies and
    fills with usable times."""
    return frozen(role_mask(trace.roles, DEVICE_WORK) & valid_times(trace))


@per_trace
def compute(trace) -> np.ndarray:
    """``(trace.roles == Role.COMPUTE) & valid_times(trace)``: kernels with usable times."""
    return frozen((trace.roles == Role.COMPUTE) & valid_times(trace))


@per_trace
def durations(trace) -> np.ndarray:
    """Each event's dur, a missing one read as 0."""
    dur = trace.events["dur"]
    return frozen(np.where(dur == MISSING_INT, 0, dur))


# -- threads ------------------------------------------------------------------------------------

@per_trace
def threads(trace) -> tuple[np.ndarray, np.ndarray]:
    """``keys.factorize(pid, tid, pid_str, tid_str)`` over all events: (each event's thread
    (track) code, the first event of each thread). The host call nesting and the trace
    view's tracks group by it."""
    ev = trace.events
    code, first = factorize(ev["pid"], ev["tid"], ev["pid_str"], ev["tid_str"])
    return frozen(np.asarray(code, dtype=np.int64).reshape(-1)), frozen(np.asarray(first, dtype=np.int64).reshape(-1))


# -- the name column ---------------------------------------------------------------------------

@per_trace
def name_index(trace) -> tuple[np.ndarray, np.ndarray]:
    """(name id per event with missing / out-of-range ids as ``len(trace.strings)``, the
    distinct valid ids used, ascending): what ``map_string_ids`` and ``string_id_mask``
    derive from the name column on every call."""
    ids = trace.events["name"]
    n = len(trace.strings)
    safe = safe_ids(ids, n)
    used = np.flatnonzero(np.bincount(safe, minlength=n + 1)[:n]) if len(safe) else np.zeros(0, np.int64)
    return frozen(safe), frozen(used)


def _among(trace, among: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the rows ``among`` marks, their name ids as ``name_index`` gives them, the distinct
    valid ones): what a predicate asked about some events only needs, in passes over those
    rows, not over every event (the kinds asked about are often a few rows of a trace:
    its memcpys, its sync events)."""
    safe, _ = name_index(trace)
    idx = np.flatnonzero(among)
    ids = safe[idx]
    n = len(trace.strings)
    used = np.flatnonzero(np.bincount(ids, minlength=n + 1)[:n]) if len(ids) else np.zeros(0, np.int64)
    return idx, ids, used


def name_map(trace, fn: Callable[[str], object], dtype=bool, default=False,
             among: np.ndarray | None = None) -> np.ndarray:
    """``map_string_ids(trace.events["name"], trace.strings, fn, dtype, default)``: fn
    once per distinct used name, broadcast to every event.

    among (a mask over events): fn runs only on the names those events use, and every
    other event gets ``default``.  Why: a predicate about operators or kernels need not
    run on the names of every other event (a trace of 10 M distinct names)."""
    strings = trace.strings
    lut = np.full(len(strings) + 1, default, dtype=dtype)  # last slot: missing ids
    if among is None:
        safe, used = name_index(trace)
    else:
        idx, ids, used = _among(trace, among)
    if len(used):  # map() over the names, one store: no Python indexing per name (10 M names)
        lut[used] = mapped(fn, strings[used], dtype)
    if among is None:
        return lut.take(safe)  # take: the name ids are int32, and lut[ids] casts them by numpy's slow path
    out = np.full(len(among), default, dtype=lut.dtype)
    out[idx] = lut.take(ids)
    return out


def name_mask(trace, predicate: Callable[[np.ndarray], np.ndarray], among: np.ndarray | None = None) -> np.ndarray:
    """``tensor_cores.string_id_mask(trace.events["name"], trace.strings, predicate)``:
    predicate (names -> bool array) over the distinct used names, broadcast; with
    ``among``, over the names those events use only, every other event False."""
    lut = np.zeros(len(trace.strings) + 1, dtype=bool)
    if among is None:
        safe, used = name_index(trace)
    else:
        idx, ids, used = _among(trace, among)
    if len(used):
        lut[used] = predicate(trace.strings[used])
    if among is None:
        return lut.take(safe)
    out = np.zeros(len(among), dtype=bool)
    out[idx] = lut.take(ids)
    return out


__all__ = ["compute", "device_work", "durations", "frozen", "name_index", "name_map", "name_mask", "threads",
           "valid_times"]
