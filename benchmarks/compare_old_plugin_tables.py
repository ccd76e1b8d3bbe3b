"""Compare tb_profiler's operator and kernel tables with the old torch-tb-profiler's.

For each trace (default: the four V100 ResNet50 traces in tests/data/traces), the old
plugin (torch-tb-profiler 0.4.3, in its own virtual environment) parses the file in a
subprocess and dumps its raw aggregates as JSON:
- operators by name, by name + input shape and by name + call stack: calls, host self/total, device
  self/total, tensor-core eligible, tensor-core self/total time;
- kernels by name: calls, total/mean/max/min, duration-weighted blocks per SM and
  occupancy, tensor cores used;
- kernels by name + operator (+ grid, block, registers, shared memory): the same.
Ours come from tb_profiler.analysis.operators / kernels on the same file. Rows are
matched by key and every number is compared; a difference over 1% is flagged.

Usage:
    python benchmarks/compare_old_plugin_tables.py [--python /tmp/oldtb/bin/python] [trace ...]
Exit status 1 when a difference over 1% (or an unmatched row) is found.

Result on the four V100 traces: every row of every table matches (5030 rows, all equal
to float rounding). On other traces the differences are old-plugin behaviours we do not
copy, each shown right by a handmade trace in tests/test_analysis_ops.py:
- ops that partly overlap a sibling ("ranges on the same thread should not intersect")
  and backward ops it cannot pair with a module are dropped by the old plugin; we keep
  them (test_partly_overlapping_ops_are_kept);
- kernels whose runtime call has no op around it: the old plugin files them under
  "CallTreeRoot" or leaves them out of its kernel-by-op table; ours lists them with op
  None (shown as N/A here; rows only we have with op N/A are not flagged)
  (test_kernels_by_name_and_by_op);
- PyTorch 2.x op names (ConvolutionBackward0, aten::convolution_backward,
  scaled-dot-product attention) are tensor-core eligible in ours, not in its 2021 list
  (test_tensor_core_names);
- python_function call stacks (torch >= 1.10 with_stack=True) are read by ours only; the
  old plugin reads the PyTorch 1.8/1.9 "Call stack" arg alone (test_python_function_stack_chain);
- its per-group tensor-core eligibility is that of the group's first call, ours "any
  call eligible" (the same on every trace seen).
One difference is ours to fix, outside these analyses: PyTorch 1.8 traces spell the
shapes "Input dims" and the decoder reads only "Input Dims", so their by-shape tables
group every call under "[]" (the legacy-formats traces show it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bigtrace import V100_TRACES  # benchmarks/, the script's folder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_TRACES = [str(p) for p in V100_TRACES]
DEFAULT_PYTHON = "/tmp/oldtb/bin/python"
TOLERANCE = 0.01

# Runs inside the old plugin's venv: parse one trace, print its raw aggregates as JSON.
OLD_DUMP = r"""
import json, sys, tempfile, logging
logging.disable(logging.CRITICAL)
from torch_tb_profiler.profiler.data import RunProfileData
p = RunProfileData.parse("worker0", "span", sys.argv[1], tempfile.mkdtemp())

def ops(aggs):
    return [dict(name=a.name, input_shape=a.input_shape, calls=a.calls, host_self=a.self_host_duration,
                 host_total=a.host_duration, device_self=a.self_device_duration,
                 device_total=a.device_duration, tc_eligible=bool(a.tc_eligible),
                 tc_self=a.tc_self_duration, tc_total=a.tc_total_duration) for a in aggs]

ks = p.kernel_stat
kernels = [dict(name=n, calls=int(r["count"]), total=float(r["sum"]), mean=float(r["mean"]),
                max=float(r["max"]), min=float(r["min"]), blocks_per_sm=float(r["blocks_per_sm"]),
                occupancy=float(r["occupancy"]), tensor_cores=bool(r["tc_used"])) for n, r in
           ([] if ks is None else ks.iterrows())]
