#!/usr/bin/env python
"""The "why is the step slow" analyses (issue 9) on a big trace: seconds of each one, first
call and again (what a second view of the same trace pays), against decoding the same trace
in the same run, and the process's peak RSS.

    python benchmarks/bench_why.py [--size 1G] [--seed TRACE] [--repeat 2] [--json]

The trace is the V100 ResNet50 one in tests/data blown up to --size by
benchmarks/make_big_trace.py (built once under bench-output/). Each analysis runs in a fresh
process that first loads the trace (cache=False: the baseline, "decode"), so one analysis's
memoized intermediates never speed up another's. Ratios: analysis seconds / decode seconds
(below 1: cheaper than reading the trace).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bigtrace import DEFAULT_SEED, build_trace  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
ANALYSES = {
    "idle": "t.idle()", "launches": "t.launches()", "queue": "t.queue()", "memcpy": "t.memcpy()",
    "annotations": "t.annotations()", "roofline": "t.roofline()", "step_outliers": "t.step_outliers()",
    "critical_path": "t.critical_path()", "range_whole": "t.range_stats(lo, hi + 1)",
    "range_10ms": "t.range_stats(lo + (hi - lo) // 2, lo + (hi - lo) // 2 + 10_000_000)",
    # issue 19: the trust report, compiled kernels, graph replays, device counters, overhead
    "integrity": "t.integrity()", "compiled_kernels": "t.compiled_kernels()", "graphs": "t.graphs()",
    "kernel_counters": "__import__('tb_profiler.analysis.hw_counters', fromlist=['x']).kernel_counters(t)",
    "overhead": "__import__('tb_profiler.analysis.overhead', fromlist=['x']).profiler_overhead(t)",
}

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
import tb_profiler
t0 = time.perf_counter()
t = tb_profiler.load(sys.argv[1], cache=False)
decode = time.perf_counter() - t0
lo, hi = t.span
times = []
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter()
    eval(sys.argv[2])
    times.append(time.perf_counter() - t0)
print(json.dumps({"decode": decode, "times": times, "events": len(t.events),
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_one(trace: Path, expr: str, repeat: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(trace), expr, str(ROOT), str(repeat)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G", help="JSON bytes of the blown-up trace (100M, 1G, ...)")
    ap.add_argument("--seed", type=Path, default=DEFAULT_SEED, help="the real trace to blow up")
    ap.add_argument("--repeat", type=int, default=2, help="calls per analysis (the first, then warm ones)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trace, _ = build_trace(args.seed, args.size)
    rows = {}
    for name, expr in ANALYSES.items():
        r = run_one(trace, expr, max(args.repeat, 1))
        rows[name] = {"first_s": r["times"][0], "again_s": min(r["times"][1:] or r["times"]), "decode_s": r["decode"],
                      "ratio_first": r["times"][0] / r["decode"], "maxrss_mb": r["maxrss_mb"], "events": r["events"]}
        print(f"{name:14s} first {r['times'][0]:7.3f} s  again {rows[name]['again_s']:7.3f} s  decode {r['decode']:6.2f} s"
              f"  first/decode {rows[name]['ratio_first']:5.2f}x  peak RSS {r['maxrss_mb']:6.0f} MB", file=sys.stderr)
    print(f"trace {trace.name} ({trace.stat().st_size / 2**30:.2f} GiB, {next(iter(rows.values()))['events']} events)",
          file=sys.stderr)
    if args.json:
        print(json.dumps({"trace": str(trace), "analyses": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
