"""Operators: calls, host and device self/total time, tensor cores, grouped three ways.

Why a call tree first: every number here is a sum over the host call nesting. An op's
host self time is its duration minus its direct host children (child ops, annotations,
runtime calls and Python frames, as torch's ``self_cpu_time_total`` counts it); its
device self time is the kernels/memcpys/memsets it launched itself (its runtime calls
sit directly in it, ``links.launching_op``), device total adds those of every op below.
The tree is a handful of int64 arrays over the events, built once per trace.

Python frames (``python_function``, traces taken ``with_stack=True``) are nodes of the
tree, as in torch's: the time of Python code an op calls back into (an autograd.Function's
backward, a tensor subclass's ``__torch_dispatch__``, a checkpointed forward) belongs to
those frames, not to the op's self time; the op's ``python_ns`` column shows it. Async
ranges (``communication.async_ranges``: c10d's ``gloo:*``/``nccl:*`` work ranges, which
may end on another thread) are nobody's parent or child.

Rules kept from the old torch-tb-profiler (checked against it on the V100 traces by
benchmarks/compare_old_plugin_tables.py):
- a child with the same name as its parent and no sibling op is folded into the parent
  (torch's ``EventList._remove_dup_nodes``): one call, the parent's duration, the child's
  children and kernels;
- ProfilerStep#N, ``enumerate(DataLoader)#...``, ``Optimizer.*`` and
  ``(Distributed)DataParallel.forward`` are not operators (in PyTorch 1.8/1.9 traces they
  are ``Operator`` events too);
- an op is tensor-core eligible by name, or when a child op is, or when it launched a
  tensor-core kernel.
Where the old plugin dropped ops (backward ops it could not pair with a module, ops that
partly overlap a sibling) this counts them.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tb_profiler.analysis.communication import async_ranges
from tb_profiler.analysis.gpu import uses_tensor_cores as kernel_uses_tensor_cores
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW, launching_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace, per_trace_args
from tb_profiler.analysis.nesting import level_chunks, marked_below, subtree_sum
from tb_profiler.analysis.shared import durations, name_map, name_mask
from tb_profiler.analysis.stacks import forward_names, op_stacks, stack_from_texts
from tb_profiler.analysis.steps import in_steps
from tb_profiler.analysis.tensor_cores import tc_eligible
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.roles import DEVICE_WORK, HOST_WORK, Role, role_mask

# Host events that make up the call tree.
CALL_ROLES = (*HOST_WORK, Role.PYTHON, Role.RUNTIME)
# cpu_op names that are steps, data loading or optimizer scopes, not operators.
NOT_OPERATOR_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#", "Optimizer.")
NOT_OPERATOR_NAMES = frozenset({"DataParallel.forward", "DistributedDataParallel.forward"})
# torch.autograd.profiler_util._filter_name: events torch leaves out of key_averages.
TORCH_HIDDEN_NAMES = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                                "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                                "aten::is_leaf", "aten::output_nr", "aten::_version"})

GROUP_BY = ("name", "input_shape", "stack")
OP_COLUMNS = ("calls", "host_self_ns", "host_total_ns", "python_ns", "device_self_ns", "device_total_ns",
              "tc_eligible", "tc_self_pct", "tc_total_pct")


@dataclass(frozen=True)
class CallTree:
    """The host call tree of one trace, arrays indexed by event row.

    node: events in the tree. merged: nodes folded into their same-name parent.
    parent: nearest tree ancestor (merged ones resolved), -1 for roots and non-nodes.
    host_self: duration minus direct children (valid on nodes that are not merged).
    python: ns of the Python frames among the direct children (the Python code the node
    called back into; part of its duration, not of its self time).
    device_self/device_total, tc_self/tc_total: ns of device work (tensor-core kernels)
    launched by the node itself / by its subtree. eligible: tensor-core eligible ops.
    operator: the rows the operator tables list.
    """

    node: np.ndarray
    merged: np.ndarray
    parent: np.ndarray
    host_self: np.ndarray
    python: np.ndarray
    device_self: np.ndarray
    device_total: np.ndarray
    tc_self: np.ndarray
    tc_total: np.ndarray
    eligible: np.ndarray
    operator: np.ndarray


def _name_mask(trace, predicate, among: np.ndarray | None = None) -> np.ndarray:
    """predicate(name) -> bool per event, evaluated once per distinct name (of the events
    ``among`` marks, when given: the others are False)."""
    return name_map(trace, predicate, among=among)


def _durations(trace) -> np.ndarray:
    """dur per event, a missing one as 0 (read-only, shared)."""
    return durations(trace)


def _not_operator(names: np.ndarray) -> np.ndarray:
    """Per name: a step, data loading or optimizer scope (NOT_OPERATOR_*), by ``map`` of str
    methods over the names (no Python frame per name)."""
    flat = [n if isinstance(n, str) else "" for n in names.tolist()]
    out = np.fromiter(map(str.startswith, flat, itertools.repeat(NOT_OPERATOR_PREFIXES)), dtype=bool, count=len(flat))
    return out | np.fromiter(map(NOT_OPERATOR_NAMES.__contains__, flat), dtype=bool, count=len(flat))


def _fold_duplicates(trace, node: np.ndarray, parent0: np.ndarray, runtime_is_child: bool, fold_kinds):
    """(merged mask, owner per row): an event (of fold_kinds; None: any) whose parent has its
    name and no other child is folded into that parent; owner maps each row to the row
    absorbing it."""
    ev = trace.events
    n = len(ev)
    is_op = np.ones(n, bool) if fold_kinds is None else kind_mask(ev["kind"], fold_kinds)
    counted = node & (runtime_is_child | (trace.roles != Role.RUNTIME))
    rows = np.flatnonzero(counted & (parent0 >= 0))
    n_children = np.bincount(parent0[rows], minlength=n)
    p = np.maximum(parent0, 0)
    merged = (is_op & node & (parent0 >= 0) & is_op[p] & (ev["name"] == ev["name"][p])
              & (n_children[p] == 1))
    owner = np.arange(n, dtype=np.int64)
    folded = np.flatnonzero(merged)
    owner[folded] = parent0[folded]
    while True:  # chains x > x > x: pointer jumping (only folded rows move), a few rounds at most
        cur = owner[folded]
        nxt = owner[cur]
        if np.array_equal(nxt, cur):
            return merged, owner
        owner[folded] = nxt


def _subtree_summer(parent: np.ndarray, rows: np.ndarray):
    """A function summing values (over events) over each row's subtree (rows: the tree's
    members), deepest level first. The tree's levels are found once for all its sums."""
    index = np.full(len(parent), -1, np.int64)  # event row -> member index
    index[rows] = np.arange(len(rows))
    lp = np.where(parent[rows] >= 0, index[np.maximum(parent[rows], 0)], -1)
    chunks = _children_first(lp) if len(rows) else []

    def summed(values: np.ndarray) -> np.ndarray:
        total = values.astype(np.int64, copy=True)
        if len(rows):
            total[rows] = subtree_sum(total[rows], lp, chunks=chunks)
        return total

    return summed


