"""Kernels' occupancy limits, priority and channel (issue 19), per kernel name.

Why: CUPTI's kernel records carry why a kernel's occupancy is what it is; Kineto writes it
into the kernel's args (``libkineto/src/CuptiActivity.h`` ``visitTypedMetadata``): a nested
``"occupancy"`` object holding ``limitingFactors`` ("none" or "WARPS|REGS|SMEM|BLOCKS|
BARRIERS" names joined by "|", ``limitingFactorsToString``) and the blocks per SM each
resource allows (``blockLimitRegs``, ``blockLimitSharedMem``, ``blockLimitWarps``,
``blockLimitBlocks``, ``blockLimitBarriers``), then the stream's ``priority`` (CUDA >=
13.1) and the hardware ``channel`` (CUDA >= 12).  The Kernel table shows them beside each
kernel name.

Cost: these keys are no decoded column, so they are read from the args text
(``trace.arg_values``), a regular expression per row.  Kernels can be millions, so the
args are read only for a bounded sample: first the first call of every kernel name (to
learn whether the trace has the keys at all: a trace without them costs one pass over as
many rows as it has kernel names), then, for the keys present, the first ``SAMPLE`` calls
of each kernel name.  A column's value is the most common among those sampled calls (ties
to the earlier call); later calls of a name are not read.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import factorize, unique_ints
from tb_profiler.analysis.memo import per_trace
from tb_profiler.trace.arg_values import arg_numbers, arg_strings, keys_mentioned
from tb_profiler.trace.roles import Role

__all__ = ["FIELD_COLUMNS", "SAMPLE", "kernel_fields", "with_kernel_fields"]

SAMPLE = 16  # calls read per kernel name
# column -> (args key, is text)
FIELDS: dict[str, tuple[str, bool]] = {
    "limiting_factors": ("limitingFactors", True),
    "block_limit_regs": ("blockLimitRegs", False),
    "block_limit_shared_mem": ("blockLimitSharedMem", False),
    "block_limit_warps": ("blockLimitWarps", False),
    "block_limit_blocks": ("blockLimitBlocks", False),
    "block_limit_barriers": ("blockLimitBarriers", False),
    "priority": ("priority", False),
    "channel": ("channel", False),
}
FIELD_COLUMNS = tuple(FIELDS)
# keys that tell whether a group of columns is there at all (the block limits come with
# limitingFactors, in one "occupancy" object)
_PROBES = {"limitingFactors": FIELD_COLUMNS[:6], "priority": ("priority",), "channel": ("channel",)}


def _read(trace, rows: np.ndarray, key: str, text: bool) -> np.ndarray:
    return arg_strings(trace, rows, key) if text else arg_numbers(trace, rows, key)


def _sample(trace, rows: np.ndarray) -> np.ndarray:
    """The first SAMPLE calls of each kernel name (rows in trace order)."""
    names = trace.events["name"][rows].astype(np.int64)
    order = np.lexsort((rows, names))
    sorted_names = names[order]
    starts = np.r_[True, sorted_names[1:] != sorted_names[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - group_start
    return rows[rank < SAMPLE]


def _mode(names: np.ndarray, values: np.ndarray) -> pd.Series:
    """Per name id, its most common value (ties to the first seen); names without a value left out."""
    df = pd.DataFrame({"name": names, "value": values, "pos": np.arange(len(names))}).dropna(subset=["value"])
    if df.empty:
        return pd.Series(dtype=object)
    g = df.groupby(["name", "value"], sort=False).agg(n=("pos", "size"), first=("pos", "min")).reset_index()
    g = g.sort_values(["name", "n", "first"], ascending=[True, False, True], kind="stable")
    return g.drop_duplicates("name").set_index("name")["value"]


@per_trace
def kernel_fields(trace) -> pd.DataFrame:
    """Per kernel name that has any: ``name`` and the FIELD_COLUMNS the trace carries
    (limiting_factors, block_limit_regs, block_limit_shared_mem, block_limit_warps,
    block_limit_blocks, block_limit_barriers, priority, channel); numbers are Int64, null
    where a name's sampled calls lack the key.  Empty (no columns but ``name``) when the
    trace's kernels carry none of them.  Read-only, memoized."""
    ev = trace.events
    rows = np.flatnonzero(trace.roles == Role.COMPUTE)
    if not len(rows):
        return pd.DataFrame({"name": pd.Series(dtype=object)})
    firsts = rows[factorize(ev["name"][rows])[1]]  # each kernel name's first call
    mentioned = keys_mentioned(trace, firsts, _PROBES)  # one read of the texts: most traces lack them all
    present = [c for key, cols in _PROBES.items()
               if key in mentioned and pd.notna(pd.Series(_read(trace, firsts, key, key == "limitingFactors"), dtype=object)).any()
               for c in cols]
    if not present:
        return pd.DataFrame({"name": pd.Series(dtype=object)})
    sample = _sample(trace, rows)
    names = ev["name"][sample].astype(np.int64)
    ids = unique_ints(names)
    out = {"name": trace.str(ids)}
    for col in present:  # at most eight keys, each one pass over the sample
        key, text = FIELDS[col]
        values = _read(trace, sample, key, text)
        mode = _mode(names, values).reindex(ids)
        out[col] = (mode.to_numpy(dtype=object) if text else
                    pd.array(pd.to_numeric(mode, errors="coerce").round(), dtype="Int64"))
    df = pd.DataFrame(out)
    return df[df[present].notna().any(axis=1)].reset_index(drop=True)


def with_kernel_fields(trace, table: pd.DataFrame) -> pd.DataFrame:
    """The kernel table (one row per name, or per name + op + launch config) with the
    columns of ``kernel_fields`` by kernel name, when the trace has any; else unchanged."""
    fields = kernel_fields(trace)
    if len(fields.columns) < 2 or "name" not in table:
        return table
    by_name = fields.set_index("name")
    out = table.copy()
    for col in by_name.columns:
        out[col] = out["name"].map(by_name[col])
        if col != "limiting_factors":
            out[col] = out[col].astype("Int64")
    return out
