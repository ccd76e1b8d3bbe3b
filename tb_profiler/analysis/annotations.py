"""User annotations: the time of each ``record_function`` range on the host and each
``gpu_user_annotation`` range on a device, with the device work each one covers.

Why both sides: a ``record_function("attention")`` range on the host says how long the
Python code took to issue the work; the same name on the device (Kineto writes a
``gpu_user_annotation`` spanning the kernels the range launched) says how long the device
spent on it. The two differ exactly when the host runs ahead or the device waits, which
is what a user annotating a model wants to see.

Host side: a kernel belongs to an annotation when its launching runtime call lies inside
the range on the same thread (``links.launch`` and the host nesting of ``links``); an
outer range covers its inner ranges' kernels too. Device side: the device's busy time
(the union of its work, ``trace.roles``) inside the annotation's span on the same device.
ProfilerStep#N ranges are steps, shown by the step views, and left out here.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.links import host_parent, launch
from tb_profiler.analysis.nesting import subtree_sum
from tb_profiler.analysis.steps import valid_times
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, Role, role_mask

__all__ = ["ANNOTATION_COLUMNS", "annotations"]

ANNOTATION_COLUMNS = ["name", "count", "total_ns", "mean_ns", "max_ns", "kernels", "kernel_ns"]
_STEP = re.compile(r"^ProfilerStep#\d+$")


def annotations(trace) -> dict:
    """Per annotation name, on the host and on the devices.

    Returns {"host": ANNOTATION_COLUMNS per record_function name (total_ns: the ranges'
    time; kernels and kernel_ns: the device compute launched inside them, each kernel's
    whole duration), "device": ANNOTATION_COLUMNS plus device, per (device, name) of the
    gpu_user_annotation ranges (kernels: compute events starting inside them; kernel_ns:
    the device's busy time inside them, each ns once), both by total time, largest first;
    "notes"}.
    """
    ev = trace.events
    ok = valid_times(trace)
    host = ok & (ev["kind"] == Kind.USER_ANNOTATION)
    is_step = np.zeros(len(ev), bool)
    if host.any():
        step_ids = [i for i in np.unique(ev["name"][host]).tolist() if _STEP.match(trace.str(i) or "")]
        is_step = np.isin(ev["name"], step_ids) & host
    host &= ~is_step
    notes = []
    out_host = _host(trace, np.flatnonzero(host))
    out_device = _device(trace, np.flatnonzero(ok & (ev["kind"] == Kind.GPU_USER_ANNOTATION)))
    if out_host.empty and out_device.empty:
        notes.append("no user annotations (torch.profiler.record_function ranges) in this trace")
    elif out_device.empty and trace.has_device_work:
        notes.append("no gpu_user_annotation ranges: the device side of the annotations is not recorded")
    return {"host": out_host, "device": out_device, "notes": notes}


def _host(trace, rows: np.ndarray) -> pd.DataFrame:
    """Each range's duration and the compute launched inside it (its subtree on the host)."""
    ev = trace.events
    if not len(rows):
        return _empty(ANNOTATION_COLUMNS)
    kernels = np.flatnonzero(trace.roles == Role.COMPUTE)
    call = launch(trace)[kernels]
    has = call >= 0
    per_call_ns = np.bincount(call[has], weights=ev["dur"][kernels[has]], minlength=len(ev)).astype(np.int64)
    per_call_n = np.bincount(call[has], minlength=len(ev)).astype(np.int64)
    parent = host_parent(trace)
    inside_ns = subtree_sum(per_call_ns, parent)[rows]
    inside_n = subtree_sum(per_call_n, parent)[rows]
    frame = pd.DataFrame({"name": trace.str(ev["name"][rows]), "dur": ev["dur"][rows].astype(np.int64), "kernels": inside_n,
                          "kernel_ns": inside_ns})
    return _aggregate(frame, ["name"])


def _device(trace, rows: np.ndarray) -> pd.DataFrame:
    """Each device range's duration and its device's busy time inside it."""
    ev = trace.events
    columns = ["device", *ANNOTATION_COLUMNS]
    if not len(rows):
        return _empty(columns)
    dev = trace.event_devices
    work = np.flatnonzero(role_mask(trace.roles, DEVICE_WORK) & valid_times(trace) & (dev >= 0))
    lo = ev["ts"][rows].astype(np.int64)
    hi = lo + ev["dur"][rows].astype(np.int64)
    busy = np.zeros(len(rows), dtype=np.int64)
    count = np.zeros(len(rows), dtype=np.int64)
    for d in np.unique(dev[rows]).tolist():  # a loop over devices, not events
        mine = dev[rows] == d
        w = work[dev[work] == d]
        ws = ev["ts"][w].astype(np.int64)
        ms, me = merge_intervals(ws, ws + ev["dur"][w].astype(np.int64))
        busy[mine] = covered_in(ms, me, lo[mine], hi[mine])
        k = np.sort(ev["ts"][w[trace.roles[w] == Role.COMPUTE]].astype(np.int64))
        count[mine] = np.searchsorted(k, hi[mine], side="left") - np.searchsorted(k, lo[mine], side="left")
    frame = pd.DataFrame({"device": dev[rows].astype(np.int64), "name": trace.str(ev["name"][rows]), "dur": hi - lo,
                          "kernels": count, "kernel_ns": busy})
    return _aggregate(frame, ["device", "name"])


def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    out = (frame.groupby(keys, sort=False)
           .agg(count=("dur", "size"), total_ns=("dur", "sum"), mean_ns=("dur", "mean"), max_ns=("dur", "max"),
                kernels=("kernels", "sum"), kernel_ns=("kernel_ns", "sum")).reset_index())
    out["mean_ns"] = np.rint(out["mean_ns"].to_numpy(np.float64)).astype(np.int64)
    return out.sort_values(["total_ns", *keys], ascending=[False] + [True] * len(keys), kind="stable")\
        .reset_index(drop=True)[[*keys, *ANNOTATION_COLUMNS[1:]]]


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in columns})
