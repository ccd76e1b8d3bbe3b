"""io.heap.warm_heap (issue 22): a fresh process's big arrays come from reused heap, not new
pages, after one call; and a fresh decode makes that call."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# In a fresh process: page faults of four 1 MiB arrays, one after another, each freed,
# after warm_heap() or not.
_FAULTS = r"""
import json, resource, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
if sys.argv[2] == "warm":
    from tb_profiler.io.heap import warm_heap
    warm_heap()
elif sys.argv[2] == "load":
    import tb_profiler
    tb_profiler.load(sys.argv[3], cache=False)
counts = []
for _ in range(4):
    f0 = faults()
    a = np.ones(1 << 20, np.uint8)
    counts.append(faults() - f0)
    del a
print(json.dumps(counts))
"""


def _faults(mode: str, *args: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", _FAULTS, str(ROOT), mode, *args], capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's malloc thresholds")


def test_the_second_big_array_reuses_the_heap_once_warmed():
    pages = (1 << 20) // 4096
    cold, warm = _faults("cold"), _faults("warm")
    # cold: the first is a map of its own, the second new heap pages (glibc had just raised its
    # threshold), only then reuse; warmed: reuse from the second on
    assert cold[1] > pages // 2, cold
    assert warm[1] < pages // 8 and warm[2] < pages // 8, warm


def test_a_fresh_load_warms_the_heap():
    from datafiles import TENSORLIST_OPS

    after = _faults("load", str(TENSORLIST_OPS))  # a small trace: its own arrays warm nothing
    assert after[1] < (1 << 20) // 4096 // 8, after  # without the call: [257, 183, 0, 0]


def test_warm_heap_runs_once_per_process():
    from tb_profiler.io import heap

    heap.warm_heap()
    heap.warm_heap()  # once per process: the second call does nothing
    assert heap._done.is_set()
