"""Device summary: per accelerator, how busy it was during the steps and how well it was fed.

Why these numbers (torch-tb-profiler's definitions, so users can compare):
- utilization: time with at least one kernel running / time from the first step's start
  to the last step's end;
- est. SM efficiency: at each instant min(sum of "blocks per SM" of the running kernels,
  1), averaged over that same window (idle time counts as 0);
- est. achieved occupancy: kernels' "est. achieved occupancy %" weighted by their
  duration inside the window;
- tensor cores: share of kernel time in kernels whose names mark tensor-core use (the
  name lists live in analysis.tensor_cores, shared with the operator and kernel views).
The window is the steps' span, so these agree with the step-time breakdown.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.keys import unique_ints
from tb_profiler.analysis.links import host_parent, launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import marked_below
from tb_profiler.analysis.shared import compute, device_work, frozen, name_mask
from tb_profiler.analysis.steps import steps_frame
from tb_profiler.analysis.tensor_cores import tc_eligible
from tb_profiler.analysis.tensor_cores import uses_tensor_cores as tc_kernel_names
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import Role

SUMMARY_COLUMNS = ["device", "word", "name", "memory_bytes", "compute_capability", "num_sms", "kernels",
                   "kernel_ns", "busy_ns", "window_ns", "utilization_pct", "sm_efficiency_pct",
                   "occupancy_pct", "tensor_core_pct"]


@per_trace
def uses_tensor_cores(trace) -> np.ndarray:
    """Per event: a kernel whose name marks tensor-core use."""
    return frozen(name_mask(trace, tc_kernel_names, among=trace.roles == Role.COMPUTE))


@per_trace
def window(trace) -> tuple[int, int] | None:
    """[first step start, last step end]; without steps, the span of kernels; None if
    neither."""
    st = steps_frame(trace)
    if not st.empty:
        return int(st["start_ns"].iloc[0]), int(st["end_ns"].iloc[-1])
    ev = trace.events
    k = compute(trace)
    if not k.any():
        return None
    return int(ev["ts"][k].min()), int((ev["ts"][k] + ev["dur"][k]).max())


def device_ids(trace) -> np.ndarray:
    """Device id per event (``trace.event_devices``); -1 for host events."""
    return trace.event_devices


def device_summary(trace) -> pd.DataFrame:
    """One row per device that ran kernels, memcpy or memset.

    device, word (GPU/XPU/NPU/MTIA as the trace says), name, memory_bytes,
    compute_capability, num_sms (from deviceProperties; None when absent), kernels
    (count), kernel_ns (sum of kernel durations), busy_ns (kernel union inside the
    window), window_ns, utilization_pct, sm_efficiency_pct, occupancy_pct,
    tensor_core_pct (NaN where the trace lacks the fields).
    """
    return _device_summary(trace).copy()


@per_trace
def _device_summary(trace) -> pd.DataFrame:
    did = device_ids(trace)
    work = device_work(trace) & (did >= 0)
    ids = unique_ints(did[work])
    if not len(ids):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SUMMARY_COLUMNS})
    win = window(trace)
    props = {d.id: d for d in trace.devices}
    rows = [_device_row(trace, int(i), did, win, props.get(int(i))) for i in ids.tolist()]  # per device
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _device_row(trace, dev_id: int, did: np.ndarray, win, device) -> dict:
    ev = trace.events
    k = np.flatnonzero(compute(trace) & (did == dev_id))
    s, d = ev["ts"][k], ev["dur"][k]
    e = s + d
    lo, hi = win if win else (0, 0)
    span = max(hi - lo, 0)
    ms, me = merge_intervals(s, e)
    busy = int(covered_in(ms, me, np.array([lo]), np.array([hi]))[0]) if span else 0
    tc = uses_tensor_cores(trace)[k]
    return {
        "device": dev_id, "word": trace.device_word, "name": getattr(device, "name", None),
        "memory_bytes": getattr(device, "total_memory", None),
        "compute_capability": getattr(device, "compute_capability", None),
        "num_sms": getattr(device, "num_sms", None),
        "kernels": len(k), "kernel_ns": int(d.sum()), "busy_ns": busy, "window_ns": span,
        "utilization_pct": 100.0 * busy / span if span else np.nan,
        "sm_efficiency_pct": _sm_efficiency(s, e, ev["blocks_per_sm"][k], lo, hi),
        "occupancy_pct": _occupancy(s, e, ev["occupancy"][k], lo, hi),
        "tensor_core_pct": 100.0 * d[tc].sum() / d.sum() if d.sum() and trace.matrix_unit else np.nan,
    }


def _sm_efficiency(s, e, blocks, lo, hi) -> float:
    """Time average over [lo, hi) of min(sum of blocks per SM of running kernels, 1), in %.

    A sweep over sorted start/end points: the running sum of +b at starts and -b at ends
    is the load on each elementary segment.
    """
    ok = np.isfinite(blocks) & (blocks > 0)
    if not ok.any() or hi <= lo:
        return np.nan
    t = np.concatenate([s[ok], e[ok]])
    delta = np.concatenate([blocks[ok], -blocks[ok]])
    order = np.argsort(t, kind="stable")
    t, load = t[order], np.cumsum(delta[order])
    seg_lo = np.clip(t[:-1], lo, hi)
    seg_hi = np.clip(t[1:], lo, hi)
    value = np.clip(load[:-1], 0.0, 1.0)
    return 100.0 * float((value * (seg_hi - seg_lo)).sum()) / (hi - lo)


def _occupancy(s, e, occ, lo, hi) -> float:
    """Duration-weighted mean of est. achieved occupancy (%) over the kernels' time in
    [lo, hi)."""
    ok = np.isfinite(occ) & (occ >= 0)
    w = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)[ok]
    if not w.sum():
        return np.nan
    return float((occ[ok] * w).sum() / w.sum())


@per_trace
def tc_eligible_kernel_share(trace) -> float:
    """Share (0..1) of launched kernel time issued directly by tensor-core-eligible
    operators that have no eligible operator below them (torch-tb-profiler's "kernels
    launched by Tensor Cores eligible operators"); 0.0 without kernels.

    An operator is eligible by name, or because it launched a tensor-core kernel itself.
    """
    ev = trace.events
    op = launching_op(trace)
    k = np.flatnonzero(compute(trace) & (op >= 0))
    if not len(k):
        return 0.0
    ops = ev["kind"] == Kind.CPU_OP
    eligible = ops & name_mask(trace, tc_eligible, among=ops)
    eligible[op[k[uses_tensor_cores(trace)[k]]]] = True
    below = marked_below(host_parent(trace), eligible)  # an eligible op below it, on its thread
    bottom = eligible & ~below
    dur = ev["dur"][k]
    return float(dur[bottom[op[k]]].sum() / dur.sum()) if dur.sum() else 0.0


def kernel_tc_share(trace) -> float | None:
    """Share (0..1) of all kernel time in tensor-core kernels; None without kernels."""
    ev = trace.events
    k = compute(trace)
    total = ev["dur"][k].sum()
    if not total:
        return None
    return float(ev["dur"][k & uses_tensor_cores(trace)].sum() / total)
