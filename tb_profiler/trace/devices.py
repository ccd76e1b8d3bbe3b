"""Which accelerators a trace shows, and what to call them.

Why: the UI must say GPU, XPU, NPU, MTIA or HPU as the trace says, never a hard-coded
"CUDA".  The backend follows Kineto's categories (xpu_runtime, mtia_*, privateuse1_*,
hpu_op, cuda_*), with ROCm recognised by its hip* runtime names under cuda_runtime
(or AMD device names), and the device list merges deviceProperties with the device
ids seen on device-side events.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.metadata import json_int
from tb_profiler.trace.strings import used_ids

# Backend -> the word the UI uses for one device of it.
DEVICE_WORDS = {"CUDA": "GPU", "ROCm": "GPU", "XPU": "XPU", "MTIA": "MTIA", "PrivateUse1": "NPU", "HPU": "HPU"}
# Backend -> what its vendor calls the matrix-multiply units, for the backends whose kernel
# names tell whether a kernel used them (analysis.tensor_cores); others have no such figure.
MATRIX_UNITS = {"CUDA": "Tensor cores", "ROCm": "Matrix cores"}

_BACKEND_KINDS = {
    "XPU": (Kind.XPU_RUNTIME, Kind.XPU_DRIVER, Kind.XPU_SYNC, Kind.XPU_SCOPE_PROFILER),
    "MTIA": (Kind.MTIA_RUNTIME, Kind.MTIA_CCP_EVENTS, Kind.MTIA_INSIGHT, Kind.MTIA_COUNTERS),
    "PrivateUse1": (Kind.PRIVATEUSE1_RUNTIME, Kind.PRIVATEUSE1_DRIVER),
    "HPU": (Kind.HPU_OP,),
}
_CUDA_HOST_KINDS = (Kind.CUDA_RUNTIME, Kind.CUDA_DRIVER, Kind.CUDA_SYNC, Kind.CUDA_EVENT, Kind.CUDA_PROFILER_RANGE)
_AMD_WORDS = ("amd", "radeon", "instinct", "gfx")


@dataclass
class Device:
    """One accelerator: from deviceProperties where listed, else only its id."""

    id: int
    name: str | None = None
    kind: str | None = None                 # backend: CUDA, ROCm, XPU, ...
    total_memory: int | None = None         # bytes (totalGlobalMem)
    compute_major: int | None = None
    compute_minor: int | None = None
    num_sms: int | None = None
    properties: dict = field(default_factory=dict)  # the raw deviceProperties entry
    seen_in_events: bool = False

    @property
    def compute_capability(self) -> str | None:
        if self.compute_major is None:
            return None
        return f"{self.compute_major}.{self.compute_minor or 0}"


def device_properties(toplevel: dict) -> list[dict]:
    """The deviceProperties list (older traces call it computeProperties)."""
    props = toplevel.get("deviceProperties")
    if props is None:
        props = toplevel.get("computeProperties")
    return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def backends(kind_counts: np.ndarray, device_work: bool, runtime_names: list[str], props: list[dict]) -> tuple[str, ...]:
    """Backends present, from per-Kind event counts, whether the trace has device work
    (``trace.roles``), cuda_runtime names and device names."""
    def has(kinds) -> bool:
        return any(kind_counts[int(k)] for k in kinds)

    found = [b for b, kinds in _BACKEND_KINDS.items() if has(kinds)]
    if has(_CUDA_HOST_KINDS) or (device_work and not found) or (props and not found):
        names = " ".join(str(p.get("name", "")) for p in props).lower()
        rocm = any(n.startswith("hip") for n in runtime_names) or any(w in names for w in _AMD_WORDS)
        found.insert(0, "ROCm" if rocm else "CUDA")
    return tuple(found)


def event_devices(events, device_side: np.ndarray) -> np.ndarray:
    """Device id per event: args "device", else the pid (Kineto writes device rows with the
    device id as pid: CUDA streams, MTIA, the CUPTI range profiler); -1 for events not on a
    device (``device_side``: a mask over events, from ``trace.roles``)."""
    dev = np.where(events["device"] != MISSING_INT, events["device"], events["pid"])
    return np.where(device_side & (dev != MISSING_INT), dev, -1)


def device_list(props: list[dict], dev_ids: np.ndarray, backend: str | None) -> list[Device]:
    """Devices from deviceProperties plus the ids device-side events ran on (``dev_ids``:
    ``event_devices``), by id."""
    by_id: dict[int, Device] = {}
    for p in props:
        did = json_int(p.get("id", len(by_id)))
        if did is None or did < 0:  # no device (trace.metadata already leaves such entries out)
            continue
        by_id[did] = Device(
            id=did, name=p.get("name") if isinstance(p.get("name"), str) else None, kind=backend,
            total_memory=_int(p.get("totalGlobalMem")),
            compute_major=_int(p.get("computeMajor", p.get("major"))),
            compute_minor=_int(p.get("computeMinor", p.get("minor"))),
            num_sms=_int(p.get("numSms", p.get("multiProcessorCount"))),
            properties=p,
        )
    if len(dev_ids):
        seen = dev_ids[dev_ids >= 0]
        # a few small ids: counted (np.unique hashes or sorts every event's id)
        ids = np.flatnonzero(np.bincount(seen)) if len(seen) and seen.max() < (1 << 16) else np.unique(seen)
        for did in ids.tolist():
            by_id.setdefault(did, Device(id=did, kind=backend)).seen_in_events = True
    return [by_id[k] for k in sorted(by_id)]


def runtime_names(events, strings) -> list[str]:
    """Distinct names of cuda_runtime/cuda_driver events (few hundred at most)."""
    ids = events["name"][kind_mask(events["kind"], (Kind.CUDA_RUNTIME, Kind.CUDA_DRIVER))]
    return [strings[i] for i in used_ids(ids, len(strings)).tolist()]


def _int(v) -> int | None:
    """A non-negative integer property, else None (a wrong type is a missing property)."""
    v = json_int(v)
    return v if v is not None and v >= 0 else None
