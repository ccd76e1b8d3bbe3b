"""What each event is: device compute, a device copy or fill, a runtime call, host work.

Why one place: every backend records its device work under categories of its own (CUDA
and ROCm ``kernel``, MTIA ``mtia_ccp_events``, the CUPTI range profiler
``cuda_profiler_range``, Intel XPU and PrivateUse1 ``kernel`` beside their own runtime
families), and a view that asks "is this a kernel?" its own way shows 0 % device time on
the backends it forgot. So the question is answered here, once, from Kineto's activity
categories (``trace.categories.Kind``), and every analysis and view (step-time
breakdown, device summary, utilization, Kernel view, timeline tracks, operators' device
time, ``has_device``, the CLI) reads ``trace.roles``.

A role is a small int per event, from a lookup table indexed by the event's kind, so the
whole column costs one gather. One exception goes by name within a category: a backend that
records its copies under its compute category (MTIA's command processor writes its DMA
transfers as ``mtia_ccp_events`` named ``dma_request``, size and direction in their args)
has them listed in ``NAMED_COPIES``; they are copies (Role.MEMCPY), not compute, so the
Kernel share, the kernel tables and the copy-bandwidth view all see them as copies.  The
name test runs once per distinct name string, never per event.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from tb_profiler.trace.categories import KIND_NAMES, Kind, codes_in
from tb_profiler.trace.strings import map_string_ids


class Role(enum.IntEnum):
    """What an event is, whatever the backend."""

    OTHER = 0        # trace spans, flows, CPU instants, profiler overhead, unknown categories
    HOST_OP = 1      # an operator on the host (cpu_op)
    ANNOTATION = 2   # a host range (user_annotation, record_function, collective_comm)
    PYTHON = 3       # a Python frame (python_function)
    RUNTIME = 4      # a runtime/driver API call on the host: launches, syncs, allocations
    COMPUTE = 5      # device compute: kernels and their equivalents on every backend
    MEMCPY = 6       # a device memory copy
    MEMSET = 7       # a device memory fill
    DEVICE_MARK = 8  # on a device timeline but no work of its own: GPU annotations, syncs, events


_ROLE_OF: dict[Kind, Role] = {
    Kind.CPU_OP: Role.HOST_OP,
    Kind.USER_ANNOTATION: Role.ANNOTATION,
    Kind.COLLECTIVE_COMM: Role.ANNOTATION,
    Kind.PYTHON_FUNCTION: Role.PYTHON,
    # host-side API calls, one family per backend (HPU_OP is Habana's host runtime event)
    Kind.CUDA_RUNTIME: Role.RUNTIME, Kind.CUDA_DRIVER: Role.RUNTIME,
    Kind.XPU_RUNTIME: Role.RUNTIME, Kind.XPU_DRIVER: Role.RUNTIME, Kind.XPU_SYNC: Role.RUNTIME,
    Kind.MTIA_RUNTIME: Role.RUNTIME, Kind.GLOW_RUNTIME: Role.RUNTIME, Kind.HPU_OP: Role.RUNTIME,
    Kind.PRIVATEUSE1_RUNTIME: Role.RUNTIME, Kind.PRIVATEUSE1_DRIVER: Role.RUNTIME,
    # device compute: CUDA/ROCm/XPU/PrivateUse1 kernels, MTIA on-device execution, and the
    # kernel ranges of the CUPTI range profiler and the XPU scope profiler
    Kind.KERNEL: Role.COMPUTE, Kind.MTIA_CCP_EVENTS: Role.COMPUTE,
    Kind.CUDA_PROFILER_RANGE: Role.COMPUTE, Kind.XPU_SCOPE_PROFILER: Role.COMPUTE,
    Kind.GPU_MEMCPY: Role.MEMCPY,
    Kind.GPU_MEMSET: Role.MEMSET,
    Kind.GPU_USER_ANNOTATION: Role.DEVICE_MARK, Kind.CUDA_SYNC: Role.DEVICE_MARK,
    Kind.CUDA_EVENT: Role.DEVICE_MARK,
}

# Role per Kind value (index = Kind).
ROLE_OF_KIND = np.array([_ROLE_OF.get(Kind(k), Role.OTHER) for k in range(len(KIND_NAMES))], dtype=np.uint8)

# What the device executes: the time that makes a device busy and a step longer.
DEVICE_WORK = (Role.COMPUTE, Role.MEMCPY, Role.MEMSET)
# Everything drawn on a device's timeline (work and marks).
DEVICE_SIDE = (*DEVICE_WORK, Role.DEVICE_MARK)
# Host events that make up the call tree and the CPU side of a step.
HOST_WORK = (Role.HOST_OP, Role.ANNOTATION)


@dataclass(frozen=True)
class NamedCopy:
    """Device events of a compute category that are memory copies, told by their name, and
    the args keys that hold their size in bytes and their direction."""

    kind: Kind
    name: str
    bytes_arg: str
    direction_arg: str


# MTIA: the command processor's DMA requests (libkineto's MTIA activity, as in HTA's test
# traces mtia_trace_single_rank and mtia_inference_trace: args {"direction":
# "HOST_TO_DEVICE" | "DEVICE_TO_HOST", "size": bytes, ...}).
NAMED_COPIES: tuple[NamedCopy, ...] = (NamedCopy(Kind.MTIA_CCP_EVENTS, "dma_request", "size", "direction"),)


def named_copy_index(kinds: np.ndarray, names: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """Per event, the index in NAMED_COPIES of the entry it matches (category and name),
    -1 for every other event."""
    kinds = np.asarray(kinds)
    out = np.full(len(kinds), -1, dtype=np.int8)
    for i, copy in enumerate(NAMED_COPIES):  # a loop over a few rules, not events
        rows = np.flatnonzero(kinds == int(copy.kind))
        if len(rows):
            hit = map_string_ids(np.asarray(names)[rows], strings, copy.name.__eq__, bool, False)
            out[rows[hit]] = i
    return out


def role_column(kinds: np.ndarray, names: np.ndarray | None = None, strings: np.ndarray | None = None) -> np.ndarray:
    """uint8 role per event from its kind column; with the name column and the string
    table, the events of NAMED_COPIES are copies (the trace's roles always pass them)."""
    out = ROLE_OF_KIND[np.asarray(kinds, dtype=np.intp)]
    if names is not None and strings is not None:
        out[named_copy_index(kinds, names, strings) >= 0] = Role.MEMCPY
    return out


def role_mask(roles: np.ndarray, wanted) -> np.ndarray:
    """Boolean mask of events whose role is ``wanted`` (one Role or an iterable of them)."""
    if isinstance(wanted, (int, Role)):
        return roles == int(wanted)
    return codes_in(roles, [int(r) for r in wanted], len(Role))


def role_counts(roles: np.ndarray) -> dict[str, int]:
    """Events per role name ("compute": 8772, ...), roles with none left out."""
    counts = np.bincount(roles, minlength=len(Role))
    return {Role(i).name.lower(): int(c) for i, c in enumerate(counts.tolist()) if c}


__all__ = ["DEVICE_SIDE", "DEVICE_WORK", "HOST_WORK", "NAMED_COPIES", "ROLE_OF_KIND", "NamedCopy", "Role",
           "named_copy_index", "role_column", "role_counts", "role_mask"]
