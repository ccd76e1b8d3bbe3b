"""Decoded rows -> the Trace's tables, all vectorized (masks, lexsort, gathers).

Why a separate step with a flat output: the result (``TraceState``: named numpy arrays,
the string table, the args text and a small JSON-able dict) is exactly what the on-disk
cache stores, so a cached reopen skips decoding *and* sorting/splitting.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_profiler.decode.schema import MISSING_INT, TIME_LIMIT_NS, Decoded, sparse_dtypes
from tb_profiler.trace.categories import kind_column
from tb_profiler.trace.metadata import checked_toplevel
from tb_profiler.trace.strings import as_string_array
from tb_profiler.trace.table import place_rows

# Bump when the tables built here change shape or meaning: it is part of the cache key.
# 2: rows without a usable ts (missing, not a number, out of range) are dropped, with notes.
# 3: instants written as complete events (torch's python exporter) go to the instants table.
# 4: args values that are no value (a float beyond float64, an integer equal to the missing
#    sentinel) are missing; meta "dropped" {reason: rows} and "repaired" {field: rows}.
# 5: the graph_id / graph_node_id args columns (CUDA/HIP graph replays).
MODEL_VERSION = 5
# The category of host instants (``[memory]`` records, ``[OutOfMemory]``): Kineto writes them
# as ``ph: i``; torch's python exporter (``export_chrome_trace(use_python_export=True)``,
# torch/profiler/_chrome_trace_export.py) writes every activity as ``ph: X``, so its memory
# records became spans lasting to the trace's end that enclosed every later operator.
INSTANT_CATEGORIES = ("cpu_instant_event",)

_ROW_WORDS = {"events": "complete event", "instants": "instant", "counters": "counter sample",
              "flows": "flow event"}
# Why a row was dropped (meta "dropped" keys, the trust report's "dropped events"), in words.
DROP_REASONS = {
    "ts_missing": "whose ts is missing or not a usable number (null, text, an object, or beyond int64)",
    "time_out_of_range": "whose ts or end (ts + dur) lies beyond ±2^62 ns",
}

# Which ph values go to which table (ph is the first byte of the "ph" string).
PHASES: dict[str, bytes] = {
    "events": b"X",
    "instants": b"iI",
    "counters": b"C",
    "flows": b"stf",
    "meta": b"M",
}
_COMMON = ("name", "cat", "pid", "tid", "pid_str", "tid_str", "ts", "args_off", "args_len")
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("row", *_COMMON[:7], "dur", "kind", *_COMMON[7:]),
    "instants": ("row", *_COMMON),
    "counters": ("row", *_COMMON[:7], "key", "value", *_COMMON[7:]),
    "flows": ("row", *_COMMON[:7], "kind", "id", "bp", *_COMMON[7:]),
    "meta": ("row", *_COMMON[:7], "arg_name", "sort_index", *_COMMON[7:]),
}
# Table column <- sparse decoder column, densified at build time (the rest stay lazy).
_FROM_SPARSE = {"key": "counter_key", "value": "counter_value", "id": "flow_id", "bp": "flow_bp",
                "arg_name": "arg_name", "sort_index": "sort_index"}


@dataclass
class TraceState:
    """Everything a Trace is made of; plain arrays so the cache can store it as is."""

    arrays: dict[str, np.ndarray]           # "events.ts", "sparse.grid_x.rows", ...
    strings: np.ndarray                      # object array of str
    args_blob: object                        # bytes-like: every event's args JSON text
    meta: dict = field(default_factory=dict)  # JSON-able: source, toplevel, counts, timings, notes


def build_state(decoded: Decoded, buf: bytearray | None = None) -> TraceState:
    """Split decoded rows into tables; frees the decoder's input buffer beyond the args.

    buf: the bytearray the decoder consumed, if any.  When the args blob is a view of its
    front, the buffer is truncated to the blob in place (no copy) so a 1 GB trace does not
    keep 1 GB of dead JSON text alive.
    """
    dense = decoded.dense
    sparse = usable_sparse(decoded.sparse)
    n = len(decoded)
    strings = as_string_array(decoded.strings)
    ph, as_instants = _phases(dense, strings)
    row_dtype = np.int32 if n < 2**31 else np.int64
    arrays: dict[str, np.ndarray] = {}
    phase_counts: dict[str, int] = {}
    if n:  # ph is one byte: counted, not sorted
        counts = np.bincount(ph, minlength=256)
        vals = np.flatnonzero(counts)
        phase_counts = {(chr(v) if v else ""): int(c) for v, c in zip(vals.tolist(), counts[vals].tolist())}

    bad_top = checked_toplevel(decoded.toplevel)[1]
    sparse_types = sparse_dtypes()
    dropped: dict[str, tuple[int, int]] = {}
    no_dur = 0
    table_of = _TABLE_OF_PHASE.take(ph)  # each row's table (1 + its index in PHASES; 0: none); take: no cast of ph
    for k, table in enumerate(PHASES, start=1):
        rows = np.flatnonzero(table_of == k)
        ts = dense["ts"][rows]
        dur = None
        if table == "events":
            dur = dense["dur"][rows]
            dur_missing = dur == MISSING_INT
            dur = np.where(dur_missing, 0, dur)  # a complete event without dur: zero-length
        if table != "meta":  # metadata rows carry no time
            keep, dropped[table] = _usable_times(ts, dur)
            if not keep.all():
                rows, ts, dur = rows[keep], ts[keep], (None if dur is None else dur[keep])
            if dur is not None:
                no_dur = int(dur_missing[keep].sum())
        if table == "events":
            order = _by_start_longest_first(ts, dur)  # by start, longest (outermost) first
            dur = dur[order]
        else:
            order = np.argsort(ts, kind="stable")
        rows = rows[order]
        inverse = None
        for col in TABLE_COLUMNS[table]:
            if col == "row":
                arr = rows.astype(row_dtype)
            elif col == "ts":
                arr = ts[order]
            elif col == "dur":
                arr = dur
            elif col == "kind":
                arr = kind_column(arrays[f"{table}.cat"], strings)
            elif col in _FROM_SPARSE:
                if inverse is None:
                    inverse = np.full(n, -1, dtype=np.int64)
                    inverse[rows] = np.arange(len(rows))
                arr = _densify(sparse, _FROM_SPARSE[col], sparse_types, inverse, len(rows))
            else:
                arr = dense[col][rows]
            arrays[f"{table}.{col}"] = arr

    for name, (where, values) in sparse.items():
        if len(where):
            arrays[f"sparse.{name}.rows"] = np.asarray(where)
            arrays[f"sparse.{name}.values"] = np.asarray(values)

    for arr in arrays.values():  # read-only, like the memory-mapped arrays of a cached trace
        arr.flags.writeable = False
    meta = {
        "source": decoded.source,
        "n_rows": n,
        "toplevel": dict(decoded.toplevel),
        "phase_counts": phase_counts,
        "sparse_dtypes": {k: np.dtype(v).str for k, v in sparse_types.items()},
        "notes": _dropped_notes(dropped) + _dur_notes(no_dur) + _toplevel_notes(bad_top) + ([
            f"{as_instants} instant events (category cpu_instant_event: [memory] records) were written as "
            "complete events (torch's python exporter) and are read as instants"] if as_instants else []),
        # machine-readable: rows left out of every table, by reason (DROP_REASONS), and fields read as missing
        "dropped": _dropped_counts(dropped),
        "repaired": {k: v for k, v in (("dur_missing", no_dur), ("toplevel_fields", len(bad_top))) if v},
    }
    return TraceState(arrays, strings, _detach_blob(decoded.args_blob, buf), meta)


def _table_of_phase() -> np.ndarray:
    """Per ph byte, 1 + the index in PHASES of the table holding it (0: none)."""
    lut = np.zeros(256, dtype=np.uint8)
    for k, phases in enumerate(PHASES.values(), start=1):
        lut[np.frombuffer(phases, dtype=np.uint8)] = k
    return lut


_TABLE_OF_PHASE = _table_of_phase()


def _by_start_longest_first(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, ts))``: by start, then longest first, then row order, without
    lexsort's two indirect merge sorts: one stable sort by start, then only the rows that
    share a start with another are ordered by -dur within their start (several times
    faster on a trace, where few events share a start)."""
    order = np.argsort(ts, kind="stable")
    s = ts[order]
    tied = s[1:] == s[:-1]
    if not tied.any():
        return order
    mark = np.zeros(len(s), dtype=bool)
    mark[:-1] |= tied
    mark[1:] |= tied
    sub = np.flatnonzero(mark)  # positions in runs of equal starts, runs kept together
    run = np.cumsum(np.r_[True, s[sub[1:]] != s[sub[:-1]]])
    order[sub] = order[sub][np.lexsort((-dur[order[sub]], run))]
    return order


