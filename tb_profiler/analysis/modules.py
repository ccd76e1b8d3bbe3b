"""Modules: the nn.Module hierarchy of a trace with host and device time per module.

With ``with_stack=True`` PyTorch's Python tracer writes a ``python_function`` event per
module call, named like "nn.Module: Conv2d_1" and carrying ``Python module id``; calls nest
through ``Python parent id`` -> ``Python id`` (the Python call stack), with plain Python
functions in between.  PyTorch Lightning's profiler writes "[pl][module]<type>: <name>"
host events instead, nested in time on their thread.  From either:

- each module call gets its enclosing module call (Python ids where present and
  unambiguous, else the interval nesting on the thread);
- calls are merged into nodes by their path from the root (same parent node, same name
  and module id), so one row is one module in the model, however often it ran;
- host time is the calls' durations; host self time is what no child module's call
  covers; device time is the kernels, memcpys and memsets launched from inside a call
  (kernel -> runtime call -> nearest enclosing module call), self when no child module
  sits in between.

Differences from torch-tb-profiler 0.4.3, on purpose: host self time subtracts only child
modules (the old plugin also subtracted every operator, leaving the Python overhead), and
calls merge by path rather than by (name, module id) alone, so a module reused under two
parents shows under each.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import match
from tb_profiler.analysis.links import (
    NO_ROW,
    device_mask,
    launch,
    launching_op,
    nearest_ancestor,
)
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import climb, subtree_sum
from tb_profiler.analysis.nesting import depth as nesting_depth
from tb_profiler.analysis.shared import name_map
from tb_profiler.analysis.steps import in_steps
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

NN_PREFIX = "nn.Module: "
PL_PREFIX = "[pl][module]"
_SUFFIX = re.compile(r"_\d+$")

MODULE_COLUMNS = ["node_id", "parent_id", "name", "module_type", "module_id", "path", "depth", "calls",
                  "operators", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]


@dataclass
class ModuleCalls:
    """Every module call of a trace (events rows in time order) and how they nest.

    parent: index into ``rows`` of the enclosing module call (-1 at the top); node: the
    aggregated module (row of ``modules()``) each call belongs to.  Per-call times in ns.
    """

    source: str                                   # "nn.Module", "lightning" or ""
    rows: np.ndarray
    parent: np.ndarray
    node: np.ndarray
    name: np.ndarray                              # object: "Conv2d_1", "model.conv1"
    module_type: np.ndarray                       # object: "Conv2d", "torch.nn....Conv2d"
    module_id: np.ndarray
    host_total: np.ndarray
    host_self: np.ndarray
    device_total: np.ndarray
    device_self: np.ndarray
    operators: np.ndarray
    notes: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


# -- which events are module calls ------------------------------------------------------------
def _module_kind(trace) -> tuple[str, np.ndarray, list[str]]:
    """(source, mask of module-call events, notes).  Lightning's annotations win when both
    are present (the old plugin did the same), since they name modules by attribute path."""
    ev = trace.events
    host = ~device_mask(trace)
    pl = host & name_map(trace, lambda s: s.startswith(PL_PREFIX))
    if pl.any():
        return "lightning", pl, []
    py = ev["kind"] == Kind.PYTHON_FUNCTION
    nn = py & (ev["python_module_id"] != MISSING_INT)
    if nn.any():
        return "nn.Module", nn, []
    return "", nn, [_no_modules_reason(trace, py.any())]


def _no_modules_reason(trace, has_python: bool) -> str:
    """Why a trace has no module information."""
    if has_python:
        return ("python_function events carry no 'Python module id': this PyTorch version does not "
                "record nn.Module calls")
    if trace.metadata.get("with_stack") in (0, False, "0", "false"):
        return "no Python function events: with_stack=True was not set"
    return ("no Python function events: profile with with_stack=True (PyTorch >= 1.11) to record "
            "nn.Module calls")


def _names(trace, rows: np.ndarray, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(display name, module type) per call, parsed once per distinct event name."""
    ids = trace.events["name"][rows]

    def parse(s: str) -> tuple[str, str]:
        if source == "lightning":
            body = s[len(PL_PREFIX):]
            kind, sep, name = body.partition(": ")
            return (name, kind) if sep else (body, body)
        name = s.removeprefix(NN_PREFIX)
        return name, _SUFFIX.sub("", name)

    uniq, inv = np.unique(ids, return_inverse=True)
    parsed = [parse(trace.strings[i]) for i in uniq.tolist()]
    name = np.array([p[0] for p in parsed] + [""], dtype=object)[:-1]
    kind = np.array([p[1] for p in parsed] + [""], dtype=object)[:-1]
    return name[inv.reshape(-1)], kind[inv.reshape(-1)]


