"""``prof.key_averages()`` from a trace file, without torch, row for row.

Why: people know torch's table and paste it into issues; printing the same rows from a
saved trace (any machine, no torch, no GPU) makes traces comparable with what they saw
live, and a number that differs from torch's is a number nobody trusts. So the rules are
torch's own (``torch/autograd/profiler.py: _parse_kineto_results`` and
``profiler_util.EventList``), checked against ``key_averages()`` of the same profile by
tests/test_torch_oracle.py:

- every host event is a node of one tree per thread, Python frames (``python_function``)
  included: an event's self time is its duration less its direct children's, so the
  time of Python code an op calls back into is the frames' (``with_stack=True``);
- torch's hidden utility events (aten::_version, profiler::_record_function_* ...) are
  left out, their time staying in the parent's self time; a same-name only child is
  folded into its parent, whatever its kind (``EventList._remove_dup_nodes``);
- async ranges (``communication.async_ranges``: gloo:*/nccl:* work ranges) are rows of
  their own with their whole duration as total and no self time, in no one's tree;
- rows are keyed by name (ProfilerStep#N as ProfilerStep*), device or host, whether the
  event is a user annotation, and when asked by input shapes and the innermost N stack
  frames; they come in the order of their first event;
- memory (``profile_memory=True``): an event's memory is the bytes of every ``[memory]``
  record within its time, on any thread; records inside no host event are rows named
  ``[memory]`` (and ``[OutOfMemory]`` records rows of their own), as torch lists them;
- times are torch's floats: microseconds from the profiler's start (the trace's
  ``PyTorch Profiler`` span), summed in torch's order, so sorting ties break as in torch.

Where ours differs on purpose (docs/api.md, "key_averages"): TensorList inputs keep one
shape per tensor (torch prints ``[]``), and ``group_by_stack_n`` groups by the stack the
trace's Python frames give (torch 2.x leaves eager ops' stacks empty); the rows of one
name still add up to torch's row.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.communication import async_ranges
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.operators import CALL_ROLES, TORCH_HIDDEN_NAMES, CallTree, build_call_tree, input_shapes
from tb_profiler.analysis.shared import name_map
from tb_profiler.analysis.stacks import op_stacks
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

# torch's sort_by names (after cuda/xpu/... -> device)
SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "device_time", "device_time_total",
             "self_device_time_total", "count", "cpu_memory_usage", "self_cpu_memory_usage",
             "device_memory_usage", "self_device_memory_usage")
COLUMNS = ("device", "user_annotation", "is_async", "count", "self_cpu_time_total", "cpu_time_total", "cpu_time",
           "self_device_time_total", "device_time_total", "device_time", "cpu_memory_usage",
           "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage")
_DEVICE_ALIASES = ("cuda", "xpu", "privateuse1", "mtia", "hpu")
# torch's DeviceType values whose memory records count as CPU / device memory
# (profiler.py: _cpu_memory_usage, _device_memory_usage)
_CPU_MEMORY = (0, 2, 5)           # CPU, MKLDNN, IDEEP
_DEVICE_MEMORY = (1, 20, 6, 12)   # CUDA, PrivateUse1, HIP, XPU
MEMORY_ROW, OOM_ROW = "[memory]", "[OutOfMemory]"
# what a row is (_Rows.part): a host event of the tree, an async range, a device event, a
# memory record inside no host event (or an OOM record)
HOST, ASYNC, DEVICE, MEMORY = 0, 1, 2, 3


@per_trace
def torch_call_tree(trace) -> CallTree:
    """The call tree under torch's key_averages rules."""
    return build_call_tree(trace, hidden_names=TORCH_HIDDEN_NAMES, runtime_is_child=True, fold_kinds=None)


def sort_key(sort_by: str | None) -> str | None:
    """torch's sort_by spelling (cuda_time_total, self_xpu_time_total, ...) -> our column;
    ValueError listing the supported keys for anything else."""
    if sort_by is None:
        return None
    key = sort_by
    for alias in _DEVICE_ALIASES:
        key = key.replace(alias, "device")
    if key not in SORT_KEYS:
        known = ", ".join(SORT_KEYS + tuple(k.replace("device", "cuda") for k in SORT_KEYS if "device" in k))
        raise ValueError(f"sort_by {sort_by!r} is not supported; use one of: {known} "
                         f"(or None for first-call order)")
    return key