def _children_first(lp: np.ndarray) -> list[np.ndarray]:
    """subtree_sum's schedule (every child before its parent) for the tree lp (parent member
    index per member, -1 at a root). The members come in event-row order, and the events
    table is sorted by start, outermost first, so a parent's index is below its children's
    and the members backwards are such a schedule: checked (one pass), else the depth-sorted
    ``level_chunks``."""
    member = np.arange(len(lp))
    has = lp >= 0
    if not (lp[has] < member[has]).all():
        return level_chunks(lp)
    backwards = member[::-1][has[::-1]]
    return [backwards] if len(backwards) else []


def _device_attribution(trace, owner: np.ndarray):
    """(device ns, tensor-core ns) launched directly by each row (after folding)."""
    ev = trace.events
    n = len(ev)
    dev = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK))
    op = launching_op(trace)[dev]
    dev, op = dev[op >= 0], owner[op[op >= 0]]
    dur = _durations(trace)[dev]
    tc = kernel_uses_tensor_cores(trace)[dev]
    device = np.bincount(op, weights=dur, minlength=n).astype(np.int64)
    tcore = np.bincount(op[tc], weights=dur[tc], minlength=n).astype(np.int64)
    return device, tcore


@dataclass(frozen=True)
class TreeShape:
    """The call tree's nodes and links under some rules, what each node launched, and which
    operators are tensor-core eligible: the part of ``CallTree`` that needs no subtree
    sums (the kernel table reads only this). Arrays indexed by event row, as CallTree's."""

    node: np.ndarray
    merged: np.ndarray
    parent: np.ndarray
    live: np.ndarray         # rows of the nodes not merged (the tree's members), ascending
    device_self: np.ndarray
    tc_self: np.ndarray
    eligible: np.ndarray