def _phases(dense: dict, strings: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's phase as read: the file's, except instants written as complete events
    (INSTANT_CATEGORIES), which are instants; and how many those were."""
    ph = dense["ph"]
    ids = [i for i, s in enumerate(strings.tolist()) if s in INSTANT_CATEGORIES]
    if not ids:
        return ph, 0
    moved = (ph == ord("X")) & np.isin(dense["cat"], ids)
    count = int(moved.sum())
    return (np.where(moved, np.uint8(ord("i")), ph).astype(ph.dtype) if count else ph), count


def _usable_times(ts: np.ndarray, dur: np.ndarray | None) -> tuple[np.ndarray, tuple[int, int]]:
    """(rows to keep, (rows without a ts, rows out of range)).

    The decoder writes MISSING_INT for a ts that is absent, null, text, an object or
    beyond int64; such a row has no place on the time axis (kept, it became a sentinel
    in every min, span and subtraction).  A ts or end beyond TIME_LIMIT_NS is dropped too.
    """
    missing = ts == MISSING_INT
    ok = (ts > -TIME_LIMIT_NS) & (ts < TIME_LIMIT_NS)
    if dur is not None:
        ok &= (dur > -TIME_LIMIT_NS) & (dur < TIME_LIMIT_NS)
        end = ts + np.where(ok, dur, 0)  # no overflow: both terms are below 2**62 where ok
        ok &= (end > -TIME_LIMIT_NS) & (end < TIME_LIMIT_NS)
    n_missing = int(missing.sum())
    return ok, (n_missing, int(len(ts) - ok.sum()) - n_missing)


def usable_sparse(sparse: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The decoder's sparse columns without the values that are no value: a float beyond
    float64 (the decoder reads 1e400 as inf) and an integer equal to the MISSING_INT
    sentinel (-2**63, which would read as missing in one place and as a number in another).
    Such a field is missing, as a field of the wrong type is (decode/schema.py)."""
    out = {}
    for name, (where, values) in sparse.items():
        values = np.asarray(values)
        bad = ~np.isfinite(values) if values.dtype.kind == "f" else (
            values == MISSING_INT if values.dtype == np.int64 else None)
        if bad is not None and bad.any():
            keep = ~bad
            where, values = np.asarray(where)[keep], values[keep]
        out[name] = (where, values)
    return out


def _dropped_counts(dropped: dict[str, tuple[int, int]]) -> dict[str, int]:
    """{reason (a DROP_REASONS key): rows dropped for it, over every table}, reasons with rows only."""
    totals = [sum(counts[i] for counts in dropped.values()) for i in range(len(DROP_REASONS))]
    return {reason: total for reason, total in zip(DROP_REASONS, totals) if total}


def _toplevel_notes(paths: list[str], shown: int = 8) -> list[str]:
    """The top-level fields read as missing (trace.metadata.TOPLEVEL_RULES), named."""
    if not paths:
        return []
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return [f"{len(paths)} top-level field{'s' if len(paths) > 1 else ''} of the wrong type or out of range "
            f"{'are' if len(paths) > 1 else 'is'} read as missing: {', '.join(paths[:shown])}{more}"]


def _dur_notes(no_dur: int) -> list[str]:
    if not no_dur:
        return []
    return [f"{no_dur} complete event{'s have' if no_dur > 1 else ' has'} no usable dur (missing, null, text, an "
            "object, or beyond int64): read as zero-length"]


def _dropped_notes(dropped: dict[str, tuple[int, int]]) -> list[str]:
    """What the tables left out, in words (shown by the overview and `tb-profiler info`)."""
    notes = []
    for i, why in enumerate(DROP_REASONS.values()):
        counts = {t: c[i] for t, c in dropped.items() if c[i]}
        if counts:
            parts = ", ".join(f"{n} {_ROW_WORDS[t]}{'s' if n > 1 else ''}" for t, n in counts.items())
            total = sum(counts.values())
            notes.append(f"dropped {total} event{'s' if total > 1 else ''} {why}: {parts}")
    return notes


def _densify(sparse: dict, name: str, types, inverse: np.ndarray, m: int) -> np.ndarray:
    from tb_profiler.decode.schema import missing_value

    dtype = types[name]
    out = np.full(m, missing_value(dtype, name), dtype=dtype)
    if name in sparse:
        place_rows(out, inverse, *sparse[name])
    return out


def _detach_blob(blob, buf: bytearray | None):
    """The args text without the rest of the decoder's input buffer behind it."""
    if buf is None or not isinstance(blob, memoryview) or blob.obj is not buf:
        if isinstance(blob, memoryview) and blob.obj is not None and len(blob.obj) > 2 * len(blob) + (1 << 20):
            return bytes(blob)  # a small view pinning a big foreign buffer: copy it out
        return blob
    length = blob.nbytes
    at_front = _address(blob) == _address(buf)
    if not at_front:
        return bytes(blob)
    blob.release()
    try:
        del buf[length:]  # shrink in place (realloc), the blob's bytes stay where they are
    except BufferError:  # someone else still exports the buffer: copy instead
        return bytes(memoryview(buf)[:length])
    return buf


def _address(obj) -> int:
    if len(obj) == 0:
        return -1
    return np.frombuffer(obj, dtype=np.uint8).ctypes.data
