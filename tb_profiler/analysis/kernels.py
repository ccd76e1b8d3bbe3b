"""Kernels: calls and time per kernel name, or per (name, launching op, launch config).

Why these columns: the kernel view answers "which kernels take the time, how well do
they fill the GPU, do they use tensor cores". Blocks per SM and estimated achieved
occupancy are averaged weighted by duration (a 1 ms kernel counts 1000x a 1 us one), a
kernel without the field counting as 0, as the old torch-tb-profiler did. The op of a
kernel is the innermost CPU operator around its launch (``links.launching_op``); None
where the trace lost the launch. A graph replay's kernel takes its node's annotation of the
captured code instead, where torch's graph annotations give one (analysis.graphs).
"""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.gpu import uses_tensor_cores as kernel_uses_tensor_cores
from tb_profiler.analysis.graphs import event_labels
from tb_profiler.analysis.kernel_fields import with_kernel_fields
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import launched_by_graph, launching_op
from tb_profiler.analysis.memo import per_trace_args
from tb_profiler.analysis.operators import tree_shape
from tb_profiler.analysis.steps import in_steps
from tb_profiler.analysis.tensor_cores import string_id_mask, tc_eligible
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.roles import Role

GROUP_BY = ("name", "op")
STAT_COLUMNS = ("calls", "graph_calls", "total_ns", "mean_ns", "max_ns", "min_ns", "longest_event", "blocks_per_sm",
                "occupancy", "tensor_cores")
OP_KEY_COLUMNS = ("op", "grid", "block", "registers", "shared_memory", "op_tc_eligible")
_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
_OBJECT_COLUMNS = ("op", "grid", "block")  # texts with None where there is none


def _dim_text(x, y, z) -> str | None:
    return None if x < 0 else f"[{x}, {y}, {z}]"


def _int_or_zero(col: np.ndarray) -> np.ndarray:
    return np.where(col == MISSING_INT, 0, col).astype(np.int64)