# -- nesting ----------------------------------------------------------------------------------
def _python_parents(trace, rows: np.ndarray, is_module: np.ndarray) -> np.ndarray | None:
    """Enclosing module call (events row) of each call through the Python call stack, or
    None where Python ids are missing or repeat (then the thread nesting decides)."""
    ev = trace.events
    py = np.flatnonzero(ev["kind"] == Kind.PYTHON_FUNCTION)
    pid = ev["python_id"][py]
    if (pid == MISSING_INT).any() or len(np.unique(pid)) != len(pid):
        return None
    # each python_function's caller frame, as a parent pointer over events
    py_parent = np.full(len(ev), NO_ROW, dtype=np.int64)
    py_parent[py] = match(pid, py, ev["python_parent_id"][py])
    return climb(py_parent, match(pid, py, ev["python_parent_id"][rows]), is_module)


def _parent_calls(trace, rows: np.ndarray, is_module: np.ndarray, source: str) -> tuple[np.ndarray, list[str]]:
    """Index into rows of each call's enclosing module call (-1 at the top), and notes."""
    notes = []
    par = _python_parents(trace, rows, is_module) if source == "nn.Module" else None
    if par is None:
        if source == "nn.Module":
            notes.append("Python ids are missing or repeat: module nesting taken from the thread's call nesting")
        par = nearest_ancestor(trace, rows, is_module, include_self=False)
    index = np.full(len(trace.events), NO_ROW, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    return np.where(par >= 0, index[np.maximum(par, 0)], NO_ROW), notes


def _node_ids(parent: np.ndarray, depth: np.ndarray, name_id: np.ndarray, module_id: np.ndarray) -> np.ndarray:
    """Aggregated node per call: same parent node, name and module id -> same node.  One
    vectorized pass per depth level; nodes numbered by their first call (parents first)."""
    node = np.full(len(parent), -1, dtype=np.int64)
    n_nodes = 0
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        at = np.flatnonzero(depth == d)
        up = np.where(parent[at] >= 0, node[np.maximum(parent[at], 0)], -1)
        keys = np.stack([up, name_id[at], module_id[at]])
        _, inv = np.unique(keys, axis=1, return_inverse=True)
        node[at] = n_nodes + inv.reshape(-1)
        n_nodes += int(inv.max()) + 1
    first = np.full(n_nodes, len(node), dtype=np.int64)
    np.minimum.at(first, node, np.arange(len(node)))
    rank = np.empty(n_nodes, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n_nodes)
    return rank[node] if len(node) else node


# -- time -------------------------------------------------------------------------------------
def _device_self(trace, rows: np.ndarray, is_module: np.ndarray) -> np.ndarray:
    """Device time (ns) launched directly inside each call, not inside a child module: each
    kernel/memcpy/memset goes to the module call around the runtime call (or, lacking one,
    the operator) that launched it."""
    ev = trace.events
    dev = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK))
    out = np.zeros(len(rows), dtype=np.int64)
    if not len(dev):
        return out
    anchor = np.where(launch(trace)[dev] >= 0, launch(trace)[dev], launching_op(trace)[dev])
    call = nearest_ancestor(trace, anchor, is_module)
    index = np.full(len(ev), NO_ROW, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    at = np.where(call >= 0, index[np.maximum(call, 0)], NO_ROW)
    ok = at >= 0
    np.add.at(out, at[ok], np.maximum(ev["dur"][dev[ok]], 0))
    return out


def _operators(trace, rows: np.ndarray, is_module: np.ndarray) -> np.ndarray:
    """Operators called directly by each module call (not inside another op or child module)."""
    ev = trace.events
    is_op = ev["kind"] == Kind.CPU_OP
    ops = np.flatnonzero(is_op & ~is_module)
    owner = nearest_ancestor(trace, ops, is_op | is_module, include_self=False)
    index = np.full(len(ev), NO_ROW, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    at = np.where(owner >= 0, index[np.maximum(owner, 0)], NO_ROW)
    return np.bincount(at[at >= 0], minlength=len(rows)).astype(np.int64)


@per_trace
def module_calls(trace) -> ModuleCalls:
    """Every module call with its nesting, aggregated node and per-call times."""
    source, is_module, notes = _module_kind(trace)
    ev = trace.events
    rows = np.flatnonzero(is_module)
    parent, more = _parent_calls(trace, rows, is_module, source) if len(rows) else (rows.copy(), [])
    depth = nesting_depth(parent)
    name, kind = _names(trace, rows, source)
    module_id = ev["python_module_id"][rows] if source == "nn.Module" else np.zeros(len(rows), dtype=np.int64)
    dur = np.maximum(ev["dur"][rows], 0)
    child = parent >= 0
    host_self = dur - np.bincount(parent[child], weights=dur[child], minlength=len(rows)).astype(np.int64)
    device_self = _device_self(trace, rows, is_module)
    return ModuleCalls(
        source=source, rows=rows, parent=parent,
        node=_node_ids(parent, depth, ev["name"][rows].astype(np.int64), module_id),
        name=name, module_type=kind, module_id=module_id,
        host_total=dur, host_self=host_self, device_total=subtree_sum(device_self, parent, depth),
        device_self=device_self, operators=_operators(trace, rows, is_module), notes=notes + more)


# -- tables -----------------------------------------------------------------------------------
def modules(trace, steps_only: bool = False) -> pd.DataFrame:
    """One row per module of the model (calls merged by path), parents before children.

    Columns: node_id, parent_id (-1 for a root), name ("Conv2d_1"), module_type ("Conv2d"),
    module_id, path ("TinyResNet_0/BasicBlock_0/Conv2d_1"), depth, calls, operators,
    host_total_ns, host_self_ns, device_total_ns, device_self_ns.  Empty, with the reason
    in ``attrs["notes"]``, when the trace has no module information.

    steps_only: count only the module calls inside the steps (``steps.in_steps``: a call
    in the step holding its start, with all its time), for figures divided by the number
    of steps; a module is listed when it or a module below it has such a call.
    """
    mc = module_calls(trace)
    if not len(mc):
        df = pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "module_type", "path") else np.int64)
                           for c in MODULE_COLUMNS})
        df.attrs.update(notes=list(mc.notes), source=mc.source)
        return df
    n = int(mc.node.max()) + 1
    first = np.full(n, len(mc), dtype=np.int64)
    np.minimum.at(first, mc.node, np.arange(len(mc)))
    up = mc.parent[first]
    parent_id = np.where(up >= 0, mc.node[np.maximum(up, 0)], -1)
    name = mc.name[first]
    counted = in_steps(trace, mc.rows) if steps_only else np.ones(len(mc), dtype=bool)

    def total(v):
        return np.bincount(mc.node, weights=np.where(counted, v, 0), minlength=n).astype(np.int64)

    df = pd.DataFrame({
        "node_id": np.arange(n), "parent_id": parent_id, "name": name, "module_type": mc.module_type[first],
        "module_id": mc.module_id[first], "path": _paths(name, parent_id), "depth": nesting_depth(parent_id),
        "calls": np.bincount(mc.node[counted], minlength=n), "operators": total(mc.operators),
        "host_total_ns": total(mc.host_total), "host_self_ns": total(mc.host_self),
        "device_total_ns": total(mc.device_total), "device_self_ns": total(mc.device_self),
    }, columns=MODULE_COLUMNS)
    if steps_only:
        df = df[subtree_sum(df["calls"].to_numpy(), parent_id, df["depth"].to_numpy()) > 0].reset_index(drop=True)
    df.attrs.update(notes=list(mc.notes), source=mc.source)
    return df


