"""Diagnosis: what the step is bound by, in one sentence, from figures already computed.

Why its own analysis: the Overview's first screen, ``tb-profiler why`` and its ``--json``
verdict (and the agents' ``why`` tool) must say the same thing, with the same figures, so
the sentence is made once here. It adds no measurement of its own: every figure is the
step breakdown's (analysis.breakdown: each ns of the average step counted once, by
priority) or idle time's (analysis.idle: device-level idle inside the steps and its
host-wait part), so a number in the sentence is the number the section below it shows.

The rule, in order (a share is of the steps' time):
- no device work (a CPU-only trace): bound by the host; its largest cost is named;
- the device idle at least IDLE_BOUND of the time and at least HOST_SHARE of that idle
  waiting on the host (nothing launched yet): bound by the host; its largest cost, the
  breakdown's largest host category (DataLoader, CPU Exec, Runtime, Other), is named;
- idle at least IDLE_BOUND otherwise: bound by waits (work issued that did not run:
  synchronizations, events, other streams);
- else the device is busy: bound by the breakdown's largest device category (kernels,
  copies, fills, communication).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.advice_text import fmt_ns
from tb_profiler.analysis.memo import per_trace

IDLE_BOUND = 0.25   # device idle at least this share of the steps: the device is not what bounds them
HOST_SHARE = 0.5    # ... and at least this share of that idle with nothing launched: the host bounds them
HOST_CATEGORIES = ("dataloader", "cpu_exec", "runtime", "other")
DEVICE_CATEGORIES = ("kernel", "memcpy", "memset", "communication")
BOUND_LABELS = {"host": "Host", "waits": "Waits on the device", "kernel": "Device compute",
                "memcpy": "Memory copies", "memset": "Memory fills", "communication": "Communication",
                "none": "Nothing to say"}

__all__ = ["BOUND_LABELS", "diagnosis"]


def diagnosis(trace) -> dict[str, Any]:
    """What bounds the step: {"bound_by" (a BOUND_LABELS key), "label", "sentence",
    "figures" (step_ns, device, idle_pct, host_wait_pct_of_idle, largest: {category,
    label, ns_per_step, pct}), "evidence" (the view and section whose numbers the sentence
    quotes, the time range of the steps, ns on the trace's clock, and the longest events of
    the cost it names with the step of the first: "event_ids", "step")}. A copy per call."""
    out = _diagnosis(trace)
    return {**out, "figures": {**out["figures"]}, "evidence": {**out["evidence"]}}


EVIDENCE_EVENTS = 5  # the longest events of the named cost, the ones a person opens first


@per_trace
def _diagnosis(trace) -> dict[str, Any]:
    """The verdict, its evidence completed with the events that carry the named cost."""
    out = _verdict_of(trace)
    largest = out["figures"].get("largest")
    if largest is not None and out["evidence"]:
        out["evidence"].update(_backing(trace, largest["category"], out["evidence"].get("time_range_ns")))
    return out


def _backing(trace, category: str, window: list[int] | None) -> dict[str, Any]:
    """{"event_ids": the EVIDENCE_EVENTS longest events of the category inside the steps
    (event rows, longest first), "step": the step of the longest}: what a link from the
    verdict opens. Empty for a category no event carries alone ("other")."""
    from tb_profiler.analysis.steps import step_numbers

    mask = bd.category_masks(trace).get(category)
    if mask is None or window is None:
        return {"event_ids": [], "step": None}
    ev = trace.events
    rows = np.flatnonzero(mask & (ev["ts"] >= window[0]) & (ev["ts"] < window[1]))
    top = rows[np.argsort(-ev["dur"][rows], kind="stable")[:EVIDENCE_EVENTS]]
    step = int(step_numbers(trace, top[:1])[0]) if len(top) else -1
    return {"event_ids": [int(i) for i in top], "step": step if step >= 0 else None}


def _verdict_of(trace) -> dict[str, Any]:
    from tb_profiler.analysis.gpu import window
    from tb_profiler.analysis.idle import idle_time

    avg = bd.average(trace)
    if not avg or not avg["total"]:
        return _verdict("none", "The trace has no steps and no events to break down.", {}, {})
    step = avg.pop("total")
    win = window(trace)
    where = {"time_range_ns": [int(win[0]), int(win[1])] if win else None}
    word = trace.device_word or "device"
    figures: dict[str, Any] = {"step_ns": step, "device": None, "idle_pct": None, "host_wait_pct_of_idle": None}
    host = _largest(avg, HOST_CATEGORIES, step)
    if not trace.has_device_work:
        figures["largest"] = host
        return _verdict("host", f"CPU-only trace: the step ({fmt_ns(step)}) is host time; {_cost(host)}, is its largest "
                        "cost.", figures, {"view": "Operator", "section": "Operators", **where})
    idle = idle_time.shared(trace)["devices"]  # read only: the kept result, not a copy
    total = idle["step"].to_numpy() == -1  # each device's totals row
    if total.any():
        col = {c: idle[c].to_numpy()[total] for c in ("device", "idle_ns", "window_ns", "host_wait_ns")}
        i = int(np.argmax(col["idle_ns"] / np.maximum(col["window_ns"], 1)))  # the idlest device, the first of ties
        idle_frac = float(col["idle_ns"][i]) / max(int(col["window_ns"][i]), 1)
        host_frac = float(col["host_wait_ns"][i]) / max(int(col["idle_ns"][i]), 1)
        device = int(col["device"][i])
        figures.update(device=device, idle_pct=100 * idle_frac, host_wait_pct_of_idle=100 * host_frac)
        dev = f"{word} {device}" if len(col["device"]) > 1 else word
        if idle_frac >= IDLE_BOUND and host_frac >= HOST_SHARE:
            figures["largest"] = host
            return _verdict("host", f"{dev} idle {_pct(idle_frac)} of the step, {_pct(host_frac)} of it waiting on the "
                            f"host; {_cost(host)}, is the largest host cost.", figures,
                            {"view": "Overview", "section": f"{word} idle time", **where})
        if idle_frac >= IDLE_BOUND:
            figures["largest"] = host
            return _verdict("waits", f"{dev} idle {_pct(idle_frac)} of the step, {_pct(1 - host_frac)} of it with work "
                            "issued that did not run yet (synchronizations, events, other streams).", figures,
                            {"view": "Overview", "section": f"{word} idle time", **where})
    busy = _largest(avg, DEVICE_CATEGORIES, step)
    figures["largest"] = busy
    idle_text = f"idle {_pct(figures['idle_pct'] / 100)}" if figures["idle_pct"] is not None else "busy"
    view = {"kernel": "Kernel", "communication": "Distributed"}.get(busy["category"], "Trace")
    return _verdict(busy["category"], f"{word} {idle_text} of the step; {busy['label']} takes "
                    f"{fmt_ns(busy['ns_per_step'])} per step ({_pct(busy['pct'] / 100)} of it).", figures,
                    {"view": view, "section": None, **where})


def _largest(avg: dict[str, int], cats: tuple[str, ...], step: int) -> dict[str, Any]:
    c = max(cats, key=lambda k: (avg.get(k, 0), -cats.index(k)))
    return {"category": c, "label": bd.LABELS[c], "ns_per_step": avg.get(c, 0), "pct": 100 * avg.get(c, 0) / max(step, 1)}


def _verdict(bound: str, sentence: str, figures: dict, evidence: dict) -> dict[str, Any]:
    return {"bound_by": bound, "label": BOUND_LABELS[bound], "sentence": sentence, "figures": figures,
            "evidence": evidence}


def _cost(c: dict) -> str:
    return f"{c['label']}, {fmt_ns(c['ns_per_step'])} per step"


def _pct(frac: float) -> str:
    return f"{100 * frac:.1f}%"
