"""torch.compile: the kernels Inductor generated, from the profiler ranges around their launches.

Why: a fused Triton kernel has a generated name (``triton_poi_fused_add_relu_0``) that says
little, and no operator around it carries shapes the roofline could count.  Inductor opens
a ``cpu_op`` range named after the kernel around each launch
(``torch/_inductor/runtime/triton_heuristics.py``: ``CachingAutotuner._pre_launch`` and the
benchmarking path, ``torch._C._profiler._RecordFunctionFast(name, args, kwargs)`` with
``get_profiler_kwargs``'s kwargs), and Kineto writes those kwargs into the event's args:
``kernel_file``, ``kernel_hash``, ``kernel_backend`` ("triton"), ``stream``, ``num_warps``,
``num_stages``, ``kernel_kwargs`` (the launch config's "XBLOCK=1024,..." text) and, when
Inductor knew them, ``kernel_name``, ``kernel_flop`` and ``kernel_num_gb`` (per call).
The range's name is ``kernel_name`` ("triton kernel" without it).

What torch 2.13 really writes (checked with a real ``_RecordFunctionFast`` under the CPU
profiler): the kwargs reach the trace only when the profile had ``record_shapes=True``;
without it the range is there, named after the kernel, with no args.  Such a range (named
``triton_*`` or "triton kernel") is still a compiled kernel here, its args NaN, and a note
says why.  A string value holding a double quote is written as the text "None" (torch does
not escape it): read as missing.

Those ranges are few (one per launch of a compiled kernel), so their args are read from
the args text (``trace.arg_values``) of the candidate rows only: cpu_ops whose name is not
an operator's (no "::") that enclose a runtime launch or own device work, or whose name is
a Triton kernel's.  The device kernels are joined through the launch
(``analysis.links.launching_op``: the cpu_op around the runtime call with the kernel's
correlation id).  A value the trace does not give is NaN, never 0.

On CPU Inductor emits C++ kernels that open no such range; ``compiled_regions`` says what
a compiled trace has there (``Torch-Compiled Region``, ``CompiledFunction`` and the ops
the compiled graph ran).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import NO_ROW, host_parent, launching_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.shared import compute, name_map
from tb_profiler.trace.arg_values import arg_numbers, arg_strings
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import Role

__all__ = ["COMPILED_COLUMNS", "REGION_PREFIX", "compiled_kernels", "compiled_launches", "compiled_regions"]

COMPILED_COLUMNS = ["name", "kernel_backend", "kernel_file", "kernel_hash", "num_warps", "num_stages", "calls",
                    "device_ns", "flops", "bytes", "tflops", "tbps", "kernel_kwargs", "kernel_name",
                    "device_kernels"]
REGION_PREFIX = "Torch-Compiled Region"
COMPILED_FUNCTION = "CompiledFunction"
MAX_TEXT = 4096           # longest kernel_file / kernel_kwargs / name text kept (untrusted args)
_STRINGS = ("kernel_backend", "kernel_file", "kernel_hash", "kernel_kwargs", "kernel_name")
_NUMBERS = ("num_warps", "num_stages", "kernel_flop", "kernel_num_gb")


def _candidates(trace) -> np.ndarray:
    """cpu_op rows that may be Inductor's launch ranges (see the module docstring)."""
    ev = trace.events
    is_op = ev["kind"] == Kind.CPU_OP
    if not is_op.any():
        return np.zeros(0, np.int64)
    marked = np.zeros(len(ev), bool)
    runtime = np.flatnonzero(trace.roles == Role.RUNTIME)
    parent = host_parent(trace)[runtime]
    marked[parent[parent >= 0]] = True
    owner = launching_op(trace)
    marked[owner[owner >= 0]] = True
    not_aten = name_map(trace, lambda n: "::" not in n, among=is_op)
    triton = name_map(trace, _triton_range_name, among=is_op)
    return np.flatnonzero(is_op & not_aten & (marked | triton))