_DEFAULT_FOLD = (Kind.CPU_OP,)


def _tree_shape(trace, hidden_names: frozenset, runtime_is_child: bool, fold_kinds) -> TreeShape:
    ev = trace.events
    n = len(ev)
    node = role_mask(trace.roles, CALL_ROLES) & ~async_ranges(trace)
    if hidden_names:
        node &= ~_name_mask(trace, hidden_names.__contains__)
    rows = np.flatnonzero(node)
    parent0 = np.full(n, NO_ROW, np.int64)
    parent0[rows] = nearest_ancestor(trace, rows, node, include_self=False)
    merged, owner = _fold_duplicates(trace, node, parent0, runtime_is_child, fold_kinds)
    is_live = node & ~merged
    live = np.flatnonzero(is_live)
    parent = np.full(n, NO_ROW, np.int64)
    parent[live] = np.where(parent0[live] >= 0, owner[np.maximum(parent0[live], 0)], NO_ROW)
    device_self, tc_self = _device_attribution(trace, owner)
    is_op = ev["kind"] == Kind.CPU_OP
    # eligible: by name or by a tensor-core kernel launched, itself or (a member) below it
    own = name_mask(trace, tc_eligible, among=is_op) | (tc_self > 0)
    eligible = is_op & (own | (is_live & marked_below(parent, own & is_live)))
    return TreeShape(node=node, merged=merged, parent=parent, live=live, device_self=device_self,
                     tc_self=tc_self, eligible=eligible)


@per_trace
def tree_shape(trace) -> TreeShape:
    """``call_tree``'s shape (the old plugin's rules), without its subtree sums."""
    return _tree_shape(trace, frozenset(), False, _DEFAULT_FOLD)


def build_call_tree(trace, hidden_names: frozenset = frozenset(), runtime_is_child: bool = False,
                    fold_kinds=_DEFAULT_FOLD) -> CallTree:
    """The call tree under the given rules: events named in hidden_names left out (their
    time stays in the parent's self time); whether runtime calls count as siblings when
    folding same-name children, and which kinds fold (None: every kind, as torch).
    ``call_tree`` uses the old plugin's rules, ``keyavg`` torch's. Async ranges are never
    nodes (see the module docstring)."""
    default = not hidden_names and not runtime_is_child and fold_kinds == _DEFAULT_FOLD
    sh = tree_shape(trace) if default else _tree_shape(trace, hidden_names, runtime_is_child, fold_kinds)
    n = len(trace.events)
    node, merged, parent, live = sh.node, sh.merged, sh.parent, sh.live
    dur = _durations(trace)
    has_parent = live[parent[live] >= 0]
    children_ns = np.bincount(parent[has_parent], weights=dur[has_parent], minlength=n).astype(np.int64)
    host_self = np.where(node & ~merged, dur - children_ns, 0)
    py = has_parent[trace.roles[has_parent] == Role.PYTHON]
    python = np.bincount(parent[py], weights=dur[py], minlength=n).astype(np.int64)
    subtree = _subtree_summer(parent, live)
    candidate = (trace.events["kind"] == Kind.CPU_OP) & node & ~merged
    operator = candidate & ~name_mask(trace, _not_operator, among=candidate)
    return CallTree(node=node, merged=merged, parent=parent, host_self=host_self, python=python,
                    device_self=sh.device_self, device_total=subtree(sh.device_self),
                    tc_self=sh.tc_self, tc_total=subtree(sh.tc_self), eligible=sh.eligible, operator=operator)