def _paths(name: np.ndarray, parent_id: np.ndarray) -> np.ndarray:
    """"Root/Child/Leaf" per node; parents come before children (node ids by first call)."""
    out = np.empty(len(name), dtype=object)
    for i, (nm, p) in enumerate(zip(name.tolist(), parent_id.tolist())):  # one per module, not per event
        out[i] = nm if p < 0 else f"{out[p]}/{nm}"
    return out


def _nest(records: list[dict], parent: list[int]) -> list[dict]:
    """Nested children lists from flat records and parent indices (-1: root)."""
    roots: list[dict] = []
    for rec in records:
        rec["children"] = []
    for rec, p in zip(records, parent):
        (roots if p < 0 else records[p]["children"]).append(rec)
    return roots


def _layout(nodes: list[dict], start: int = 0) -> None:
    """Aggregated flame-graph positions: siblings side by side, each as wide as its host
    total, children from their parent's left edge (start_ns/end_ns are relative)."""
    stack = [(nodes, start)]
    while stack:
        level, x = stack.pop()
        for node in level:
            node["start_ns"], node["end_ns"] = x, x + node["host_total_ns"]
            stack.append((node["children"], x))
            x += node["host_total_ns"]


def module_tree(trace, step: int | None = None, max_calls: int = 20000) -> dict:
    """The module tree for a tree table and two flame graphs.

    Returns {"source", "nodes", "calls", "notes"}:
    - nodes: the rows of ``modules()`` nested (children lists), each with start_ns/end_ns
      laid out for an aggregated flame graph (relative ns; width = host total);
    - calls: the module calls themselves nested, with absolute start_ns/end_ns, host and
      device times, for a flame graph of one step (``step``: a ProfilerStep number; None:
      the whole trace), at most ``max_calls`` of them (the earliest; a note says so).
    """
    df = modules(trace)
    notes = list(df.attrs.get("notes", []))
    records = df.drop(columns=["parent_id"]).to_dict("records")
    nodes = _nest(records, df["parent_id"].tolist())
    _layout(nodes)
    return {"source": df.attrs.get("source", ""), "nodes": nodes,
            "calls": _call_tree(trace, step, max_calls, notes), "notes": notes}


