"""Route bodies: from parsed Traces, or a run's summaries (RunSummaries), and already
validated parameters, to JSON data.

Pure functions over the analyses (tb_profiler.analysis); no HTTP here. Absolute
timestamps become relative to the trace's origin (docs/api.md, "Times"). The run-level
routes (views of a run of several workers, distributed/*) read summaries only.
"""
from __future__ import annotations

import threading
from typing import Any, Iterable

import numpy as np

from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.plugin.timeline import origin, wall_origin
from tb_profiler.trace.strings import bounded, shown, shown_all

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
def _flags(item) -> tuple[bool, bool, bool, dict]:
    """(device work, memory records, modules, distributedInfo) of a TraceSummary, or of a
    Trace in memory (a run of one worker, whose trace the server loads anyway)."""
    if hasattr(item, "has_memory"):  # a TraceSummary: the facts it was built with
        return item.has_device_work, item.has_memory, item.has_modules, item.distributed_info or {}
    from tb_profiler.analysis.modules import modules

    try:
        has_modules = len(modules(item)) > 0
    except Exception:  # a module analysis problem must not hide the other views
        has_modules = False
    return has_device(item), len(item.memory_records) > 0, has_modules, item.distributed_info or {}


def views(items: list, n_workers: int) -> list[str]:
    """The views with data, over the run's (latest-span) summaries (or traces)."""
    out = {"Overview", "Operator", "Trace"} | ({"Distributed"} if n_workers > 1 else set())
    for item in items:
        device, memory, mods, info = _flags(item)
        out |= {v for v, has in (("Kernel", device), ("Memory", memory), ("Module", mods)) if has}
        if isinstance(info, dict) and (info.get("world_size") or 1) > 1:
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
            "matrix_unit": trace.matrix_unit, "device_kinds": list(trace.device_kinds),
            "environments": [{"title": "Number of Worker(s)", "value": str(n_workers)},
                             {"title": "Device Type", "value": word if has_device(trace) and word else "CPU"}]}


# -- operators ----------------------------------------------------------------------------
MAX_TABLE_ROWS = 10_000  # rows of an operator or kernel table sent, in the table's order (all counted)


def _pie(df, column: str, top: int) -> list[dict]:
    """The ``top`` rows of df with the largest positive ``column`` (ties in table order),
    then "Other": their sum. By numpy over the columns: only the slices shown become
    Python objects (a table of 10 M names is no 10 M dicts)."""
    if not len(df):
        return []
    v = np.asarray(df[column].to_numpy(), dtype=np.float64)
    pos = np.flatnonzero(v > 0)
    order = pos[np.argsort(-v[pos], kind="stable")]
    head = order[:top]
    names = df["name"].to_numpy()[head]
    if "input_shape" in df:
        shapes = df["input_shape"].to_numpy()[head]
        names = [f"{n} {s}".rstrip() for n, s in zip(names, shapes)]
    out = [{"name": nm, "value_ns": int(v[i])} for nm, i in zip(shown_all(names), head.tolist())]
    rest = float(v[order[top:]].sum())
    if rest > 0:
        out.append({"name": "Other", "value_ns": int(rest)})
    return out


def _page(df) -> tuple[list[dict], dict]:
    """The first MAX_TABLE_ROWS rows of a table as JSON records (strings ``shown``), and
    how many it has in all."""
    rows = bounded(to_jsonable(df.head(MAX_TABLE_ROWS)))
    return rows, {"rows_total": int(len(df)), "truncated": len(df) > len(rows)}


def operation_pie(trace, group_by: str, top: int) -> dict:
    from tb_profiler.analysis.operators import operators_frame

    df = operators_frame(trace, OP_GROUPS[group_by])
    dev = has_device(trace)
    return {"group_by": group_by,
            "device_self": _pie(df, "device_self_ns", top) if dev else [],
            "device_total": _pie(df, "device_total_ns", top) if dev else [],
            "host_self": _pie(df, "host_self_ns", top),
            "host_total": _pie(df, "host_total_ns", top)}