@per_trace
def call_tree(trace) -> CallTree:
    """The call tree under the old plugin's rules (runtime calls are not counted as
    siblings when folding same-name children)."""
    return build_call_tree(trace)


@per_trace
def tc_eligible_ops(trace) -> np.ndarray:
    """Boolean mask over events: operators that are tensor-core eligible (by name, by an
    eligible child op, or by having launched a tensor-core kernel)."""
    tree = call_tree(trace)
    return tree.operator & tree.eligible


# -- keys -----------------------------------------------------------------------------
def _shape_text(raw: str | None) -> str:
    """Input Dims JSON text as the old plugin and torch print it (str of the list)."""
    if raw is None:
        return "[]"
    try:
        return str(json.loads(raw))
    except ValueError:
        return raw


def input_shapes(trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key per row, text per key): each row's input shapes, ``"[[2, 3], []]"``, equal
    shapes written differently in the file sharing one key; one parse per distinct text."""
    ids = trace.events["input_dims"][rows]
    # the distinct ids by hashing (their order does not matter: keys follow the sorted texts)
    inv, uniq = pd.factorize(np.asarray(ids), sort=False)
    texts = np.array([_shape_text(trace.str(int(i))) for i in uniq.tolist()], dtype=object)
    # sorted by hashing, not np.unique over a fixed-width copy (as wide as the longest text)
    key_of_uniq, text_keys = pd.factorize(texts, sort=True)
    return np.asarray(key_of_uniq).reshape(-1)[inv.reshape(-1)], np.asarray(text_keys, dtype=object)


def _groups(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(first row index per group, group index per row) for rows keyed by int columns."""
    inv, first = factorize(*keys)
    return first, inv


def _sums(inv: np.ndarray, m: int, **cols: np.ndarray) -> dict[str, np.ndarray]:
    return {k: np.bincount(inv, weights=v, minlength=m).astype(np.int64) for k, v in cols.items()}