def _call_tree(trace, step: int | None, max_calls: int, notes: list[str]) -> list[dict]:
    """The nested calls inside one step (or all), cut to the first max_calls."""
    mc = module_calls(trace)
    keep = np.ones(len(mc), dtype=bool)
    ev = trace.events
    start, end = ev["ts"][mc.rows], ev["ts"][mc.rows] + mc.host_total
    if step is not None:
        steps = trace.steps
        hit = np.flatnonzero(steps["number"] == int(step))
        if not len(hit):
            notes.append(f"no ProfilerStep#{step} in the trace")
            return []
        keep &= (start >= steps["start"][hit[0]]) & (end <= steps["end"][hit[0]])
    idx = np.flatnonzero(keep)
    if len(idx) > max_calls:
        notes.append(f"{len(idx)} module calls: the flame graph shows the first {max_calls}")
        idx = idx[:max_calls]
    local = np.full(len(mc), -1, dtype=np.int64)
    local[idx] = np.arange(len(idx))
    parent = np.where(mc.parent[idx] >= 0, local[np.maximum(mc.parent[idx], 0)], -1)
    frame = pd.DataFrame({"node_id": mc.node[idx], "name": mc.name[idx], "module_type": mc.module_type[idx],
                          "start_ns": start[idx], "end_ns": end[idx], "host_total_ns": mc.host_total[idx],
                          "host_self_ns": mc.host_self[idx], "device_total_ns": mc.device_total[idx],
                          "device_self_ns": mc.device_self[idx], "event": mc.rows[idx]})
    return _nest(frame.to_dict("records"), parent.tolist())
