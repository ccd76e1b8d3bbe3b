#!/usr/bin/env python
"""Decoder speed and memory on a ~100 MB real trace, against the goals in the design.

    python benchmarks/bench_decode.py [--seed TRACE] [--size 100M] [--repeat 5] [--json]

The trace is blown up from a real one (default: the ResNet50/V100 trace in tests/data/) with
benchmarks/make_big_trace.py and kept in ./bench-output/ for the next run.
Measured in one run, on one core:
  (a) tb_profiler.decode.decode from bytes already in memory (a bytearray) -> columns;
  (b) the stdlib route for the same columns: json.loads + a pandas DataFrame;
  (c) peak RSS of (a) in a fresh process, over the file size;
  (d) a .gz of the same trace: read + inflate (python-isal if installed, else zlib) + decode.
  (e) the events array split between all the CPUs the benchmark may use (not pinned), in a
      child process, against one thread in the same child: the parallel decoder's gain;
      and (c) again with that many threads (the helpers' args text and columns live
      apart until merged).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bigtrace import DEFAULT_SEED, OUT_DIR, build_trace  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOALS = {"decode_mb_s": 250.0, "speedup_vs_stdlib": 12.0, "peak_rss_ratio": 2.0}


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def best_of(n: int, setup, run) -> float:
    """Best wall time of run(setup()) over n tries (setup is not timed)."""
    best = float("inf")
    for _ in range(n):
        arg = setup()
        t0 = time.perf_counter()
        run(arg)
        best = min(best, time.perf_counter() - t0)
        del arg
    return best


def bench_ours(data: bytes, repeat: int) -> dict:
    from tb_profiler.decode import decode

    t = best_of(repeat, lambda: bytearray(data), decode)
    decoded = decode(bytearray(data))
    return {"seconds": t, "mb_s": len(data) / 1e6 / t, "events": len(decoded), "strings": len(decoded.strings)}


def stdlib_route(data: bytes):
    """What one would write without this package: json.loads, then a DataFrame with the
    decoder's dense columns (ts/dur in ns) and the sparse args fields flattened."""
    import pandas as pd

    from tb_profiler.decode import schema

    doc = json.loads(data)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    arg_keys = {**schema.ARG_INT, **schema.ARG_FLOAT, **schema.ARG_DIM3, **schema.ARG_TEXT, **schema.ARG_JSON}
    rows = []
    for e in events:
        args = e.get("args")
        row = {"ph": e.get("ph"), "cat": e.get("cat"), "name": e.get("name"), "pid": e.get("pid"),
               "tid": e.get("tid"), "ts": e.get("ts"), "dur": e.get("dur"), "flow_id": e.get("id"),
               "flow_bp": e.get("bp")}
        if isinstance(args, dict):
            for col, key in arg_keys.items():
                if key in args:
                    row[col] = args[key]
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("ts", "dur"):
        df[col] = (pd.to_numeric(df[col], errors="coerce") * 1000).round().astype("Int64")
    return df


def bench_stdlib(data: bytes, repeat: int) -> dict:
    t = best_of(repeat, lambda: None, lambda _: stdlib_route(data))
    return {"seconds": t, "mb_s": len(data) / 1e6 / t}


_RSS_CHILD = r"""
import os, resource, sys
sys.path.insert(0, sys.argv[2])
import numpy, pandas
from tb_profiler.decode import decode
import tb_profiler._native


def peak_rss():
    # VmHWM can be reset (below); ru_maxrss cannot, and it even carries over from the
    # parent across fork/exec, so it is only the fallback.
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return peak_rss()


try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak to the current RSS
except OSError:
    pass
base = max(current_rss(), peak_rss())
path = sys.argv[1]
size = os.path.getsize(path)
buf = bytearray(size)
with open(path, "rb", buffering=0) as f:
    assert f.readinto(buf) == size
d = decode(buf, path)
print(base, peak_rss(), len(d))
"""


def bench_rss(path: Path, threads: int = 1) -> dict:
    env = dict(os.environ, TB_PROFILER_DECODE_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(path), str(ROOT)], check=True,
                         capture_output=True, text=True, env=env).stdout.split()
    base, peak = int(out[0]), int(out[1])
    size = path.stat().st_size
    return {"baseline_bytes": base, "peak_bytes": peak, "file_bytes": size, "ratio": (peak - base) / size}


def inflater():
    try:
        from isal import igzip

        return "isal", igzip.decompress
    except ImportError:
        import zlib

        return "zlib", lambda raw: zlib.decompress(raw, wbits=31)


def bench_gz(gz: Path, json_bytes: int, repeat: int) -> dict:
    from tb_profiler.decode import decode

    codec, inflate = inflater()

    def run(_):
        with open(gz, "rb") as f:
            raw = f.read()
        decode(bytearray(inflate(raw)), str(gz))

    t = best_of(repeat, lambda: None, run)
    raw = gz.read_bytes()
    t_inflate = best_of(repeat, lambda: None, lambda _: inflate(raw))
    return {"codec": codec, "seconds": t, "mb_s": json_bytes / 1e6 / t, "inflate_mb_s": json_bytes / 1e6 / t_inflate,
            "gz_bytes": len(raw)}


