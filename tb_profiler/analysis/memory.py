"""Memory: allocator curves, allocation/free events and per-operator memory statistics.

PyTorch's profiler (``profile_memory=True``) writes one ``[memory]`` instant per allocator
call: when, on which thread, which device, the address, +bytes (allocate) or -bytes
(free), and the allocator's totals right after it.  Everything here derives from those
records (``trace.memory``) and the host call nesting, read once per trace by
analysis.memory_records (device keys, each record's operator):

- curves: total allocated / reserved per device over time, thinned for drawing without
  losing a peak (per time bucket: first, last, min and max of each series);
- events: each allocation paired with the free of the same address on the same device;
  unmatched allocations (still alive at the end, or freed outside the window) and frees
  (allocated before the window) are listed as such;
- stats (analysis/memory_stats.py): per operator and device, the old plugin's
  MemoryStatsTable plus frees, with allocation factories named after their caller.

Device keys are "CPU", "GPU0", "XPU1", ...: the accelerator word follows the trace
(``trace.device_word``), never a hard-coded "CUDA".  Times are absolute int64 ns.

Differences from torch-tb-profiler 0.4.3, on purpose:
- pairing is per (device, address), over the whole trace, then restricted to the range
  (the old plugin paired only the records inside the range and keyed by address alone,
  so a pair straddling the range edge lost one end, and a second alloc at a live
  address silently dropped the first);
- a record's operator is the innermost cpu_op enclosing it on its thread; the old plugin
  dropped records whose innermost enclosing node was not an operator (e.g. a record
  directly inside a user annotation nested in an operator);
- traces without allocator totals (PyTorch < 1.10) still get a curve: the running sum
  of bytes, raised so it never goes below zero (a lower bound: memory allocated before
  the window is unknown).  The old plugin showed no curve for them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import NO_ROW
from tb_profiler.analysis.memory_records import (
    NO_RECORDS_NOTE,
    Records,
    devices,
    memory_op_parent,
    memory_records,
    record_ops,
    select_records,
    sort_devices,
)
from tb_profiler.analysis.memory_stats import memory_stats
from tb_profiler.decode.schema import MISSING_INT

EVENTS_COLUMNS = ["device", "addr", "bytes", "alloc_ns", "free_ns", "duration_ns", "op", "parent_op",
                  "free_op", "op_row"]


# -- curves ---------------------------------------------------------------------------------
def downsample(t: np.ndarray, series: list[np.ndarray], max_points: int) -> np.ndarray:
    """Indices of at most max(max_points, 6) points that keep every bucket's extremes.

    The time span is cut into equal buckets (one per few pixels); per bucket the first and
    last point and, per series, the first point at its minimum and at its maximum are kept,
    so a one-sample spike survives any zoom.  NaN values are ignored.
    """
    n = len(t)
    if n <= max_points:
        return np.arange(n)
    n_buckets = max(1, int(max_points) // (2 + 2 * len(series)))
    span = int(t[-1]) - int(t[0]) + 1
    width = -(-span // n_buckets)
    bucket = (t - t[0]) // width
    starts = np.concatenate([[0], np.flatnonzero(np.diff(bucket)) + 1])
    ends = np.concatenate([starts[1:], [n]]) - 1
    keep = [starts, ends]
    counts = ends - starts + 1
    which = np.repeat(np.arange(len(starts)), counts)
    for y in series:
        y = np.asarray(y, dtype=np.float64)
        for reduce in (np.fmin, np.fmax):
            level = np.repeat(reduce.reduceat(y, starts), counts)
            hits = np.flatnonzero(y == level)
            keep.append(hits[np.unique(which[hits], return_index=True)[1]])
    return np.unique(np.concatenate(keep))


def _device_series(rec: Records, dev: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(indices, allocated, reserved, reconstructed) of one device's curve over the whole
    trace; allocated is rebuilt from the bytes when the trace has no allocator totals."""
    idx = np.flatnonzero(rec.device == dev)
    ta, tr = rec.total_allocated[idx], rec.total_reserved[idx]
    has = ta != MISSING_INT
    if has.any():
        idx, tr = idx[has], tr[has]
        allocated = ta[has].astype(np.float64)
        reserved = np.where(tr == MISSING_INT, np.nan, tr.astype(np.float64))
        return idx, allocated, reserved, False
    run = np.cumsum(rec.bytes[idx].astype(np.float64))
    low = run.min() if len(run) else 0.0
    return idx, run - min(low, 0.0), np.full(len(idx), np.nan), True


