"""Roofline: per operator and per kernel, the FLOPs and bytes it moved, the TFLOP/s and TB/s
it achieved, its arithmetic intensity, and how close it came to the device's roof.

FLOPs come from the trace's ``flops`` arg where the profile had ``with_flops=True`` (torch's
own count), for a kernel torch.compile generated from the ``kernel_flop`` and
``kernel_num_gb`` args Inductor writes on the range around its launch (source "trace",
``analysis.compiled``; bytes from ``kernel_num_gb`` too), else from the operator's input shapes (``record_shapes=True``) for the ops
whose count is standard: matrix products (mm, addmm, bmm, baddbmm, linear, matmul: 2·M·K·N
per product), convolutions (2 · output elements · C_in/groups · kernel size, with stride,
padding and dilation from the op's concrete inputs), scaled-dot-product attention
(4·B·H·L·S·E) and elementwise ops (one FLOP per output element).  Bytes moved are the
tensor inputs plus the output (an estimate: a cache can serve a re-read input), at the
inputs' element size.

Each FLOP is counted once: an op inside another counted op (aten::addmm inside aten::linear)
is not counted again; the trace's own count wins over the shapes' where both exist on a
chain; else the innermost op counts.  Time is the device time of the kernels the op
launched (its subtree's, as the Operator view's device total).  A kernel gets its op's
FLOPs and bytes in proportion to its share of that device time.

The roof is the device's peak for the op's data type (``analysis.peaks``): compute-bound
when the op's intensity is above the ridge point (peak FLOP/s over peak bytes/s),
memory-bound below it; with no peak for the device or the data type there is no
percentage, and the notes say why.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from tb_profiler.analysis.compiled import launch_flops_bytes
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW, host_parent, launching_op, nearest_ancestor
from tb_profiler.analysis.nesting import subtree_sum
from tb_profiler.analysis.operators import call_tree
from tb_profiler.analysis.peaks import BYTES, dtype_of, peaks_for
from tb_profiler.analysis.steps import valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import Role

__all__ = ["ROOFLINE_COLUMNS", "flops_from_shapes", "roofline"]

ROOFLINE_COLUMNS = ["name", "dtype", "calls", "flops", "bytes", "device_ns", "tflops", "tbps", "intensity",
                    "peak_tflops", "peak_tbps", "compute_pct", "memory_pct", "bound", "source"]

_MATMUL = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2),
           "aten::matmul": (0, 1)}
# where each convolution's (stride, padding, dilation, groups) stand among its inputs
_CONV = {"aten::conv1d": (3, 4, 5, 6), "aten::conv2d": (3, 4, 5, 6), "aten::conv3d": (3, 4, 5, 6),
         "aten::convolution": (3, 4, 5, 8), "aten::_convolution": (3, 4, 5, 8),
         "aten::cudnn_convolution": (3, 2, 4, 5), "aten::miopen_convolution": (3, 2, 4, 5),
         "aten::mkldnn_convolution": (4, 3, 5, 6)}
_SDPA = re.compile(r"^aten::(_?scaled_dot_product_\w*attention\w*|_flash_attention_forward|_efficient_attention_forward)$")
_ELEMENTWISE = {"aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div",
                "aten::div_", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_",
                "aten::sigmoid", "aten::tanh", "aten::threshold_backward", "aten::gelu_backward",
                "aten::silu_backward", "aten::where", "aten::clamp", "aten::clamp_", "aten::exp", "aten::neg"}


def _numel(shape) -> int:
    return int(math.prod(shape)) if isinstance(shape, list) and all(isinstance(d, int) for d in shape) else 0


def _is_tensor_type(type_name) -> bool:
    """Whether an "Input type" entry is a tensor's: torch writes a tensor's dtype as its C++
    type name ("float", "long int", "c10::BFloat16"; "Tensor(...)" elsewhere), and any other
    argument as its kind, capitalised ("Scalar", "Int", "Double", "GenericList") or empty."""
    return isinstance(type_name, str) and (type_name.startswith(("c10::", "Tensor")) or type_name[:1].islower())


def _integer_only(types) -> bool:
    """Whether an op's "Input type" list names tensors and all of them hold integers or
    bools (long int, int, bool: no roofline data type), so it does no floating-point work."""
    if not isinstance(types, list):
        return False
    tensor_types = [t for t in types if _is_tensor_type(t) and not t.startswith("Tensor")]
    return bool(tensor_types) and all(dtype_of(t) is None for t in tensor_types)


def _tensors(shapes: list, types: list | None = None) -> list[list[int]]:
    """The tensor inputs' shapes.  ``[]`` is a scalar argument (a Python number: 1.0, alpha)
    unless its "Input type" (``types``, beside ``shapes``) is a tensor's: then it is a 0-dim
    tensor, one element (``x * torch.tensor(2.)``, and the wrapped number of ``x * 2.``)."""
    if not isinstance(shapes, list):  # Input Dims of another type (a number, text): no shapes known
        return []
    types = types if isinstance(types, list) else []
    return [s for i, s in enumerate(shapes) if isinstance(s, list) and all(isinstance(d, int) for d in s)
            and (s or (i < len(types) and _is_tensor_type(types[i])))]


def flops_from_shapes(name: str, shapes: list, concrete: list | None = None,
                      types: list | None = None) -> tuple[int, int]:
    """(FLOPs, output elements) of one call from its input shapes (and concrete inputs for a
    convolution's stride, padding, dilation and groups; ``types``: the "Input type" list,
    which tells a 0-dim tensor from a scalar); (0, 0) when the op is not one whose count is
    standard or the shapes do not say, and when its tensors are all integer or bool (no
    floating-point operation: BatchNorm's ``num_batches_tracked += 1`` on a 0-dim long)."""
    if _integer_only(types):
        return 0, 0
    try:
        if name in _MATMUL:
            a, b = (shapes[i] for i in _MATMUL[name])
            if name == "aten::matmul" and (len(a) < 2 or len(b) < 2):
                return 0, 0
            batch = _numel(a[:-2]) if len(a) > 2 else 1
            m, k, n = a[-2], a[-1], b[-1]
            return 2 * batch * m * k * n, batch * m * n
        if name == "aten::linear":
            x, w = shapes[0], shapes[1]
            rows = _numel(x[:-1])
            return 2 * rows * x[-1] * w[0], rows * w[0]
        if name in _CONV:
            return _conv(name, shapes, concrete)
        if _SDPA.match(name):
            q, k = shapes[0], shapes[1]  # [..., L, E] and [..., S, E]: batch and heads lead
            heads = _numel(q[:-2]) or 1
            return 4 * heads * q[-2] * k[-2] * q[-1], heads * q[-2] * q[-1]
        if name in _ELEMENTWISE:
            out = max((_numel(s) for s in _tensors(shapes, types)), default=0)
            return out, out
    except (IndexError, TypeError):
        pass
    return 0, 0


def _conv(name: str, shapes: list, concrete: list | None) -> tuple[int, int]:
    x, w = shapes[0], shapes[1]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return 0, 0
    if not concrete or len(concrete) <= _CONV[name][0] or not concrete[_CONV[name][0]]:
        return 0, 0  # no stride recorded: a strided convolution would be counted 4x
    stride, padding, dilation, groups = _conv_args(concrete, _CONV[name], spatial)
    if padding is None:  # padding="same" (or text torch may write): the output keeps the input's size
        padding = [(dilation[i] * (w[2 + i] - 1)) // 2 for i in range(spatial)]
    out_spatial = []
    for i in range(spatial):
        size = (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        if size <= 0:
            return 0, 0
        out_spatial.append(size)
    out = x[0] * w[0] * math.prod(out_spatial)
    return 2 * out * (x[1] // groups) * math.prod(w[2:]), out


def _conv_args(concrete: list | None, at: tuple[int, int, int, int], spatial: int):
    """stride, padding (None for "same"), dilation, groups from a convolution's concrete
    inputs (torch writes them as text: "[2, 2]", "1"); 1, 0, 1, 1 where it does not."""
    def value(i: int):
        text = concrete[i] if concrete and i < len(concrete) else ""
        if text in ("same", "'same'", '"same"'):
            return "same"
        try:
            return json.loads(text) if text else None
        except (ValueError, TypeError):
            return None

    def vec(i: int, default: int):
        v = value(i)
        v = v if isinstance(v, list) else [v] * spatial if isinstance(v, int) else None
        return [int(t) for t in v] if v and len(v) == spatial and all(isinstance(t, int) for t in v) else \
            [default] * spatial

    groups = value(at[3])
    return (vec(at[0], 1), None if value(at[1]) == "same" else vec(at[1], 0), vec(at[2], 1),
            groups if isinstance(groups, int) and groups > 0 else 1)


def roofline(trace, *, peaks: dict | None = None) -> dict:
    """Per operator name and data type, and per kernel name: FLOPs, bytes, time, achieved
    TFLOP/s and TB/s, intensity, the roof and the bound (ROOFLINE_COLUMNS), most FLOPs first.

    Returns {"operators": ..., "kernels": ... (ROOFLINE_COLUMNS with kernel names; dtype
    and source of the ops they ran for), "points": one per operator call group for the
    chart (name, dtype, intensity, tflops), "device": {"name", "peaks", "peaks_from"},
    "notes"}."""
    ev = trace.events
    counted, flops, out_elems, source, uncounted = _counted_ops(trace)
    notes = []
    device = next((d for d in trace.devices if d.name), None)
    device_name = device.name if device else None
    roof, roof_from = peaks_for(device_name, peaks)
    if roof is None:
        notes.append(roof_from)
    if not len(counted):
        notes.append("no operator with a FLOP count: profile with with_flops=True, or record_shapes=True for the "
                     "shapes of matrix products, convolutions, attention and elementwise ops")
    if uncounted:
        notes.append(f"{uncounted} convolution calls have no FLOP count: the trace records their shapes but not "
                     "their stride and padding (profile with with_flops=True)")
    dtypes = _dtypes(trace, counted)
    nbytes = _bytes(trace, counted, dtypes, out_elems)
    given_bytes = launch_flops_bytes(trace, counted)[1]  # Inductor's kernel_num_gb, where it says
    nbytes = np.where(np.isfinite(given_bytes), np.rint(np.nan_to_num(given_bytes)), nbytes).astype(np.int64)
    device_ns = call_tree(trace).device_total[counted].astype(np.int64)
    if len(counted) and not (device_ns > 0).any():
        notes.append("the operators with FLOPs launched no device work in this trace: no achieved rate")
    ops = pd.DataFrame({"name": trace.str(ev["name"][counted]) if len(counted) else np.zeros(0, object),
                        "dtype": dtypes, "flops": flops, "bytes": nbytes, "device_ns": device_ns, "source": source})
    operators = _table(ops, "name", roof)
    kernels = _table(_kernel_share(trace, counted, ops), "name", roof)
    points = operators[["name", "dtype", "intensity", "tflops"]].dropna()
    return {"operators": operators, "kernels": kernels, "points": points,
            "device": {"name": device_name, "peaks": roof, "peaks_from": roof_from}, "notes": notes}


def _counted_ops(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(rows, FLOPs, output elements, source) of the operator calls whose FLOPs count, and
    how many convolution calls have no count (neither the trace's nor their shapes')."""
    ev = trace.events
    ops = np.flatnonzero((ev["kind"] == Kind.CPU_OP) & valid_times(trace))
    given = ev["flops"][ops]
    has_arg = (given != MISSING_INT) & (given > 0)
    inductor = launch_flops_bytes(trace, ops)[0]  # kernel_flop of a compiled kernel's launch range
    from_inductor = ~has_arg & np.isfinite(inductor) & (inductor > 0)
    given = np.where(from_inductor, np.rint(np.nan_to_num(inductor)), given).astype(np.int64)
    has_arg |= from_inductor
    shaped_flops, shaped_out = _shape_flops(trace, ops)
    by_shape = ~has_arg & (shaped_flops > 0)
    parent = host_parent(trace)
    arg_mask = np.zeros(len(ev), bool)
    arg_mask[ops[has_arg]] = True
    # a shapes count is dropped where the trace's own count covers the chain (ancestor or descendant)
    arg_below = subtree_sum(arg_mask.astype(np.int64), parent)
    arg_above = nearest_ancestor(trace, ops, arg_mask, include_self=False) >= 0
    by_shape &= ~arg_above & (arg_below[ops] == 0)
    keep = has_arg | by_shape
    mask = np.zeros(len(ev), bool)
    mask[ops[keep]] = True
    # the innermost counted op of a chain counts (addmm, not the linear around it)
    below = subtree_sum(mask.astype(np.int64), parent) - mask
    keep &= below[ops] == 0
    rows = ops[keep]
    flops = np.where(has_arg, given, shaped_flops)[keep].astype(np.int64)
    out = shaped_out[keep].astype(np.int64)
    source = np.where(from_inductor[keep], "trace", np.where(has_arg[keep], "trace flops", "shapes")).astype(object)
    return rows, flops, out, source, _uncounted_convolutions(trace, ops, has_arg | (shaped_flops > 0), parent)


def _uncounted_convolutions(trace, ops: np.ndarray, has_count: np.ndarray, parent: np.ndarray) -> int:
    """Convolution calls (each once: the innermost convolution op of its chain) without a count."""
    ev = trace.events
    ids = np.unique(ev["name"][ops])
    conv_ids = [i for i, n in zip(ids.tolist(), trace.str(ids) if len(ids) else []) if n in _CONV]
    conv = np.isin(ev["name"][ops], conv_ids)
    if not conv.any():
        return 0
    mask = np.zeros(len(ev), np.int64)
    mask[ops[conv]] = 1
    innermost = (subtree_sum(mask, parent) - mask)[ops] == 0
    return int((conv & innermost & ~has_count).sum())


def _shape_flops(trace, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and output elements per op row from its shapes; one parse per distinct
    (name, shapes, concrete inputs)."""
    ev = trace.events
    flops = np.zeros(len(ops), dtype=np.int64)
    out = np.zeros(len(ops), dtype=np.int64)
    if not len(ops):
        return flops, out
    name_ids = np.unique(ev["name"][ops])
    countable = [i for i in name_ids.tolist() if _countable(trace.str(i) or "")]
    rows = np.flatnonzero(np.isin(ev["name"][ops], countable))  # only ops with a formula: a few names
    if not len(rows):
        return flops, out
    code, first = factorize(ev["name"][ops[rows]], ev["input_dims"][ops[rows]], ev["concrete_inputs"][ops[rows]],
                            ev["input_type"][ops[rows]])
    f = np.zeros(len(first), dtype=np.int64)
    o = np.zeros(len(first), dtype=np.int64)
    for j, r in enumerate(ops[rows][first].tolist()):  # distinct calls, not events
        shapes = _json(trace.str(ev["input_dims"][r]))
        if isinstance(shapes, list):
            conc = _json(trace.str(ev["concrete_inputs"][r]))
            f[j], o[j] = flops_from_shapes(trace.str(ev["name"][r]), shapes, conc if isinstance(conc, list) else None,
                                           _json(trace.str(ev["input_type"][r])))
    flops[rows], out[rows] = f[code], o[code]
    return flops, out


def _countable(name: str) -> bool:
    return name in _MATMUL or name == "aten::linear" or name in _CONV or name in _ELEMENTWISE or bool(_SDPA.match(name))




def _json(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _dtypes(trace, rows: np.ndarray) -> np.ndarray:
    """The data type of each op call: its first floating input's "Input type"."""
    ids = trace.events["input_type"][rows]
    uniq, inv = np.unique(ids, return_inverse=True)
    names = []
    for i in uniq.tolist():
        types = _json(trace.str(i)) if i >= 0 else None
        found = next((d for d in (dtype_of(t) for t in types) if d), None) if isinstance(types, list) else None
        names.append(found or "unknown")
    return np.array(names, dtype=object)[inv.reshape(-1)] if len(rows) else np.zeros(0, object)


def _bytes(trace, rows: np.ndarray, dtypes: np.ndarray, out_elems: np.ndarray) -> np.ndarray:
    """Tensor inputs (a 0-dim one: one element) plus the output, at the element size of the
    op's data type; one parse per distinct (shapes, types)."""
    ev = trace.events
    dims, types = ev["input_dims"][rows], ev["input_type"][rows]
    code, first = factorize(dims, types)
    elems = np.array([_elements(trace, d, t) for d, t in zip(dims[first].tolist(), types[first].tolist())],
                     dtype=np.int64)
    size = np.array([BYTES.get(d, 4) for d in dtypes], dtype=np.int64)
    return ((elems[code] if len(rows) else np.zeros(0, np.int64)) + out_elems) * size


def _elements(trace, dims_id: int, types_id: int) -> int:
    """The elements of one call's tensor inputs, from its Input Dims and Input type ids."""
    if dims_id < 0:
        return 0
    types = _json(trace.str(types_id)) if types_id >= 0 else None
    return sum(_numel(s) for s in _tensors(_json(trace.str(dims_id)) or [], types))


def _kernel_share(trace, counted: np.ndarray, ops: pd.DataFrame) -> pd.DataFrame:
    """Each counted op's FLOPs and bytes over the kernels it launched, by kernel time."""
    ev = trace.events
    k = np.flatnonzero((trace.roles == Role.COMPUTE) & valid_times(trace))
    if not len(k) or not len(counted):
        return ops.iloc[:0].copy()
    is_counted = np.zeros(len(ev), bool)
    is_counted[counted] = True
    owner = nearest_ancestor(trace, launching_op(trace)[k], is_counted)
    k, owner = k[owner != NO_ROW], owner[owner != NO_ROW]
    pos = np.searchsorted(counted, owner)
    total = ops["device_ns"].to_numpy(np.int64)[pos]
    share = np.where(total > 0, ev["dur"][k] / np.maximum(total, 1), 0.0)
    return pd.DataFrame({"name": trace.str(ev["name"][k]), "dtype": ops["dtype"].to_numpy(object)[pos],
                         "flops": np.rint(ops["flops"].to_numpy(np.float64)[pos] * share).astype(np.int64),
                         "bytes": np.rint(ops["bytes"].to_numpy(np.float64)[pos] * share).astype(np.int64),
                         "device_ns": ev["dur"][k].astype(np.int64), "source": ops["source"].to_numpy(object)[pos]})


def _table(rows: pd.DataFrame, key: str, roof: dict | None) -> pd.DataFrame:
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "dtype", "bound", "source") else
                                          np.int64 if c in ("calls", "flops", "bytes", "device_ns") else np.float64)
                             for c in ROOFLINE_COLUMNS})
    out = (rows.groupby([key, "dtype"], sort=False)
           .agg(calls=("flops", "size"), flops=("flops", "sum"), bytes=("bytes", "sum"), device_ns=("device_ns", "sum"),
                source=("source", "first")).reset_index())
    t = out["device_ns"].to_numpy(np.float64)
    timed = t > 0
    out["tflops"] = np.where(timed, out["flops"] / np.where(timed, t, 1) / 1e3, np.nan)  # FLOP/ns = GFLOP/s
    out["tbps"] = np.where(timed, out["bytes"] / np.where(timed, t, 1) / 1e3, np.nan)
    out["intensity"] = np.where(out["bytes"] > 0, out["flops"] / out["bytes"].where(out["bytes"] > 0, 1), np.nan)
    peak_tflops = np.array([((roof or {}).get("tflops") or {}).get(d, np.nan) for d in out["dtype"]], dtype=float)
    peak_tbps = float((roof or {}).get("tbps") or np.nan)
    out["peak_tflops"], out["peak_tbps"] = peak_tflops, peak_tbps
    out["compute_pct"] = 100.0 * out["tflops"] / peak_tflops
    out["memory_pct"] = 100.0 * out["tbps"] / peak_tbps
    ridge = peak_tflops / peak_tbps  # FLOP per byte where the two roofs meet
    out["bound"] = np.where(np.isnan(ridge) | np.isnan(out["intensity"]) | ~timed, None,  # no device time: no point
                            np.where(out["intensity"] >= ridge, "compute", "memory")).astype(object)
    return out.sort_values(["flops", key], ascending=[False, True], kind="stable").reset_index(drop=True)[
        ROOFLINE_COLUMNS]