def _torch_names(trace, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key per row, text per key): names as torch keys them (ProfilerStep#N ->
    ProfilerStep*), rewritten once per distinct name id."""
    used, inv = np.unique(ids, return_inverse=True)
    texts = [trace.str(int(i)) or "" for i in used.tolist()]
    texts = ["ProfilerStep*" if t.startswith("ProfilerStep#") else t for t in texts]
    uniq, key_of_used = np.unique(np.array(texts, dtype=str), return_inverse=True)
    return key_of_used.reshape(-1)[inv.reshape(-1)], uniq.astype(object)


@per_trace
def _start_ns(trace) -> int:
    """The profiler's start, torch's time zero (``trace_start_ns``): the trace's
    ``PyTorch Profiler`` span where there is one, else its first event."""
    ev = trace.events
    span = np.flatnonzero((ev["kind"] == Kind.TRACE) & (ev["ts"] != MISSING_INT))
    if len(span):
        return int(ev["ts"][span].min())
    ok = ev["ts"] != MISSING_INT
    return int(ev["ts"][ok].min()) if ok.any() else 0


def _hidden(trace) -> np.ndarray:
    return name_map(trace, TORCH_HIDDEN_NAMES.__contains__)


@per_trace
def _memory(trace) -> dict:
    """torch's memory figures: per event, the bytes of the [memory] records within its
    [start, end] on any thread (cpu, device); the records inside no host event, and the
    [OutOfMemory] records (ts, cpu bytes, device bytes, name) that become rows."""
    ev = trace.events
    n = len(ev)
    rec = trace.memory_records
    ok = rec["ts"] != MISSING_INT
    order = np.flatnonzero(ok)[np.argsort(rec["ts"][ok], kind="stable")]
    rts = rec["ts"][order]
    cpu_b, dev_b = _split_bytes(rec["bytes"][order], rec["device_type"][order])
    cpu_cum, dev_cum = np.r_[0, np.cumsum(cpu_b)], np.r_[0, np.cumsum(dev_b)]
    host = np.flatnonzero(_host_events(trace) & (ev["ts"] != MISSING_INT))
    start = ev["ts"][host]
    end = start + np.where(ev["dur"][host] == MISSING_INT, 0, ev["dur"][host])
    lo, hi = np.searchsorted(rts, start, "left"), np.searchsorted(rts, end, "right")
    cpu, dev = np.zeros(n, np.int64), np.zeros(n, np.int64)
    cpu[host], dev[host] = cpu_cum[hi] - cpu_cum[lo], dev_cum[hi] - dev_cum[lo]
    # a record is used when some host event covers it: among the events starting at or
    # before it, the furthest end reaches it
    free = np.ones(len(rts), bool)
    if len(host):
        by_start = np.argsort(start, kind="stable")
        reach = np.maximum.accumulate(end[by_start])
        k = np.searchsorted(start[by_start], rts, "right") - 1
        free = (k < 0) | (reach[np.maximum(k, 0)] < rts)
    oom = _oom_records(trace)
    return {"cpu": cpu, "device": dev,
            "rows_ts": np.concatenate([rts[free], oom["ts"]]),
            "rows_cpu": np.concatenate([cpu_b[free], oom["cpu"]]),
            "rows_dev": np.concatenate([dev_b[free], oom["dev"]]),
            "rows_oom": np.r_[np.zeros(int(free.sum()), bool), np.ones(len(oom["ts"]), bool)]}


def _split_bytes(nbytes: np.ndarray, device_type: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cpu bytes, device bytes) of memory records, by torch's device types."""
    nbytes = np.where(nbytes == MISSING_INT, 0, nbytes).astype(np.int64)
    return (np.where(np.isin(device_type, _CPU_MEMORY), nbytes, 0),
            np.where(np.isin(device_type, _DEVICE_MEMORY), nbytes, 0))


def _oom_records(trace) -> dict:
    inst = trace.instants
    oom = np.flatnonzero(_named(trace, inst["name"], OOM_ROW) & (inst["ts"] != MISSING_INT)) if len(inst) else \
        np.zeros(0, np.int64)
    cpu, dev = _split_bytes(inst["mem_bytes"][oom], inst["device_type"][oom]) if len(oom) else (oom, oom)
    return {"ts": inst["ts"][oom] if len(oom) else oom, "cpu": cpu, "dev": dev}


def _named(trace, ids: np.ndarray, text: str) -> np.ndarray:
    strings = trace.strings
    hit = [i for i in np.unique(ids).tolist() if 0 <= i < len(strings) and strings[i] == text]
    return np.isin(ids, hit)


@per_trace
def _host_events(trace) -> np.ndarray:
    """Events torch makes host FunctionEvents of: every host event of the call tree's
    roles that is not hidden, async ranges included."""
    return role_mask(trace.roles, CALL_ROLES) & ~_hidden(trace)