@per_trace
def compiled_launches(trace) -> pd.DataFrame:
    """One row per launch range of a compiled kernel: ``row`` (its event), ``name``, the
    decoded args (strings: None where absent; numbers: NaN), ``device_ns`` (its device
    kernels' time, NaN when none is in the trace) and ``device_kernels``."""
    ev = trace.events
    cand = _candidates(trace)
    backend = arg_strings(trace, cand, "kernel_backend") if len(cand) else np.zeros(0, object)
    has_args = pd.Series(backend, dtype=object).str.len().fillna(0).to_numpy() > 0
    by_name = name_map(trace, _triton_range_name, among=ev["kind"] == Kind.CPU_OP)[cand] if len(cand) else has_args
    rows = cand[has_args | by_name]
    cols: dict = {"row": rows, "name": _bounded(trace.str(ev["name"][rows]) if len(rows) else np.zeros(0, object))}
    for key in _STRINGS:
        cols[key] = _bounded(arg_strings(trace, rows, key))
    for key in _NUMBERS:
        v = arg_numbers(trace, rows, key)
        cols[key] = np.where(np.isfinite(v) & (v >= 0), v, np.nan)
    ns, count = _device_time(trace, rows)
    cols["device_ns"] = np.where(count > 0, ns, np.nan)
    cols["device_kernels"] = count
    return pd.DataFrame(cols)


def _triton_range_name(name: str) -> bool:
    """A name Inductor gives its launch ranges: a Triton kernel's (triton_poi_, triton_red_,
    triton_per_, triton_tem_, ...) or its default "triton kernel"."""
    return name.startswith("triton_") or name == "triton kernel"


def _bounded(values: np.ndarray) -> np.ndarray:
    """Strings cut to MAX_TEXT; anything else, and torch's "None" for a string it would
    not write, None."""
    s = pd.Series(values, dtype=object).str.slice(0, MAX_TEXT)  # NaN where not a string
    return s.where(s.notna() & (s != "None"), None).to_numpy(dtype=object)


def _device_time(trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device ns, device kernels) per launch range: the compute events whose launching op
    is that range or inside it."""
    ev = trace.events
    if not len(rows):
        return np.zeros(0, np.float64), np.zeros(0, np.int64)
    mine = np.zeros(len(ev), bool)
    mine[rows] = True
    k = np.flatnonzero(compute(trace))
    op = launching_op(trace)[k]
    owner = np.full(len(k), NO_ROW, np.int64)
    has = op >= 0
    owner[has] = nearest_ancestor(trace, op[has], mine, include_self=True)
    k, owner = k[owner >= 0], owner[owner >= 0]
    pos = np.searchsorted(rows, owner)
    dur = np.maximum(ev["dur"][k], 0).astype(np.float64)
    return (np.bincount(pos, weights=dur, minlength=len(rows)),
            np.bincount(pos, minlength=len(rows)).astype(np.int64))


def compiled_kernels(trace) -> pd.DataFrame:
    """One row per compiled kernel (name, kernel_file, kernel_hash), most device time first:
    COMPILED_COLUMNS.  ``flops`` = kernel_flop per call x calls, ``bytes`` = kernel_num_gb
    x 1e9 per call x calls, ``tflops`` / ``tbps`` over ``device_ns``; NaN where the trace
    does not say (no kernel_flop, no device kernel in the trace)."""
    launches = compiled_launches(trace)
    if launches.empty:
        return _empty()
    keys = ["name", "kernel_file", "kernel_hash"]
    g = launches.fillna({"kernel_file": "", "kernel_hash": ""}).groupby(keys, sort=False, dropna=False)
    out = g.agg(kernel_backend=("kernel_backend", "first"), num_warps=("num_warps", "first"),
                num_stages=("num_stages", "first"), calls=("row", "size"),
                device_ns=("device_ns", lambda s: s.sum(min_count=1)),
                flop=("kernel_flop", "max"), gb=("kernel_num_gb", "max"),
                kernel_kwargs=("kernel_kwargs", "first"), kernel_name=("kernel_name", "first"),
                device_kernels=("device_kernels", "sum")).reset_index()
    calls = out["calls"].to_numpy(np.float64)
    out["flops"] = out["flop"].to_numpy(np.float64) * calls
    out["bytes"] = out["gb"].to_numpy(np.float64) * 1e9 * calls
    t = out["device_ns"].to_numpy(np.float64)
    timed = np.isfinite(t) & (t > 0)
    safe = np.where(timed, t, 1.0)
    out["tflops"] = np.where(timed, out["flops"] / safe / 1e3, np.nan)  # FLOP/ns = GFLOP/s; / 1e3: TFLOP/s
    out["tbps"] = np.where(timed, out["bytes"] / safe / 1e3, np.nan)
    out = out.sort_values(["device_ns", "name"], ascending=[False, True], na_position="last", kind="stable")
    return out.reset_index(drop=True)[COMPILED_COLUMNS]


def _empty() -> pd.DataFrame:
    text = {"name", "kernel_backend", "kernel_file", "kernel_hash", "kernel_kwargs", "kernel_name"}
    ints = {"calls", "device_kernels"}
    return pd.DataFrame({c: pd.Series(dtype=object if c in text else np.int64 if c in ints else np.float64)
                         for c in COMPILED_COLUMNS})


def launch_flops_bytes(trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel_flop, kernel_num_gb x 1e9) per given event row, NaN where the row is not a
    compiled kernel's launch range or its args do not say (the roofline's "trace" source)."""
    launches = compiled_launches(trace)
    flop = np.full(len(rows), np.nan)
    nbytes = np.full(len(rows), np.nan)
    if launches.empty or not len(rows):
        return flop, nbytes
    at = launches["row"].to_numpy(np.int64)
    pos = np.clip(np.searchsorted(at, rows), 0, len(at) - 1)
    hit = at[pos] == rows
    flop[hit] = launches["kernel_flop"].to_numpy(np.float64)[pos[hit]]
    nbytes[hit] = launches["kernel_num_gb"].to_numpy(np.float64)[pos[hit]] * 1e9
    return flop, nbytes


