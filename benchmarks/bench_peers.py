#!/usr/bin/env python
"""A cold open of a real trace, against torch-tb-profiler 0.4.3 and HTA 0.5.0, in one run (issue 22).

    python benchmarks/bench_peers.py [--repeat 5] [--trace PATH ...] [--root CHECKOUT] [--json]

The peers, each in a venv of its own (benchmarks/peers.py says what each one runs):

    python -m venv /tmp/oldtb && /tmp/oldtb/bin/pip install torch-tb-profiler==0.4.3
    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0

($OLD_TB_PYTHON and $HTA_PYTHON name other interpreters; a peer whose interpreter is
missing is left out and said so.)

Every measurement is a fresh process, imports excluded on every side, file -> every number:
  vs old   old:  RunProfileData.parse + RunGenerator.generate_run_profile
           ours: load(cache=False) + overview() + kernels("name") + kernels("op") + idle()
  vs HTA   hta:  TraceAnalysis(trace_dir) + temporal, GPU kernel and idle time breakdowns
           ours: load(cache=False) + overview() (its step breakdown is the temporal one) +
                 kernels("name") + idle()
The traces (default): the ResNet50/V100 one of tests/data (1.0 MB gzip, 35 MB JSON) and
the 4-worker V100 trace blown up 3x by benchmarks/make_big_trace.py (bigtrace.build_trace:
~92 MB JSON, gzipped, built once under bench-output/), both .json.gz as the profiler
writes them. Each side runs --repeat times, the runs of every side interleaved (the machine
is shared: what disturbs one disturbs all); each figure is the smallest of its runs, and
the ratios (peer / ours) compare figures of the same run. Goal: >= 20x against each peer.
--root runs another checkout's tb_profiler as ours (a baseline: ``git archive`` of a commit,
its extension built with ``python setup.py build_ext --inplace``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# benchmarks/, the script's folder; tests/datafiles.py (bigtrace puts tests/ on the path)
from bigtrace import DEFAULT_SEED, build_trace
from datafiles import V100_W4_TRACE
from peers import (
    HTA_PYTHON,
    OLD_PYTHON,
    OURS_HTA,
    OURS_VIEWS,
    ROOT,
    hta_seconds,
    old_seconds,
    ours_seconds,
)

GOAL = 20.0
BIG_SEED, BIG_SIZE = V100_W4_TRACE, "85M"  # 30.8 MB of JSON: 3 copies, ~92 MB


def measure(trace: Path, repeat: int, sides: dict) -> dict:
    """{side: [seconds of each run]}, the sides' runs interleaved. Sides: ours, old (the old
    plugin), ours_hta (ours doing HTA's work), hta."""
    runs = {name: [] for name in sides}
    for _ in range(repeat):
        for name, fn in sides.items():
            runs[name].append(fn(trace))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, action="append", help="a trace (repeatable; default: the two above)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--old-python", default=OLD_PYTHON)
    ap.add_argument("--hta-python", default=HTA_PYTHON)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose tb_profiler is ours")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    traces = [Path(t).resolve() for t in args.trace or [DEFAULT_SEED, build_trace(BIG_SEED, BIG_SIZE)[1]]]
    sides = {"ours": lambda p: ours_seconds(p, OURS_VIEWS, root=args.root)}
    missing = []
    if Path(args.old_python).exists():
        sides["old"] = lambda p: old_seconds(p, args.old_python)
    else:
        missing.append(f"torch-tb-profiler: no {args.old_python}")
    if Path(args.hta_python).exists():
        sides["ours_hta"] = lambda p: ours_seconds(p, OURS_HTA, root=args.root)
        sides["hta"] = lambda p: hta_seconds(p, args.hta_python)
    else:
        missing.append(f"HTA: no {args.hta_python}")

    result = {"repeat": args.repeat, "goal": GOAL, "root": str(args.root), "missing": missing, "traces": []}
    for trace in traces:
        runs = measure(trace, args.repeat, sides)
        best = {name: min(v) for name, v in runs.items()}
        row = {"trace": str(trace), "json_mb": _json_mb(trace), "min_s": best, "runs_s": runs}
        if "old" in best:
            row["old_speedup"] = best["old"] / best["ours"]
        if "hta" in best:
            row["hta_speedup"] = best["hta"] / best["ours_hta"]
        result["traces"].append(row)
        if not args.json:
            _print_row(row)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for m in missing:
            print("left out:", m)
        print(f"min of {args.repeat} fresh processes per side, imports excluded; goal >= {GOAL:.0f}x")


def _json_mb(trace: Path) -> float:
    """MB of JSON text (the gzip trailer's ISIZE for a .gz; < 4 GiB)."""
    if trace.name.endswith(".gz"):
        with open(trace, "rb") as f:
            f.seek(-4, 2)
            return int.from_bytes(f.read(4), "little") / 1e6
    return trace.stat().st_size / 1e6


def _print_row(row: dict) -> None:
    b = row["min_s"]
    print(f"{Path(row['trace']).name} ({row['json_mb']:.1f} MB JSON)")
    if "old" in b:
        ok = "ok" if row["old_speedup"] >= GOAL else "BELOW GOAL"
        print(f"  torch-tb-profiler 0.4.3 {b['old']:8.3f} s   tb_profiler {b['ours']:7.3f} s   "
              f"{row['old_speedup']:6.1f}x  {ok}")
    if "hta" in b:
        ok = "ok" if row["hta_speedup"] >= GOAL else "BELOW GOAL"
        print(f"  HTA 0.5.0               {b['hta']:8.3f} s   tb_profiler {b['ours_hta']:7.3f} s   "
              f"{row['hta_speedup']:6.1f}x  {ok}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