def operation_table(trace, group_by: str) -> dict:
    from tb_profiler.analysis.operators import operators_frame

    rows, count = _page(operators_frame(trace, OP_GROUPS[group_by]))
    if OP_GROUPS[group_by] == "stack":  # one row per (operator, distinct call stack): give its frames
        from tb_profiler.analysis.stacks import stack_frames

        frames = {sid: bounded(stack_frames(trace, sid)) if sid is not None and sid >= 0 else []
                  for sid in {r.get("stack_id") for r in rows}}
        for r in rows:
            r["frames"] = frames[r.get("stack_id")]
    from tb_profiler.analysis.graphs import graph_notes

    notes = graph_notes(trace)  # graph replays: what the operators' device time leaves out
    return {"group_by": group_by, "has_device": has_device(trace), "matrix_unit": trace.matrix_unit, "rows": rows,
            **count, **({"notes": notes} if notes else {})}


def operation_stack(trace, group_by: str, op_name: str, input_shape: str | None) -> dict:
    from tb_profiler.analysis.operators import operator_stacks, operators_frame

    shape = input_shape if OP_GROUPS[group_by] == "input_shape" else None
    table = operator_stacks(trace, op_name, shape)
    if not len(table):
        ops = operators_frame(trace, OP_GROUPS[group_by])
        hit = ops["name"] == op_name
        if shape is not None and "input_shape" in ops:
            hit &= ops["input_shape"] == shape
        if not bool(hit.any()):
            what = f"operator {shown(op_name, 200)!r}" + (f" with input shape {shown(shape, 200)!r}"
                                                          if shape is not None else "")
            raise NotFound(f"no {what} in this trace")
    rows, count = _page(table)
    return {"op_name": shown(op_name), "input_shape": shown(shape), "rows": rows, **count}


# -- kernels -------------------------------------------------------------------------------
def _kernels(trace, group_by: str = "name"):
    from tb_profiler.analysis.kernels import _empty, kernels_frame

    return kernels_frame(trace, group_by) if has_device(trace) else _empty(group_by)


def kernel_pie(trace, top: int) -> dict:
    df = _kernels(trace)
    return {"total_ns": int(df["total_ns"].sum()) if len(df) else 0, "rows": _pie(df, "total_ns", top)}


def kernel_table(trace, group_by: str) -> dict:
    rows, count = _page(_kernels(trace, KERNEL_GROUPS[group_by]))
    return {"group_by": group_by, "matrix_unit": trace.matrix_unit, "rows": rows, **count}


def kernel_tc(trace) -> dict:
    df = _kernels(trace)
    total = int(df["total_ns"].sum()) if len(df) else 0
    using = int(df["total_ns"][df["tensor_cores"].to_numpy(dtype=bool)].sum()) if len(df) else 0
    unit = trace.matrix_unit
    if unit is None:  # kernel names do not tell on this backend
        return {"total_ns": total, "using_tc_pct": None, "unit": None, "rows": []}
    return {"total_ns": total, "using_tc_pct": (using / total * 100.0) if total else None, "unit": unit,
            "rows": [{"name": f"Using {unit}", "value_ns": using},
                     {"name": f"Not using {unit}", "value_ns": total - using}]}


# -- memory --------------------------------------------------------------------------------
def _device(trace, device: str | None) -> tuple[list[str], str | None]:
    from tb_profiler.analysis.memory_records import devices

    devs = list(devices(trace))
    if device is not None and device not in devs:
        raise NotFound(f"no memory records for device {device!r}; devices: {', '.join(devs) or 'none'}")
    return devs, device if device is not None else (devs[0] if devs else None)


# -- why a step is slow (issue 9) ------------------------------------------------------------
MAX_GAPS = 500          # the longest idle gaps sent (all are counted)
MAX_RANGE_ROWS = 200    # names per kind in a range's statistics (the rest counted)


def idle(trace, kernel_wait_ns: int) -> dict:
    out = trace.idle(kernel_wait_ns=kernel_wait_ns)
    gaps = out["gaps"]
    longest = gaps.nlargest(MAX_GAPS, "dur_ns").sort_values("start_ns", kind="stable")
    doc = to_jsonable({"devices": out["devices"], "streams": out["streams"], "gaps": longest,
                       "threshold_ns": out["threshold_ns"], "notes": out["notes"]})
    _rebase(doc["gaps"], ("start_ns", "end_ns"), origin(trace))
    doc["gaps_total"] = int(len(gaps))
    return doc


def launches(trace) -> dict:
    out = trace.launches()
    doc = to_jsonable({k: v for k, v in out.items() if k != "launches"})
    _rebase(doc["outliers"], ("call_start_ns", "kernel_start_ns"), origin(trace))
    doc["launches_total"] = int(len(out["launches"]))
    return doc


