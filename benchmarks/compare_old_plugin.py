#!/usr/bin/env python
"""Overview numbers: tb_profiler against torch-tb-profiler 0.4.3, side by side.

    python benchmarks/compare_old_plugin.py [TRACE ...] [--tol 1.0] [--json]

For each trace (default: the four ResNet50/V100 traces in tests/data/traces/kineto-
resnet50-v100/, two runs x two spans), the old plugin's parser and generator
(RunProfileData.parse + RunGenerator.generate_run_profile) run in its own virtualenv
($OLD_TB_PYTHON, default /tmp/oldtb/bin/python; it needs 'pandas<2' 'numpy<2' only if
the import fails) in a subprocess that prints its numbers as JSON; ours run here. Compared:
the step-time breakdown of every step and the average (Kernel, Memcpy, Memset,
Communication, Runtime, DataLoader, CPU Exec, Other, Total; us), the number of steps,
GPU utilization, est. SM efficiency, est. achieved occupancy, kernel time on tensor
cores, and the share of kernel time launched by tensor-core-eligible operators. Every
value whose relative difference exceeds --tol percent is flagged "<<" and counted; the
exit status is 1 when any is.

Extending: another comparison (operators, kernels) supplies an old-side snippet (Python
run in the old venv: it gets the trace paths in sys.argv[1:] and prints one JSON object
{path: {metric: value}}) and a new-side function path -> {metric: value}, and calls
``compare(paths, old_snippet, new_fn, tol)`` and ``print_table(rows)`` from this module.

Known old-plugin bugs (tb_profiler is right; tests/test_analysis_overview.py shows each on
a small handmade trace); none of them shows on the V100 traces, which the old plugin reads
correctly:
- DataLoader time is 0 on PyTorch >= 1.10 traces: ``enumerate(DataLoader)#...__next__``
  became a ``user_annotation`` event, and the old plugin drops every user_annotation that
  is not ProfilerStep#N or a gloo/nccl collective (trace.create_trace_event), so that time
  lands in Other.
- Its category map has no ``cuda_runtime``/``cuda_driver`` (only the PyTorch 1.8-1.9
  "Runtime"), so on newer traces Runtime is 0, steps are not stretched to the kernels they
  launched (the kernels of a step that finish after the CPU step are cut off) and the
  trailing-step rule never runs.
- For the same reason user annotations (record_function ranges, ``Optimizer.step#...``,
  ``DistributedDataParallel.forward``), which PyTorch 1.9 wrote as cpu_op and the old
  plugin counted as CPU Exec, count as nothing on newer traces: their time moves from
  CPU Exec to Other. tb_profiler counts them as CPU Exec on both.
On the torch 2.13 sample traces (samples/make_all.py) this script shows exactly these
differences (DataLoader 0 vs 7.6 ms a step on cnn_dataloader_0workers; CPU Exec and Other apart by
the annotations' time) and no other.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from bigtrace import V100_TRACES  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OLD_PYTHON = os.environ.get("OLD_TB_PYTHON", "/tmp/oldtb/bin/python")
CATEGORIES = ("Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other", "Total")

# Runs in the old plugin's venv: its own parser + generator, numbers as JSON (us, ratios).
OLD_OVERVIEW = r"""
import json, logging, sys, tempfile
logging.disable(logging.WARNING)
from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.run_generator import RunGenerator
from torch_tb_profiler.profiler.event_parser import ProfileRole
CATS = ("Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other", "Total")
ROLES = (ProfileRole.Kernel, ProfileRole.Memcpy, ProfileRole.Memset, ProfileRole.Communication,
         ProfileRole.Runtime, ProfileRole.DataLoader, ProfileRole.CpuOp, ProfileRole.Other, ProfileRole.Total)
out = {}
for path in sys.argv[1:]:
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = RunProfileData.parse("worker0", "span", path, tmp)
            RunGenerator("worker0", "span", data).generate_run_profile()
    except Exception as e:  # the old plugin cannot read some formats (bare JSON arrays)
        out[path] = {"error": f"{type(e).__name__}: {e}"}
        continue
    m = {"steps": len(data.steps_costs)}
    for name, costs in zip(data.steps_names, data.steps_costs):
        for cat, role in zip(CATS, ROLES):
            m[f"step {name} {cat}"] = costs.costs[role]
    for cat, role in zip(CATS, ROLES):
        m[f"average {cat}"] = data.avg_costs.costs[role]
    g = data.gpu_metrics_parser
    for gpu in sorted(g.gpu_ids):
        m[f"gpu{gpu} utilization %"] = 100 * g.gpu_utilization[gpu]
        if g.avg_approximated_sm_efficiency_per_device[gpu] is not None:
            m[f"gpu{gpu} est. SM efficiency %"] = 100 * g.avg_approximated_sm_efficiency_per_device[gpu]
        if g.avg_occupancy_per_device[gpu] is not None:
            m[f"gpu{gpu} est. achieved occupancy %"] = g.avg_occupancy_per_device[gpu]
        if data.tc_ratio[gpu] is not None:
            m[f"gpu{gpu} tensor cores %"] = 100 * data.tc_ratio[gpu]
    m["TC-eligible op kernel share %"] = 100 * data.tc_eligible_ops_kernel_ratio
    out[path] = m