by_op = [dict(name=a.name, op="N/A" if a.op_name == "CallTreeRoot" else a.op_name, grid=str(a.grid), block=str(a.block),
              registers=str(a.regs_per_thread or "0"), shared_memory=str(a.shared_memory or "0"),
              calls=a.calls, total=a.total_duration, mean=a.avg_duration, max=a.max_duration,
              min=a.min_duration, blocks_per_sm=a.avg_blocks_per_sm, occupancy=a.avg_occupancy,
              tensor_cores=bool(a.tc_used)) for a in p.kernel_list_groupby_name_op]
stacks = []
for aggs in p.stack_lists_group_by_name.values():
    for a, row in zip(aggs, ops(aggs)):
        row["stack"] = ";".join(f.strip() for f in list(a.callstacks)[0].split(";") if f.strip())
        stacks.append(row)
json.dump(dict(ops_by_name=ops(p.op_list_groupby_name), ops_by_shape=ops(p.op_list_groupby_name_input),
               ops_by_stack=stacks,
               kernels_by_name=kernels, kernels_by_op=by_op), sys.stdout)
"""

OP_METRICS = ("calls", "host_self", "host_total", "device_self", "device_total", "tc_self", "tc_total",
              "tc_eligible")
KERNEL_METRICS = ("calls", "total", "mean", "max", "min", "blocks_per_sm", "occupancy", "tensor_cores")


def old_tables(python: str, path: str) -> dict:
    proc = subprocess.run([python, "-c", OLD_DUMP, path], capture_output=True, text=True, timeout=600,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"old plugin failed on {path}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def our_tables(path: str) -> dict:
    """Our tables in the old plugin's units (us) and key spellings."""
    import tb_profiler
    from tb_profiler.analysis.kernels import kernels
    from tb_profiler.analysis.operators import operators
    from tb_profiler.analysis.stacks import op_stacks

    trace = tb_profiler.load(path, cache=False)
    table = op_stacks(trace)[1]

    def ops(df):
        tc_self = df["tc_self_pct"] / 100 * df["device_self_ns"]
        tc_total = df["tc_total_pct"] / 100 * df["device_total_ns"]
        return [{"name": r.name, "input_shape": getattr(r, "input_shape", None), "calls": r.calls,
                 "stack": ";".join(table.texts(int(getattr(r, "stack_id", -1)))),
                 "host_self": r.host_self_ns / 1e3, "host_total": r.host_total_ns / 1e3,
                 "device_self": r.device_self_ns / 1e3, "device_total": r.device_total_ns / 1e3,
                 "tc_eligible": bool(r.tc_eligible), "tc_self": ts / 1e3, "tc_total": tt / 1e3}
                for r, ts, tt in zip(df.itertuples(index=False), tc_self, tc_total)]

    def kern(df, by_op):
        out = []
        for r in df.itertuples(index=False):
            row = {"name": r.name, "calls": r.calls, "total": r.total_ns / 1e3, "mean": r.mean_ns / 1e3,
                   "max": r.max_ns / 1e3, "min": r.min_ns / 1e3, "blocks_per_sm": r.blocks_per_sm,
                   "occupancy": r.occupancy, "tensor_cores": bool(r.tensor_cores)}
            if by_op:
                row.update(op=r.op if r.op is not None else "N/A", grid=str(r.grid), block=str(r.block),
                           registers=str(r.registers or "0"), shared_memory=str(r.shared_memory or "0"))
            out.append(row)
        return out

    by_stack = operators(trace, "stack")
    return {"ops_by_name": ops(operators(trace, "name")), "ops_by_shape": ops(operators(trace, "input_shape")),
                "ops_by_stack": ops(by_stack[by_stack["stack_id"] >= 0]),
                "kernels_by_name": kern(kernels(trace, "name"), False), "kernels_by_op": kern(kernels(trace, "op"), True)}


