"""What counts as communication: one definition for the step breakdown and the
distributed view, so the two never disagree about the same trace.

Host calls: ``<backend>:<op>`` ranges (gloo:all_reduce, nccl:all_reduce, ...), ``c10d::*``
and functional-collective dispatcher ops, ``record_param_comms``, anything carrying a
"Collective name" argument, and ``collective_comm`` events (among them the XCCL
collectives Kineto's XPU plugin records, ``xccl::<op>`` carrying ``Communicator_id``:
``XpuptiActivityHandlers.cpp`` ``handleCommunicationActivity``; the name counts in any host
category too).
Kernels: NCCL/RCCL kernels by name, and kernels launched under a communication call
(same External id), which catches collectives whose kernel names do not say so.
"""
from __future__ import annotations

import re

import numpy as np

from tb_profiler.analysis.keys import unique_ints
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.shared import compute, frozen, name_map
from tb_profiler.analysis.steps import valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind, kind_mask

COMM_BACKENDS = ("nccl", "gloo", "ucc", "mpi", "xccl", "hccl", "rccl", "cncl", "mccl")
BACKEND_RE = re.compile(rf"(?:{'|'.join(COMM_BACKENDS)}):(?!:)", re.IGNORECASE)
_DISPATCH_PREFIXES = ("c10d::", "c10d_functional::", "_c10d_functional::")
_COLLECTIVE_PREFIXES = (*_DISPATCH_PREFIXES, "xccl::")  # xccl::allreduce: Kineto's XPU plugin
_KERNEL_RE = re.compile(r"nccl|rccl", re.IGNORECASE)
_HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.COLLECTIVE_COMM)


def name_flags(trace, fn, among: np.ndarray | None = None) -> np.ndarray:
    """fn(name) for every event, evaluated once per distinct name (of the events ``among``
    marks, when given: the others are False)."""
    return name_map(trace, fn, among=among)


def is_comm_name(name: str) -> bool:
    return (name == "record_param_comms" or name.startswith(_COLLECTIVE_PREFIXES)
            or BACKEND_RE.match(name) is not None)


@per_trace
def comm_calls(trace) -> np.ndarray:
    """Mask of host events that are communication calls."""
    ev = trace.events
    host = kind_mask(ev["kind"], _HOST_KINDS)
    comm = name_flags(trace, is_comm_name, host) | (ev["collective_name"] >= 0) | (ev["kind"] == Kind.COLLECTIVE_COMM)
    return host & comm & valid_times(trace)


def is_work_range_name(name: str) -> bool:
    """``<backend>:<op>`` (gloo:all_reduce, nccl:all_gather, ...): the range c10d's ``Work``
    opens when a collective is issued and closes when it completes."""
    return BACKEND_RE.match(name) is not None


@per_trace
def async_ranges(trace) -> np.ndarray:
    """Mask of host ranges that are asynchronous in torch's sense: they may start and end
    on different threads, so they are nobody's parent or child and have no self time.

    torch marks them with ``RecordFunction::_setAsync`` (``kineto_event.is_async()``),
    which the trace file does not carry; c10d's ``Work`` is the one caller in torch that
    sets it, and its ranges are the ``<backend>:<op>`` user annotations (gloo:all_reduce,
    nccl:all_reduce, ...). They are recognised by category and name."""
    ev = trace.events
    ranges = kind_mask(ev["kind"], (Kind.USER_ANNOTATION,))
    return frozen(name_flags(trace, is_work_range_name, ranges))


@per_trace
def comm_kernels(trace) -> np.ndarray:
    """Mask of communication kernels: NCCL/RCCL by name, or sharing a communication call's
    External id."""
    ev = trace.events
    kernel = compute(trace)
    by_name = name_flags(trace, lambda n: _KERNEL_RE.search(n) is not None, kernel)  # kernels' names only
    ext = ev["external_id"]
    ids = unique_ints(ext[comm_calls(trace) & (ext != MISSING_INT)])
    by_call = np.isin(ext, ids) & (ext != MISSING_INT) if len(ids) else np.zeros(len(ext), dtype=bool)
    return kernel & (by_name | by_call)