MAX_COPIES = 2000       # the largest copies sent (all are counted)


def memcpy(trace, bins: int) -> dict:
    out = trace.memcpy(bins=bins)
    copies = out["copies"]
    largest = copies.nlargest(MAX_COPIES, "bytes").sort_values("start_ns", kind="stable")
    doc = to_jsonable({"copies": largest, "directions": out["directions"], "notes": out["notes"]})
    t0 = origin(trace)
    _rebase(doc["copies"], ("start_ns",), t0)
    over = dict(out["over_time"])
    over["edges"] = [e - t0 for e in over.get("edges", [])]
    doc["over_time"] = to_jsonable(over)
    doc["copies_total"] = int(len(copies))
    return doc


def queue(trace, full_at: int) -> dict:
    return to_jsonable(trace.queue(full_at=full_at))


MAX_ROOFLINE_ROWS = 1000  # operators and kernels each, most FLOPs first


def roofline(trace) -> dict:
    out = trace.roofline()
    doc = to_jsonable({"operators": out["operators"].head(MAX_ROOFLINE_ROWS),
                       "kernels": out["kernels"].head(MAX_ROOFLINE_ROWS), "device": out["device"],
                       "notes": out["notes"]})
    doc["operators_total"], doc["kernels_total"] = int(len(out["operators"])), int(len(out["kernels"]))
    return doc


MAX_PATH_SEGMENTS = 20_000  # segments of the chosen step sent (the Trace view's highlight)


def critical_path(trace, step: int | None) -> dict:
    """Every step's summary and the top names on the paths; the segments of one step (the
    slowest when none is asked), on the timeline's clock, for the Trace view's highlight."""
    out = trace.critical_path()
    steps = out["steps"]
    if step is None and len(steps):
        step = int(steps.loc[steps["length_ns"].idxmax(), "step"])
    if step is not None and len(steps) and step not in set(steps["step"].tolist()):
        raise NotFound(f"no step {step}; steps: {', '.join(map(str, steps['step'].tolist()))}")
    seg = out["segments"]
    mine = seg[seg["step"] == step] if step is not None else seg.iloc[:0]
    doc = to_jsonable({"steps": steps, "top": out["top"].head(200), "segments": mine.head(MAX_PATH_SEGMENTS),
                       "notes": out["notes"]})
    _rebase(doc["segments"], ("start_ns", "end_ns"), origin(trace))
    doc["step"], doc["segments_total"] = step, int(len(mine))
    return doc


def annotations(trace) -> dict:
    return to_jsonable(trace.annotations())


def step_outliers(trace, factor: float) -> dict:
    doc = to_jsonable(trace.step_outliers(factor=factor))
    _rebase(doc["steps"], ("start_ns",), origin(trace))
    return doc


def range_stats(trace, start_ns: int, end_ns: int) -> dict:
    """The range [start_ns, end_ns) in ns relative to the trace's origin, as the timeline's."""
    t0 = origin(trace)
    out = trace.range_stats(t0 + start_ns, t0 + end_ns)
    rows = out["rows"]
    kept = rows.groupby("kind", sort=False).head(MAX_RANGE_ROWS)
    left = rows.groupby("kind", sort=False).size() - kept.groupby("kind", sort=False).size()
    return {"start_ns": start_ns, "end_ns": end_ns, "events": out["events"], "kinds": to_jsonable(out["kinds"]),
            "rows": bounded(to_jsonable(kept)), "more": {k: int(n) for k, n in left.items() if n > 0}, "notes": out["notes"]}


def memory_stats(trace, device: str | None, start_ns: int | None, end_ns: int | None) -> dict:
    from tb_profiler.analysis.memory import memory_notes
    from tb_profiler.analysis.memory_stats import memory_stats as _stats

    devs, dev = _device(trace, device)
    t0 = origin(trace)
    rows = []
    if dev is not None:
        rows = to_jsonable(_stats(trace, dev, _abs(start_ns, t0), _abs(end_ns, t0)))
    return {"devices": devs, "default_device": devs[0] if devs else None, "device": dev, "rows": rows,
            "notes": to_jsonable(memory_notes(trace))}


