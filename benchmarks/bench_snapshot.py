#!/usr/bin/env python
"""Memory-snapshot benchmark (issue 20): a big allocator snapshot to a first picture.

    python benchmarks/bench_snapshot.py [--size 2G] [--frames torch] [--devices 2] [--json]

The snapshot is written by benchmarks/make_snapshot.py (kept in ./bench-output/ for the
next run). Each figure is a child process (the file in the OS page cache: a warm disk):
  cold:      an empty cache folder: tb_profiler.load_snapshot + summary() +
             timeline(max_points=2000) (what a user's first open of the file costs);
  warm:      the same with the cache entry the cold run wrote;
  baseline:  what torch offers: pickle.load of the file + torch.cuda._memory_viz.segsum.
             pickle.load holds a Python object per entry (about 10x the file); when that
             would not fit in the memory available, the baseline runs on a smaller snapshot
             made the same way and is said so (its figures are per that file's bytes).
Peak RSS is the child's own VmHWM (/proc/self/status), not wait4's ru_maxrss, which
carries the parent's. Goals: cold <= 5 s, warm <= 1 s, peak RSS <= 1.5x the file.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
OUT_DIR = Path("bench-output")
GOALS = {"cold_s": 5.0, "warm_s": 1.0, "rss_per_file": 1.5}
PICKLE_BLOWUP = 12      # bytes of Python objects per byte of snapshot pickle, for the memory check

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
mode, path, cache_dir, root = sys.argv[1:5]
sys.path.insert(0, root)
out = {}
if mode == "ours":
    import tb_profiler
    t1 = time.perf_counter()
    snap = tb_profiler.load_snapshot(path, cache=True, cache_dir=cache_dir)
    t2 = time.perf_counter()
    s = snap.summary()
    tl = snap.timeline(max_points=2000)
    t3 = time.perf_counter()
    out.update(load_s=t2 - t1, picture_s=t3 - t2, history_entries=int(s["history_entries"]),
               segments=int(s["segments"]), points=len(tl["points"]))
else:
    import pickle
    from torch.cuda import _memory_viz
    t1 = time.perf_counter()
    with open(path, "rb") as f:
        data = pickle.load(f)
    t2 = time.perf_counter()
    _memory_viz.segsum(data)
    t3 = time.perf_counter()
    out.update(load_s=t2 - t1, picture_s=t3 - t2,
               history_entries=sum(len(d) for d in data["device_traces"]), segments=len(data["segments"]))
out["open_s"] = t3 - t1
out["import_s"] = t1 - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
out["peak_rss_bytes"] = int(hwm.split()[1]) * 1024
print("RESULT " + json.dumps(out))
"""


def require_model() -> None:
    """The model (tb_profiler.load_snapshot) must be there: say so clearly otherwise."""
    sys.path.insert(0, str(ROOT))
    try:
        import tb_profiler
        getattr(tb_profiler, "load_snapshot")
    except (ImportError, AttributeError) as e:
        sys.exit(f"bench_snapshot: tb_profiler.load_snapshot is not available ({e}); "
                 "the snapshot model (issue 20) has to land before this benchmark can run")


def make(size: str, frames: str, devices: int) -> Path:
    """The snapshot file for these settings, written once into bench-output/."""
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"snapshot_{size}_{frames}_{devices}dev.pickle"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        subprocess.run([sys.executable, str(HERE / "make_snapshot.py"), str(tmp), "--size", size,
                        "--frames", frames, "--devices", str(devices)], check=True)
        tmp.rename(path)
    return path


