#!/usr/bin/env python
"""Hostile inputs: how long each takes to be answered, and the peak memory it costs, beside
a good trace's in the same run.

    python benchmarks/bench_hostile.py [--code DIR] [--timeout 600] [--big] [--many] [--only NAME]
                                       [--cap-gb 12] [--json]

Each case runs in a new child process (so a hang is killed at --timeout and the peak
RSS is the child's own, from wait4; its address space is capped at --cap-gb, so a case
that would take the shared machine fails there instead), against the tb_profiler package
found in --code (default: this checkout; point it at an export of an older commit, e.g.
``git archive HEAD~5 tb_profiler | tar -x -C /tmp/old`` plus the built _native .so, to get
the "before" figures).  Inputs are written once to ./bench-output/hostile/.

Load cases (tb_profiler.load in the child):
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

Server cases (issue 18: "a small file cannot take the machine"): the plugin's
ProfilerState and app over a logdir of a good run (the ResNet50/V100 trace of tests/data)
and the hostile run(s); the hostile run's Operator view (pie and table), Trace view window,
search, an event's details and a range's statistics are asked for (202s followed), while
the good run's Trace view is asked for every 0.5 s (new parameters: computed each time).
Printed: the time until the hostile run's last answer, the child's peak RSS, each answer's
status and size, the error where one is due, and the slowest answer of the good run.
  good                      the good run alone: the figures the others are set beside
  name-500m                 one 500 MB event name, gzipped to ~0.5 MB
  name-50m                  one 50 MB event name (~50 KB of gzip: under the padding rule's 64 MiB)
  names-1m                  1 M distinct operator names (~80 MB of text)
  names-10m (--big)         10 M distinct operator names (~830 MB of text)
  nest-1e6                  10^6 operators, each nested in the one before
  bombs-4                   four runs of one bomb-2g file each (they share one load budget)
  spans-2000, runs-10000    (--many) benchmarks/bench_many_files.py's cases: a run of 2,000
                            span files, a logdir of 10,000 one-file runs (time to settle,
                            peak RSS, the good run's slowest answer meanwhile)
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
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


_SERVER_CHILD = r"""
import json, os, resource, sys, threading, time
sys.path.insert(0, sys.argv[1])
logdir, cache_dir, runs, timeout = sys.argv[2], sys.argv[3], sys.argv[4].split(","), float(sys.argv[5])
from werkzeug.test import Client
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
P = "/data/plugin/pytorch_profiler/"
ROUTES = (("operation", ""), ("operation/table", ""), ("trace", ""), ("trace/search", "&q=a"),
          ("trace/event", "&i=1"), ("trace/range_stats", "&start_ns=0&end_ns=2305843009213693952"))
state = ProfilerState(logdir, cache_dir=cache_dir)
app = ProfilerApp(state, standalone=True)
t0 = time.perf_counter()
state.start()
state.wait_scanned(timeout)
done = threading.Event()
good = {"max_s": 0.0, "asked": 0, "statuses": set()}

def ask(client, route, deadline):
    # one route, its 202s followed: (status, bytes, seconds, error text)
    a = time.perf_counter()
    while True:
        r = client.get(P + route)
        body = r.get_data()
        if r.status_code != 202 or time.perf_counter() > deadline:
            break
        time.sleep(json.loads(body).get("retry_after_ms", 500) / 1000)
    err = None
    if r.status_code >= 400:
        try:
            err = json.loads(body).get("error", "")[:300]
        except ValueError:
            err = body[:300].decode("utf-8", "replace")
    return r.status_code, len(body), time.perf_counter() - a, err

def watch_good():
    client, i = Client(app), 0
    while not done.is_set():
        i += 1
        a = time.perf_counter()
        r = client.get(P + f"trace?run=good&width={600 + i}")
        took = time.perf_counter() - a
        if r.status_code == 200:  # a 202 is an answer too, but the good run loads first
            good["max_s"] = max(good["max_s"], took)
        good["asked"] += 1
        good["statuses"].add(r.status_code)
        done.wait(0.5)

first = ask(Client(app), "overview?run=good", time.perf_counter() + timeout)
watcher = threading.Thread(target=watch_good, daemon=True)
watcher.start()
client, out = Client(app), {}
deadline = t0 + timeout
for run in runs:
    for route, query in ROUTES:
        out[f"{run}:{route}"] = ask(client, f"{route}?run={run}{query}", deadline)