def memory_curve(trace, start_ns: int | None, end_ns: int | None, max_points: int) -> dict:
    from tb_profiler.analysis.memory import memory_notes, memory_peaks
    from tb_profiler.analysis.memory_records import devices
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
class SummaryMissing(Exception):
    """A file of the run without a summary; str: the worker and why (the cross-rank
    analysis names it in its notes, and ``info.excluded`` lists it)."""

    def __init__(self, worker: str, reason: str):
        super().__init__(f"{worker}: {reason}")
        self.worker, self.reason = worker, reason


class RunSummaries:
    """One span of a run as the run-level routes see it: each worker's TraceSummary (or a
    SummaryMissing), and the cross-rank analysis over them, computed once on first use and
    shared by every route (and each JSON part of it converted once)."""

    def __init__(self, summaries: list):
        self.summaries = summaries
        self._lock = threading.RLock()
        self._result: dict | None = None
        self._parts: dict[str, Any] = {}

    @property
    def ok(self) -> list:
        return [s for s in self.summaries if not isinstance(s, BaseException)]

    @property
    def missing(self) -> list[SummaryMissing]:
        return [s for s in self.summaries if isinstance(s, SummaryMissing)]

    def result(self) -> dict:
        """``distributed_from_summaries`` over the summaries (once)."""
        from tb_profiler.analysis.distributed import distributed_from_summaries

        with self._lock:
            if self._result is None:
                self._result = distributed_from_summaries(self.summaries)
            return self._result

    def part(self, name: str) -> Any:
        """One part of the result as JSON data (once)."""
        with self._lock:
            if name not in self._parts:
                self._parts[name] = to_jsonable(self.result()[name])
            return self._parts[name]


def run_summaries(items: Iterable) -> RunSummaries:
    """A RunSummaries over TraceSummaries or Traces (summarized: one definition of every
    number, whether the traces are in memory or not)."""
    from tb_profiler.analysis.summarize import summarize_trace

    return RunSummaries([x if hasattr(x, "has_memory") or isinstance(x, BaseException) else summarize_trace(x)
                         for x in items])


