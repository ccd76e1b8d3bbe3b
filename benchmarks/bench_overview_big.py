#!/usr/bin/env python
"""Whole-trace routes on a big trace (issue 10, "Big traces"): the seconds of the first call
of each route's analysis, with this checkout's code and with a baseline commit's, in the
same run.

    python benchmarks/bench_overview_big.py [--trace /tmp/big1g.json] [--size 1G]
        [--base f23394c] [--base-dir DIR] [--current DIR] [--rounds 3]
        [--modes sequence,alone] [--json]

The trace: --trace when that file exists (default /tmp/big1g.json), else the V100
ResNet50 trace of tests/data blown up to --size by benchmarks/bigtrace.py (built once under
bench-output/).

The baseline: ``git archive BASE`` extracted to bench-output/bench-overview-big/base-BASE/
and its native extension built in place (``TB_PROFILER_SKIP_FRONTEND=1 python setup.py
build_ext --inplace``), once; --base-dir takes a folder prepared the same way instead.
--current takes another checkout to measure in place of this one.

Each measurement is a fresh process with that code first on sys.path: it loads the trace
(from a cache folder of its own per code, so the decoded columns are read, not parsed, from
the second run on), reads every column once (the memory-mapped pages, so no route pays for
them), then calls the plugin's route functions (tb_profiler.plugin.views) and times each
call:

  sequence   every route in the order a user opens the views (Overview, Operator,
             Kernel, Memory, Module), in one process: what each view's first visit costs
             after the ones before it (their shared intermediates are memoized per trace);
  alone      each route in a process of its own: its whole cost, nothing shared.

Rounds alternate the baseline and the current code (--rounds of each) and each figure is
the smallest over the rounds: the machine is shared, the smallest is the least disturbed.
Printed: seconds per route, old and new, and old/new (above 1: the new code is faster), in
wall-clock seconds and in the process's CPU seconds (user + system: less disturbed by other
processes on a shared machine). Timings differ from machine to machine: compare ratios from
one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
OUT = ROOT / "bench-output" / "bench-overview-big"
DEFAULT_TRACE = Path("/tmp/big1g.json")

# (route, expression over t (the Trace) and V (tb_profiler.plugin.views)); in a view-visit order.
ROUTES = (
    ("overview", "V.overview(t, 1)"),
    ("operation/table", "V.operation_table(t, 'Operation')"),
    ("operation (pie)", "V.operation_pie(t, 'Operation', 10)"),
    ("operation/table shape", "V.operation_table(t, 'OperationAndInputShape')"),
    ("kernel/table", "V.kernel_table(t, 'Kernel')"),
    ("kernel (pie)", "V.kernel_pie(t, 10)"),
    ("kernel/tc_pie", "V.kernel_tc(t)"),
    ("kernel/table op", "V.kernel_table(t, 'KernelNameAndOp')"),
    ("memory", "V.memory_curve(t, None, None, 2000)"),
    ("memory/stats", "V.memory_stats(t, None, None, None)"),
    ("module", "V.module(t)"),
)

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import tb_profiler
from tb_profiler.plugin import views as V
t = tb_profiler.load(sys.argv[2])
for table in (t.events, t.instants):
    for col in list(table.materialized.values()):
        np.asarray(col).sum()  # page the mapped columns in: no route pays for them
routes = json.loads(sys.argv[3])
has_module = "Module" in V.views([t], 1)
out = {"events": len(t.events)}
for name, expr in routes:
    if name == "module" and not has_module:
        continue
    t0, c0 = time.perf_counter(), time.process_time()
    eval(expr)
    out[name] = [time.perf_counter() - t0, time.process_time() - c0]
print(json.dumps(out))
"""