def child(mode: str, path: Path, cache_dir: str) -> dict:
    """One measured child process; its wall time includes the interpreter and imports."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path), cache_dir, str(ROOT)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    wall = time.perf_counter() - t
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        sys.exit(f"bench_snapshot: the {mode} child failed on {path}:\n{r.stderr[-3000:]}")
    res = json.loads(line[-1][7:])
    res["process_s"] = wall
    return res


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def mem_available() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def run(size: str, frames: str, devices: int, baseline_size: str) -> dict:
    path = make(size, frames, devices)
    file_bytes = path.stat().st_size
    warm_page_cache(path)
    cache = tempfile.mkdtemp(prefix="bench_snapshot_cache_")
    try:
        cold = child("ours", path, cache)
        warm = child("ours", path, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    base_path, note = path, "baseline on the same file"
    if file_bytes * PICKLE_BLOWUP > mem_available():
        base_path = make(baseline_size, frames, devices)
        note = (f"pickle.load of {file_bytes / 1e9:.2f} GB would not fit in "
                f"{mem_available() / 1e9:.1f} GB available: baseline on {base_path.name}")
    warm_page_cache(base_path)
    base = child("baseline", base_path, "")
    base_bytes = base_path.stat().st_size
    scale = file_bytes / base_bytes
    return {
        "file": str(path), "file_bytes": file_bytes, "history_entries": cold["history_entries"],
        "segments": cold["segments"], "cold": cold, "warm": warm, "baseline": base,
        "baseline_file_bytes": base_bytes, "baseline_note": note,
        "cold_s": cold["open_s"], "warm_s": warm["open_s"],
        "rss_per_file": cold["peak_rss_bytes"] / file_bytes,
        "warm_rss_per_file": warm["peak_rss_bytes"] / file_bytes,
        "baseline_open_s_per_file": base["open_s"] * scale,
        "baseline_rss_per_file": base["peak_rss_bytes"] / base_bytes,
        "cold_vs_baseline": base["open_s"] * scale / cold["open_s"],
        "warm_vs_baseline": base["open_s"] * scale / warm["open_s"],
        "rss_vs_baseline": (base["peak_rss_bytes"] / base_bytes) / (cold["peak_rss_bytes"] / file_bytes),
    }


def report(r: dict) -> str:
    mb = 1 << 20
    lines = [f"{r['file']}: {r['file_bytes'] / 1e6:,.0f} MB, {r['history_entries']:,} history entries, "
             f"{r['segments']:,} segments"]
    for k in ("cold", "warm"):
        x = r[k]
        lines.append(f"  {k:5}: open to first picture {x['open_s']:.2f} s (load {x['load_s']:.2f} + summary/"
                     f"timeline {x['picture_s']:.2f}; process {x['process_s']:.2f} s), peak RSS "
                     f"{x['peak_rss_bytes'] / mb:,.0f} MiB = {x['peak_rss_bytes'] / r['file_bytes']:.2f}x the file")
    b = r["baseline"]
    lines.append(f"  baseline (pickle.load + segsum; {r['baseline_note']}): {b['open_s']:.2f} s "
                 f"(load {b['load_s']:.2f} + segsum {b['picture_s']:.2f}), peak RSS {b['peak_rss_bytes'] / mb:,.0f} "
                 f"MiB = {r['baseline_rss_per_file']:.2f}x its file")
    lines.append(f"  ratios (baseline / ours; above 1: ours is better): cold {r['cold_vs_baseline']:.2f}, "
                 f"warm {r['warm_vs_baseline']:.2f}, peak RSS per file byte {r['rss_vs_baseline']:.2f}")
    ok = {k: r[k] <= g for k, g in GOALS.items()}
    lines.append("  goals: " + ", ".join(f"{k} {r[k]:.2f} <= {g} {'met' if ok[k] else 'MISSED'}"
                                         for k, g in GOALS.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="2G")
    ap.add_argument("--frames", default="torch", choices=("torch", "shared", "inline"))
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--baseline-size", default="200M", help="the baseline's file when the big one won't fit")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    require_model()
    r = run(a.size, a.frames, a.devices, a.baseline_size)
    print(json.dumps(r, indent=1) if a.json else report(r))


if __name__ == "__main__":
    main()
