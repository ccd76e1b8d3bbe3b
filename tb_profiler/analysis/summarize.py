"""Trace -> TraceSummary: every per-trace fact the run-level views need, computed once.

Why here: the Distributed view's per-rank numbers (computation, communication and their
overlap per step, the collectives, the Overview's Communication) and the cross-rank
diff's tables are all functions of one trace; only waits need the other ranks, and they
need only the collectives and the merged communication intervals.  So each trace is
reduced to those here, by the same analysis functions the per-trace views use, and the
run-level analyses (analysis.distributed, analysis.diff) read summaries only.  It is an
analysis (per-trace analyses in, a TraceSummary out) that the run-level analyses call
on traces in memory; the summary stage (tb_profiler.summary) calls it on files and keeps
what it gives.

How computation and communication are measured on each rank (device, host or mixed
timelines) is defined in analysis.distributed's docstring; ``busy`` computes it.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.collectives import collective_notes, collectives
from tb_profiler.analysis.communication import BACKEND_RE, comm_calls, comm_kernels
from tb_profiler.analysis.gpu import device_summary
from tb_profiler.analysis.hosts import host_name, job_metadata
from tb_profiler.analysis.intervals import covered_in, intersect, merge_intervals, per_group_subtract
from tb_profiler.analysis.kernels import kernels
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.modules import modules
from tb_profiler.analysis.operators import operators
from tb_profiler.analysis.steps import step_notes, steps_frame, valid_times
from tb_profiler.io.discovery import worker_name
from tb_profiler.analysis.trace_summary import TraceSummary
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.roles import Role

__all__ = ["busy", "default_worker", "summarize_trace"]


def summarize_trace(trace, *, worker: str | None = None) -> TraceSummary:
    """The summary of one loaded Trace (computed once per Trace object, then shared).

    worker: the worker's name as discovery gives it (default: from the file name).
    Size and mtime are unknown here (-1, None): ``summary_for`` fills them from the file.
    """
    return _summary(trace).relabel(worker=worker)


def default_worker(source: str) -> str:
    """The worker as discovery names a file (torch's naming, else the file name's stem)."""
    return worker_name(os.path.basename(str(source).rstrip("/")))[0]


@per_trace
def _summary(trace) -> TraceSummary:
    t0 = time.perf_counter()
    st = steps_frame(trace)
    facts = busy(trace)
    base = trace.base_time_ns
    summary = TraceSummary(
        source=str(trace.source), worker=default_worker(trace.source),
        distributed_info=trace.distributed_info if isinstance(trace.distributed_info, dict) else None,
        base_time_ns=int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None,
        host_name=host_name(trace), job=job_metadata(trace),
        device_word=trace.device_word, device_kinds=tuple(trace.device_kinds), matrix_unit=trace.matrix_unit,
        has_device_work=bool(trace.has_device_work), devices=[_device(d) for d in trace.devices],
        has_memory=len(trace.memory_records) > 0, has_modules=_has_modules(trace),
        measured_on=facts["source"], backend_guess=_guess_backend(trace), notes=list(trace.notes),
        step_notes=step_notes(trace), collective_notes=collective_notes(trace),
        steps=st, breakdown=bd.breakdown(trace), device_summary=device_summary(trace),
        collectives=collectives(trace).copy(), step_busy=_step_busy(st, facts),
        communication=pd.DataFrame({"start": facts["communication"][0], "end": facts["communication"][1]}),
        # an event row means something only inside its own trace, never in a run's summary
        kernels=kernels(trace, group_by="name", steps_only=True).drop(columns="longest_event"),
        operators=operators(trace, group_by="name", steps_only=True),
        modules=_modules_in_steps(trace))
    summary.seconds = time.perf_counter() - t0
    return summary


def _device(d) -> dict:
    """The facts of one Device the Distributed view's gpuinfo shows."""
    return {"id": d.id, "name": d.name, "kind": d.kind, "total_memory": d.total_memory,
            "compute_capability": d.compute_capability, "num_sms": d.num_sms}


def _has_modules(trace) -> bool:
    """Whether the Module view has data (as the plugin's views route asks)."""
    try:
        return len(modules(trace)) > 0
    except Exception:  # noqa: BLE001 - a module analysis problem must not hide the other views
        return False


def _modules_in_steps(trace) -> pd.DataFrame:
    try:
        return modules(trace, steps_only=True)
    except Exception:  # noqa: BLE001 - as _has_modules: no module table rather than no summary
        return pd.DataFrame({"path": pd.Series(dtype=object)})


# -- computation and communication -------------------------------------------------------------

@per_trace
def busy(trace) -> dict:
    """Computation and communication as merged intervals, and where they are measured
    ("device", "host" or "mixed": see analysis.distributed)."""
    ev = trace.events
    kernel = (trace.roles == Role.COMPUTE) & valid_times(trace)
    if kernel.any():
        comp = merge_intervals(*_ends(ev, np.flatnonzero(kernel & ~comm_kernels(trace))))
        source = "device"
    else:
        ops = kind_mask(ev["kind"], Kind.CPU_OP) & ~comm_calls(trace) & valid_times(trace)
        ops[trace.steps["event"]] = False  # old traces call ProfilerStep#N an operator
        ops = np.flatnonzero(ops)
        cuts = np.flatnonzero(comm_calls(trace))
        g, _ = factorize(ev["pid"], ev["tid"], ev["pid_str"], ev["tid_str"])
        comp = per_group_subtract(*_ends(ev, ops), g[ops], *_ends(ev, cuts), g[cuts])
        source = "host"
    if comm_kernels(trace).any():
        comm = merge_intervals(*_ends(ev, np.flatnonzero(comm_kernels(trace))))
    else:
        recs = collectives(trace)
        comm = merge_intervals(recs["start"].to_numpy(np.int64), recs["end"].to_numpy(np.int64))
        if source == "device" and len(comm[0]):
            source = "mixed"
    return {"computation": comp, "communication": comm, "source": source}


def _ends(ev, rows):
    return ev["ts"][rows], ev["ts"][rows] + ev["dur"][rows]


def _step_busy(st: pd.DataFrame, facts: dict) -> pd.DataFrame:
    """Per step (the rows of ``st``): computation, communication and their overlap, ns."""
    lo, hi = st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
    comp, comm = facts["computation"], facts["communication"]
    return pd.DataFrame({"step": st["step"].to_numpy(np.int64),
                         "computation_ns": covered_in(*comp, lo, hi),
                         "communication_ns": covered_in(*comm, lo, hi),
                         "overlap_ns": covered_in(*intersect(comp, comm), lo, hi)})


def _guess_backend(trace) -> str | None:
    """For traces without distributedInfo: nccl from its kernels, else the prefix of the
    host collectives ("gloo" from gloo:all_reduce)."""
    if comm_kernels(trace).any():
        return "nccl"
    names = collectives(trace)["name"]
    found = names[names.str.match(BACKEND_RE)]
    return found.iloc[0].split(":", 1)[0].lower() if len(found) else None
