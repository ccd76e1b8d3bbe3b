#!/usr/bin/env python
"""Many files: how long a server takes to load a logdir of thousands of tiny traces, whether
that grows linearly with the number of files, and how a good run answers meanwhile.

    python benchmarks/bench_many_files.py [--spans 500,2000] [--runs 2500,10000]
                                          [--writes 0,1000,10000] [--code DIR] [--timeout 900] [--json]

Cases (each size in a new child process, a fresh cache folder, so the figures of one size
are not helped by another's cache):
  spans N   one run, one worker, N span files (a long job with ``repeat=0`` writes one every
            few minutes), plus a good run (the ResNet50/V100 trace of tests/data);
  runs N    N runs of one file each, plus the good run;
  writes M  one cache.write_entry into a cache folder already holding M entries (the cost
            that made a logdir's load O(N²): every write listed and read every entry).
The tiny trace is tests/data's tiny H100 trace (15 KB of text), each file with its own
timestamps.  For spans/runs the child builds the plugin's ProfilerState and app (2 loader
threads, the default), starts it, asks the good run's ``overview`` ("first": its load and
analysis, jumping the loading queue), then every 0.5 s until every file is loaded asks a
Trace view window and the operator table of the good run (new parameters each time: computed,
not answered from the response cache), ``runs`` and ``status``: "settle" is the time to
that point, "max" the slowest of those answers, "threads" the most threads alive at once,
"fds" the most open file descriptors, "rss" the child's peak RSS.  The smallest size of each case is the baseline of the same run:
"per file" (wall time) divided by the baseline's says how the cost grows (1.0: linear;
N/N0: O(N²)); "cpu/file" is the same from the child's CPU time (user + system, all
threads), which other work on a shared machine disturbs less.

--code DIR runs the children against the tb_profiler package in DIR (an export of an older
commit, e.g. ``git archive <commit> tb_profiler | tar -x -C /tmp/old`` plus the built
_native .so copied into /tmp/old/tb_profiler), for the "before" figures.  Logdirs are kept
in ./bench-output/many-files/ for the next run.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-output" / "many-files"
TINY = ROOT / "tests" / "data" / "traces" / "tiny-h100" / "after_fix_trace.json.gz"
GOOD = ROOT / "tests" / "data" / "traces" / "kineto-resnet50-v100" / "resnet50_num_workers_0" / \
    "worker0.1623143089861.pt.trace.json.gz"

_SERVER_CHILD = r"""
import json, os, resource, sys, threading, time
sys.path.insert(0, sys.argv[1])
logdir, cache_dir, timeout, routes = sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5].split(",")
from werkzeug.test import Client
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
P = "/data/plugin/pytorch_profiler/"
state = ProfilerState(logdir, cache_dir=cache_dir)
app = ProfilerApp(state, standalone=True)
client = Client(app)
t0 = time.perf_counter()
state.start()
a = time.perf_counter()
first = client.get(P + "overview?run=good")
first_s = time.perf_counter() - a
assert first.status_code == 200, first.get_data()[:300]
slowest, asked, threads, answers, i, fds = {}, 0, threading.active_count(), {}, 0, 0
while True:
    i += 1
    for name, route in (("trace", f"trace?run=good&width={600 + i}"), ("operation", f"operation?run=good&top={1 + i}"),
                        ("runs", "runs"), ("status", "status")):
        if name not in routes:
            continue
        a = time.perf_counter()
        r = client.get(P + route)
        took = time.perf_counter() - a
        answers[name] = r.status_code
        slowest[name] = max(slowest.get(name, 0.0), took)
        asked += 1
    threads = max(threads, threading.active_count())
    fds = max(fds, len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1)
    if not state.loading or time.perf_counter() - t0 > timeout:
        break
    time.sleep(0.5)
