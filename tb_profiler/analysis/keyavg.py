"""``prof.key_averages().table()`` from a trace file, without torch.

Why: people know torch's text table and paste it into issues; being able to print the
same table from a saved trace (any machine, no torch, no GPU) makes traces comparable
with what they saw live. The numbers follow torch's rules, not the old plugin's:
- rows are host calls (cpu_op, user annotations, runtime calls) and device events
  (kernels, memcpy, memset), keyed by name (ProfilerStep#N as ProfilerStep*), by kind
  (host or device) and, when asked, by input shapes;
- torch's hidden utility events (aten::_version, profiler::_record_function_* ...) are
  left out, their time staying in the parent's self time; a same-name only child is
  folded into its parent (``EventList._remove_dup_nodes``);
- Self CPU % and CPU total % are shares of the summed self CPU time; the device %
  is a share of the summed device-event time.
Not reproduced: python_function rows (torch lists them when the trace was taken
``with_stack=True``, with self times that can go negative) and memory columns.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.operators import (
    TORCH_HIDDEN_NAMES,
    CallTree,
    build_call_tree,
    input_shapes,
)
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "device_time", "device_time_total",
             "self_device_time_total", "count")
_DEVICE_ALIASES = ("cuda", "xpu", "privateuse1", "mtia", "hpu")
# torch's header word per backend (use_device.upper()); ROCm runs as "cuda" in torch.
_TORCH_DEVICE_NAMES = {"CUDA": "CUDA", "ROCm": "CUDA", "XPU": "XPU", "MTIA": "MTIA", "HPU": "HPU"}
_NAME_WIDTH, _SHAPES_WIDTH, _COL_WIDTH, _SPACING = 55, 80, 12, 2


@per_trace
def torch_call_tree(trace) -> CallTree:
    """The call tree under torch's key_averages rules."""
    return build_call_tree(trace, hidden_names=TORCH_HIDDEN_NAMES, runtime_is_child=True,
                           fold_kinds=(Kind.CPU_OP, Kind.USER_ANNOTATION))


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


def key_averages(trace, group_by_input_shape: bool = False):
    """torch's ``key_averages()`` as a DataFrame, times in microseconds (float) as torch.

    Columns: name, [input_shapes], device (False: host call, True: device event), count,
    self_cpu_time_total, cpu_time_total, cpu_time, self_device_time_total,
    device_time_total, device_time; rows in first-call order.
    """
    import pandas as pd

    ev = trace.events
    tree = torch_call_tree(trace)
    host = np.flatnonzero(tree.node & ~tree.merged)
    dev = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK))
    rows = np.concatenate([host, dev])
    dur = np.where(ev["dur"][rows] == MISSING_INT, 0, ev["dur"][rows]).astype(np.float64)
    is_dev = np.arange(len(rows)) >= len(host)
    name_key, name_text = _torch_names(trace, ev["name"][rows])
    names = name_text[name_key]
    keys = [name_key, is_dev.astype(np.int64)]
    shapes = None
    if group_by_input_shape and len(rows):
        shape_key, shape_text = input_shapes(trace, rows)
        keys.append(shape_key)
        shapes = shape_text[shape_key]
    return _average(pd, trace, tree, rows, dur, is_dev, names, keys, shapes)