def _self_cpu(trace, tree: CallTree, host: np.ndarray, elapsed_host: np.ndarray) -> np.ndarray:
    """torch's self CPU time of host rows: elapsed less the children's elapsed, summed in
    the children's start order (floats, as torch)."""
    n = len(trace.events)
    elapsed = np.zeros(n)
    elapsed[host] = elapsed_host
    child = host[tree.parent[host] >= 0]
    child = child[np.lexsort((-elapsed[child], trace.events["ts"][child]))]
    children = np.bincount(tree.parent[child], weights=elapsed[child], minlength=n)
    return elapsed[host] - children[host]


def _self_memory(tree: CallTree, host: np.ndarray, usage: np.ndarray) -> np.ndarray:
    child = host[tree.parent[host] >= 0]
    below = np.zeros(len(usage), np.int64)
    np.add.at(below, tree.parent[child], usage[child])
    return usage[host] - below[host]


def _stack_keys(trace, rows: np.ndarray, n: int) -> tuple[np.ndarray, list[list[str]]]:
    """(key per row, frames per key): each row's innermost n stack frames."""
    sid, table = op_stacks(trace)
    used, inv = np.unique(sid[rows], return_inverse=True)
    texts = np.array(["\n".join(table.texts(int(s))[:n]) if s >= 0 else "" for s in used.tolist()], dtype=str)
    uniq, key = np.unique(texts, return_inverse=True)
    frames = [u.split("\n") if u else [] for u in uniq.tolist()]
    return key.reshape(-1)[inv.reshape(-1)], frames


class _Rows:
    """The events and memory records torch lists, with their per-event figures (floats
    in us, bytes), in torch's event order (by start, longest first)."""

    def __init__(self, trace, tree: CallTree):
        ev = trace.events
        host = np.flatnonzero(tree.node & ~tree.merged)
        asynchronous = np.flatnonzero(async_ranges(trace) & ~_hidden(trace))
        device = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK) | (ev["kind"] == Kind.GPU_USER_ANNOTATION))
        mem = _memory(trace)
        n_free = len(mem["rows_ts"])
        event_rows = np.concatenate([host, asynchronous, device])
        part = np.repeat([HOST, ASYNC, DEVICE, MEMORY], [len(host), len(asynchronous), len(device), n_free])
        t0 = _start_ns(trace)
        dur = np.where(ev["dur"][event_rows] == MISSING_INT, 0, ev["dur"][event_rows])
        start = np.concatenate([(ev["ts"][event_rows] - t0) / 1000.0, (mem["rows_ts"] - t0) / 1000.0])
        end = np.concatenate([(ev["ts"][event_rows] + dur - t0) / 1000.0, (mem["rows_ts"] - t0) / 1000.0])
        elapsed = end - start
        m = len(part)
        v = {k: np.zeros(m) for k in ("self_cpu", "self_dev", "dev")}
        v["cpu"] = np.where((part == HOST) | (part == ASYNC), elapsed, 0.0)
        is_host = part == HOST
        v["self_cpu"][is_host] = _self_cpu(trace, tree, host, elapsed[is_host])
        v["self_dev"][is_host] = tree.device_self[host] / 1000.0
        v["dev"][is_host] = tree.device_total[host] / 1000.0
        v["self_dev"][part == DEVICE] = v["dev"][part == DEVICE] = elapsed[part == DEVICE]
        for col, src, rows_col in (("cpu_mem", "cpu", "rows_cpu"), ("dev_mem", "device", "rows_dev")):
            usage = mem[src]
            v[col] = np.concatenate([usage[event_rows], mem[rows_col]])
            v[col][part == DEVICE] = 0
            v["self_" + col] = v[col].copy()
            v["self_" + col][is_host] = _self_memory(tree, host, usage)
            v["self_" + col][(part == ASYNC) | (part == DEVICE)] = 0
        names, name_text = _torch_names(trace, ev["name"][event_rows])
        free_names = np.where(mem["rows_oom"], len(name_text) + 1, len(name_text))
        self.name_text = np.concatenate([name_text, np.array([MEMORY_ROW, OOM_ROW], dtype=object)])
        ua = (ev["kind"] == Kind.USER_ANNOTATION) | (ev["kind"] == Kind.GPU_USER_ANNOTATION)
        order = np.lexsort((-elapsed, start))
        self.event_rows = np.concatenate([event_rows, np.full(n_free, NO_ROW)])[order]
        self.part = part[order]
        self.name = np.concatenate([names, free_names])[order]
        self.ua = np.concatenate([ua[event_rows], np.zeros(n_free, bool)])[order]
        self.values = {k: a[order] for k, a in v.items()}


