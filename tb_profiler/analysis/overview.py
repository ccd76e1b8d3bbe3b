"""Overview: the first page of a profile — steps, where their time went, devices, advice.

Why one function: the plugin route, the CLI and ``trace.overview()`` want the same
bundle, and each part is memoized per trace, so asking for all of it costs what its
parts cost once. A part the trace cannot give (no steps, no device events, no memory
records, kernels without their launch) comes back empty with a reason in "notes"; the
overview never raises on a valid Trace.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.diagnosis import diagnosis
from tb_profiler.analysis.gpu import device_summary, window
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.recommendations import recommendations
from tb_profiler.analysis.steps import step_info
from tb_profiler.trace.strings import match_ids


def overview(trace, records: bool = False) -> dict:
    """The overview of one trace.

    Returns {"device_word", "steps", "breakdown", "devices", "recommendations",
    "diagnosis" (analysis.diagnosis: what bounds the step, in one sentence), "summary",
    "notes"}: steps, breakdown["ns"], breakdown["pct"] and devices are
    DataFrames (lists of plain dicts with ``records=True``, ready for JSON);
    breakdown["labels"] maps category to its display name in priority order; summary
    holds step_time_avg_ns, num_steps, the average breakdown and the main device numbers,
    and left_out_steps: the ProfilerStep#N ranges the steps leave out, each with its reason
    (``steps.left_out_steps``; notes say the same in words).

    Computed once per trace (the plugin's route, the CLI and the notebook share it); each
    call returns its own deep copy.
    """
    out = copy.deepcopy(_overview(trace))
    return to_records(out) if records else out


@per_trace
def _overview(trace) -> dict:
    info = step_info(trace)
    ns = bd.breakdown(trace)
    pct = bd.breakdown_percent(ns)
    devices = device_summary(trace)
    out = {
        "device_word": trace.device_word,
        "steps": info.frame.copy(),
        "breakdown": {"ns": ns, "pct": pct, "labels": dict(bd.LABELS)},
        "devices": devices,
        "recommendations": recommendations(trace),
        "diagnosis": diagnosis(trace),
        "summary": _summary(trace, info, pct, devices),
        "notes": _notes(trace, info, devices),
    }
    return out


def _summary(trace, info, pct: pd.DataFrame, devices: pd.DataFrame) -> dict:
    """The headline numbers: average step, step count and the average breakdown."""
    steps = info.frame
    win = window(trace)
    avg = bd.average(trace)  # the breakdown's average row (ns)
    summary = {
        "num_steps": len(steps),
        "step_time_avg_ns": avg["total"] if avg else None,
        "steps_span_ns": (win[1] - win[0]) if win else None,
        "dropped_steps": info.dropped,
        "left_out_steps": [dict(d) for d in info.left_out],
        "whole_trace_step": info.fallback,
        "average_ns": {c: avg[c] for c in bd.CATEGORIES} if avg else {},
        "average_pct": {c: float(pct[c + "_pct"].to_numpy()[-1]) for c in bd.CATEGORIES} if len(pct) else {},
    }
    summary["utilization_pct"] = {int(d): _num(u) for d, u in zip(devices["device"], devices["utilization_pct"])}
    return summary


def _notes(trace, info, devices: pd.DataFrame) -> list[str]:
    """Why parts are empty or partial, in words; first what the trace's tables left out."""
    notes = [*trace.notes, *info.notes]
    ev = trace.events
    if not len(ev):
        notes.append("the trace has no complete events")
    if not trace.has_device_work:
        notes.append("no device events (kernels, copies or fills, on any backend): a CPU-only trace, no device summary")
    elif devices.empty:
        notes.append("device events carry no usable time or device id: no device summary")
    elif devices["sm_efficiency_pct"].isna().all():
        notes.append("kernels carry no 'blocks per SM': est. SM efficiency unavailable")
    if len(devices) and devices["occupancy_pct"].isna().all():
        notes.append("kernels carry no 'est. achieved occupancy %': occupancy unavailable")
    if len(devices) and not any(d.total_memory for d in trace.devices):
        notes.append("no deviceProperties in the trace: device name, memory and compute capability unknown")
    if not _has_memory_records(trace):
        notes.append("no [memory] records (profile_memory=True was not set?): no peak-memory advice")
    return notes


def _has_memory_records(trace) -> bool:
    """Whether any [memory] instant exists (without building the memory table)."""
    ids = match_ids(trace.strings, lambda s: s == "[memory]")
    return bool(len(ids)) and bool(np.isin(trace.instants["name"], ids).any())


def _num(x):
    """A float for JSON: None for NaN."""
    x = float(x)
    return None if math.isnan(x) else x


def to_records(out: dict) -> dict:
    """The overview with DataFrames turned into lists of plain dicts (NaN -> None)."""
    def frame(df: pd.DataFrame) -> list[dict]:
        return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict("records")]

    res = dict(out)
    res["steps"] = frame(out["steps"])
    res["devices"] = frame(out["devices"])
    res["breakdown"] = {"ns": frame(out["breakdown"]["ns"]), "pct": frame(out["breakdown"]["pct"]),
                        "labels": out["breakdown"]["labels"]}
    res["diagnosis"] = _plain(out["diagnosis"])
    res["recommendations"] = [{**r, "evidence": {k: _plain(v) for k, v in r["evidence"].items()}}
                              for r in out["recommendations"]]
    return res


def _plain(v):
    """numpy scalars to Python ones, NaN to None; dicts recursively."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
