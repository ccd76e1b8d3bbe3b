"""Kernel launch statistics: per launch call, how long the host spent in the call, how
much device work it launched and how long the device took to start it.

Why per launch call, not per kernel: a graph launch (``cudaGraphLaunch``,
``hipGraphLaunch``) is one call that issues every kernel of the graph under its one
correlation id; counting it once per kernel would charge its call time many times. So a
launch here is ``links.launches``: each runtime/driver call (any backend: CUDA runtime
and driver, HIP, MTIA, XPU, PrivateUse1, ...) that launched device compute, found by
correlation rather than by name, with the kernels it launched summed. Its delay is
measured to its first kernel's start.

Kernels whose launching call the trace lost (cut off by the profiling window, or a
trace without runtime calls) and launch calls that launched nothing are counted in
``unmatched``, not dropped silently. All times are int64 ns as in the trace.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.graphs import graph_notes
from tb_profiler.analysis.links import (
    GRAPH_LAUNCH_NAMES,
    launch,
    launches,
    launching_op,
)
from tb_profiler.analysis.memo import per_trace_result
from tb_profiler.analysis.steps import step_numbers, valid_times
from tb_profiler.trace.roles import DEVICE_SIDE, Role, role_mask
from tb_profiler.trace.strings import map_string_ids

__all__ = ["CALL_COLUMNS", "HISTOGRAMS", "LAUNCH_COLUMNS", "OPERATOR_COLUMNS", "OUTLIER_COLUMNS", "launch_stats"]

LAUNCH_COLUMNS = ["call", "call_start_ns", "call_dur_ns", "kernel", "kernels", "kernel_start_ns", "kernel_dur_ns",
                  "launch_delay_ns", "device", "stream", "operator", "step"]
OUTLIER_COLUMNS = LAUNCH_COLUMNS + ["reason"]
CALL_COLUMNS = ["call", "launches", "kernels", "call_dur_total_ns", "call_dur_mean_ns", "call_dur_median_ns",
                "call_dur_p90_ns", "call_dur_max_ns", "delay_mean_ns", "delay_median_ns", "delay_p90_ns",
                "delay_max_ns", "kernel_dur_total_ns", "kernel_dur_median_ns", "short_kernels"]
OPERATOR_COLUMNS = ["operator", "launches", "call_ns", "kernel_ns", "delay_median_ns", "overhead_share"]
HISTOGRAMS = ("call_dur_ns", "launch_delay_ns", "kernel_dur_ns")

# A launch is a delay outlier above max(p99, OUTLIER_MEDIAN_FACTOR x median) of all delays.
OUTLIER_QUANTILE = 0.99
OUTLIER_MEDIAN_FACTOR = 10

_INT_LAUNCH = ("call_start_ns", "call_dur_ns", "kernels", "kernel_start_ns", "kernel_dur_ns", "launch_delay_ns",
               "device", "stream", "step")
_INT_CALLS = ("launches", "kernels", "call_dur_total_ns", "call_dur_max_ns", "delay_max_ns",
              "kernel_dur_total_ns", "short_kernels")
_INT_OPS = ("launches", "call_ns", "kernel_ns")


def _typed(data: dict, columns: list[str], ints: tuple) -> pd.DataFrame:
    """A frame with exactly ``columns``: ints int64, the rest float64 or object (names)."""
    out = {}
    for c in columns:
        v = data.get(c, [])
        if c in ints:
            out[c] = np.asarray(v, dtype=np.int64)
        elif isinstance(v, np.ndarray) and v.dtype.kind in "fiu":
            out[c] = v.astype(np.float64)
        else:
            out[c] = pd.Series(list(v) if not isinstance(v, pd.Series) else v.to_numpy(), dtype=object)
    return pd.DataFrame(out, columns=columns)


def _names(trace, ids: np.ndarray) -> np.ndarray:
    """Object array of names for string ids (None where missing)."""
    out = np.empty(len(ids), dtype=object)
    if len(ids):
        out[:] = trace.str(np.asarray(ids, dtype=np.int64))
    return out


def _first_kernels(trace, calls: np.ndarray) -> np.ndarray:
    """For each launch call (sorted rows, as ``launches`` gives them), the row of its
    earliest compute event (ties: the lower row)."""
    ev = trace.events
    rt = launch(trace)
    k = np.flatnonzero((trace.roles == Role.COMPUTE) & valid_times(trace) & (rt >= 0))
    order = np.lexsort((k, ev["ts"][k], rt[k]))  # by call, then start, then row
    k = k[order]
    first = k[np.r_[True, rt[k][1:] != rt[k][:-1]]] if len(k) else k
    # first is in call order, one per call launching compute: exactly ``calls``
    return first


def _launch_frame(trace) -> tuple[pd.DataFrame, int]:
    """The launches frame and how many launches were left out for a call without usable
    times."""
    ev = trace.events
    lau = launches(trace)
    call = lau.call
    first = _first_kernels(trace, call)
    ok = valid_times(trace)[call]
    call, first, work, count = call[ok], first[ok], lau.work_ns[ok], lau.kernels[ok]
    op = launching_op(trace)[first]  # the innermost cpu_op around the call (links.py)
    step = step_numbers(trace, call)
    call_start = ev["ts"][call].astype(np.int64)
    kernel_start = ev["ts"][first].astype(np.int64)
    data = {
        "call": _names(trace, ev["name"][call]),
        "call_start_ns": call_start,
        "call_dur_ns": ev["dur"][call].astype(np.int64),
        "kernel": _names(trace, ev["name"][first]),
        "kernels": count,
        "kernel_start_ns": kernel_start,
        "kernel_dur_ns": work,
        "launch_delay_ns": kernel_start - call_start,
        "device": trace.event_devices[first].astype(np.int64),
        "stream": trace.event_streams[first],
        "operator": _names(trace, np.where(op >= 0, ev["name"][np.maximum(op, 0)], -1)),
        "step": step,
    }
    return _typed(data, LAUNCH_COLUMNS, _INT_LAUNCH), int((~ok).sum())


def _histogram(values: np.ndarray, bins: int) -> dict:
    """Log-spaced histogram over int ns: bins+1 strictly increasing int edges from the
    smallest positive value (at least 1 ns) to at least the largest; values below the
    first edge (0 or negative) count in the first bin, so the counts sum to len(values)."""
    v = np.asarray(values, dtype=np.int64)
    if not len(v):
        return {"edges": [], "counts": []}
    pos = v[v > 0]
    lo = int(pos.min()) if len(pos) else 1
    hi = max(int(v.max()), lo + 1)
    edges = np.rint(np.geomspace(lo, hi, bins + 1)).astype(np.int64)
    edges[0], edges[-1] = lo, hi
    step = np.arange(bins + 1, dtype=np.int64)
    edges = np.maximum.accumulate(edges - step) + step  # strictly increasing ints
    counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
    return {"edges": edges.tolist(), "counts": counts.astype(np.int64).tolist()}


def _calls_frame(lf: pd.DataFrame) -> pd.DataFrame:
    if lf.empty:
        return _typed({}, CALL_COLUMNS, _INT_CALLS)
    d = lf.assign(short=lf["kernel_dur_ns"] < lf["call_dur_ns"])
    g = d.groupby("call", sort=False)
    cd, dl, kd = g["call_dur_ns"], g["launch_delay_ns"], g["kernel_dur_ns"]
    out = pd.DataFrame({
        "launches": g.size(), "kernels": g["kernels"].sum(),
        "call_dur_total_ns": cd.sum(), "call_dur_mean_ns": cd.mean(), "call_dur_median_ns": cd.median(),
        "call_dur_p90_ns": cd.quantile(0.9), "call_dur_max_ns": cd.max(),
        "delay_mean_ns": dl.mean(), "delay_median_ns": dl.median(), "delay_p90_ns": dl.quantile(0.9),
        "delay_max_ns": dl.max(), "kernel_dur_total_ns": kd.sum(), "kernel_dur_median_ns": kd.median(),
        "short_kernels": g["short"].sum()}).reset_index()
    out = out.sort_values(["call_dur_total_ns", "call"], ascending=[False, True], kind="stable")
    data = {c: out[c].to_numpy() for c in CALL_COLUMNS}
    return _typed(data, CALL_COLUMNS, _INT_CALLS)


def _operators_frame(lf: pd.DataFrame) -> pd.DataFrame:
    """Per enclosing operator (None: launches outside any operator, last)."""
    if lf.empty:
        return _typed({}, OPERATOR_COLUMNS, _INT_OPS)
    d = lf.assign(operator=lf["operator"].fillna("\0none"))
    g = d.groupby("operator", sort=False)
    out = pd.DataFrame({"launches": g.size(), "call_ns": g["call_dur_ns"].sum(),
                        "kernel_ns": g["kernel_dur_ns"].sum(),
                        "delay_median_ns": g["launch_delay_ns"].median()}).reset_index()
    total = out["call_ns"] + out["kernel_ns"]
    out["overhead_share"] = np.where(total > 0, out["call_ns"] / total.where(total > 0, 1), 0.0)
    out["_none"] = out["operator"] == "\0none"
    out = out.sort_values(["_none", "call_ns", "operator"], ascending=[True, False, True], kind="stable")
    ops = out["operator"].to_numpy(dtype=object)
    ops[ops == "\0none"] = None
    data = {c: out[c].to_numpy() for c in OPERATOR_COLUMNS}
    data["operator"] = ops
    return _typed(data, OPERATOR_COLUMNS, _INT_OPS)


def _outliers(lf: pd.DataFrame, limit: int) -> pd.DataFrame:
    if lf.empty or limit <= 0:
        return _typed({}, OUTLIER_COLUMNS, _INT_LAUNCH)
    delay = lf["launch_delay_ns"].to_numpy(dtype=np.int64)
    p99 = float(np.quantile(delay, OUTLIER_QUANTILE))
    med = float(np.median(delay))
    cut = max(p99, OUTLIER_MEDIAN_FACTOR * med)
    rows = np.flatnonzero(delay > cut)
    rows = rows[np.lexsort((rows, -delay[rows]))][:limit]  # largest first, then trace order
    out = lf.iloc[rows].reset_index(drop=True)
    why = (f"delay above p99 ({p99:.0f} ns)" if p99 >= OUTLIER_MEDIAN_FACTOR * med
           else f"delay above {OUTLIER_MEDIAN_FACTOR} x median ({OUTLIER_MEDIAN_FACTOR * med:.0f} ns)")
    out["reason"] = pd.Series([why] * len(out), dtype=object)
    return out[OUTLIER_COLUMNS]


def _launch_named(trace, launched_names: np.ndarray) -> np.ndarray:
    """Runtime calls named like a launch: a name some call of this trace launched compute
    with, or a graph launch (links.GRAPH_LAUNCH_NAMES)."""
    ev = trace.events
    rt = trace.roles == Role.RUNTIME
    named = map_string_ids(ev["name"], trace.strings, lambda s: s in GRAPH_LAUNCH_NAMES, bool, False)
    return rt & (named | np.isin(ev["name"], launched_names))


def _unmatched(trace) -> dict:
    ev = trace.events
    rt = launch(trace)
    compute = trace.roles == Role.COMPUTE
    kernels_without_call = int((compute & (rt < 0)).sum())
    lau = launches(trace)
    launched_names = np.unique(ev["name"][lau.call])
    dev = role_mask(trace.roles, DEVICE_SIDE) & (rt >= 0)
    launched_any = np.zeros(len(ev), dtype=bool)
    launched_any[rt[dev]] = True
    calls_without_kernel = int((_launch_named(trace, launched_names) & ~launched_any).sum())
    return {"calls_without_kernel": calls_without_kernel, "kernels_without_call": kernels_without_call}


@per_trace_result
def launch_stats(trace, *, bins: int = 30, outliers: int = 50) -> dict:
    """Kernel launch statistics of one trace.

    Returns {"launches": one row per launch call that launched device compute
    (LAUNCH_COLUMNS: call = runtime call name; kernel = its first kernel's name; kernels =
    how many compute events it launched (a graph launch: many); kernel_start_ns = first
    kernel's start; kernel_dur_ns = its kernels' durations summed; launch_delay_ns =
    kernel_start_ns - call_start_ns; operator = innermost cpu_op around the call or None;
    step = ProfilerStep number the call starts in, or -1), in call order;
    "calls": per call name (CALL_COLUMNS), by call time; "histograms": {"call_dur_ns" |
    "launch_delay_ns" | "kernel_dur_ns": {"edges": bins+1 log-spaced int ns, "counts":
    bins ints}} (values <= 0 counted in the first bin; empty lists without launches);
    "short_kernels": launches whose kernel_dur_ns < call_dur_ns, "short_share": their
    share; "outliers": launches with a delay above max(p99, 10 x median), at most
    ``outliers``, largest first, with a "reason"; "operators": per enclosing operator
    (OPERATOR_COLUMNS; None = outside any operator, last); "unmatched":
    {"calls_without_kernel", "kernels_without_call"}; "notes": [str]}.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1; got {bins}")
    lf, bad_times = _launch_frame(trace)
    unmatched = _unmatched(trace)
    notes: list[str] = []
    n = len(lf)
    short = int((lf["kernel_dur_ns"] < lf["call_dur_ns"]).sum()) if n else 0
    if not n:
        notes.append("no kernel launches: the trace has no runtime call correlated with device compute")
    else:
        graph = lf["call"].isin(GRAPH_LAUNCH_NAMES)
        if graph.any():
            notes.append(f"{int(graph.sum())} graph launches issue {int(lf['kernels'][graph].sum())} kernels: "
                         "each counts once, its delay to its first kernel, its kernel time summed")
            notes += graph_notes(trace)  # whether the replayed kernels can be attributed to the captured code
        neg = int((lf["launch_delay_ns"] < 0).sum())
        if neg:
            notes.append(f"{neg} launches have their first kernel start before the call (host and device clocks "
                         "disagree): their delay is negative, counted in the first histogram bin")
    if bad_times:
        notes.append(f"{bad_times} launch calls without a usable start or duration are left out")
    if unmatched["kernels_without_call"]:
        notes.append(f"{unmatched['kernels_without_call']} kernels have no launching call in the trace (cut off by "
                     "the profiling window, or a backend that records no runtime calls): not in the launches")
    if unmatched["calls_without_kernel"]:
        notes.append(f"{unmatched['calls_without_kernel']} launch calls have no device event in the trace (their "
                     "kernels ran after the profiling window closed?)")
    hist = {h: _histogram(lf[h].to_numpy(dtype=np.int64), bins) for h in HISTOGRAMS}
    return {"launches": lf, "calls": _calls_frame(lf), "histograms": hist, "short_kernels": short,
            "short_share": short / n if n else 0.0, "outliers": _outliers(lf, outliers),
            "operators": _operators_frame(lf), "unmatched": unmatched, "notes": notes}