def _pct(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return np.where(whole > 0, 100.0 * part / np.maximum(whole, 1), 0.0)


def _aggregate(trace, rows: np.ndarray, keys: list[np.ndarray]) -> tuple[np.ndarray, dict]:
    """Per-group sums of the operator columns; returns (first row per group, columns)."""
    tree = call_tree(trace)
    first, inv = _groups(keys)
    m = len(first)
    dur = _durations(trace)[rows]
    s = _sums(inv, m, host_self_ns=tree.host_self[rows], host_total_ns=dur, python_ns=tree.python[rows],
              device_self_ns=tree.device_self[rows], device_total_ns=tree.device_total[rows],
              tc_self=tree.tc_self[rows], tc_total=tree.tc_total[rows])
    cols = {"calls": np.bincount(inv, minlength=m).astype(np.int64),
            **{k: s[k] for k in ("host_self_ns", "host_total_ns", "python_ns", "device_self_ns", "device_total_ns")},
            "tc_eligible": np.bincount(inv, weights=tree.eligible[rows], minlength=m) > 0,
            "tc_self_pct": _pct(s["tc_self"], s["device_self_ns"]),
            "tc_total_pct": _pct(s["tc_total"], s["device_total_ns"])}
    return first, cols


def _frame(data: dict, order_by=("device_self_ns", "host_self_ns")):
    import pandas as pd

    df = pd.DataFrame(data)
    if len(df):
        df = df.sort_values(list(order_by), ascending=False, kind="stable").reset_index(drop=True)
    return df


def _empty(lead: list[str]):
    import pandas as pd

    return pd.DataFrame({c: [] for c in lead + list(OP_COLUMNS)})


def operators(trace, group_by: str = "name", steps_only: bool = False):
    """Operator table: one row per name, per (name, input shape) or per (name, stack).

    Columns: name, [input_shape | stack_id, stack_from], calls, host_self_ns, host_total_ns,
    python_ns (time in Python frames the op called back into: in host_total_ns, not in
    host_self_ns), device_self_ns, device_total_ns, tc_eligible, tc_self_pct, tc_total_pct;
    sorted by device self time, then host self time. stack_id is -1 for calls without a
    stack; stack_from as in ``operator_stacks``; ``stacks.stack_frames`` gives the frames.

    steps_only: count only the calls inside the steps (``steps.in_steps``), for figures
    divided by the number of steps. A call counts in the step holding its start, with all
    its host time and all the device work it and the ops below it launched (the call tree
    gives an op its children's time, so splitting a call at a step boundary would count
    its children twice or not at all).

    Computed once per trace and arguments (the pie and the table of a view ask for the
    same one); each call returns its own copy.
    """
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    return _operators(trace, group_by, bool(steps_only)).copy()


def operators_frame(trace, group_by: str = "name"):
    """``operators(trace, group_by)`` without the copy: the table kept for the trace, to be
    read, never changed.  Why: a table of millions of rows (a trace of millions of
    distinct names) costs as much again per copy; a view reads only a page of it."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    return _operators(trace, group_by, False)


@per_trace_args
def _operators(trace, group_by: str, steps_only: bool):
    lead = ["name"] + {"name": [], "input_shape": ["input_shape"], "stack": ["stack_id", "stack_from"]}[group_by]
    rows = np.flatnonzero(call_tree(trace).operator)
    if steps_only:
        rows = rows[in_steps(trace, rows)]
    if not len(rows):
        return _empty(lead)
    names = trace.events["name"][rows]
    keys, extra = [names], {}
    if group_by == "input_shape":
        shape_key, shape_text = input_shapes(trace, rows)
        keys.append(shape_key)
    elif group_by == "stack":  # a backward op's stack is its forward op's: rows say so
        keys += [op_stacks(trace)[0][rows], forward_names(trace, rows)]
    first, cols = _aggregate(trace, rows, keys)
    if group_by == "input_shape":
        extra["input_shape"] = shape_text[shape_key[first]]
    elif group_by == "stack":
        extra["stack_id"] = keys[1][first]
        extra["stack_from"] = stack_from_texts(trace, keys[2][first])
    return _frame({"name": trace.str(names[first]), **extra, **cols})


def operator_stacks(trace, name: str, input_shape: str | None = None):
    """The calls of one operator (optionally of one input shape) split by call stack.

    Columns: stack_id, stack_from ("forward op aten::convolution" where the calls are
    backward ops showing their forward op's stack, else None), frames ([{file, line,
    func}], innermost first), and the operator columns. Calls without a stack are left
    out (as the old plugin's stack view)."""
    lead = ["stack_id", "stack_from", "frames"]
    tree = call_tree(trace)
    ids = np.flatnonzero(trace.strings == name) if len(trace.strings) else np.zeros(0, np.int64)
    rows = np.flatnonzero(tree.operator & np.isin(trace.events["name"], ids))
    if input_shape is not None and len(rows):
        key, text = input_shapes(trace, rows)
        rows = rows[text[key] == input_shape]
    sid, table = op_stacks(trace)
    rows = rows[sid[rows] >= 0]
    if not len(rows):
        return _empty(lead)
    fwd = forward_names(trace, rows)
    first, cols = _aggregate(trace, rows, [sid[rows], fwd])
    ids = sid[rows][first]
    return _frame({"stack_id": ids, "stack_from": stack_from_texts(trace, fwd[first]),
                   "frames": [table.frames_of(int(i)) for i in ids.tolist()], **cols})


__all__ = [
    "GROUP_BY",
    "CallTree",
    "build_call_tree",
    "call_tree",
    "input_shapes",
    "operator_stacks",
    "operators",
    "operators_frame",
    "tc_eligible_ops",
]
