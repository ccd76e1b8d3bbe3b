#!/usr/bin/env python
"""Where a cold open's time goes, analysis by analysis, against a baseline checkout in the same run.

    python benchmarks/profile_open.py [--trace PATH] [--repeat 9] [--root CHECKOUT] [--json]

What bench_peers.py times as one figure (``tb_profiler.load`` + every number of the
Overview, the Kernel view and the idle analysis: ``peers.OURS_VIEWS``), split: the load's
read, decode and build seconds (the trace's meta), then each memoized analysis's own time
(its body, less the memoized analyses it calls; the public calls' copies are "(views)").
Every repeat is a fresh process (imports excluded, as in bench_peers.py); each figure is the
median over the repeats. With --root, a second checkout (``git worktree add /tmp/base REV``,
its extension built with ``python setup.py build_ext --inplace``) runs interleaved with this
one and each row shows both and their ratio: which analysis a change made faster or slower.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bigtrace import DEFAULT_SEED  # benchmarks/, the script's folder
from peers import OURS_VIEWS, ROOT, child

# argv: trace, repository root, the work (Python statements over t)
_PROFILE = r"""
import collections, functools, importlib, json, pkgutil, sys, time
sys.path.insert(0, sys.argv[2])
import tb_profiler.analysis.memo as memo
own, stack = collections.Counter(), []
def timed(name, fn):
    @functools.wraps(fn)
    def run(*a, **k):
        t0 = time.perf_counter()
        stack.append(0.0)
        try:
            return fn(*a, **k)
        finally:
            dt = time.perf_counter() - t0
            own[name] += dt - stack.pop()
            if stack:
                stack[-1] += dt
    return run
for name in ("per_trace", "per_trace_args"):  # before any analysis module decorates with them
    wrap = getattr(memo, name)
    setattr(memo, name, lambda fn, wrap=wrap: wrap(timed(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}", fn)))
import tb_profiler, tb_profiler.api, tb_profiler.analysis as A
for m in pkgutil.iter_modules(A.__path__):
    importlib.import_module("tb_profiler.analysis." + m.name)
t = tb_profiler.load(sys.argv[1], cache=False)
timed("(views)", lambda: exec(sys.argv[3], {"t": t}))()
out = {f"load: {k[:-8]}": v for k, v in t._state.meta.items() if k.endswith("_seconds")}
out.update(own)
print(json.dumps(out))
"""


def profile(trace: Path, root: Path, repeat: int, baseline: Path | None) -> dict[str, dict[str, float]]:
    """{side: {stage: median seconds}} for this checkout ("ours") and the baseline, if any."""
    sides = {"ours": root} | ({"base": baseline} if baseline else {})
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for _ in range(repeat):  # interleaved: what disturbs one side disturbs both
        for side, checkout in sides.items():
            runs[side].append(child(_PROFILE, sys.executable, str(trace), str(checkout), OURS_VIEWS))
    return {side: {k: statistics.median(r.get(k, 0.0) for r in rs) for k in set().union(*rs)}
            for side, rs in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_SEED)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--root", type=Path, default=None, help="a baseline checkout to compare with")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = profile(args.trace.resolve(), ROOT, args.repeat, args.root.resolve() if args.root else None)
    if args.json:
        print(json.dumps(res, indent=1, sort_keys=True))
        return
    ours, base = res["ours"], res.get("base")
    rows = sorted(set(ours) | set(base or {}), key=lambda k: -(ours.get(k, 0.0)))
    print(f"{args.trace.name}: median of {args.repeat} fresh processes, ms" + (", base / ours" if base else ""))
    for k in rows:
        o = 1e3 * ours.get(k, 0.0)
        if base:
            b = 1e3 * base.get(k, 0.0)
            ratio = f"{b / o:5.2f}x" if b and o else "    -"  # "-": the analysis is on one side only
            print(f"  {k:44s} {b:8.2f} {o:8.2f}  {ratio}")
        else:
            print(f"  {k:44s} {o:8.2f}")
    # medians of parts do not add up to the median of the whole: the sum, not a measured total
    print(f"  {'sum of the rows (ours)':44s} {1e3 * sum(ours.values()):8.2f}")


if __name__ == "__main__":
    main()
