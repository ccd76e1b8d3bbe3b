"""Memory by operator: per device and operator, the old plugin's MemoryStatsTable plus frees,
with the allocations of factory ops charged to the operator that called them.

Why the naming: nearly every allocation of a PyTorch program happens inside
``aten::empty``, ``aten::empty_strided`` and a few other factories, so a table keyed by
the innermost operator alone files most of the memory under "aten::empty" and tells no
one which operator asked for it.  torch-tb-profiler named such an allocation after the
operator around it, ``aten::cudnn_convolution (aten::empty)`` (in its memory events
table); here every call of a factory op is a row of that form, ``<caller> (<factory>)``:
its self figures are the factory's own allocations for that caller, its inclusive ones
what it holds.  The caller is the nearest enclosing operator that is not a factory itself
(``aten::zeros`` calls ``aten::empty``: both are named after the op that called
``aten::zeros``; the old plugin named the inner one ``aten::zeros (aten::empty)``).  A
factory call with no operator around it keeps its own name.  Every other row is the
old plugin's, number for number (tests/test_analysis_memory.py); adding up the rows of
one factory gives the old plugin's row of that name.

Rows are sorted per device (accelerators first) by self allocation size, largest first:
what each operator itself allocated.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.memory_records import (
    Records,
    memory_op_parent,
    memory_ops,
    memory_records,
    record_ops,
    select_records,
    sort_devices,
)
from tb_profiler.analysis.shared import name_map

STATS_COLUMNS = ["device", "name", "calls", "size_increase", "self_size_increase", "allocation_count",
                 "self_allocation_count", "allocation_size", "self_allocation_size", "free_count",
                 "self_free_count", "free_size", "self_free_size"]
# Ops that only allocate (or re-size) a tensor for their caller: the old plugin's
# aten::empty* (empty, empty_like, empty_strided, empty_permuted, ...) and the fill-after-
# allocate factories built on them.
FACTORY_PREFIX = "aten::empty"
FACTORY_OPS = frozenset({"aten::new_empty", "aten::new_empty_strided", "aten::zeros", "aten::zeros_like",
                         "aten::new_zeros", "aten::ones", "aten::ones_like", "aten::new_ones", "aten::full",
                         "aten::full_like", "aten::new_full", "aten::resize_", "aten::resize_as_"})


def is_factory(name: str) -> bool:
    """Whether an operator name is an allocation factory (see FACTORY_OPS)."""
    return isinstance(name, str) and (name.startswith(FACTORY_PREFIX) or name in FACTORY_OPS)


def charged_name(caller: str, factory: str) -> str:
    """The row name of a factory's allocations made for ``caller``, as the old plugin wrote it."""
    return f"{caller} ({factory})"


@per_trace
def op_labels(trace) -> np.ndarray:
    """Per event row, the code of its memory row: ``name * (S + 1) + caller + 1`` with S
    the number of strings, caller the name id of a factory call's caller (-1: no caller,
    and every op that is not a factory); -1 for events that are not memory operators.
    Codes, not texts: the stats group by an int, and only the rows shown get a text."""
    ev = trace.events
    ops = memory_ops(trace)
    factory = ops & name_map(trace, is_factory, among=ops)
    base = len(trace.strings) + 1
    out = np.full(len(ev), -1, dtype=np.int64)
    rows = np.flatnonzero(ops)
    out[rows] = ev["name"][rows].astype(np.int64) * base
    fac = np.flatnonzero(factory)
    caller = nearest_ancestor(trace, fac, ops & ~factory, include_self=False)
    out[fac] += np.where(caller >= 0, ev["name"][np.maximum(caller, 0)].astype(np.int64), -1) + 1
    return out


