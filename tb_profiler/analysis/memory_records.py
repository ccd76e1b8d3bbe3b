"""Memory records: the [memory] instants of a trace, once per trace, with their device and
the operator around each one; what the memory analyses all read.

Why its own module: the curves and events (analysis.memory) and the per-operator table
(analysis.memory_stats) are built from these, and memory.memory() shows all of them; with
the records here, memory_stats reads them without importing memory.py, which imports it.
See analysis.memory's docstring for what the records are and how they differ from
torch-tb-profiler's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW, device_mask, host_parent, nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import nesting_order
from tb_profiler.analysis.shared import name_map
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind

__all__ = ["C10_DEVICE_TYPES", "NO_RECORDS_NOTE", "Records", "device_key", "devices", "memory_op_parent",
           "memory_ops", "memory_records", "memory_table", "record_ops", "select_records", "sort_devices"]

# c10::DeviceType numbers (torch/headeronly/core/DeviceType.h).
C10_DEVICE_TYPES = {
    0: "CPU", 1: "CUDA", 2: "MKLDNN", 3: "OPENGL", 4: "OPENCL", 5: "IDEEP", 6: "HIP", 7: "FPGA",
    8: "MAIA", 9: "XLA", 10: "Vulkan", 11: "Metal", 12: "XPU", 13: "MPS", 14: "Meta", 15: "HPU",
    16: "VE", 17: "Lazy", 18: "IPU", 19: "MTIA", 20: "PrivateUse1",
}
# The word for one device of each type when the trace itself does not say.
_TYPE_WORDS = {1: "GPU", 6: "GPU", 12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA", 20: "NPU"}
# Which c10 device types belong to each backend of trace.device_kinds.
_BACKEND_TYPES = {"CUDA": (1,), "ROCm": (1, 6), "XPU": (12,), "HPU": (15,), "MTIA": (19,),
                  "PrivateUse1": (20,)}
# Host events the old plugin did not count as operators (wrappers, steps, optimizer and
# data-loading spans).
_NOT_OPS = ("ProfilerStep#", "Optimizer.", "[pl][", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
_NOT_OPS_EXACT = ("DataParallel.forward", "DistributedDataParallel.forward")

_RECORD_COLUMNS = ("row", "ts", "pid", "tid", "addr", "bytes", "total_allocated",
                   "total_reserved", "device_type", "device_id")
NO_RECORDS_NOTE = "the trace has no [memory] records: profile_memory=True was not set?"


# -- device names ------------------------------------------------------------------------
def device_key(device_type: int, device_id: int, trace=None) -> str:
    """"CPU", "GPU0", "XPU1", ...: the trace's own word for its backend's device types,
    else a word by c10 device type, else the c10 name (e.g. "Meta0")."""
    t, i = int(device_type), int(device_id)
    if t == 0:
        return "CPU"
    if t == MISSING_INT:
        return "Unknown"
    own = trace is not None and bool(trace.device_kinds) and t in _BACKEND_TYPES.get(trace.device_kinds[0], ())
    word = (trace.device_word if own else None) or _TYPE_WORDS.get(t) or C10_DEVICE_TYPES.get(t) or f"DeviceType{t}:"
    return f"{word}{i}" if i >= 0 else word


def sort_devices(names) -> list[str]:
    """Accelerators first (by word, then id), CPU after them: the UI opens the first."""
    def key(n: str):
        word = n.rstrip("0123456789")
        num = n[len(word):]
        return (n == "CPU", word, int(num) if num else -1)

    return sorted(set(names), key=key)


# -- the records, once per trace ------------------------------------------------------------
@dataclass
class Records:
    """The [memory] records in time order, with their device (see record_ops for the
    operator around each one).

    device: index into ``devices``.  Totals are MISSING_INT where the trace lacks them.
    """

    ts: np.ndarray
    bytes: np.ndarray
    addr: np.ndarray
    total_allocated: np.ndarray
    total_reserved: np.ndarray
    device: np.ndarray
    devices: list

    def __len__(self) -> int:
        return len(self.ts)


def memory_table(trace) -> dict:
    """The [memory] records' columns: row, ts, pid, tid, addr, bytes,
    total_allocated, total_reserved, device_type, device_id."""
    table = trace.memory_records
    return {c: table[c] for c in _RECORD_COLUMNS}


@per_trace
def memory_records(trace) -> Records:
    """All memory records of the trace, time-ordered, with device index and operator row."""
    m = memory_table(trace)
    order = np.lexsort((m["row"], m["ts"]))
    dtype, did = m["device_type"][order], m["device_id"][order]
    dev, first = factorize(dtype, did)
    names = [device_key(t, i, trace) for t, i in zip(dtype[first].tolist(), did[first].tolist())]
    return Records(ts=m["ts"][order], bytes=m["bytes"][order], addr=m["addr"][order],
                   total_allocated=m["total_allocated"][order], total_reserved=m["total_reserved"][order],
                   device=dev.reshape(-1).astype(np.int64), devices=names)


@per_trace
def record_ops(trace) -> np.ndarray:
    """Per record (in memory_records order): the innermost operator row enclosing it on its
    thread, -1 when none. Apart from the records because curves and peaks never need it."""
    m = memory_table(trace)
    return _enclosing_op(trace, m, np.lexsort((m["row"], m["ts"])))


@per_trace
def memory_ops(trace) -> np.ndarray:
    """Events that count as operators for memory: cpu_ops, less the wrappers and spans the
    old plugin left out (ProfilerStep#N, Optimizer.*, enumerate(DataLoader)#...,
    (Distributed)DataParallel.forward, Lightning's [pl][...] spans)."""
    ev = trace.events
    named_op = name_map(trace, lambda s: not (s.startswith(_NOT_OPS) or s in _NOT_OPS_EXACT))
    return (ev["kind"] == Kind.CPU_OP) & named_op


@per_trace
def memory_op_parent(trace) -> np.ndarray:
    """Each operator's nearest enclosing operator (events row, -1 at the top); -1 elsewhere."""
    mask = memory_ops(trace)
    out = np.full(len(trace.events), NO_ROW, dtype=np.int64)
    ops = np.flatnonzero(mask)
    out[ops] = nearest_ancestor(trace, ops, mask, include_self=False)
    return out


def _enclosing_op(trace, m, order: np.ndarray) -> np.ndarray:
    """For each record (an instant on a thread), the innermost operator containing its ts.

    The host events of a thread nest, so the innermost event containing ts is the last one
    starting at or before ts, or one of its ancestors: sort events and records together by
    (thread, start), take for each record the last event before it, then hop up the
    nesting until an operator whose end lies after ts (an event ending at ts is over).
    """
    ev = trace.events
    n_rec = len(order)
    out = np.full(n_rec, NO_ROW, dtype=np.int64)
    host = np.flatnonzero(~device_mask(trace) & (ev["kind"] != Kind.TRACE))
    if not n_rec or not len(host):
        return out
    cols = ("pid", "tid")  # numbers only: old traces write an event's tid as text, a record's as int
    group, _ = factorize(*(np.concatenate([ev[c][host], m[c][order]]) for c in cols))
    ev_group, rec_group = group[:len(host)], group[len(host):]
    start = ev["ts"][host]
    rec_ts = m["ts"][order]
    # The events of each thread by (start, innermost last); records are never sorted in
    # with them: each one takes the last event of its thread starting at or before it
    # (an event starting with it comes before it), found by one binary search per thread.
    srt = nesting_order(ev_group, start, -(start + np.maximum(ev["dur"][host], 0)))
    g_sorted, s_sorted = ev_group[srt], start[srt]
    bounds = np.searchsorted(g_sorted, np.arange(int(group.max()) + 2))  # thread g: [bounds[g], bounds[g + 1])
    by_thread = np.argsort(rec_group, kind="stable")
    rec_bounds = np.searchsorted(rec_group[by_thread], np.arange(int(group.max()) + 2))
    prev = np.full(n_rec, -1, dtype=np.int64)
    for g in np.flatnonzero(np.diff(rec_bounds)).tolist():  # a loop over threads, not events
        lo, hi = int(bounds[g]), int(bounds[g + 1])
        recs = by_thread[rec_bounds[g]:rec_bounds[g + 1]]
        at = lo + np.searchsorted(s_sorted[lo:hi], rec_ts[recs], side="right") - 1
        prev[recs] = np.where(at >= lo, at, -1)
    cand = np.where(prev >= 0, host[srt[np.maximum(prev, 0)]], NO_ROW)
    out[:] = _hop_to_op(trace, cand, rec_ts)
    return out


def _hop_to_op(trace, cur: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """From each candidate event up its host ancestors to the first operator still open at
    ts; one vectorized hop per nesting level."""
    parent, is_op = host_parent(trace), memory_ops(trace)
    end = trace.events["ts"] + np.maximum(trace.events["dur"], 0)
    cur = cur.copy()
    out = np.full(len(cur), NO_ROW, dtype=np.int64)
    todo = np.flatnonzero(cur >= 0)
    while len(todo):
        c = cur[todo]
        found = is_op[c] & (end[c] > ts[todo])
        out[todo[found]] = c[found]
        todo = todo[~found]
        cur[todo] = parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return out


def select_records(rec: Records, device, start_ns, end_ns) -> np.ndarray:
    """Record indices on ``device`` (a key or None: all) with start_ns <= ts <= end_ns."""
    keep = np.ones(len(rec), dtype=bool)
    if device is not None:
        keep &= rec.device == (rec.devices.index(device) if device in rec.devices else -1)
    if start_ns is not None:
        keep &= rec.ts >= int(start_ns)
    if end_ns is not None:
        keep &= rec.ts <= int(end_ns)
    return np.flatnonzero(keep)


def devices(trace) -> list[str]:
    """Device keys that have memory records, accelerators first."""
    return sort_devices(memory_records(trace).devices)
