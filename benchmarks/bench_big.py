#!/usr/bin/env python
"""Big traces (issue 10): cold load, reopen, first Overview through the server, Trace-view
windows, cache size and memory, on traces of 1, 4 and 10 GB blown up from a real one;
every figure against the decoder alone and against a baseline checkout in the same run.

    python benchmarks/bench_big.py [--sizes 1G,4G,10G] [--base /tmp/tbp-base] [--base-max 1G]
                                   [--small 100M] [--windows 200] [--json out.json]

--base: a checkout of the code to compare with, its extension built in place, e.g.
    mkdir /tmp/tbp-base && git archive f23394c | tar -x -C /tmp/tbp-base
    (cd /tmp/tbp-base && TB_PROFILER_SKIP_FRONTEND=1 python setup.py -q build_ext --inplace)
--base-max: the biggest size the baseline is run on (it copies the text into memory and
    keeps the args resident: 10 GB does not fit this machine's 24 GiB).

Each measurement runs in a new process (its own peak RSS), with a fresh cache folder for a
cold load; the trace file is in the OS page cache (read once before) in every case.
Figures: seconds, peak RSS (GiB and x the file), the cache entry (x the file).  The goals
are printed beside them; nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bigtrace import OUT_DIR, build_trace  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
GiB = 1 << 30

# One child per measurement: argv = mode, trace, cache dir, extra.  Prints one JSON line.
_CHILD = r"""
import json, os, resource, sys, time
mode, path, cache_dir, extra = sys.argv[1:5]
def rss_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {}
if mode == "decode":
    import mmap
    from tb_profiler import decode
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        t = time.perf_counter()
        d = decode.decode(mm, path, keep_input=True)
        out["seconds"] = time.perf_counter() - t
        out["events"] = len(d)
elif mode == "stdlib":
    import pandas as pd
    t = time.perf_counter()
    with open(path, "rb") as f:
        doc = json.load(f)
    df = pd.DataFrame(doc["traceEvents"])
    out["seconds"] = time.perf_counter() - t
    out["events"] = len(df)
elif mode in ("load", "reopen"):
    from tb_profiler.trace import load
    t = time.perf_counter()
    tr = load(path, cache_dir=cache_dir)
    out["seconds"] = time.perf_counter() - t
    int(tr.events["ts"][-1])  # a column read (a reopen checks what it reads)
    out["from_cache"] = tr.from_cache
    out["events"] = len(tr.events)
    entry = tr.cache_path  # waits for a write in the background
    out["until_cached"] = time.perf_counter() - t
    out["entry_bytes"] = os.path.getsize(entry) if entry else 0
    import gc; gc.collect()
    out["rss_after"] = rss_now()