KEYS = {"ops_by_name": ("name",), "ops_by_shape": ("name", "input_shape"), "ops_by_stack": ("name", "stack"),
        "kernels_by_name": ("name",),
        "kernels_by_op": ("name", "op", "grid", "block", "registers", "shared_memory")}


def rel_diff(a, b) -> float:
    a, b = float(a), float(b)
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def compare_table(name: str, ours: list[dict], old: list[dict]) -> dict:
    keys = KEYS[name]
    metrics = OP_METRICS if name.startswith("ops") else KERNEL_METRICS
    mine = {tuple(str(r[k]) for k in keys): r for r in ours}
    theirs = {tuple(str(r[k]) for k in keys): r for r in old}
    both = sorted(set(mine) & set(theirs))
    # Kernels the old plugin could not tie to an op it dropped from this table (see above).
    lost = {k for k in set(mine) - set(theirs) if name == "kernels_by_op" and k[1] == "N/A"}
    worst, within, exact = [], 0, 0
    for key in both:
        diffs = [(rel_diff(mine[key][m], theirs[key][m]), m) for m in metrics]
        d, m = max(diffs)
        within += d <= TOLERANCE
        exact += d <= 1e-9
        if d > 1e-9:  # float noise of weighted means is not a difference
            worst.append((d, m, key, mine[key][m], theirs[key][m]))
    worst.sort(reverse=True)
    return {"table": name, "compared": len(both), "within": within, "exact": exact, "only_ours": sorted(set(mine) - set(theirs) - lost), "unattributed": len(lost),
                "only_old": sorted(set(theirs) - set(mine)), "worst": worst[:5]}


def report(path: str, results: list[dict]) -> bool:
    """Print one trace's comparison; True when everything is within tolerance."""
    ok = True
    print(f"\n== {os.path.relpath(path, ROOT)}")
    for r in results:
        flag = r["within"] == r["compared"] and not r["only_ours"] and not r["only_old"]
        ok &= flag
        print(f"  {r['table']:<16} rows compared {r['compared']:>4}, within 1% {r['within']:>4} "
              f"(equal {r['exact']:>4}), "
              f"only ours {len(r['only_ours'])}, only old {len(r['only_old'])}  {'ok' if flag else 'FLAG'}")
        for d, m, key, a, b in r["worst"][:3]:
            print(f"      worst {d:8.4%} {m:<14} ours {a!s:>12} old {b!s:>12}  {' | '.join(key)[:90]}")
        for side in ("only_ours", "only_old"):
            for key in r[side][:3]:
                print(f"      {side}: {' | '.join(key)[:110]}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=DEFAULT_TRACES)
    ap.add_argument("--python", default=DEFAULT_PYTHON, help="the old plugin's venv python")
    args = ap.parse_args(argv)
    all_ok, totals, worst = True, [0, 0, 0], []
    for path in args.traces:
        try:
            old = old_tables(args.python, path)
        except RuntimeError as e:
            print(f"\n== {path}: skipped, the old plugin cannot read it ({str(e).strip().splitlines()[-1]})")
            continue
        ours = our_tables(path)
        results = [compare_table(name, ours[name], old[name]) for name in KEYS]
        all_ok &= report(path, results)
        totals[0] += sum(r["compared"] for r in results)
        totals[1] += sum(r["within"] for r in results)
        totals[2] += sum(r["exact"] for r in results)
        worst += [(w[0], r["table"], w[1], w[2]) for r in results for w in r["worst"]]
    worst_text = (f"worst {max(worst)[0]:.2e} ({max(worst)[1]} {max(worst)[2]})" if worst else "no difference")
    print(f"\nSummary: {totals[0]} rows compared over {len(args.traces)} traces, {totals[1]} within 1%, "
          f"{totals[2]} equal to 1e-9; {worst_text}"
          f" -> {'all within 1%' if all_ok else 'DIFFERENCES FLAGGED'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