def memory_curve(trace, device: str | None = None, start_ns: int | None = None, end_ns: int | None = None,
                 max_points: int = 2000) -> dict[str, pd.DataFrame]:
    """{device: DataFrame(ts_ns, allocated, reserved)} in bytes, at most ~max_points rows each.

    Within a range, the first row gives the level in effect at start_ns.  Each frame's
    ``attrs`` holds peak_allocated, peak_allocated_ns, peak_reserved (over every record
    in the range, not just the kept points), records, and reconstructed (True when the
    trace has no allocator totals and allocated is a running sum of bytes, a lower bound).
    """
    out = {}
    for name, ts, allocated, reserved, rebuilt in _series(trace, device, start_ns, end_ns):
        keep = downsample(ts, [allocated, reserved], max_points)
        df = pd.DataFrame({"ts_ns": ts[keep], "allocated": allocated[keep], "reserved": reserved[keep]})
        df.attrs.update(_peaks(ts, allocated, reserved, rebuilt))
        out[name] = df
    return out


def _series(trace, device: str | None, start_ns: int | None, end_ns: int | None):
    """(device, ts, allocated, reserved, reconstructed) per device with records in the
    range (all of them: the curve thins them, the peaks read them all)."""
    rec = memory_records(trace)
    for name in sort_devices(rec.devices):
        if device is not None and name != device:
            continue
        idx, allocated, reserved, rebuilt = _device_series(rec, rec.devices.index(name))
        ts = rec.ts[idx]
        lo = np.searchsorted(ts, start_ns, "left") if start_ns is not None else 0
        hi = np.searchsorted(ts, end_ns, "right") if end_ns is not None else len(ts)
        first = max(lo - 1, 0) if start_ns is not None else lo   # the level at start_ns
        if hi <= first:
            continue
        ts, allocated, reserved = ts[first:hi].copy(), allocated[first:hi], reserved[first:hi]
        if first < lo:
            ts[0] = int(start_ns)
        yield name, ts, allocated, reserved, rebuilt


def _peaks(ts, allocated, reserved, rebuilt: bool) -> dict:
    """A device's peaks over every record of its series."""
    top = int(np.argmax(allocated))
    return {"peak_allocated": float(allocated[top]), "peak_allocated_ns": int(ts[top]),
            "peak_reserved": float(np.nanmax(reserved)) if np.isfinite(reserved).any() else None,
            "records": len(ts), "reconstructed": rebuilt}


PEAK_COLUMNS = ["device", "peak_allocated", "peak_allocated_ns", "peak_reserved", "total_memory", "reconstructed"]


def peak_rows(trace, device: str | None = None, start_ns: int | None = None,
              end_ns: int | None = None) -> list[dict]:
    """``memory_peaks``' rows as dicts (PEAK_COLUMNS), for a reader of a few values (no
    DataFrame: one row per device)."""
    totals = {f"{trace.device_word}{d.id}": d.total_memory for d in trace.devices} if trace.device_kinds else {}
    rows = []
    for name, ts, allocated, reserved, rebuilt in _series(trace, device, start_ns, end_ns):
        peaks = _peaks(ts, allocated, reserved, rebuilt)
        rows.append({"device": name, "peak_allocated": peaks["peak_allocated"],
                     "peak_allocated_ns": peaks["peak_allocated_ns"], "peak_reserved": peaks["peak_reserved"],
                     "total_memory": totals.get(name), "reconstructed": rebuilt})
    return rows


