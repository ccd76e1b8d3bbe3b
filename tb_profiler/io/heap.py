"""The C heap made ready, once per process, for the arrays a trace's open allocates.

Why (issue 22, measured): a process starts with glibc's malloc serving every block over
128 KiB from a fresh ``mmap`` of its own, and giving the heap's free top back to the system
whenever it passes twice that. An open of a trace allocates and frees hundreds of arrays
of a few hundred KiB (one number per event), so in a fresh process each of them is new
pages, and each page a fault (~1.5 us on this VM): ~1,300 faults more, ~6-12 ms of a
~180 ms open of the 35 MB V100 trace, than in a process that has opened one trace before.

glibc adapts by itself: freeing an mmapped block raises that threshold to the block's size
(up to 32 MiB), and the trim threshold to twice it. ``warm_heap`` frees one untouched 8 MiB
block, so the process is at once where its first trace would have taken it. Not
``mallopt``: setting any threshold turns glibc's adaptation off for the whole process; this
only moves it ahead, as the first big free would, and touches no page (no memory is kept).
Elsewhere than glibc it is an allocation and a free, and nothing else.
"""
from __future__ import annotations

import threading

import numpy as np

WARM_BYTES = 8 << 20  # over the biggest array of a typical open, under glibc's 32 MiB cap

_done = threading.Event()


def warm_heap() -> None:
    """Once per process: allocate and free (never touching) one WARM_BYTES block."""
    if _done.is_set():
        return
    _done.set()
    block = np.empty(WARM_BYTES, dtype=np.uint8)  # numpy's data is malloc'd: the same heap
    del block


__all__ = ["WARM_BYTES", "warm_heap"]