def key_averages(trace, group_by_input_shape: bool = False, group_by_stack_n: int = 0):
    """torch's ``key_averages()`` as a DataFrame, times in microseconds (float) as torch.

    Columns: name, [input_shapes], [stack] (frames, innermost first), device (False: a
    host event, True: a device event), user_annotation, is_async, count,
    self_cpu_time_total, cpu_time_total, cpu_time, self_device_time_total,
    device_time_total, device_time, cpu_memory_usage, self_cpu_memory_usage,
    device_memory_usage, self_device_memory_usage (bytes); rows in first-call order.
    """
    import pandas as pd

    r = _Rows(trace, torch_call_tree(trace))
    extra_cols = (["input_shapes"] if group_by_input_shape else []) + (["stack"] if group_by_stack_n else [])
    if not len(r.part):
        return pd.DataFrame({c: [] for c in ["name", *extra_cols, *COLUMNS]})
    keys = [r.name, (r.part == DEVICE).astype(np.int64), r.ua.astype(np.int64)]
    extra: dict[str, np.ndarray] = {}
    is_event = r.event_rows >= 0
    if group_by_input_shape:
        shape_key = np.full(len(r.part), -1, np.int64)
        text = np.full(len(r.part), "[]", dtype=object)
        if is_event.any():
            k, t = input_shapes(trace, r.event_rows[is_event])
            shape_key[is_event], text[is_event] = k, t[k]
        keys.append(shape_key)
        extra["input_shapes"] = text
    if group_by_stack_n:
        stack_key = np.full(len(r.part), -1, np.int64)
        frames_of = np.empty(len(r.part), dtype=object)
        frames_of[:] = [[]] * len(r.part) if len(r.part) else []
        if is_event.any():
            k, frames = _stack_keys(trace, r.event_rows[is_event], group_by_stack_n)
            stack_key[is_event] = k
            lut = np.empty(len(frames), dtype=object)
            lut[:] = frames
            frames_of[is_event] = lut[k]
        keys.append(stack_key)
        extra["stack"] = frames_of
    return _average(pd, r, keys, extra)


def _average(pd, r: _Rows, keys: list[np.ndarray], extra: dict):
    """Group rows by keys (rows in torch's event order) and sum torch's columns; groups
    come in the order of their first row (key_averages' dict order)."""
    inv, first = factorize(*keys)
    m = len(first)
    v = r.values

    def total(values):  # bincount adds in row order: torch's order of += per key
        return np.bincount(inv, weights=values, minlength=m)

    def total_int(values):
        out = np.zeros(m, np.int64)
        np.add.at(out, inv, values)
        return out

    count = np.bincount(inv, minlength=m)
    cpu, dev = total(v["cpu"]), total(v["dev"])
    data = {"name": r.name_text[r.name[first]], **{k: a[first] for k, a in extra.items()},
            "device": r.part[first] == DEVICE, "user_annotation": r.ua[first], "is_async": r.part[first] == ASYNC,
            "count": count, "self_cpu_time_total": total(v["self_cpu"]), "cpu_time_total": cpu,
            "cpu_time": cpu / count, "self_device_time_total": total(v["self_dev"]), "device_time_total": dev,
            "device_time": dev / count}
    for col, name in (("cpu_mem", "cpu_memory_usage"), ("self_cpu_mem", "self_cpu_memory_usage"),
                      ("dev_mem", "device_memory_usage"), ("self_dev_mem", "self_device_memory_usage")):
        data[name] = total_int(v[col])
    return pd.DataFrame(data)


def table(trace, sort_by: str | None = "self_cpu_time_total", row_limit: int = 10,
          group_by_input_shape: bool = False, group_by_stack_n: int = 0, **kw) -> str:
    """The text of ``prof.key_averages(group_by_input_shape, group_by_stack_n).table(sort_by,
    row_limit)`` for this trace: same rows, columns, widths, rounding and footer as
    torch's (keyword arguments as torch's ``table``: max_name_column_width, ...)."""
    from tb_profiler.analysis.keyavg_text import render

    key = sort_key(sort_by)
    avg = key_averages(trace, group_by_input_shape, group_by_stack_n)
    return render(trace, avg, key, row_limit, **kw)


__all__ = ["COLUMNS", "SORT_KEYS", "key_averages", "sort_key", "table", "torch_call_tree"]
