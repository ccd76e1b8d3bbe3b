"""Route bodies: from parsed Traces (and already validated parameters) to JSON data.

Pure functions over the analyses (tb_profiler.analysis); no HTTP here. Absolute
timestamps become relative to the trace's origin (docs/api.md, "Times").
"""
from __future__ import annotations

from typing import Iterable

from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.plugin.timeline import origin, wall_origin

VIEW_ORDER = ("Overview", "Operator", "Kernel", "Trace", "Memory", "Module", "Distributed")

OP_GROUPS = {"Operation": "name", "OperationAndInputShape": "input_shape", "OperationAndStack": "stack",
             "name": "name", "input_shape": "input_shape", "stack": "stack"}
KERNEL_GROUPS = {"Kernel": "name", "KernelNameAndOp": "op", "name": "name", "op": "op"}


class NotFound(Exception):
    """Something the parameters name that the trace does not have (HTTP 404)."""


def _rebase(rows: Iterable[dict], fields: Iterable[str], t0: int) -> None:
    fields = tuple(fields)
    for row in rows:
        for f in fields:
            v = row.get(f)
            if isinstance(v, (int, float)) and v is not None and not isinstance(v, bool):
                row[f] = int(v) - t0


def _rebase_tree(nodes: list[dict], fields: tuple[str, ...], t0: int) -> None:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        _rebase([node], fields, t0)
        stack.extend(node.get("children") or [])


def has_device(trace) -> bool:
    return trace.has_device_work


# -- run level -----------------------------------------------------------------------------
def views(traces: list, n_workers: int) -> list[str]:
    """The views with data, over the run's (latest-span) traces."""
    from tb_profiler.analysis.modules import modules

    out = {"Overview", "Operator", "Trace"}
    for t in traces:
        if has_device(t):
            out.add("Kernel")
        if len(t.memory_records):
            out.add("Memory")
        if "Module" not in out:
            try:
                if len(modules(t)):
                    out.add("Module")
            except Exception:  # a module analysis problem must not hide the other views
                pass
        info = t.distributed_info or {}
        if n_workers > 1 or (isinstance(info, dict) and (info.get("world_size") or 1) > 1):
            out.add("Distributed")
    return [v for v in VIEW_ORDER if v in out]


# -- overview ------------------------------------------------------------------------------
def overview(trace, n_workers: int) -> dict:
    from tb_profiler.analysis.overview import overview as _overview

    data = to_jsonable(_overview(trace, records=True))
    t0 = origin(trace)
    _rebase(data.get("steps", []), ("start_ns", "end_ns", "host_start_ns", "host_end_ns"), t0)
    word = data.get("device_word") or trace.device_word
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), **data,
            "matrix_unit": trace.matrix_unit,
            "environments": [{"title": "Number of Worker(s)", "value": str(n_workers)},
                             {"title": "Device Type", "value": word if has_device(trace) and word else "CPU"}]}


# -- operators -----------------------------------------------------------------------------
def _pie(rows: list[dict], column: str, top: int) -> list[dict]:
    rows = sorted((r for r in rows if (r.get(column) or 0) > 0), key=lambda r: -r[column])
    out = [{"name": r["name"] if "input_shape" not in r else f"{r['name']} {r['input_shape']}".rstrip(),
            "value_ns": r[column]} for r in rows[:top]]
    rest = sum(r[column] for r in rows[top:])
    if rest > 0:
        out.append({"name": "Other", "value_ns": rest})
    return out


def operation_pie(trace, group_by: str, top: int) -> dict:
    rows = to_jsonable(trace.operators(OP_GROUPS[group_by]))
    dev = has_device(trace)
    return {"group_by": group_by,
            "device_self": _pie(rows, "device_self_ns", top) if dev else [],
            "device_total": _pie(rows, "device_total_ns", top) if dev else [],
            "host_self": _pie(rows, "host_self_ns", top),
            "host_total": _pie(rows, "host_total_ns", top)}


def operation_table(trace, group_by: str) -> dict:
    rows = to_jsonable(trace.operators(OP_GROUPS[group_by]))
    if OP_GROUPS[group_by] == "stack":  # one row per (operator, distinct call stack): give its frames
        from tb_profiler.analysis.stacks import stack_frames

        frames = {sid: stack_frames(trace, sid) if sid is not None and sid >= 0 else []
                  for sid in {r.get("stack_id") for r in rows}}
        for r in rows:
            r["frames"] = frames[r.get("stack_id")]
    return {"group_by": group_by, "has_device": has_device(trace), "matrix_unit": trace.matrix_unit, "rows": rows}