settle = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_SELF)
entries = state.entries()
loaded = sum(e.state in ("loaded", "failed") for e in entries)
files = len(entries)
print(json.dumps({"first_overview_s": first_s, "settle_s": settle, "cpu_s": usage.ru_utime + usage.ru_stime, "settled": not state.loading, "files_done": loaded, "files": files,
                  "latency_s": slowest, "asked": asked, "threads": threads, "fds": fds, "answers": answers,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
state.stop()
os._exit(0)
"""

_WRITE_CHILD = r"""
import json, os, shutil, sys, time
sys.path.insert(0, sys.argv[1])
folder, m = sys.argv[2], int(sys.argv[3])
import numpy as np
from tb_profiler import cache
try:
    from tb_profiler.cache_folder import entry_name
except ImportError:  # a tree from before cache_folder.py (the "before" figures)
    from tb_profiler.cache import entry_name
os.makedirs(folder, exist_ok=True)
key = cache.CacheKey("/bench/seed.json", 1, 1, "bench", 1)
seed = os.path.join(folder, entry_name("/bench/seed.json"))
arrays = {"a": np.arange(2000, dtype=np.int64)}
assert cache.write_entry(seed, key, arrays, ["s"], b"", {})
for i in range(m):  # copies of one entry under their own names: what listing and headers cost
    shutil.copyfile(seed, os.path.join(folder, entry_name(f"/bench/{i}.json")))
times = []
for i in range(5):
    src = f"/bench/new{i}.json"
    k = cache.CacheKey(src, 1, 1, "bench", 1)
    a = time.perf_counter()
    assert cache.write_entry(os.path.join(folder, entry_name(src)), k, arrays, ["s"], b"", {})
    times.append(time.perf_counter() - a)
print(json.dumps({"entries": m, "first_write_s": times[0], "later_write_s": sorted(times[1:])[len(times[1:]) // 2]}))
"""


def tiny_text() -> bytes:
    return gzip.decompress(TINY.read_bytes())


def build(case: str, n: int) -> Path:
    """The logdir of a case (kept for the next run): n tiny traces, each with its own
    timestamps (the first event's ts shifted), plus the good run."""
    logdir = OUT / f"{case}-{n}"
    done = logdir / ".complete"
    if done.exists():
        return logdir
    shutil.rmtree(logdir, ignore_errors=True)
    text = tiny_text().decode()
    marker = '"ts": '
    at = text.index(marker) + len(marker)
    (logdir / "good").mkdir(parents=True)
    shutil.copy(GOOD, logdir / "good" / GOOD.name)
    for i in range(n):
        body = (text[:at] + str(1000 + i) + "0" + text[at:]).encode()  # a distinct first ts per file
        if case == "spans":
            path = logdir / "long_job" / f"w.{1700000000000 + i * 60000}.pt.trace.json"
        else:
            path = logdir / f"run-{i:05d}" / "w.pt.trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    done.write_text("")
    return logdir


def run_child(script: str, args: list[str], timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=timeout + 120)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


DEFAULT_ASK = "trace,operation,runs,status"  # the routes a page asks for while a logdir loads


def server_case(case: str, n: int, code: str, timeout: float, routes: str) -> dict:
    logdir = build(case, n)
    cache_dir = tempfile.mkdtemp(prefix="tbp-many-cache-")
    try:
        t0 = time.perf_counter()
        doc = run_child(_SERVER_CHILD, [code, str(logdir), cache_dir, str(timeout), routes], timeout)
        doc["process_s"] = time.perf_counter() - t0
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    doc.update(case=case, n=n, per_file_ms=1000 * doc["settle_s"] / max(n, 1),
               cpu_per_file_ms=1000 * doc["cpu_s"] / max(n, 1))
    return doc


def write_case(m: int, code: str) -> dict:
    folder = tempfile.mkdtemp(prefix="tbp-many-write-")
    try:
        return dict(run_child(_WRITE_CHILD, [code, folder, str(m)], 600), case="writes")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()] if text else []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spans", default="500,2000", help="sizes of the one-worker run (comma-separated)")
    ap.add_argument("--runs", default="2500,10000", help="numbers of one-file runs (comma-separated)")
    ap.add_argument("--writes", default="0,1000,10000", help="entries already in the cache for one write")
    ap.add_argument("--code", default=str(ROOT), help="folder holding the tb_profiler package to measure")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a server case may take to settle")
    ap.add_argument("--ask", default=DEFAULT_ASK,
                    help="routes asked every 0.5 s while loading (of trace,operation,runs,status); the page polls "
                         "runs and status while loading")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    results = {"writes": [write_case(m, args.code) for m in sizes(args.writes)], "spans": [], "runs": []}
    for case in ("spans", "runs"):
        for n in sizes(getattr(args, case)):
            results[case].append(server_case(case, n, args.code, args.timeout, args.ask))
        if results[case]:
            base, cpu_base = results[case][0]["per_file_ms"], results[case][0]["cpu_per_file_ms"]
            for r in results[case]:
                r["per_file_vs_baseline"] = r["per_file_ms"] / base if base else None
                r["cpu_vs_baseline"] = r["cpu_per_file_ms"] / cpu_base if cpu_base else None
    if args.json:
        print(json.dumps({"code": args.code, "cpus": os.cpu_count(), **results}, indent=2))
        return 0
    print(f"code: {args.code}   cpus: {os.cpu_count()}")
    if results["writes"]:
        print(f"\n{'cache entries':>14}{'first write':>13}{'next writes':>13}")
        for r in results["writes"]:
            print(f"{r['entries']:>14}{r['first_write_s'] * 1e3:>11.2f}ms{r['later_write_s'] * 1e3:>11.2f}ms")
    for case in ("spans", "runs"):
        if not results[case]:
            continue
        what = "spans of one worker" if case == "spans" else "one-file runs"
        print(f"\n{what}: time until every file is loaded; the good run asked every 0.5 s meanwhile")
        head = (f"{'files':>7}{'settled':>9}{'done':>7}{'settle':>9}{'per file':>10}{'vs base':>9}"
                f"{'cpu/file':>10}{'vs base':>9}"
                f"{'first':>8}{'trace max':>11}{'ops max':>9}{'runs max':>10}{'status max':>12}{'threads':>9}"
                f"{'fds':>7}{'rss MiB':>9}")
        print(head)
        print("-" * len(head))
        for r in results[case]:
            lat = {k: r["latency_s"].get(k, float("nan")) for k in ("trace", "operation", "runs", "status")}
            print(f"{r['n']:>7}{'yes' if r['settled'] else 'NO':>9}{r['files_done']:>7}{r['settle_s']:>8.1f}s"
                  f"{r['per_file_ms']:>8.2f}ms{r['per_file_vs_baseline']:>8.2f}x"
                  f"{r['cpu_per_file_ms']:>8.2f}ms{r['cpu_vs_baseline']:>8.2f}x{r['first_overview_s']:>7.2f}s"
                  f"{lat['trace']:>10.3f}s{lat['operation']:>8.3f}s{lat['runs']:>9.3f}s{lat['status']:>11.3f}s"
                  f"{r['threads']:>9}{r.get('fds', -1):>7}{r['rss_mib']:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