def _average(pd, trace, tree: CallTree, rows, dur, is_dev, names, keys, shapes):
    """Group rows by keys and sum torch's columns (us), first-call order."""
    cols = ["name"] + (["input_shapes"] if shapes is not None else []) + [
        "device", "count", "self_cpu_time_total", "cpu_time_total", "cpu_time",
        "self_device_time_total", "device_time_total", "device_time"]
    if not len(rows):
        return pd.DataFrame({c: [] for c in cols})
    _, first, inv = np.unique(np.stack(keys, axis=1), axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    m = len(first)
    ts = trace.events["ts"][rows]

    def total(values):
        return np.bincount(inv, weights=values, minlength=m) / 1e3

    count = np.bincount(inv, minlength=m)
    self_cpu = total(np.where(is_dev, 0.0, tree.host_self[rows]))
    cpu = total(np.where(is_dev, 0.0, dur))
    self_dev = total(np.where(is_dev, dur, tree.device_self[rows]))
    dev = total(np.where(is_dev, dur, tree.device_total[rows]))
    first_ts = np.full(m, np.iinfo(np.int64).max)
    np.minimum.at(first_ts, inv, ts)
    order = np.lexsort((first, first_ts))
    data = {"name": names[first], **({"input_shapes": shapes[first]} if shapes is not None else {}),
            "device": is_dev[first], "count": count, "self_cpu_time_total": self_cpu,
            "cpu_time_total": cpu, "cpu_time": cpu / count, "self_device_time_total": self_dev,
            "device_time_total": dev, "device_time": dev / count}
    return pd.DataFrame(data).iloc[order].reset_index(drop=True)


def format_time(us: float) -> str:
    """torch's _format_time: 1.234s, 1.234ms or 1.234us."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_share(part: float, whole: float) -> str:
    return "NaN" if whole == 0 else f"{part * 100.0 / whole:.2f}%"


def device_header(trace) -> str:
    """The word torch's table uses for this trace's device (CUDA, XPU, MTIA, ...)."""
    kinds = trace.device_kinds
    if not kinds:
        return "None"
    return _TORCH_DEVICE_NAMES.get(kinds[0], (trace.device_word or kinds[0]).upper())


def table(trace, sort_by: str | None = "self_cpu_time_total", row_limit: int = 10,
          group_by_input_shape: bool = False) -> str:
    """The text of ``prof.key_averages(group_by_input_shape).table(sort_by, row_limit)``
    for this trace: same columns, widths, rounding and footer as torch's."""
    key = sort_key(sort_by)
    avg = key_averages(trace, group_by_input_shape)
    if not len(avg):
        return ""
    if key is not None:
        avg = avg.sort_values(key, ascending=False, kind="stable")
    return _render(avg, device_header(trace), row_limit, group_by_input_shape)


def _render(avg, dev_name: str, row_limit: int, with_shapes: bool) -> str:
    """Lay the rows out exactly as torch's _build_table."""
    has_dev = bool((avg["self_device_time_total"] > 0).any())
    name_w = min(int(avg["name"].str.len().max()) + 4, _NAME_WIDTH)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_dev:
        headers += [f"Self {dev_name}", f"Self {dev_name} %", f"{dev_name} total", f"{dev_name} time avg"]
    headers.append("# of Calls")
    widths = [name_w] + [_COL_WIDTH] * (len(headers) - 1)
    if with_shapes:
        headers.append("Input Shapes")
        widths.append(min(int(avg["input_shapes"].str.len().max()) + 4, _SHAPES_WIDTH))
    fmt = "".join("{: >" + str(w) + "}" + " " * _SPACING for w in widths)
    sep = "".join("-" * w + " " * _SPACING for w in widths)
    sum_cpu = float(avg["self_cpu_time_total"].sum())
    sum_dev = float(avg.loc[avg["device"], "self_device_time_total"].sum())
    lines = [sep, fmt.format(*headers), sep]
    for r in avg.head(max(row_limit, 0)).itertuples(index=False):
        lines.append(fmt.format(*_row(r, name_w, has_dev, with_shapes, widths[-1], sum_cpu, sum_dev)))
    lines += [sep, f"Self CPU time total: {format_time(sum_cpu)}"]
    if has_dev:
        lines.append(f"Self {dev_name} time total: {format_time(sum_dev)}")
    return "\n".join(lines) + "\n"


def _row(r, name_w: int, has_dev: bool, with_shapes: bool, shapes_w: int, sum_cpu: float, sum_dev: float) -> list:
    name = r.name if len(r.name) < _NAME_WIDTH - 3 else r.name[:_NAME_WIDTH - 3] + "..."
    values = [name, format_share(r.self_cpu_time_total, sum_cpu), format_time(r.self_cpu_time_total),
              format_share(r.cpu_time_total, sum_cpu), format_time(r.cpu_time_total), format_time(r.cpu_time)]
    if has_dev:
        values += [format_time(r.self_device_time_total), format_share(r.self_device_time_total, sum_dev),
                   format_time(r.device_time_total), format_time(r.device_time)]
    values.append(r.count)
    if with_shapes:
        values.append(str(r.input_shapes)[:shapes_w])
    return values


__all__ = ["SORT_KEYS", "device_header", "key_averages", "sort_key", "table", "torch_call_tree"]