def operation_stack(trace, group_by: str, op_name: str, input_shape: str | None) -> dict:
    from tb_profiler.analysis.operators import operator_stacks

    shape = input_shape if OP_GROUPS[group_by] == "input_shape" else None
    rows = to_jsonable(operator_stacks(trace, op_name, shape))
    if not rows:
        table = trace.operators(OP_GROUPS[group_by])
        hit = table["name"] == op_name
        if shape is not None and "input_shape" in table:
            hit &= table["input_shape"] == shape
        if not bool(hit.any()):
            what = f"operator {op_name!r}" + (f" with input shape {shape!r}" if shape is not None else "")
            raise NotFound(f"no {what} in this trace")
    return {"op_name": op_name, "input_shape": shape, "rows": rows}


# -- kernels -------------------------------------------------------------------------------
def kernel_pie(trace, top: int) -> dict:
    rows = to_jsonable(trace.kernels("name")) if has_device(trace) else []
    return {"total_ns": sum(r.get("total_ns") or 0 for r in rows), "rows": _pie(rows, "total_ns", top)}


def kernel_table(trace, group_by: str) -> dict:
    rows = to_jsonable(trace.kernels(KERNEL_GROUPS[group_by])) if has_device(trace) else []
    return {"group_by": group_by, "matrix_unit": trace.matrix_unit, "rows": rows}


def kernel_tc(trace) -> dict:
    rows = to_jsonable(trace.kernels("name")) if has_device(trace) else []
    total = sum(r.get("total_ns") or 0 for r in rows)
    using = sum(r.get("total_ns") or 0 for r in rows if r.get("tensor_cores"))
    unit = trace.matrix_unit
    if unit is None:  # kernel names do not tell on this backend
        return {"total_ns": total, "using_tc_pct": None, "unit": None, "rows": []}
    return {"total_ns": total, "using_tc_pct": (using / total * 100.0) if total else None, "unit": unit,
            "rows": [{"name": f"Using {unit}", "value_ns": using},
                     {"name": f"Not using {unit}", "value_ns": total - using}]}


# -- memory --------------------------------------------------------------------------------
def _device(trace, device: str | None) -> tuple[list[str], str | None]:
    from tb_profiler.analysis.memory import devices

    devs = list(devices(trace))
    if device is not None and device not in devs:
        raise NotFound(f"no memory records for device {device!r}; devices: {', '.join(devs) or 'none'}")
    return devs, device if device is not None else (devs[0] if devs else None)


def memory_stats(trace, device: str | None, start_ns: int | None, end_ns: int | None) -> dict:
    from tb_profiler.analysis.memory import memory_notes
    from tb_profiler.analysis.memory import memory_stats as _stats

    devs, dev = _device(trace, device)
    t0 = origin(trace)
    rows = []
    if dev is not None:
        rows = to_jsonable(_stats(trace, dev, _abs(start_ns, t0), _abs(end_ns, t0)))
    return {"devices": devs, "default_device": devs[0] if devs else None, "device": dev, "rows": rows,
            "notes": to_jsonable(memory_notes(trace))}


def memory_curve(trace, start_ns: int | None, end_ns: int | None, max_points: int) -> dict:
    from tb_profiler.analysis.memory import devices, memory_notes, memory_peaks
    from tb_profiler.analysis.memory import memory_curve as _curve

    t0 = origin(trace)
    a, b = _abs(start_ns, t0), _abs(end_ns, t0)
    devs = list(devices(trace))
    curves = to_jsonable(_curve(trace, None, a, b, max_points))
    for points in curves.values():
        _rebase(points, ("ts_ns",), t0)
    peaks = to_jsonable(memory_peaks(trace, None, a, b))
    _rebase(peaks, ("peak_allocated_ns",), t0)
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), "devices": devs, "default_device": devs[0] if devs else None,
            "curves": curves, "peaks": peaks, "notes": to_jsonable(memory_notes(trace))}