def _pick(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    return [{k: r.get(k) for k in keys if k in r} for r in rows]


def _info(run: RunSummaries) -> dict:
    """The analysis' info, with every rank left out and why: the ones that do not agree
    with the others, and the files without a summary."""
    excluded = run.part("excluded") + [{"rank": None, "worker": m.worker, "reason": m.reason} for m in run.missing]
    return {**run.part("info"), "excluded": excluded}


def _head(run: RunSummaries) -> dict:
    return {"info": _info(run), "notes": run.part("notes")}


def _with_clock(rows: list[dict], run: RunSummaries) -> list[dict]:
    """Rank rows with the clock correction the analysis applied to the rank."""
    clock = {c["rank"]: c for c in run.part("clock")}
    return [{**r, "clock_offset_ns": clock.get(r.get("rank"), {}).get("clock_offset_ns"),
             "clock_method": clock.get(r.get("rank"), {}).get("clock_method")} for r in rows]


def dist_gpuinfo(run: RunSummaries) -> dict:
    out = [{"worker": s.worker, "rank": s.rank, "devices": s.devices} for s in run.ok]
    return {**_head(run), "workers": to_jsonable(out)}


_OVERLAP = ("rank", "worker", "steps", "step", "step_ns", "computation_ns", "communication_ns", "overlap_ns",
            "other_ns", "overview_communication_ns", "communication_note")
_WAIT = ("rank", "worker", "steps", "step", "communication_ns", "wait_ns", "transfer_ns")


def dist_overlap(run: RunSummaries) -> dict:
    return {**_head(run), "ranks": _with_clock(_pick(run.part("ranks"), _OVERLAP), run),
            "steps": _pick(run.part("steps"), _OVERLAP)}


def dist_wait(run: RunSummaries) -> dict:
    return {**_head(run), "ranks": _with_clock(_pick(run.part("ranks"), _WAIT), run),
            "steps": _pick(run.part("steps"), _WAIT)}


def dist_commops(run: RunSummaries) -> dict:
    # scopes: per rank its collectives' time split intra-/inter-node (analysis.hosts, issue 19)
    return {**_head(run), "rows": run.part("collectives"), "scopes": run.part("scopes")}


def dist_ranks(run: RunSummaries, max_cells: int) -> dict:
    """Per rank: per-step means, clock, outlier (analysis.stragglers); slowest first; and
    the step time of every rank and step (at most max_cells numbers)."""
    from tb_profiler.analysis.stragglers import step_matrix, stragglers

    table, notes = stragglers(run.result())
    rows = to_jsonable(table.sort_values("rank", kind="stable"))
    return {"info": _info(run), "notes": run.part("notes") + notes, "ranks": rows,
            "order": table["rank"].tolist(), "step_matrix": step_matrix(run.result(), max_cells)}


MAX_ARRIVAL_ROWS = 2000  # (rank, step) rows of late arrivals sent, latest first


def dist_stragglers(run: RunSummaries) -> dict:
    """Who the others waited for: per rank its late arrivals at the collectives, per rank
    and step, and the operators that ran long on the latest ranks (analysis.stragglers)."""
    from tb_profiler.analysis.stragglers import late_ranks, verdict

    result = run.result()
    late = late_ranks(result, run.ok)
    arrivals = result["arrivals"].sort_values(["late_ns", "rank", "step"], ascending=[False, True, True],
                                              kind="stable")
    info = _info(run)
    said = verdict(late["ranks"], result["collectives"], result["ranks"], list(info.get("missing_ranks") or []))
    return {"info": info, "verdict": to_jsonable(said), "notes": run.part("notes") + late["notes"],
            "ranks": to_jsonable(late["ranks"]),
            "operators": to_jsonable(late["operators"]), "arrivals": to_jsonable(arrivals.head(MAX_ARRIVAL_ROWS)),
            "arrivals_total": int(len(arrivals))}


INSTANCE_SORTS = {"skew": "skew_ns", "duration": "mean_duration_ns", "bytes": "bytes"}
_ARRIVALS = ("first_arrival_ns", "last_arrival_ns")


def dist_instances(run: RunSummaries, sort: str, limit: int, offset: int) -> dict:
    """The collective instances across the ranks, largest ``sort`` first, one page of them;
    arrival times relative to ``origin_ns`` (the earliest arrival, on the analysis' clock)."""
    df = run.result()["instances"]
    order = df.sort_values([INSTANCE_SORTS[sort], "first_arrival_ns"], ascending=[False, True],
                           na_position="last", kind="stable")
    t0 = int(df["first_arrival_ns"].min()) if len(df) else 0
    rows = to_jsonable(order.iloc[offset:offset + limit])
    _rebase(rows, _ARRIVALS, t0)
    return {**_head(run), "origin_ns": str(t0), "sort": sort, "total": len(df), "offset": offset, "limit": limit,
            "truncated": offset + len(rows) < len(df), "rows": rows}


def clocks(run: RunSummaries) -> tuple[dict[str, dict], list[str]]:
    """({worker: its rank, clock_offset_ns and clock_method}, the workers slowest first):
    what trace/ranks needs of the cross-rank analysis."""
    from tb_profiler.analysis.stragglers import stragglers

    clock = {c["worker"]: {"rank": c["rank"], "offset_ns": c["clock_offset_ns"], "clock_method": c["clock_method"]}
             for c in run.part("clock")}
    return clock, stragglers(run.result())[0]["worker"].tolist()


def trace_ranks(traces: list, workers: list[str], clock: dict[str, dict], start_ns: int | None,
                end_ns: int | None, width: int, max_events: int, max_flows: int) -> dict:
    """The merged window of these ranks (timeline.merged_window), each on the common clock;
    a rank the cross-rank analysis left out keeps its clock as written, and the notes say so."""
    from tb_profiler.plugin.timeline import merged_window

    none = {"rank": None, "offset_ns": 0, "clock_method": None}
    out = merged_window([(w, t, clock.get(w, none)["offset_ns"]) for w, t in zip(workers, traces)],
                        start_ns, end_ns, width, max_events, max_flows)
    for part in out["workers"]:
        c = clock.get(part["worker"], none)
        part.update(rank=c["rank"], clock_method=c["clock_method"])
    out["notes"] = [f"{w}: not in the cross-rank analysis (see distributed/ranks' info.excluded): its times are "
                    "shown as its trace wrote them, not aligned" for w in workers if w not in clock]
    return out


def dist_matrix(run: RunSummaries) -> dict:
    from tb_profiler.analysis.p2p import p2p_matrix, process_groups

    groups = {s.worker: process_groups(s.distributed_info) for s in run.ok}
    return {"info": _info(run), **to_jsonable(p2p_matrix(run.result()["collectives"], groups))}


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
