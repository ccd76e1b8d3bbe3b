"""ROCm's HSA queue of each device stream, for the stream's track label (issue 19).

Why: on ROCm a HIP stream runs on a hardware (HSA) queue, and two streams sharing one queue
serialize; Kineto writes the queue's handle into every device activity's args beside the
stream (``libkineto/src/RocprofActivity_inl.h`` ``GpuActivity::visitTypedMetadata``:
``"stream": <id>, "hsa_queue": <uint64>``).  The timeline labels such a stream
"stream 3 · hsa_queue 0x7f3a5c001000".

Cost: the key is no decoded column, so it is read from the args text (``trace.arg_values``)
of one event per device track (its first device work), never of every kernel; a stream
whose work moved between queues shows the queue of its first work.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.trace.roles import DEVICE_WORK, role_mask

__all__ = ["HSA_QUEUE", "track_queues", "with_queue"]

HSA_QUEUE = "hsa_queue"
_U64_MAX = 2**64 - 1


def track_queues(trace, group: np.ndarray, is_dev: np.ndarray) -> dict[int, str]:
    """{track group: the hsa_queue handle in hex} for the groups (``group``: per event, its
    track) whose first device work carries one; {} on traces without the key."""
    from tb_profiler.trace.arg_values import _extract

    work = np.flatnonzero(np.asarray(is_dev, dtype=bool) & role_mask(trace.roles, DEVICE_WORK))
    if not len(work):
        return {}
    g = np.asarray(group)[work]
    uniq, first = np.unique(g, return_index=True)  # work is in row order: the first row per group
    import pandas as pd  # on use: the trace layer never imports pandas with its modules

    text = pd.Series(_extract(trace, work[first], HSA_QUEUE, r'"?(\d{1,20})(?![\d.eE])'), dtype=object)
    out = {}
    for grp, digits in zip(uniq.tolist(), text.tolist()):  # one per device track
        if digits is not None and int(digits) <= _U64_MAX:
            out[int(grp)] = hex(int(digits))
    return out


def with_queue(label: str, queue: str | None) -> str:
    """The stream's label with its HSA queue, when known."""
    return label if queue is None else f"{label} · {HSA_QUEUE} {queue}"