hostile_s = time.perf_counter() - t0
done.set()
watcher.join()
print(json.dumps({"first_good_s": first[2], "hostile_s": hostile_s, "answers": out, "good_max_s": good["max_s"],
                  "good_asked": good["asked"], "good_statuses": sorted(good["statuses"]),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
state.stop()
os._exit(0)
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


GOOD = ROOT / "tests" / "data" / "traces" / "kineto-resnet50-v100" / "resnet50_num_workers_0" / \
    "worker0.1623143089861.pt.trace.json.gz"
_HEAD = b'{"schemaVersion": 1, "traceEvents": [\n'


def _op_text(name: bytes, ts: int, dur: int) -> bytes:
    return (b'{"ph": "X", "cat": "cpu_op", "name": "' + name + b'", "pid": 1, "tid": 1, "ts": '
            + str(ts).encode() + b', "dur": ' + str(dur).encode() + b'}')


def _long_name(path: Path, mib: int) -> None:
    """A step, one operator named by ``mib`` MiB of 'a', and ten small operators after it
    (the issue's "single 500 MB event name" file: it gzips to ~0.1% of its text)."""
    step = json.dumps(_step()).encode()
    small = b"".join(b",\n" + _op_text(b"aten::add", 2000 + i, 1) for i in range(10))
    head = _HEAD + step + b',\n{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1001, "dur": 5, "name": "'
    _write_gz_stream(path, [(head, 1), (b"a" * (1 << 20), mib), (b'"}' + small + b"\n]}", 1)])


def _many_names(path: Path, n: int) -> None:
    """A step around n operators of n distinct names (op_0, op_1, ...), one after another."""
    def parts():
        yield _HEAD + json.dumps({**_step(), "dur": 10 * n + 10_000}).encode(), 1
        for start in range(0, n, 100_000):
            yield b"".join(b",\n" + _op_text(b"op_%d" % i, 2000 + 10 * i, 5)
                           for i in range(start, min(n, start + 100_000))), 1
        yield b"\n]}", 1
    _write_gz_stream(path, parts())


def _nested(path: Path, n: int) -> None:
    """n operators on one thread, each inside the one before (depth n)."""
    def parts():
        yield _HEAD + json.dumps({**_step(), "ts": 0, "dur": 4 * n + 10}).encode(), 1
        for start in range(0, n, 100_000):
            yield b"".join(b",\n" + _op_text(b"aten::op%d" % (i % 7), 1 + i, 4 * n - 2 * i)
                           for i in range(start, min(n, start + 100_000))), 1
        yield b"\n]}", 1
    _write_gz_stream(path, parts())


SERVER_CASES = {  # case -> (hostile runs: {run: file maker}, big only)
    "good": ({}, False),
    "name-500m": ({"hostile": lambda p: _long_name(p, 500)}, False),
    "name-50m": ({"hostile": lambda p: _long_name(p, 50)}, False),
    "names-1m": ({"hostile": lambda p: _many_names(p, 1_000_000)}, False),
    "names-10m": ({"hostile": lambda p: _many_names(p, 10_000_000)}, True),
    "nest-1e6": ({"hostile": lambda p: _nested(p, 1_000_000)}, False),
    "bombs-4": ({f"bomb-{k}": lambda p: _write_gz_stream(p, [(_HEAD, 1), (b" " * (1 << 24), 128)])
                 for k in range(4)}, False),
}


def server_logdir(case: str) -> tuple[Path, list[str]]:
    """The case's logdir (kept for the next run): good/ and one folder per hostile run."""
    makers, _ = SERVER_CASES[case]
    logdir = OUT / "server" / case
    done = logdir / ".complete"
    if not done.exists():
        (logdir / "good").mkdir(parents=True, exist_ok=True)
        shutil.copy(GOOD, logdir / "good" / GOOD.name)  # a link out of the logdir is not followed
        for run, make in makers.items():
            (logdir / run).mkdir(exist_ok=True)
            make(logdir / run / "w.pt.trace.json.gz")
        done.write_text("")
    return logdir, list(makers) or ["good"]


def _limits(cap_gb: float):
    """The child's address space capped at cap_gb (a case that would take the shared machine
    fails with MemoryError instead)."""
    def apply() -> None:
        import resource

        if cap_gb > 0:
            cap = int(cap_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return apply


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[bytes, int, float, bool, float]:
    """(stdout, exit code, wall s, hung, peak RSS MiB) of a child, killed at timeout."""
    t0 = time.perf_counter()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - t0
    hung = not timer.is_alive() and wall >= timeout
    return out, os.waitstatus_to_exitcode(status), wall, hung, usage.ru_maxrss / 1024


def _outcome(doc: dict, out: bytes, code: int, hung: bool, timeout: float) -> dict:
    if hung:
        doc["result"] = f"killed after {timeout:.0f} s (hang)"
    elif code < 0:
        doc["result"] = f"crashed (signal {-code})"
    else:
        try:
            doc.update(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            doc["result"] = f"exit {code}, no answer"
    return doc


def run_case(code: str, case: str, path: Path, timeout: float, cap_gb: float = 0) -> dict:
    """The child's JSON answer plus its wall time and peak RSS (killed at timeout)."""
    env = dict(os.environ)
    if case == "bomb-json-2g":
        env["TB_PROFILER_MAX_TRACE_BYTES"] = str(512 << 20)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, code, case, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir(),
                            preexec_fn=_limits(cap_gb))
    out, rc, wall, hung, rss = _wait(proc, timeout)
    return _outcome({"case": case, "wall_s": round(wall, 3), "peak_rss_mib": round(rss, 1)}, out, rc, hung, timeout)


def server_case(code: str, case: str, timeout: float, cap_gb: float) -> dict:
    """A server case in a child (fresh cache folder and load ledger: nothing shared with
    another case)."""
    logdir, runs = server_logdir(case)
    scratch = Path(tempfile.mkdtemp(prefix="tbp-hostile-"))
    env = dict(os.environ, TB_PROFILER_LOAD_LEDGER=str(scratch / "loads.ledger"))
    try:
        proc = subprocess.Popen([sys.executable, "-c", _SERVER_CHILD, code, str(logdir), str(scratch / "cache"),
                                 ",".join(runs), str(timeout)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, cwd=tempfile.gettempdir(), preexec_fn=_limits(cap_gb))
        out, rc, wall, hung, rss = _wait(proc, timeout + 60)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    doc = _outcome({"case": case, "wall_s": round(wall, 3), "peak_rss_mib": round(rss, 1)}, out, rc, hung, timeout)
    if "answers" in doc:
        answers = doc["answers"]
        worst = max(answers.values(), key=lambda a: a[1])
        errors = sorted({a[3] for a in answers.values() if a[3]})
        doc["result"] = (f"statuses {sorted({a[0] for a in answers.values()})}, largest answer {worst[1]:,} B, "
                         f"slowest {max(a[2] for a in answers.values()):.2f} s"
                         + (f"; error: {errors[0][:200]}" if errors else ""))
    return doc


def many_case(code: str, case: str, timeout: float) -> dict:
    """spans-2000 / runs-10000 through benchmarks/bench_many_files.py (its logdirs and child)."""
    import bench_many_files  # benchmarks/, the script's folder

    kind, n = case.split("-")
    r = bench_many_files.server_case(kind, int(n), code, timeout, bench_many_files.DEFAULT_ASK)
    return {"case": case, "wall_s": round(r["settle_s"], 3), "peak_rss_mib": round(r["rss_mib"], 1),
            "good_max_s": max(r["latency_s"].values()),
            "result": f"{r['files_done']}/{r['files']} files settled" + ("" if r["settled"] else " (NOT settled)")}


def _print(doc: dict, good: dict | None) -> None:
    rel = ""
    if good and good.get("peak_rss_mib") and doc is not good:
        rel = (f"  ({doc['peak_rss_mib'] / good['peak_rss_mib']:.1f}x the good RSS, "
               f"{doc['wall_s'] / max(good['wall_s'], 1e-9):.1f}x its time)")
    extra = f"  good run's slowest answer {doc['good_max_s']:.2f} s" if "good_max_s" in doc else ""
    print(f"{doc['case']:18} {doc['wall_s']:8.2f} s  peak RSS {doc['peak_rss_mib']:8.1f} MiB{rel}{extra}\n"
          f"{'':18} {doc.get('result', '')}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", default=str(ROOT), help="folder holding the tb_profiler package to measure")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--big", action="store_true", help="also the 10 GiB bomb and 10 M names")
    ap.add_argument("--many", action="store_true", help="also spans-2000 and runs-10000 (bench_many_files)")
    ap.add_argument("--only", action="append", help="run only these cases")
    ap.add_argument("--cap-gb", type=float, default=12.0, help="address space of each child (0: none)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    files = make_inputs(args.big)
    wanted = lambda case: not args.only or case in args.only or case == "good"  # noqa: E731
    results, good = [], None
    for case, (_, big) in SERVER_CASES.items():
        if wanted(case) and (args.big or not big):
            doc = server_case(args.code, case, args.timeout, args.cap_gb)
            good = good or doc
            results.append(doc)
            if not args.json:
                _print(doc, good)
    for case, path in files.items():
        if wanted(case):
            results.append(run_case(args.code, case, path, min(args.timeout, 60.0), args.cap_gb))
            if not args.json:
                _print(results[-1], good)
    for case in ("spans-2000", "runs-10000") if args.many else ():
        if wanted(case):
            results.append(many_case(args.code, case, args.timeout))
            if not args.json:
                _print(results[-1], good)
    # Linux carries a parent's high-water RSS over fork and exec into the child's ru_maxrss:
    # every figure above is at least this script's own peak (a floor, not the child's cost).
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps({"results": results, "rss_floor_mib": round(floor, 1)}, indent=2))
    else:
        print(f"(peak RSS figures include this script's own peak, {floor:.0f} MiB, which wait4 carries into each child)")


if __name__ == "__main__":
    main()
