#!/usr/bin/env python
"""Hostile inputs: how long each takes to be answered, and the peak memory it costs.

    python benchmarks/bench_hostile.py [--code DIR] [--timeout 60] [--big] [--only NAME] [--json]

Each case runs in a new child process (so a hang is killed at --timeout and the peak
RSS is the child's own, from wait4), against the tb_profiler package found in --code
(default: this checkout; point it at an export of an older commit, e.g.
``git archive HEAD~5 tb_profiler | tar -x -C /tmp/old`` plus the built _native .so,
to get the "before" figures).  Inputs are written once to ./bench-output/hostile/.

Cases:
  multimember-zlib / -isal  a valid two-member gzip (2 MiB + 2 bytes of text), + zero padding
  bomb-2g                   2 MB of gzip inflating to 2 GiB of whitespace
  bomb-10g (--big)          10 MB inflating to 10 GiB of whitespace (before: ~13.5 GiB RSS)
  bomb-json-2g              '{"traceEvents": [' then 2 GiB of whitespace, limit 512 MiB
  bad-ts                    ts null / text / object / 1e400 / 2**63 among memory records:
                            overview + memory curve
  fifo                      load() of a FIFO (no writer)
  names                     discovery of rank-0.json.gz, rank-1.json.gz (+ non-traces)
  scan                      discover() of 256 rank-N.json.gz of 2 MB text each + 256 other
                            JSON files, twice (the second scan reads no file: sniff results
                            are kept per (path, size, mtime))
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-output" / "hostile"

_CHILD = r"""
import json, os, sys, time, zlib
sys.path.insert(0, sys.argv[1])
case, path = sys.argv[2], sys.argv[3]
from tb_profiler.io import read
import tb_profiler
if case.endswith("-zlib"):   # pick the inflater: the new module attribute, or the old one
    if hasattr(read, "INFLATERS"):
        read.inflater = read.INFLATERS["zlib"]
    else:
        read._zlib = zlib
t0 = time.perf_counter()
out = {}
try:
    if case == "names":
        run = tb_profiler.load_run(path, cache=False)
        out["workers"] = run.workers
        out["ranks"] = len(run.distributed()["ranks"])
    elif case == "scan":
        from tb_profiler.io.discovery import discover
        for key in ("first_scan_s", "next_scan_s"):
            t = time.perf_counter()
            found = discover(path)
            out[key] = round(time.perf_counter() - t, 4)
        out["workers"] = sum(len(r.workers) for r in found.runs)
        out["skipped"] = len(found.skipped)
    else:
        trace = tb_profiler.load(path, cache=False)
        out["events"] = len(trace.events)
        out["span"] = list(trace.span)
        if case == "bad-ts":
            ov = trace.overview()
            out["notes"] = [n for n in ov["notes"] if "dropped" in n]
            out["curve_points"] = sum(len(c) for c in trace.memory()["curves"].values())
    out["result"] = "ok"
except BaseException as e:
    out["result"] = f"{type(e).__name__}: {str(e)[:300]}"
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def _write_gz_stream(path: Path, parts) -> None:
    """A gzip file from (bytes, repeat) parts, compressed as a stream (never all in memory)."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for chunk, repeat in parts:
            for _ in range(repeat):
                f.write(c.compress(chunk))
        f.write(c.flush())


def _trace(events: list) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


def _step() -> dict:
    return {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 1000, "dur": 900}


def _mem(ts, total) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "cat": "cpu_instant_event", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Addr": 1, "Bytes": 64, "Total Allocated": total, "Total Reserved": 4096,
                     "Device Type": 0, "Device Id": -1}}


def make_inputs(big: bool) -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    mm = OUT / "multimember.json.gz"
    if not mm.exists():
        ops = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1000 + i, "dur": 1}
               for i in range(20000)]
        text = _trace(ops)
        mm.write_bytes(gzip.compress(text[:-2]) + gzip.compress(text[-2:]) + b"\0" * 512)
    files["multimember-zlib"] = files["multimember-isal"] = mm
    gib = 1 << 30
    for name, n, head in (("bomb-2g", 2, b""), ("bomb-json-2g", 2, b'{"traceEvents": [')) + (
            (("bomb-10g", 10, b""),) if big else ()):
        p = OUT / f"{name}.json.gz"
        if not p.exists():
            _write_gz_stream(p, [(head, 1), (b" " * (1 << 24), n * gib >> 24)])
        files[name] = p
    bad = OUT / "bad-ts.json"
    events = [_step()] + [_mem(1000 + 10 * i, 64 * i) for i in range(300)]
    events += [_mem(ts, 1) for ts in (None, "1000", {"us": 1})]
    text = _trace(events).replace(b'"ts": "1000"', b'"ts": 1e400')
    bad.write_bytes(text.replace(b'"ts": {"us": 1}', b'"ts": 9223372036854775808'))
    files["bad-ts"] = bad
    fifo = Path(tempfile.mkdtemp(prefix="tbp-fifo-")) / "fifo.json"  # not in the tree: `grep -r` would block on it
    os.mkfifo(fifo)
    files["fifo"] = fifo
    names = OUT / "names"
    names.mkdir(exist_ok=True)
    for rank in (0, 1):
        doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
               "traceEvents": [_step()]}
        (names / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    (names / "config.json").write_text('{"lr": 0.1}')
    files["names"] = names
    files["scan"] = _scan_folder()
    return files


def _scan_folder() -> Path:
    scan = OUT / "scan"
    if scan.exists():
        return scan
    scan.mkdir()
    ops = [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1000 + i, "dur": 1}
           for i in range(20000)]
    for rank in range(256):
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 256}, "traceEvents": ops}
        (scan / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
        (scan / f"metrics-{rank}.json").write_text(json.dumps({"loss": [1.0] * 1000}))
    return scan


def run_case(code: str, case: str, path: Path, timeout: float) -> dict:
    """The child's JSON answer plus its wall time and peak RSS (killed at timeout)."""
    env = dict(os.environ)
    if case == "bomb-json-2g":
        env["TB_PROFILER_MAX_TRACE_BYTES"] = str(512 << 20)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, code, case, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir())
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    hung = not timer.is_alive() and time.perf_counter() - t0 >= timeout
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    doc = {"case": case, "wall_s": round(wall, 3), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}
    if hung:
        doc["result"] = f"killed after {timeout:.0f} s (hang)"
    elif proc.returncode < 0:
        doc["result"] = f"crashed (signal {-proc.returncode})"
    else:
        try:
            doc.update(json.loads(out))
        except ValueError:
            doc["result"] = f"exit {proc.returncode}, no answer"
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", default=str(ROOT), help="folder holding the tb_profiler package to measure")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--big", action="store_true", help="also the 10 GiB bomb")
    ap.add_argument("--only", action="append", help="run only these cases")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    files = make_inputs(args.big)
    results = []
    for case, path in files.items():
        if args.only and case not in args.only:
            continue
        doc = run_case(args.code, case, path, args.timeout)
        results.append(doc)
        if not args.json:
            extra = {k: v for k, v in doc.items() if k not in ("case", "wall_s", "peak_rss_mib", "result", "seconds")}
            print(f"{case:18} {doc['wall_s']:8.3f} s  peak RSS {doc['peak_rss_mib']:8.1f} MiB  {doc['result']}"
                  + (f"  {extra}" if extra else ""), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