def memory_peaks(trace, device: str | None = None, start_ns: int | None = None,
                 end_ns: int | None = None) -> pd.DataFrame:
    """One row per device: peak_allocated (bytes), when, peak_reserved, the device's total
    memory where deviceProperties give it, and whether the curve was reconstructed."""
    return pd.DataFrame(peak_rows(trace, device, start_ns, end_ns), columns=PEAK_COLUMNS)


# -- events ---------------------------------------------------------------------------------
def pair_records(rec: Records) -> tuple[np.ndarray, np.ndarray]:
    """(alloc, free) record indices, -1 for the missing side, over records with an address.

    An allocation at address A is freed by the next record at A on the same device if
    that record is a free; an allocation followed by another allocation at A (its free was
    not recorded) stays unmatched, as does a free with no allocation before it.
    """
    sel = np.flatnonzero((rec.addr != MISSING_INT) & (rec.bytes != 0))
    srt = sel[np.lexsort((sel, rec.addr[sel], rec.device[sel]))]
    is_alloc = rec.bytes[srt] > 0
    same = (rec.device[srt][1:] == rec.device[srt][:-1]) & (rec.addr[srt][1:] == rec.addr[srt][:-1])
    pair = is_alloc[:-1] & ~is_alloc[1:] & same
    paired = np.zeros(len(srt), dtype=bool)
    paired[:-1] |= pair
    paired[1:] |= pair
    lone_alloc, lone_free = srt[is_alloc & ~paired], srt[~is_alloc & ~paired]
    alloc = np.concatenate([srt[:-1][pair], lone_alloc, np.full(len(lone_free), NO_ROW)])
    free = np.concatenate([srt[1:][pair], np.full(len(lone_alloc), NO_ROW), lone_free])
    return alloc.astype(np.int64), free.astype(np.int64)


def memory_events(trace, device: str | None = None, start_ns: int | None = None,
                  end_ns: int | None = None) -> pd.DataFrame:
    """One row per allocation (with its free) or unmatched free, in time order.

    Columns: device, addr, bytes, alloc_ns / free_ns / duration_ns (nullable Int64: <NA>
    where that side is outside the trace), op (the operator that allocated; for an
    unmatched free, none), parent_op (its enclosing operator, which gives context to
    aten::empty), free_op (the operator around the free), op_row (events row of op, -1).
    With a range, a row is kept if its allocation or its free falls within [start, end].
    ``attrs["notes"]`` explains rows that could not be formed.
    """
    rec = memory_records(trace)
    alloc, free = pair_records(rec)
    keep = _event_filter(rec, alloc, free, device, start_ns, end_ns)
    alloc, free = alloc[keep], free[keep]
    df = _events_frame(trace, rec, alloc, free)
    df.attrs["notes"] = _events_notes(rec)
    return df


def _event_filter(rec: Records, alloc, free, device, start_ns, end_ns) -> np.ndarray:
    """Rows on the device with an alloc or a free inside the range."""
    either = np.where(alloc >= 0, alloc, free)
    keep = np.ones(len(alloc), dtype=bool)
    if device is not None:
        keep &= np.isin(either, select_records(rec, device, None, None))
    if start_ns is not None or end_ns is not None:
        inside = np.zeros(len(rec), dtype=bool)
        inside[select_records(rec, None, start_ns, end_ns)] = True
        keep &= ((alloc >= 0) & inside[np.maximum(alloc, 0)]) | ((free >= 0) & inside[np.maximum(free, 0)])
    return keep


def _take(values: np.ndarray, rows: np.ndarray, missing: int) -> np.ndarray:
    """values[rows] where rows >= 0, ``missing`` elsewhere (values may be empty)."""
    out = np.full(len(rows), missing, dtype=np.int64)
    ok = rows >= 0
    out[ok] = values[rows[ok]]
    return out


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(np.where(valid, values, 0).astype(np.int64), ~valid)


