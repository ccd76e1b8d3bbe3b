#!/usr/bin/env python
"""Trace view benchmark (issue 10, "Big traces"): the window query (plugin/timeline.py
``window``, served by GET trace) on a big trace, this checkout against the code of a
baseline commit (default f23394c: the full scan before the level-of-detail index), in the
same process and run, so the ratios hold while the machine is shared.

    python benchmarks/bench_timeline.py [--size 1G | --trace FILE ...] [--seed SEED]
        [--baseline f23394c] [--width 1500] [--windows 200] [--repeat 5] [--cache-dir DIR] [--json]

The trace: --trace FILE (any number: one row each), or the V100 ResNet50 seed of
tests/data blown up to --size by benchmarks/make_big_trace.py under ./bench-output/
(built once, reused). Loaded with tb_profiler.load (through the cache: --cache-dir, default
./bench-output/timeline-cache, so the second run skips the decode).

The baseline is the baseline commit's plugin/timeline.py (``git show``) loaded as a module
beside this checkout's: it runs on this checkout's trace model and analyses, so the
figures compare the window code alone. Measured, per trace:
  index        the first window's one-off work: old: its timeline_index + flow_pairs +
               kernel_busy; new: the same + the level-of-detail index, the flow index, the
               counters' sums and pyramids (new's timeline_index runs first, so the analyses
               both share, memoized with the trace, count on new's side);
  whole        the whole-trace window (start/end omitted) at --width px, median of --repeat;
  random       --windows windows, lengths log-uniform from 1e-6 of the span to all of it,
               random starts, each asked of old and new in turn: p50, p99, max of the
               first pass, and ("best") of each window's fastest of --passes passes (the
               machine is shared: a descheduled call shows in the first figures only);
  reply        the whole-trace reply's JSON bytes (json.dumps, before compression), and its
               parts (events, busy, flows, counters);
and, for every window, that old and new send the same events and flows, and below the
index's finest bin the same busy blocks (a mismatch is printed and fails the run).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tb_profiler
from tb_profiler.plugin import timeline as new
from tb_profiler.plugin import timeline_counters as counters


def old_module(commit: str):
    """The baseline's plugin/timeline.py as a module of its own (its memo keys differ)."""
    text = subprocess.run(["git", "show", f"{commit}:tb_profiler/plugin/timeline.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="tbp-old-timeline-")) / "tbp_old_timeline.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("tbp_old_timeline", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tbp_old_timeline"] = mod
    spec.loader.exec_module(mod)
    return mod


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t) * 1e3


def sizes(reply: dict) -> dict:
    return {"total": len(json.dumps(reply)), **{k: len(json.dumps(reply[k])) for k in
                                                ("events", "busy", "flows", "counters")}}


def same(old_reply: dict, new_reply: dict, exact_busy: bool) -> str | None:
    if old_reply["events"] != new_reply["events"]:
        return "events differ"
    if old_reply["flows"] != new_reply["flows"] or old_reply["counts"]["flows_in_window"] != \
            new_reply["counts"]["flows_in_window"]:
        return "flows differ"
    if old_reply["counters"] != new_reply["counters"]:
        return "counters differ"
    if exact_busy and (old_reply["busy"] != new_reply["busy"] or old_reply["counts"] != new_reply["counts"]):
        return "busy blocks differ below the finest bin"
    return None


def measure(path: Path, old, args) -> dict:
    t = time.perf_counter()
    trace = tb_profiler.load(path, cache_dir=args.cache_dir)
    out = {"trace": str(path), "json_bytes": path.stat().st_size, "events": len(trace.events),
           "load_s": round(time.perf_counter() - t, 2)}
    _, out["timeline_index_ms"] = timed(new.timeline_index, trace)
    _, ms_old = timed(lambda tr: (old.timeline_index(tr), old.flow_pairs(tr), old.kernel_busy(tr)), trace)
    from tb_profiler.analysis.queue import queue_series
    queue_series(trace)  # analysis.queue's memo: shared by both
    parts = {}
    for name, fn in (("lod_index", new.lod_index), ("flow_pairs", new.flow_pairs), ("flow_index", new.flow_index),
                     ("kernel_busy", new.kernel_busy), ("counter_sums", counters._kernel_busy_sums),
                     ("queue_pyramids", counters._queue_pyramids)):
        parts[name] = round(timed(fn, trace)[1], 1)
    ms_new = sum(parts.values())
    out["index_parts_ms"] = parts
    # new: its timeline_index (timed first, so the shared analyses it memoizes count there) + the rest
    out["index_ms"] = {"old": round(ms_old, 1), "new": round(out["timeline_index_ms"] + ms_new, 1),
                       "new_beyond_timeline_index": round(ms_new, 1)}
    lod = new.lod_index(trace)
    out["lod"] = {"levels": lod.levels, "rows": lod.rows, "runs": len(lod.run_lo),
                  "mb": round(sum(v.nbytes for v in lod.arrays().values()) / 2**20, 1)}
    W = args.width

    def window(mod, a, b):
        return mod.window(trace, a, b, W, args.max_events, args.max_flows)

    whole = {}
    for name, mod in (("old", old), ("new", new)):
        window(mod, None, None)  # warm
        gc.collect()
        whole[name] = float(np.median([timed(window, mod, None, None)[1] for _ in range(args.repeat)]))
    reply_old, reply_new = window(old, None, None), window(new, None, None)
    out["whole_ms"] = {k: round(v, 1) for k, v in whole.items()}
    out["reply_bytes"] = {"old": sizes(reply_old), "new": sizes(reply_new)}
    problems = []
    bad = same(reply_old, reply_new, lod.level_for(reply_new["ns_per_px"]) < 0)
    if bad:
        problems.append(("whole", bad))

    rng = np.random.default_rng(args.rng_seed)
    span = int(trace.span[1] - trace.span[0])
    wins = []
    for _ in range(args.windows):
        n = max(1, int(span * 10 ** rng.uniform(-6, 0)))
        wins.append((int(rng.integers(0, max(1, span - n))), n))
    times = {"old": np.full((args.passes, len(wins)), np.inf), "new": np.full((args.passes, len(wins)), np.inf)}
    for p in range(args.passes):
        for k, (a, n) in enumerate(wins):
            pair = (("old", old), ("new", new)) if (k + p) % 2 else (("new", new), ("old", old))
            got = {}
            for name, mod in pair:
                got[name], times[name][p, k] = timed(window, mod, a, a + n)
            if p == 0:
                bad = same(got["old"], got["new"], lod.level_for(got["new"]["ns_per_px"]) < 0)
                if bad:
                    problems.append(((a, a + n), bad))
    out["random_ms"] = {}
    for name, t in times.items():
        for label, v in (("", t[0]), ("best ", t.min(axis=0))):
            out["random_ms"].setdefault(name, {}).update({
                label + "p50": round(float(np.percentile(v, 50)), 1), label + "p99": round(float(np.percentile(v, 99)), 1),
                label + "max": round(float(v.max()), 1)})
    out["problems"] = [f"{w}: {p}" for w, p in problems]
    return out


def print_row(r: dict) -> None:
    def ratio(x, y):
        return f"{x / y:.1f}x" if y else "-"

    print(f"\n{r['trace']}: {r['json_bytes'] / 2**30:.2f} GiB JSON, {r['events']:,} events (load {r['load_s']} s)")
    lod = r["lod"]
    print(f"  level-of-detail index: {lod['levels']} levels, {lod['rows']} rows, {lod['runs']:,} busy runs, "
          f"{lod['mb']} MiB of arrays; built in {r['index_ms']['new_beyond_timeline_index']:.0f} ms "
          f"(with the flow index and counter sums) after timeline_index's {r['timeline_index_ms']:.0f} ms")
    print("  index parts ms: " + ", ".join(f"{k} {v:.0f}" for k, v in r["index_parts_ms"].items()))
    i, w, q = r["index_ms"], r["whole_ms"], r["random_ms"]
    print(f"  {'':24}{'old':>10}{'new':>10}{'old/new':>10}")
    print(f"  {'index build ms':24}{i['old']:>10.0f}{i['new']:>10.0f}{ratio(i['old'], i['new']):>10}")
    print(f"  {'whole-trace window ms':24}{w['old']:>10.1f}{w['new']:>10.1f}{ratio(w['old'], w['new']):>10}")
    for k in q["new"]:
        print(f"  {'random ' + k + ' ms':24}{q['old'][k]:>10.1f}{q['new'][k]:>10.1f}"
              f"{ratio(q['old'][k], q['new'][k]):>10}")
    for part in ("total", "events", "busy", "flows", "counters"):
        o, n = r["reply_bytes"]["old"][part], r["reply_bytes"]["new"][part]
        print(f"  {'reply ' + part + ' KB':24}{o / 1000:>10.0f}{n / 1000:>10.0f}{ratio(o, n):>10}")
    print("  same events, flows, counters as the baseline:", "yes" if not r["problems"] else "NO")
    for p in r["problems"][:10]:
        print("   ", p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, action="append", help="a trace to measure (repeatable)")
    ap.add_argument("--size", default="1G", help="without --trace: the seed blown up to this size (100M, 1G, 4G)")
    ap.add_argument("--seed", type=Path, default=None, help="the real trace to blow up (default: tests/data V100)")
    ap.add_argument("--baseline", default="f23394c", help="the commit whose timeline.py is the baseline")
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--max-events", type=int, default=20000)
    ap.add_argument("--max-flows", type=int, default=2000)
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--passes", type=int, default=2, help="times each random window is asked (best kept too)")
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=str(ROOT / "bench-output" / "timeline-cache"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.trace:
        paths = args.trace
    else:
        import bigtrace

        seed = args.seed or bigtrace.DEFAULT_SEED
        paths = [bigtrace.build_trace(seed, args.size, gz=False)[0]]  # the JSON only: no .gz needed here
    old = old_module(args.baseline)
    rows = [measure(p, old, args) for p in paths]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print_row(r)
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