def compiled_regions(trace) -> dict:
    """What a torch.compile trace holds around the compiled code: how many
    ``Torch-Compiled Region`` ranges and ``CompiledFunction`` calls, and the operators
    the compiled graphs ran (cpu_ops inside a region, by name: calls and host time)."""
    ev = trace.events
    is_op = (ev["kind"] == Kind.CPU_OP) | (ev["kind"] == Kind.USER_ANNOTATION)
    region = name_map(trace, lambda n: n.startswith(REGION_PREFIX), among=is_op) & is_op
    function = name_map(trace, lambda n: n == COMPILED_FUNCTION, among=is_op) & is_op
    ops = np.flatnonzero((ev["kind"] == Kind.CPU_OP) & ~region)
    inside = ops[nearest_ancestor(trace, ops, region, include_self=False) >= 0] if region.any() else ops[:0]
    table = pd.DataFrame({"name": trace.str(ev["name"][inside]) if len(inside) else np.zeros(0, object),
                          "host_ns": np.maximum(ev["dur"][inside], 0).astype(np.int64)})
    table = (table.groupby("name", sort=False).agg(calls=("host_ns", "size"), host_ns=("host_ns", "sum"))
             .reset_index().sort_values(["host_ns", "name"], ascending=[False, True], kind="stable")
             .reset_index(drop=True)) if len(table) else pd.DataFrame(
                 {"name": pd.Series(dtype=object), "calls": pd.Series(dtype=np.int64),
                  "host_ns": pd.Series(dtype=np.int64)})
    return {"regions": int(region.sum()), "compiled_functions": int(function.sum()), "ops": table}


def compiled_notes(trace, kernels: pd.DataFrame, regions: dict) -> list[str]:
    """Plain words on what the compiled-kernels table can and cannot show."""
    notes = []
    if kernels.empty and regions["regions"]:
        ops = regions["ops"]
        names = ", ".join(ops["name"].head(5).tolist())
        notes.append(f"no Triton kernels in this trace: {regions['regions']} {REGION_PREFIX} ranges, "
                     f"{regions['compiled_functions']} {COMPILED_FUNCTION} calls and {int(ops['calls'].sum())} "
                     f"operator calls under them ({names or 'none'}); on CPU Inductor emits C++ kernels, which "
                     "the profiler does not record as kernels")
    elif kernels.empty:
        notes.append("no compiled kernels: the trace has no Inductor launch ranges (args kernel_backend, "
                     "kernel_file) and no torch.compile region")
    else:
        bare = kernels["kernel_backend"].isna()
        if bare.any():
            notes.append(f"{int(bare.sum())} compiled kernels have no launch args (kernel_file, num_warps, "
                         "kernel_flop, ...): torch writes them only when the profile had record_shapes=True")
        if kernels["flops"].isna().any():
            notes.append(f"{int(kernels['flops'].isna().sum())} compiled kernels carry no kernel_flop (Inductor "
                         "writes it with config.benchmark_kernel): no FLOPs for them")
        if kernels["device_ns"].isna().any():
            notes.append(f"{int(kernels['device_ns'].isna().sum())} compiled kernels have no device kernel in the "
                         "trace (cut off by the profiling window, or no device activity recorded)")
    return notes