def prepare_base(commit: str) -> Path:
    """This repository's `commit` extracted and its extension built, once."""
    folder = OUT / f"base-{commit}"
    if (folder / ".built").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    print(f"extracting {commit} into {folder} ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryFile() as tmp:
        subprocess.run(["git", "archive", commit], cwd=ROOT, stdout=tmp, check=True)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(folder, filter="data")
    env = {**os.environ, "TB_PROFILER_SKIP_FRONTEND": "1"}
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    (folder / ".built").write_text(commit + "\n")
    return folder


def measure(code: Path, trace: Path, routes, cache_dir: Path) -> dict:
    env = {**os.environ, "TB_PROFILER_CACHE_DIR": str(cache_dir)}
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(code), str(trace), json.dumps(routes)],
                         capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), check=False)
    if out.returncode:
        raise RuntimeError(f"{code}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_mode(mode: str, codes: dict, trace: Path, rounds: int) -> dict:
    """{label: {route: [smallest wall seconds, smallest CPU seconds] over the rounds}}."""
    best: dict = {label: {} for label in codes}
    for r in range(rounds):
        for label, code in codes.items():
            cache_dir = OUT / f"cache-{label}"
            groups = [list(ROUTES)] if mode == "sequence" else [[x] for x in ROUTES]
            for group in groups:
                res = measure(code, trace, group, cache_dir)
                for name, sec in res.items():
                    if name != "events":
                        prev = best[label].get(name, [float("inf")] * 2)
                        best[label][name] = [min(a, b) for a, b in zip(sec, prev)]
                best[label]["events"] = res["events"]
            print(f"  {mode} round {r + 1}/{rounds} {label} done", file=sys.stderr, flush=True)
    return best


def report(mode: str, best: dict) -> None:
    old, new = best["old"], best["new"]
    print(f"\n{mode}: seconds of the first call of each route (smallest over the rounds), wall clock and "
          "the process's CPU time")
    print(f"  {'route':24s} {'old s':>8s} {'new s':>8s} {'old/new':>8s}   {'old cpu':>8s} {'new cpu':>8s} {'old/new':>8s}")
    tot_old, tot_new = [0.0, 0.0], [0.0, 0.0]
    for name, _ in ROUTES:
        if name not in old or name not in new:
            continue
        cells = []
        for i in (0, 1):
            tot_old[i] += old[name][i]
            tot_new[i] += new[name][i]
            cells.append(f"{old[name][i]:8.3f} {new[name][i]:8.3f} {old[name][i] / max(new[name][i], 1e-9):8.2f}")
        print(f"  {name:24s} {cells[0]}   {cells[1]}")
    cells = [f"{tot_old[i]:8.3f} {tot_new[i]:8.3f} {tot_old[i] / max(tot_new[i], 1e-9):8.2f}" for i in (0, 1)]
    print(f"  {'all routes':24s} {cells[0]}   {cells[1]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="the trace (made with --size if missing)")
    ap.add_argument("--size", default="1G", help="size of the blown-up V100 trace when --trace is missing")
    ap.add_argument("--base", default="f23394c", help="baseline commit")
    ap.add_argument("--base-dir", type=Path, help="a prepared checkout of the baseline (extension built)")
    ap.add_argument("--current", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each code per mode (the smallest counts)")
    ap.add_argument("--modes", default="sequence,alone", help="sequence, alone, or both")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = ap.parse_args()
    trace = args.trace
    if not trace.exists():
        from bigtrace import build_trace

        trace, _ = build_trace(size=args.size)
    codes = {"old": args.base_dir.resolve() if args.base_dir else prepare_base(args.base),
             "new": args.current.resolve()}
    OUT.mkdir(parents=True, exist_ok=True)
    for label, code in codes.items():  # decode once per code into its cache folder, untimed
        measure(code, trace, [], OUT / f"cache-{label}")
    results = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        results[mode] = run_mode(mode, codes, trace, max(args.rounds, 1))
    size = trace.stat().st_size
    print(f"trace {trace} ({size / 2**30:.2f} GiB, {results[next(iter(results))]['new']['events']} events); "
          f"old = {args.base_dir or args.base}, new = {codes['new']}")
    for mode, best in results.items():
        report(mode, best)
    if args.json:
        print(json.dumps({"trace": str(trace), "bytes": size, "base": str(args.base_dir or args.base),
                          "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