def memory_events(trace, device: str | None, start_ns: int | None, end_ns: int | None, limit: int) -> dict:
    from tb_profiler.analysis.memory import memory_events as _events

    devs, dev = _device(trace, device)
    t0 = origin(trace)
    frame = _events(trace, dev, _abs(start_ns, t0), _abs(end_ns, t0)) if dev is not None else None
    total = 0 if frame is None else len(frame)
    rows = [] if frame is None else to_jsonable(frame.head(limit))
    for r in rows:
        r.pop("op_row", None)
        if isinstance(r.get("addr"), int):  # up to 2^64: beyond a JS number's exact range
            r["addr"] = hex(r["addr"] & 0xFFFFFFFFFFFFFFFF)
    _rebase(rows, ("alloc_ns", "free_ns"), t0)
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), "device": dev, "total": total, "truncated": total > limit, "rows": rows}


def _abs(rel: int | None, t0: int) -> int | None:
    return None if rel is None else int(rel) + t0


# -- modules -------------------------------------------------------------------------------
def module(trace) -> dict:
    from tb_profiler.analysis.modules import modules

    df = modules(trace)
    return {"source": df.attrs.get("source", ""), "rows": to_jsonable(df),
            "notes": to_jsonable(list(df.attrs.get("notes", [])))}


def tree(trace, step: int | None) -> dict:
    from tb_profiler.analysis.modules import module_tree

    data = to_jsonable(module_tree(trace, step))
    t0 = origin(trace)
    _rebase_tree(data.get("calls", []), ("start_ns", "end_ns"), t0)
    for stack in (data.get("nodes", []), data.get("calls", [])):
        _drop(stack, "event")
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), **data}


def _drop(nodes: list[dict], key: str) -> None:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        node.pop(key, None)
        stack.extend(node.get("children") or [])


# -- distributed ---------------------------------------------------------------------------
def _distributed(traces: list) -> dict:
    from tb_profiler.analysis.distributed import distributed

    return to_jsonable(distributed(traces))


def _pick(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    return [{k: r.get(k) for k in keys if k in r} for r in rows]


def dist_gpuinfo(traces: list, workers: list[str]) -> dict:
    data = _distributed(traces)
    out = []
    for worker, t in zip(workers, traces):
        info = t.distributed_info if isinstance(t.distributed_info, dict) else {}
        out.append({"worker": worker, "rank": info.get("rank"),
                    "devices": [{"id": d.id, "name": d.name, "kind": d.kind, "total_memory": d.total_memory,
                                 "compute_capability": d.compute_capability, "num_sms": d.num_sms}
                                for d in t.devices]})
    return {"info": data.get("info", {}), "notes": data.get("notes", []), "workers": to_jsonable(out)}


_OVERLAP = ("rank", "worker", "steps", "step", "step_ns", "computation_ns", "communication_ns", "overlap_ns",
            "other_ns", "overview_communication_ns", "communication_note")
_WAIT = ("rank", "worker", "steps", "step", "communication_ns", "wait_ns", "transfer_ns")


def dist_overlap(traces: list) -> dict:
    data = _distributed(traces)
    return {"info": data.get("info", {}), "notes": data.get("notes", []),
            "ranks": _pick(data.get("ranks", []), _OVERLAP), "steps": _pick(data.get("steps", []), _OVERLAP)}


def dist_wait(traces: list) -> dict:
    data = _distributed(traces)
    return {"info": data.get("info", {}), "notes": data.get("notes", []),
            "ranks": _pick(data.get("ranks", []), _WAIT), "steps": _pick(data.get("steps", []), _WAIT)}


def dist_commops(traces: list) -> dict:
    data = _distributed(traces)
    return {"info": data.get("info", {}), "notes": data.get("notes", []), "rows": data.get("collectives", [])}


# -- diff ----------------------------------------------------------------------------------
def diff(a: list, b: list) -> dict:
    from tb_profiler.analysis.diff import diff as _diff

    return to_jsonable(_diff(a, b))


def diffnode(a: list, b: list, path: str) -> dict:
    rows = diff(a, b).get("modules", [])
    by_path = {r["path"]: r for r in rows}
    if path and path not in by_path:
        raise NotFound(f"no module path {path!r} on either side")
    parent = lambda p: p.rsplit("/", 1)[0] if "/" in p else ""  # noqa: E731
    children = [r for r in rows if r["path"] != path and parent(r["path"]) == path]
    return {"path": path, "node": by_path.get(path), "children": children}
