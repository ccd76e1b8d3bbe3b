#!/usr/bin/env python
"""Where the analysis benchmark's time goes, in instructions (deterministic, unlike seconds
on a shared machine): valgrind's callgrind counts every instruction of a child process.

    python benchmarks/bench_instructions.py [--trace TRACE]

Each stage runs in its own child, cumulatively (stage N does stages 1..N), and the count
of a stage is its child's total minus the previous child's. The baseline child imports
everything and opens the trace from the cache, so imports and interpreter start cancel
out. Stages: load without the cache (read + inflate + decode + build), overview,
operators by name and by input shape, kernels by name and by op, as bench_analysis.py's
(1) runs them. One decoding thread, so the count does not depend on scheduling. Needs
valgrind (Debian's package); about 30 s per stage.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bigtrace import DEFAULT_SEED  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("baseline (imports, cached open)", "load, no cache", "overview", "operators x2", "kernels x2")

_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[2])
import importlib, pkgutil
import tb_profiler, tb_profiler.analysis as A
for m in pkgutil.iter_modules(A.__path__):
    importlib.import_module("tb_profiler.analysis." + m.name)
n = int(sys.argv[3])
t = tb_profiler.load(sys.argv[1], cache=n == 0)
if n >= 2: t.overview()
if n >= 3: t.operators("name"); t.operators("input_shape")
if n >= 4: t.kernels("name"); t.kernels("op")
"""


def count(trace: Path, stage: int) -> int:
    python = os.path.realpath(sys.executable)  # not a shim script: valgrind must see Python itself
    env = dict(os.environ, TB_PROFILER_DECODE_THREADS="1")
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, "-c", _CHILD,
                           str(trace), str(ROOT), str(stage)], capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if not found:
        raise SystemExit(f"no callgrind total in:\n{proc.stderr[-2000:]}")
    return int(found[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_SEED)
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind not found (apt-get install valgrind)")
    import tb_profiler

    tb_profiler.load(str(args.trace))  # the baseline child opens it from the cache
    totals = [count(args.trace, n) for n in range(len(STAGES))]
    print(f"trace: {args.trace.name}; instructions per stage (callgrind, one decoding thread)")
    analyses = 0
    for n, name in enumerate(STAGES):
        if n == 0:
            print(f"  {name:<34} {totals[0] / 1e6:10.0f} M (subtracted below)")
            continue
        part = totals[n] - totals[n - 1] if n > 1 else totals[1] - totals[0]
        analyses += part if n >= 2 else 0
        print(f"  {name:<34} {part / 1e6:10.0f} M")
    load = totals[1] - totals[0]
    print(f"  {'all analyses':<34} {analyses / 1e6:10.0f} M  ({analyses / (analyses + load):.0%} of load + analyses)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