def _events_frame(trace, rec: Records, alloc: np.ndarray, free: np.ndarray) -> pd.DataFrame:
    """Assemble the events table from (alloc, free) record index pairs."""
    either = np.where(alloc >= 0, alloc, free)
    has_a, has_f = alloc >= 0, free >= 0
    a, f = np.maximum(alloc, 0), np.maximum(free, 0)
    t_alloc, t_free = rec.ts[a], rec.ts[f]
    order = np.argsort(np.where(has_a, t_alloc, t_free), kind="stable")
    op_row = np.where(has_a, record_ops(trace)[a], NO_ROW)
    parent_row = _take(memory_op_parent(trace), op_row, NO_ROW)
    free_row = np.where(has_f, record_ops(trace)[f], NO_ROW)
    names = trace.events["name"]
    dev_names = np.asarray(rec.devices + [None], dtype=object)

    def name_of(rows):  # object dtype keeps None for "no operator" (pandas would make it NaN)
        return pd.Series(trace.str(_take(names, rows, -1)), dtype=object)

    df = pd.DataFrame({
        "device": dev_names[rec.device[either]] if len(either) else np.zeros(0, dtype=object),
        "addr": rec.addr[either],
        "bytes": np.abs(rec.bytes[either]),
        "alloc_ns": _nullable(t_alloc, has_a),
        "free_ns": _nullable(t_free, has_f),
        "duration_ns": _nullable(t_free - t_alloc, has_a & has_f),
        "op": name_of(op_row), "parent_op": name_of(parent_row), "free_op": name_of(free_row),
        "op_row": op_row,
    }, columns=EVENTS_COLUMNS)
    return df.iloc[order].reset_index(drop=True)


def _events_notes(rec: Records) -> list[str]:
    """Why some records are not in the events table."""
    if not len(rec):
        return [NO_RECORDS_NOTE]
    notes = []
    no_addr = int((rec.addr == MISSING_INT).sum())
    if no_addr:
        notes.append(f"{no_addr} of {len(rec)} memory records carry no address (PyTorch < 1.10?): "
                     "they cannot be paired into allocation/free events")
    return notes


# -- bundle ---------------------------------------------------------------------------------
def memory_notes(trace) -> list[str]:
    """Why the memory view is empty or partial for this trace."""
    rec = memory_records(trace)
    if not len(rec):
        flag = trace.metadata.get("profile_memory")
        if flag is not None and flag not in (0, False, "0", "false", "False"):
            return [("profile_memory was set but the trace has no [memory] records (no allocation "
                     "happened inside the profiling window?)")]
        return [NO_RECORDS_NOTE]
    notes = _events_notes(rec)
    rebuilt = [rec.devices[d] for d in np.unique(rec.device).tolist()
               if (rec.total_allocated[rec.device == d] == MISSING_INT).all()]
    if rebuilt:
        notes.append(f"no allocator totals on {', '.join(sort_devices(rebuilt))} (PyTorch < 1.10?): the "
                     "allocated curve is the running sum of bytes, a lower bound; reserved is unknown")
    unattributed = int((record_ops(trace) < 0).sum())
    if unattributed:
        notes.append(f"{unattributed} of {len(rec)} memory records lie outside any operator on their thread "
                     "and count in no operator's statistics")
    return notes


def memory(trace, device: str | None = None, start_ns: int | None = None, end_ns: int | None = None,
           max_points: int = 2000) -> dict:
    """Everything the memory view shows: devices (accelerators first), default_device,
    curves ({device: DataFrame}), peaks, events, stats (DataFrames) and notes."""
    devs = devices(trace)
    curves = memory_curve(trace, device, start_ns, end_ns, max_points)
    return {
        "devices": devs,
        "default_device": devs[0] if devs else None,
        "curves": curves,
        "peaks": memory_peaks(trace, device, start_ns, end_ns),
        "events": memory_events(trace, device, start_ns, end_ns),
        "stats": memory_stats(trace, device, start_ns, end_ns),
        "notes": memory_notes(trace),
    }