_THREADS_CHILD = r"""
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from tb_profiler.decode import decode
data, repeat, cpus = open(sys.argv[1], "rb").read(), int(sys.argv[3]), json.loads(sys.argv[4])
data = np.frombuffer(data, np.uint8)  # the buffer tb_profiler.load's reader gives: numpy (huge pages)
os.sched_setaffinity(0, cpus)
best = {}
for _ in range(repeat):  # alternated, so both see the same machine
    for threads in (1, len(cpus)):
        buf = data.copy()
        t0 = time.perf_counter()
        decode(buf, threads=threads)
        best[threads] = min(best.get(threads, 1e9), time.perf_counter() - t0)
print(json.dumps({"threads": len(cpus), "one_s": best[1], "all_s": best[len(cpus)]}))
"""


def bench_threads(path: Path, cpus: list[int], repeat: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _THREADS_CHILD, str(path), str(ROOT), str(repeat), json.dumps(cpus)],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    size = path.stat().st_size
    return {**r, "one_mb_s": size / 1e6 / r["one_s"], "all_mb_s": size / 1e6 / r["all_s"],
            "speedup": r["one_s"] / r["all_s"]}


def pin_one_core(cpu: int | None) -> int | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {cpu})
    return cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=Path, default=DEFAULT_SEED, help="real trace to blow up (.json or .json.gz)")
    ap.add_argument("--size", default="100M", help="uncompressed size of the test trace (default 100M)")
    ap.add_argument("--synth-gpu", action="store_true", help="add synthetic GPU kernels/runtime/flows")
    ap.add_argument("--repeat", type=int, default=5, help="tries per measurement of our decoder (best is kept)")
    ap.add_argument("--stdlib-repeat", type=int, default=1, help="tries of the (slow) stdlib route")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ap.add_argument("--cpu", type=int, default=None, help="core to pin to (default: the last one)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

    path, gz = build_trace(args.seed, args.size, args.out_dir, args.synth_gpu)
    all_cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cpu = pin_one_core(args.cpu)
    rss = bench_rss(path)  # first, while this process is small (a child inherits its peak RSS)
    data = path.read_bytes()
    ours = bench_ours(data, args.repeat)
    stdlib = bench_stdlib(data, args.stdlib_repeat)
    gzr = bench_gz(gz, len(data), max(1, args.repeat // 2))
    threads = bench_threads(path, all_cpus, args.repeat) if len(all_cpus) > 1 else None
    if threads:
        threads["peak_rss"] = bench_rss(path, len(all_cpus))
    result = {
        "trace": str(path), "bytes": len(data), "events": ours["events"], "cpu": cpu,
        "decode": ours, "stdlib": stdlib, "speedup_vs_stdlib": ours["mb_s"] / stdlib["mb_s"],
        "peak_rss": rss, "gz": gzr, "threads": threads, "goals": GOALS,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0

    def row(label, value, goal="", ok=None):
        mark = "" if ok is None else ("ok" if ok else "MISSED")
        print(f"  {label:<44} {value:>14}  {goal:>10}  {mark}")

    print(f"trace: {path.name}  {len(data) / 1e6:.1f} MB, {ours['events']:,} events, "
          f"{ours['strings']:,} strings; pinned to cpu {cpu}")
    print(f"  {'measure':<44} {'value':>14}  {'goal':>10}")
    row("(a) decode, bytes in memory -> columns", f"{ours['mb_s']:.0f} MB/s", ">= 250",
        ours["mb_s"] >= GOALS["decode_mb_s"])
    row("(b) json.loads + pandas DataFrame", f"{stdlib['mb_s']:.1f} MB/s")
    row("    speed-up (a)/(b)", f"{result['speedup_vs_stdlib']:.1f}x", ">= 12x",
        result["speedup_vs_stdlib"] >= GOALS["speedup_vs_stdlib"])
    row("(c) peak RSS over file size (fresh process)", f"{rss['ratio']:.2f}x", "<= 2x",
        rss["ratio"] <= GOALS["peak_rss_ratio"])
    row(f"(d) .gz read + inflate ({gzr['codec']}) + decode", f"{gzr['mb_s']:.0f} MB/s")
    row("    inflate alone", f"{gzr['inflate_mb_s']:.0f} MB/s")
    if threads:
        row(f"(e) decode, {threads['threads']} threads (one: {threads['one_mb_s']:.0f} MB/s)",
            f"{threads['all_mb_s']:.0f} MB/s")
        row("    speed-up over one thread, same run", f"{threads['speedup']:.2f}x")
        row(f"    peak RSS over file size, {threads['threads']} threads", f"{threads['peak_rss']['ratio']:.2f}x",
            "<= 2x", threads["peak_rss"]["ratio"] <= GOALS["peak_rss_ratio"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