print(json.dumps(out))
"""


def run_old(snippet: str, paths: list[str]) -> dict:
    """Run a snippet in the old plugin's venv; its stdout's last line is JSON."""
    proc = subprocess.run([OLD_PYTHON, "-c", snippet, *paths], capture_output=True, text=True, timeout=1200,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"old plugin failed ({OLD_PYTHON}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def new_overview(path: str) -> dict:
    """Our numbers under the old plugin's metric names (us, percent)."""
    import tb_profiler
    from tb_profiler.analysis import breakdown as bd
    from tb_profiler.analysis.gpu import device_summary, tc_eligible_kernel_share

    trace = tb_profiler.load(path, cache=False)
    frame = bd.breakdown(trace)
    m: dict = {"steps": len(frame) - 1 if len(frame) else 0}
    for row in frame.itertuples(index=False):
        label = "average" if row.step == -1 and row.name == "average" else f"step {row.step}"
        for cat, key in zip(CATEGORIES, [c + "_ns" for c in bd.CATEGORIES] + ["total_ns"]):
            m[f"{label} {cat}"] = getattr(row, key) / 1000.0
    for row in device_summary(trace).itertuples(index=False):
        gpu = f"gpu{row.device}"
        m[f"{gpu} utilization %"] = row.utilization_pct
        m[f"{gpu} est. SM efficiency %"] = row.sm_efficiency_pct
        m[f"{gpu} est. achieved occupancy %"] = row.occupancy_pct
        m[f"{gpu} tensor cores %"] = row.tensor_core_pct
    m["TC-eligible op kernel share %"] = 100 * tc_eligible_kernel_share(trace)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}


def rel_diff(old, new) -> float | None:
    """|new - old| / |old| in percent; 0 when both are 0 or both missing; None when one
    side is missing."""
    if old is None and new is None:
        return 0.0
    if old is None or new is None:
        return None
    if old == new:
        return 0.0
    return 100.0 * abs(new - old) / abs(old) if old else math.inf


def compare(paths: list[str], old_snippet: str, new_fn, tol: float) -> list[dict]:
    """Rows {trace, metric, old, new, diff_pct, flag} for every metric of either side."""
    old_all = run_old(old_snippet, paths)
    rows = []
    for path in paths:
        old, new = old_all.get(path, {}), new_fn(path)
        parts = Path(path).name.split(".")
        label = f"{Path(path).parent.name}/{parts[1] if parts[1].isdigit() else parts[0]}"
        if "error" in old:
            rows.append({"trace": label, "metric": "old plugin failed", "old": old["error"][:60], "new": None,
                         "diff_pct": None, "flag": False})
            continue
        for metric in list(old) + [k for k in new if k not in old]:
            d = rel_diff(old.get(metric), new.get(metric))
            rows.append({"trace": label, "metric": metric, "old": old.get(metric), "new": new.get(metric),
                         "diff_pct": d, "flag": d is None or d > tol})
    return rows


def print_table(rows: list[dict], tol: float, per_step: bool = False) -> None:
    """Averages and device numbers always; per-step rows only when flagged (or asked)."""
    def num(v):
        return "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))

    for r in rows:
        if r["metric"] == "old plugin failed":
            print(f"{r['trace']}: the old plugin failed ({r['old']}), not compared")
    rows = [r for r in rows if r["metric"] != "old plugin failed"]

    print(f"{'trace':<32} {'metric':<34} {'old 0.4.3':>12} {'tb_profiler':>12} {'diff %':>8}")
    for r in rows:
        if r["metric"].startswith("step ") and not (r["flag"] or per_step):
            continue
        d = "-" if r["diff_pct"] is None else f"{r['diff_pct']:.3f}"
        print(f"{r['trace']:<32} {r['metric']:<34} {num(r['old']):>12} {num(r['new']):>12} {d:>8}"
              f"{'  <<' if r['flag'] else ''}")
    steps = [r for r in rows if r["metric"].startswith("step ")]
    flagged = [r for r in rows if r["flag"]]
    print(f"\n{len(rows)} values compared ({len(steps)} per-step breakdown values, shown only when flagged); "
          f"{len(flagged)} differ by more than {tol}%.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", help="trace files (default: the four V100 traces in tests/data)")
    ap.add_argument("--tol", type=float, default=1.0, help="flag relative differences above this percent")
    ap.add_argument("--steps", action="store_true", help="print every per-step value")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    paths = [str(p) for p in (args.traces or V100_TRACES)]
    rows = compare(paths, OLD_OVERVIEW, new_overview, args.tol)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print_table(rows, args.tol, args.steps)
    return 1 if any(r["flag"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