def label_texts(trace, codes: np.ndarray) -> list[str]:
    """The row names of label codes (``op_labels``): the op's name, or ``caller (factory)``."""
    base = len(trace.strings) + 1
    codes = np.asarray(codes, dtype=np.int64)
    own, caller = trace.str(codes // base), trace.str(codes % base - 1)
    return [o if c is None else charged_name(c, o) for o, c in zip(own.tolist(), caller.tolist())]


def memory_stats(trace, device: str | None = None, start_ns: int | None = None,
                 end_ns: int | None = None) -> pd.DataFrame:
    """Per device and operator (a factory per caller, see the module): the old plugin's
    memory statistics, plus frees.

    self_*: records whose innermost enclosing operator is a call of this row; the others
    count every record inside a call of this row, nested operators included (once, even
    when calls of the row nest in each other).  size_increase sums
    +alloc and -free bytes; allocation_* count/sum the allocations, free_* the frees (size
    as a positive number).  calls: how many calls of the row overlap the range (all
    devices).  Records are taken by their own ts in [start_ns, end_ns]; rows with every
    metric zero are left out.  Sorted per device by self_allocation_size, largest first.
    """
    rec = memory_records(trace)
    sel = select_records(rec, device, start_ns, end_ns)
    ops = record_ops(trace)
    sel = sel[ops[sel] >= 0]
    if not len(sel):
        return pd.DataFrame(columns=STATS_COLUMNS)
    op_rows, rec_idx, is_self = _op_chains(trace, ops[sel], sel)
    label = op_labels(trace)[op_rows]
    # A record inside aten::div inside aten::div counts once for aten::div (the innermost
    # call comes first: it keeps is_self).
    first = factorize(rec_idx, label)[1]
    rec_idx, label, is_self = rec_idx[first], label[first], is_self[first]
    b = rec.bytes[rec_idx]
    df = pd.DataFrame({
        "device": rec.device[rec_idx], "name": label, "self": is_self,
        "inc": b, "ac": (b > 0).astype(np.int64), "as": np.where(b > 0, b, 0),
        "fc": (b < 0).astype(np.int64), "fs": np.where(b < 0, -b, 0),
    })
    return _stats_table(trace, rec, df, start_ns, end_ns)


def _op_chains(trace, ops: np.ndarray, rec_idx: np.ndarray):
    """(operator row, record index, is self) for each record and each operator enclosing it:
    the innermost first, then one vectorized hop per nesting level."""
    parent = memory_op_parent(trace)
    out_ops, out_rec, out_self = [], [], []
    cur, idx, first = ops, rec_idx, True
    while len(cur):
        out_ops.append(cur)
        out_rec.append(idx)
        out_self.append(np.full(len(cur), first))
        cur = parent[cur]
        live = cur >= 0
        cur, idx, first = cur[live], idx[live], False
    return np.concatenate(out_ops), np.concatenate(out_rec), np.concatenate(out_self)


_METRICS = {"inc": ("size_increase", "self_size_increase"), "ac": ("allocation_count", "self_allocation_count"),
            "as": ("allocation_size", "self_allocation_size"), "fc": ("free_count", "self_free_count"),
            "fs": ("free_size", "self_free_size")}


def _stats_table(trace, rec: Records, df: pd.DataFrame, start_ns, end_ns) -> pd.DataFrame:
    """Sum per (device, row), inclusive and self, and add the call counts."""
    keys = ["device", "name"]
    total = df.groupby(keys)[list(_METRICS)].sum()
    own = df[df["self"]].groupby(keys)[list(_METRICS)].sum().reindex(total.index, fill_value=0)
    out = pd.DataFrame(index=total.index)
    for m, (inc_col, self_col) in _METRICS.items():
        out[inc_col] = total[m].astype(np.int64)
        out[self_col] = own[m].astype(np.int64)
    out = out.reset_index()
    out["calls"] = _calls(trace, start_ns, end_ns).reindex(out["name"].to_numpy(), fill_value=0).to_numpy()
    out["device"] = np.asarray(rec.devices, dtype=object)[out["device"].to_numpy()]
    out["name"] = label_texts(trace, out["name"].to_numpy())
    metric_cols = [c for c in STATS_COLUMNS if c not in ("device", "name", "calls")]
    out = out[(out[metric_cols] != 0).any(axis=1)]
    return out[STATS_COLUMNS].sort_values(["device", "self_allocation_size", "name"], ascending=[True, False, True],
                                          key=_device_order_key, kind="stable").reset_index(drop=True)


def _device_order_key(col: pd.Series) -> pd.Series:
    if col.name != "device":
        return col
    order = {d: i for i, d in enumerate(sort_devices(col.unique()))}
    return col.map(order)


def _calls(trace, start_ns, end_ns) -> pd.Series:
    """Calls per row (label code) among operators overlapping [start_ns, end_ns]."""
    ev = trace.events
    keep = memory_ops(trace).copy()
    if start_ns is not None:
        keep &= ev["ts"] + ev["dur"] >= int(start_ns)
    if end_ns is not None:
        keep &= ev["ts"] <= int(end_ns)
    return pd.Series(op_labels(trace)[keep]).value_counts()


__all__ = ["FACTORY_OPS", "FACTORY_PREFIX", "STATS_COLUMNS", "charged_name", "is_factory", "label_texts",
           "memory_stats", "op_labels"]