elif mode == "window":
    import random
    from tb_profiler.trace import load
    from tb_profiler.plugin import timeline
    tr = load(path, cache_dir=cache_dir)
    n = int(extra)
    t = time.perf_counter()
    first = timeline.window(tr, None, None, 1600, 5000)
    out["first_whole"] = time.perf_counter() - t
    t = time.perf_counter()
    whole = timeline.window(tr, None, None, 1600, 5000)
    out["whole"] = time.perf_counter() - t
    wire = getattr(timeline, "on_the_wire", lambda r: r)  # what the route sends (a base may have none)
    out["whole_kb"] = len(json.dumps(wire(whole), separators=(",", ":"))) / 1024
    lo, hi = tr.span
    span = hi - lo
    rng = random.Random(1)
    times = []
    for _ in range(n):
        width = span * 10 ** rng.uniform(-5, 0)
        a = rng.uniform(0, span - width)
        t = time.perf_counter()
        timeline.window(tr, int(a), int(a + width), 1600, 5000)
        times.append(time.perf_counter() - t)
    times.sort()
    out["p50"] = times[len(times) // 2]
    out["p99"] = times[min(len(times) - 1, int(0.99 * len(times)))]
out["peak_rss"] = peak()
print(json.dumps(out))
"""


def child(code: Path, mode: str, path: Path, cache_dir: Path, extra: str = "", timeout: float = 1800) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), TB_PROFILER_CACHE_DIR=str(cache_dir))
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path), str(cache_dir), extra],
                             capture_output=True, text=True, env=env, timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        return {"error": f"exit {out.returncode}: {tail[0][:200]}"}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - t0
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_overview(code: Path, trace: Path, work: Path, timeout: float = 900) -> dict:
    """`tb-profiler serve` on a logdir holding only this trace, a fresh cache: seconds from
    the start until the Overview answers 200, and the server's peak RSS (VmHWM)."""
    logdir, cache = work / "logdir", work / "cache-serve"
    shutil.rmtree(logdir, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    (logdir / "run").mkdir(parents=True)
    os.link(trace, logdir / "run" / "worker0.1.pt.trace.json")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(code), TB_PROFILER_CACHE_DIR=str(cache))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    url = (f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/overview?run=run&worker=worker0&span=1")
    out: dict = {"error": f"no Overview within {timeout:.0f} s"}
    peak = 0
    try:
        while time.monotonic() - t0 < timeout:
            peak = max(peak, _hwm(proc.pid))
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    if r.status == 200:
                        out = {"seconds": time.monotonic() - t0}
                        break
            except OSError:
                pass
            time.sleep(0.1)
        _wait_idle(proc.pid)  # the entry and the Trace view's index are built in the background
        out["rss_after"] = _rss(proc.pid)
        out["peak_rss"] = max(peak, _hwm(proc.pid))
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _wait_idle(pid: int, quiet_s: float = 2.0, limit_s: float = 300.0) -> None:
    """Until the process used no CPU for quiet_s (its background work is done)."""
    end = time.monotonic() + limit_s
    last, since = _cpu_seconds(pid), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.5)
        now = _cpu_seconds(pid)
        if now - last > 0.05:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return


def _status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _hwm(pid: int) -> int:
    return _status_kib(pid, "VmHWM:")


def _rss(pid: int) -> int:
    return _status_kib(pid, "VmRSS:")


def warm(path: Path) -> None:
    """Read the file once so every measurement finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 26):
            pass


def size_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def measure(code: Path, label: str, trace: Path, work: Path, windows: int, serve: bool) -> dict:
    cache = work / f"cache-{label}"
    shutil.rmtree(cache, ignore_errors=True)
    r = {"cold": child(code, "load", trace, cache)}
    r["reopen"] = child(code, "reopen", trace, cache)
    r["window"] = child(code, "window", trace, cache, str(windows))
    if serve:
        r["serve"] = first_overview(code, trace, work)
    shutil.rmtree(cache, ignore_errors=True)
    return r


def fmt(v, unit="s") -> str:
    if v is None:
        return "—"
    if unit == "s":
        return f"{v:.2f} s" if v >= 0.1 else f"{v * 1e3:.1f} ms"
    if unit == "GiB":
        return f"{v / GiB:.2f} GiB"
    return f"{v:.2f}{unit}"


def report(size: str, trace: Path, decode: dict, new: dict, base: dict | None) -> list[str]:
    n = trace.stat().st_size
    lines = [f"\n== {size}: {trace.name} ({n / GiB:.2f} GiB), decoder alone {fmt(decode.get('seconds'))}"]

    def row(name, key, sub, unit="s", goal=""):
        a = new.get(key, {}).get(sub) if "error" not in new.get(key, {}) else None
        b = base.get(key, {}).get(sub) if base and "error" not in base.get(key, {}) else None
        ratio = f"  new/base {a / b:.2f}x" if a and b else ""
        err = new.get(key, {}).get("error") or ""
        lines.append(f"  {name:<34} new {fmt(a, unit):>11}   base {fmt(b, unit):>11}{ratio}  {goal} {err}")
        return a

    cold = row("cold load (returns)", "cold", "seconds", goal="goal <= 5 s at 1 GB")
    row("cold load until the entry is written", "cold", "until_cached")
    if cold and decode.get("seconds"):
        lines.append(f"  {'cold load / decoder alone':<34} {cold / decode['seconds']:.2f}x   goal <= 2x")
    row("reopen", "reopen", "seconds", goal="goal <= 0.5 s")
    entry = new.get("cold", {}).get("entry_bytes")
    if entry:
        lines.append(f"  {'cache entry':<34} {entry / GiB:.3f} GiB = {entry / n:.2f}x the trace   goal <= 0.3x")
    if base and base.get("cold", {}).get("entry_bytes"):
        lines.append(f"  {'cache entry (base)':<34} {base['cold']['entry_bytes'] / GiB:.3f} GiB = "
                     f"{base['cold']['entry_bytes'] / n:.2f}x")
    peak = row("peak RSS, cold load", "cold", "peak_rss", "GiB", "goal <= 1.5x the file")
    if peak:
        lines.append(f"  {'':<34} = {peak / n:.2f}x the file")
    steady = row("RSS after the cold load", "cold", "rss_after", "GiB", "goal <= 0.5x the file")
    if steady:
        lines.append(f"  {'':<34} = {steady / n:.2f}x the file")
    row("first whole-trace window (+index)", "window", "first_whole")
    row("whole-trace window", "window", "whole", goal="goal <= 150 ms")
    row("random windows p50", "window", "p50")
    row("random windows p99", "window", "p99", goal="goal <= 100 ms")
    row("whole-trace reply KiB", "window", "whole_kb", "", "goal <= 250 KB")
    if "serve" in new:
        row("serve: first Overview", "serve", "seconds", goal="goal <= 7 s at 1 GB")
        row("serve: peak RSS", "serve", "peak_rss", "GiB")
        served = row("serve: RSS once idle", "serve", "rss_after", "GiB", "goal <= 0.5x the file")
    if served:
        lines.append(f"  {'':<34} = {served / n:.2f}x the file")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1G,4G,10G")
    ap.add_argument("--base", type=Path, help="a checkout of the code to compare with (extension built)")
    ap.add_argument("--base-max", default="1G", help="biggest size the baseline runs on")
    ap.add_argument("--small", default="100M", help="size for the load vs stdlib json bar ('' to skip)")
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--no-serve", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    work = OUT_DIR / "big"
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    lines: list[str] = []
    if args.small:
        trace, _ = build_trace(size=args.small)
        warm(trace)
        stdlib = child(ROOT, "stdlib", trace, work / "none")
        new = child(ROOT, "load", trace, work / "cache-small")
        shutil.rmtree(work / "cache-small", ignore_errors=True)
        base = child(args.base, "load", trace, work / "cache-small") if args.base else {}
        shutil.rmtree(work / "cache-small", ignore_errors=True)
        results["small"] = {"stdlib": stdlib, "new": new, "base": base}
        s, nw, b = stdlib.get("seconds"), new.get("seconds"), base.get("seconds")
        lines.append(f"== {args.small}: stdlib json -> DataFrame {fmt(s)}; load (fresh) new {fmt(nw)}"
                     + (f" = {s / nw:.1f}x stdlib" if s and nw else "")
                     + (f"; base {fmt(b)} = {s / b:.1f}x stdlib" if s and b else "") + "   goal >= 10x")
        print(lines[-1], flush=True)
    for size in [s for s in args.sizes.split(",") if s]:
        trace, _ = build_trace(size=size, gz=False)
        warm(trace)
        decode = child(ROOT, "decode", trace, work / "none")
        new = measure(ROOT, "new", trace, work, args.windows, not args.no_serve)
        base = None
        if args.base and size_bytes(size) <= size_bytes(args.base_max):
            base = measure(args.base, "base", trace, work, args.windows, not args.no_serve)
        results[size] = {"decode": decode, "new": new, "base": base}
        part = report(size, trace, decode, new, base)
        print("\n".join(part), flush=True)
        lines += part
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