def _weighted(col: np.ndarray, dur: np.ndarray, inv: np.ndarray, m: int, total: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(col.astype(np.float64), nan=0.0)
    s = np.bincount(inv, weights=x * dur, minlength=m)
    return np.where(total > 0, s / np.maximum(total, 1), 0.0)


def _stats(trace, rows: np.ndarray, inv: np.ndarray, m: int) -> dict:
    ev = trace.events
    dur = np.where(ev["dur"][rows] == MISSING_INT, 0, ev["dur"][rows])
    calls = np.bincount(inv, minlength=m).astype(np.int64)
    total = np.bincount(inv, weights=dur, minlength=m).astype(np.int64)
    graph = np.bincount(inv, weights=launched_by_graph(trace)[rows], minlength=m).astype(np.int64)
    # one sort by group, then duration: each group's first call is its shortest, its last
    # the longest (whose event a row of the table opens in the Trace view: its launch, its
    # operator and that operator's stack are one click from there)
    order = np.lexsort((dur, inv))
    grouped = inv[order]
    first = np.searchsorted(grouped, np.arange(m), side="left")
    last = np.searchsorted(grouped, np.arange(m), side="right") - 1
    return {"calls": calls, "graph_calls": graph, "total_ns": total, "mean_ns": total / np.maximum(calls, 1),
            "max_ns": dur[order[last]], "min_ns": dur[order[first]], "longest_event": rows[order[last]].astype(np.int64),
            "blocks_per_sm": _weighted(ev["blocks_per_sm"][rows], dur, inv, m, total),
            "occupancy": _weighted(ev["occupancy"][rows], dur, inv, m, total)}


def graph_label_codes(trace) -> np.ndarray:
    """Per event: the code of its graph annotation (analysis.graphs), -1 where none."""
    return event_labels(trace)[0]


def graph_labels(trace) -> np.ndarray:
    """The graph annotations' texts, by code."""
    return event_labels(trace)[1]


def _op_keys(trace, rows: np.ndarray) -> list[np.ndarray]:
    ev = trace.events
    op = launching_op(trace)[rows]
    op_name = np.where(op >= 0, ev["name"][np.maximum(op, 0)], -1)
    graph = graph_label_codes(trace)[rows]  # a graph node's annotation, coded -2 - label
    op_name = np.where(graph >= 0, -2 - graph, op_name)
    return [op_name, *(ev[c][rows].astype(np.int64) for c in _DIMS),
            _int_or_zero(ev["registers"][rows]), _int_or_zero(ev["shared_memory"][rows]), op]


def _empty(group_by: str):
    import pandas as pd

    lead = ["name"] + (list(OP_KEY_COLUMNS) if group_by == "op" else [])
    return pd.DataFrame({c: [] for c in lead + list(STAT_COLUMNS)})


def kernels(trace, group_by: str = "name", steps_only: bool = False):
    """Kernel table, one row per kernel name (``group_by="name"``) or per (name, op,
    grid, block, registers, shared memory) (``"op"``); sorted by total time.

    Columns: name, [op, grid, block, registers, shared_memory, op_tc_eligible], calls,
    graph_calls (of the calls, those launched by a graph launch), total_ns, mean_ns, max_ns,
    min_ns, longest_event (the event row of the longest call), blocks_per_sm, occupancy, tensor_cores; and, only when the trace's kernels carry
    them, limiting_factors, block_limit_* , priority and channel (analysis.kernel_fields).

    steps_only: count only the kernels inside the steps (``steps.in_steps``: a kernel in
    the step that launched it), for figures divided by the number of steps.

    Computed once per trace and arguments (the Kernel view's pie, table and tensor-core
    chart ask for the same one); each call returns its own copy.
    """
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    return _kernels(trace, group_by, bool(steps_only)).copy()


def kernels_frame(trace, group_by: str = "name"):
    """``kernels(trace, group_by)`` without the copy: the table kept for the trace, to be
    read, never changed (a view reads only a page of it)."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    return _kernels(trace, group_by, False)


@per_trace_args
def _kernels(trace, group_by: str, steps_only: bool):
    import pandas as pd

    ev = trace.events
    rows = np.flatnonzero(trace.roles == Role.COMPUTE)
    if steps_only:
        rows = rows[in_steps(trace, rows)]
    if not len(rows):
        return _empty(group_by)
    keys = [ev["name"][rows].astype(np.int64)]
    if group_by == "op":
        keys += _op_keys(trace, rows)
    key_cols = keys[:-1] if group_by == "op" else keys  # the op row is carried, not a key
    inv, first = factorize(*key_cols)
    data = {"name": trace.str(keys[0][first])}
    if group_by == "op":
        data.update(_op_columns(trace, keys, first, inv))
    data.update(_stats(trace, rows, inv, len(first)))
    data["tensor_cores"] = kernel_uses_tensor_cores(trace)[rows[first]]  # by the group's kernel name
    # by total time, then calls, both descending, ties in order of first appearance: sorted
    # as arrays, so the table is built once
    order = np.lexsort((-data["calls"], -data["total_ns"]))
    # object dtype keeps None (JSON null) where pandas' string dtype would put NaN; the
    # name column takes pandas' string dtype (a kernel always has a name)
    df = pd.DataFrame({c: pd.Series(v[order], dtype=object) if c in _OBJECT_COLUMNS else v[order]
                       for c, v in data.items()})
    return with_kernel_fields(trace, df)  # occupancy limits, priority, channel where present


def _op_columns(trace, keys: list[np.ndarray], first: np.ndarray, inv: np.ndarray) -> dict:
    """op, grid, block, registers, shared_memory and op_tc_eligible per group."""
    op_name, gx, gy, gz, bx, by, bz, regs, shm = (k[first] for k in keys[1:10])
    op = keys[10]  # launching op row per kernel
    eligible = tree_shape(trace).eligible  # not the whole call tree: no subtree sums
    op_elig = np.bincount(inv, weights=(op >= 0) & eligible[np.maximum(op, 0)], minlength=len(first)) > 0
    op_elig |= string_id_mask(op_name, trace.strings, tc_eligible)
    op_text = trace.str(op_name)
    annotated = op_name <= -2  # graph kernels: the captured code's annotation, not the launch's op
    if annotated.any():
        op_text[annotated] = graph_labels(trace)[-2 - op_name[annotated]]
    return {"op": op_text,
            "grid": _texts(_dim_text(*t) for t in zip(gx.tolist(), gy.tolist(), gz.tolist())),
            "block": _texts(_dim_text(*t) for t in zip(bx.tolist(), by.tolist(), bz.tolist())),
            "registers": regs, "shared_memory": shm, "op_tc_eligible": op_elig}


def _texts(items) -> np.ndarray:
    """An object array of texts and None (a list of tuples would become a 2-D array)."""
    items = list(items)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


__all__ = ["GROUP_BY", "kernels", "kernels_frame"]
