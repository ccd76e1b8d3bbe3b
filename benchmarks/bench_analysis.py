#!/usr/bin/env python
"""Analysis speed: file -> every overview, operator and kernel number, against the old plugin,
and every analysis of a ~100 MB trace after decoding.

    python benchmarks/bench_analysis.py [--old-python /tmp/oldtb/bin/python] [--repeat 3] [--json]

(1) One real kineto trace (the ResNet50/V100 one in tests/data/, 1.0 MB gz / 35 MB JSON), same run:
    old:  torch-tb-profiler 0.4.3 (in its own venv, see benchmarks/peers.py): RunProfileData.parse
          (read + json + process + analyze) + RunGenerator.generate_run_profile;
    ours: load(cache=False) + overview + operators (name, input shape) + kernels (name, op).
    Both timed inside a fresh process, imports excluded (benchmarks/peers.py runs both).
    Goal: ours >= 20x faster. (benchmarks/bench_peers.py: the same against HTA too.)
(2) A ~100 MB trace with GPU-like events (benchmarks/make_big_trace.py --synth-gpu): each analysis
    timed after load. Goal: all of them together <= 2 s.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bigtrace import DEFAULT_SEED, build_trace  # benchmarks/, the script's folder
from peers import OLD_PYTHON, ROOT, child, old_seconds, ours_seconds

GOAL_SPEEDUP, GOAL_ALL_SECONDS = 20.0, 2.0

_EACH = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import tb_profiler
t0 = time.perf_counter()
t = tb_profiler.load(sys.argv[1], cache=False)
out = {"load": time.perf_counter() - t0, "events": len(t.events)}
steps = [
    ("overview", lambda: t.overview()),
    ("operators by name", lambda: t.operators("name")),
    ("operators by input shape", lambda: t.operators("input_shape")),
    ("operators by stack", lambda: t.operators("stack")),
    ("kernels by name", lambda: t.kernels("name")),
    ("kernels by op", lambda: t.kernels("op")),
    ("memory", lambda: t.memory()),
    ("modules", lambda: t.modules()),
    ("key_averages table", lambda: t.table()),
]
for name, fn in steps:
    s = time.perf_counter(); fn(); out[name] = time.perf_counter() - s
print(json.dumps(out))
"""


OURS_WORK = 't.overview(); t.operators("name"); t.operators("input_shape"); t.kernels("name"); t.kernels("op")'


def versus_old(trace: Path, old_python: str, repeat: int) -> dict:
    old = [old_seconds(trace, old_python) for _ in range(repeat)]
    ours = [ours_seconds(trace, OURS_WORK) for _ in range(repeat)]
    o, u = statistics.median(old), statistics.median(ours)
    return {"trace": trace.name, "old_s": o, "ours_s": u, "speedup": o / u}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-python", default=OLD_PYTHON)
    ap.add_argument("--trace", type=Path, default=DEFAULT_SEED)
    ap.add_argument("--size", default="100M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    result = {}
    if Path(args.old_python).exists():
        result["versus_old"] = versus_old(args.trace, args.old_python, args.repeat)
    big, _ = build_trace(DEFAULT_SEED, args.size, synth_gpu=True)
    each = child(_EACH, sys.executable, str(big), str(ROOT))
    analyses = {k: v for k, v in each.items() if k not in ("load", "events")}
    result["big"] = {"trace": big.name, "mb": big.stat().st_size / 1e6, "events": each["events"],
                     "load_s": each["load"], "analyses": analyses, "all_s": sum(analyses.values())}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    if "versus_old" in result:
        v = result["versus_old"]
        ok = "ok" if v["speedup"] >= GOAL_SPEEDUP else "BELOW GOAL"
        print(f"(1) {v['trace']}: torch-tb-profiler 0.4.3 {v['old_s']:.3f} s, tb_profiler {v['ours_s']:.3f} s "
              f"-> {v['speedup']:.1f}x (goal >= {GOAL_SPEEDUP:.0f}x) {ok}   [median of {args.repeat}]")
    else:
        print(f"(1) skipped: no old plugin at {args.old_python}")
    b = result["big"]
    print(f"(2) {b['trace']}: {b['mb']:.1f} MB, {b['events']} events, load (no cache) {b['load_s']:.2f} s")
    for name, sec in b["analyses"].items():
        print(f"      {name:<26} {sec:7.3f} s")
    ok = "ok" if b["all_s"] <= GOAL_ALL_SECONDS else "ABOVE GOAL"
    print(f"      {'all analyses':<26} {b['all_s']:7.3f} s  (goal <= {GOAL_ALL_SECONDS:.0f} s) {ok}")


if __name__ == "__main__":
    main()
