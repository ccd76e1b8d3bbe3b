#!/usr/bin/env python
"""Many users at once: `tb-profiler serve` under 50 concurrent clients for 60 s, every
route, three runs; requests/s, latency p50/p99, errors and the server's RSS over time,
against a baseline checkout served the same way in the same run.

    python benchmarks/bench_load.py [--base /tmp/tbp-base] [--clients 50] [--seconds 60]
                                    [--runs 3] [--procs 2] [--json out.json]

--base: a checkout of the code to compare with, its extension built in place, e.g.
    mkdir /tmp/tbp-base && git archive f23394c | tar -x -C /tmp/tbp-base
    (cd /tmp/tbp-base && TB_PROFILER_SKIP_FRONTEND=1 python setup.py -q build_ext --inplace)
    Without it only this checkout is measured (no ratios).

The logdir (./bench-output/load/logdir, written once) holds the real traces of tests/data
(the V100 ResNet50 runs of 2 spans each, the H100 and 4xV100 traces, the legacy ones) and
the torch samples (samples/make_all.py: two CNN runs, a transformer, a 2-rank gloo DDP
run), so every view has data: distributed and diff routes included.

Each run starts a new server on a fresh cache folder, waits until every run is loaded,
asks every URL once (a URL either server cannot answer with 200 is dropped from both
lists, and named), then the clients ask URLs drawn at random (a fixed seed, the same draws
for both servers): the fixed URLs of every route, and routes whose query changes on every
request (Trace-view windows, trace/event, search, memory ranges, range_stats), which the
response cache cannot answer. Clients are --procs processes of threads, each thread with
a keep-alive connection, asking again as soon as it is answered. An error is a status
other than 200 (a 202 "still computing" counts as one) or a failed connection.
Nothing here is a test; the figures go into the issue's note.
"""
from __future__ import annotations

import argparse
import http.client
import itertools
import json
import multiprocessing as mp
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-output" / "load"
PREFIX = "/data/plugin/pytorch_profiler/"
DATA = ROOT / "tests" / "data" / "traces"


# -- the logdir ----------------------------------------------------------------------------
def build_logdir(logdir: Path) -> Path:
    """tests/data's real traces and the torch samples, one run folder each (written once)."""
    if (logdir / ".complete").exists():
        return logdir
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    for run in (DATA / "kineto-resnet50-v100").iterdir():
        shutil.copytree(run, logdir / f"v100_{run.name}")
    for i, p in enumerate(sorted((DATA / "tiny-h100").glob("*.json.gz"))):
        run = logdir / p.name.split(".")[0]
        run.mkdir()
        shutil.copy(p, run / f"worker0.{1000 + i}.pt.trace.json.gz")
    for p in sorted((DATA / "legacy-formats").rglob("*.json.gz")):
        run = logdir / f"legacy_{p.parent.parent.name}_{p.parent.name}"
        run.mkdir()
        shutil.copy(p, run / p.name)
    subprocess.run([sys.executable, str(ROOT / "samples" / "make_all.py"), str(logdir / "samples")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (logdir / ".complete").write_text("")
    return logdir


# -- the server ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(code: Path, logdir: Path, cache: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(code), TB_PROFILER_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port)],
                            cwd=str(code), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, port


def get(port: int, url: str, timeout: float = 120) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", url)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_loaded(proc: subprocess.Popen, port: int, limit_s: float = 600) -> float:
    """Seconds until `status` says nothing is loading (every run is read)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            status, body = get(port, PREFIX + "status", 10)
            doc = json.loads(body) if status == 200 else {}
            runs = doc.get("runs", [])
            if runs and not doc.get("loading") and all(r.get("state") != "loading" for r in runs):
                return time.monotonic() - t0
        except (OSError, ValueError):
            pass
        time.sleep(0.25)
    raise RuntimeError("the server did not finish loading")


def rss(pid: int) -> int:
    """Resident bytes of the server and its children (summary workers)."""
    total = 0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


# -- the URLs ------------------------------------------------------------------------------
def q(**kw) -> str:
    return urllib.parse.urlencode(kw)


# the per-trace routes and the extra query each is asked with (docs/api.md)
TRACE_ROUTES = [
    ("overview", {}), ("operation", {"group_by": "Operation"}), ("operation", {"group_by": "OperationAndInputShape"}),
    ("operation/table", {"group_by": "Operation"}),
    ("kernel", {}), ("kernel/table", {"group_by": "Kernel"}), ("kernel/tc_pie", {}), ("memory", {}),
    ("memory_curve", {}), ("memory_events", {"limit": 100}), ("module", {}), ("tree", {}), ("trace", {"width": 1500}),
    ("idle", {}), ("launches", {}), ("memcpy", {}), ("queue", {}), ("roofline", {}), ("critical_path", {}),
    ("annotations", {}), ("steps/outliers", {})]
RANKS_ROUTES = ("gpuinfo", "overlap", "waittime", "commops", "ranks", "instances", "stragglers", "matrix")


def fixed_urls(port: int) -> list[str]:
    """Every route with the queries the frontend sends, for every run and worker."""
    runs = json.loads(get(port, PREFIX + "runs")[1])["runs"]
    urls = [PREFIX + "runs", PREFIX + "status", PREFIX + "skipped", "/", PREFIX + "index.html"]
    for run in runs:
        urls += [PREFIX + f"{r}?" + q(run=run) for r in ("views", "workers", "spans")]
        workers = json.loads(get(port, PREFIX + "workers?" + q(run=run))[1])
        for w in workers:
            urls += [PREFIX + f"{route}?" + q(run=run, worker=w, **extra) for route, extra in TRACE_ROUTES]
            ops = json.loads(get(port, PREFIX + "operation?" + q(run=run, worker=w, group_by="Operation"))[1])
            names = [row["name"] for key in ("host_self", "device_self") for row in ops.get(key, [])[:1]]
            urls += [PREFIX + "operation/stack?" + q(run=run, worker=w, op_name=n, group_by="Operation")
                     for n in names[:1]]
        if len(workers) > 1:
            urls += [PREFIX + f"distributed/{r}?" + q(run=run) for r in RANKS_ROUTES]
            urls += [PREFIX + "trace/ranks?" + q(run=run, workers=",".join(workers), width=1500)]
    single = [r for r in runs if len(json.loads(get(port, PREFIX + "workers?" + q(run=r))[1])) == 1]
    for a, b in itertools.pairwise(single):
        urls += [PREFIX + "diff?" + q(run=a, exp_run=b), PREFIX + "diffnode?" + q(run=a, exp_run=b, path="")]
    return urls


def changing_url(rng: random.Random, traces: list[tuple[str, str, int, int]]) -> str:
    """A request the response cache cannot answer: a random window, event, search or range."""
    run, worker, span_ns, events = rng.choice(traces)
    a = rng.randrange(max(1, span_ns))
    b = a + 1 + rng.randrange(max(1, span_ns - a))
    kind = rng.randrange(5)
    sel = {"run": run, "worker": worker}
    if kind == 0:
        return PREFIX + "trace?" + q(**sel, start_ns=a, end_ns=b, width=rng.choice((800, 1500, 2500)))
    if kind == 1:
        return PREFIX + "trace/event?" + q(**sel, i=rng.randrange(max(1, events)))
    if kind == 2:
        return PREFIX + "trace/search?" + q(**sel, q=rng.choice(("aten", "conv", "add", "mm", "Step", "cuda")),
                                              limit=50, offset=rng.randrange(50))
    if kind == 3:
        return PREFIX + "memory_curve?" + q(**sel, start_ns=a, end_ns=b, max_points=rng.choice((200, 1000)))
    return PREFIX + "trace/range_stats?" + q(**sel, start_ns=a, end_ns=b)


def trace_sizes(port: int, urls: list[str]) -> list[tuple[str, str, int, int]]:
    """(run, worker, the trace's length in ns, its events drawn) of every trace whose
    whole-trace window is asked for."""
    out = []
    for u in urls:
        if "/trace?" not in u:
            continue
        sel = dict(urllib.parse.parse_qsl(u.partition("?")[2]))
        status, body = get(port, u)
        if status == 200:
            w = json.loads(body)
            out.append((sel["run"], sel["worker"], max(1, int(w["span"]["end_ns"])), int(w["counts"]["in_window"])))
    return out


def answered(port: int, urls: list[str]) -> tuple[list[str], list[str]]:
    """URLs answered 200 (after the 202s of first computations), and the others."""
    ok, bad = [], []
    for u in urls:
        for _ in range(240):
            status, _body = get(port, u)
            if status != 202:
                break
            time.sleep(0.5)
        (ok if status == 200 else bad).append(u)
    return ok, bad


# -- the clients ---------------------------------------------------------------------------
def client_proc(port: int, threads: int, seconds: float, seed: int, fixed: list[str],
                runs: list[tuple[str, str, int, int]], share: float, queue) -> None:
    results: list[tuple[float, float, int, str]] = []  # (start, latency, status, url if not 200)
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def loop(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine = []
        while time.monotonic() < end:
            url = changing_url(rng, runs) if runs and rng.random() < share else rng.choice(fixed)
            t = time.monotonic()
            try:
                conn.request("GET", url)
                r = conn.getresponse()
                r.read()
                status = r.status
                if r.will_close:
                    conn.close()
            except (OSError, http.client.HTTPException):
                status = -1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            mine.append((t, time.monotonic() - t, status, "" if status == 200 else url))
        with lock:
            results.extend(mine)

    pool = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    queue.put(results)


def load_run(port: int, pid: int, clients: int, procs: int, seconds: float, seed: int, fixed: list[str],
             runs: list[tuple[str, str, int, int]], share: float) -> dict:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    workers = [ctx.Process(target=client_proc, args=(port, n, seconds, seed + i, fixed, runs, share, queue))
               for i, n in enumerate(per) if n]
    rss_series = []
    t0 = time.monotonic()
    for w in workers:
        w.start()
    while any(w.is_alive() for w in workers) and time.monotonic() - t0 < seconds + 300:
        rss_series.append((round(time.monotonic() - t0, 1), rss(pid)))
        if time.monotonic() - t0 > seconds:
            break
        time.sleep(1.0)
    results = []
    for _ in workers:
        results.extend(queue.get(timeout=seconds + 300))
    for w in workers:
        w.join()
    rss_series.append((round(time.monotonic() - t0, 1), rss(pid)))
    lat = sorted(r[1] for r in results)
    errors = sum(1 for r in results if r[2] != 200)
    return {"requests": len(results), "rps": len(results) / seconds, "errors": errors,
            "error_statuses": sorted({r[2] for r in results if r[2] != 200}),
            "error_urls": sorted({f"{r[2]} {r[3]}" for r in results if r[2] != 200})[:10],
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None,
            "max_ms": 1000 * lat[-1] if lat else None,
            "rss": rss_series}


# -- one server, every run -----------------------------------------------------------------
def serve(code: Path, label: str, logdir: Path, work: Path):
    """A server of `code` on a fresh cache folder, every run loaded: (process, port, seconds to load)."""
    cache = work / f"cache-{label}"
    shutil.rmtree(cache, ignore_errors=True)
    proc, port = start_server(code, logdir, cache)
    try:
        return proc, port, wait_loaded(proc, port)
    except BaseException:
        stop(proc)
        raise


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def common_urls(sides: list[tuple[str, Path]], logdir: Path, work: Path) -> tuple[list[str], dict[str, list[str]]]:
    """The URLs of every route (listed by the first side's server) that every side answers
    with 200, and per side those it does not."""
    urls, dropped = None, {}
    for label, code in sides:
        proc, port, _ = serve(code, label, logdir, work)
        try:
            if urls is None:
                urls = fixed_urls(port)
            ok, dropped[label] = answered(port, urls)
            urls = [u for u in urls if u in set(ok)]
        finally:
            stop(proc)
    return urls, dropped


def measure(code: Path, label: str, logdir: Path, work: Path, args, urls: list[str]) -> dict:
    proc, port, loaded_s = serve(code, label, logdir, work)
    try:
        ok, bad = answered(port, urls)  # the first computations, before the clock starts
        traces = trace_sizes(port, ok)
        rss_warm = rss(proc.pid)
        run = load_run(port, proc.pid, args.clients, args.procs, args.seconds, args.seed, urls, traces,
                       args.changing)
        return {"label": label, "loaded_s": loaded_s, "urls": len(urls), "not_ok_before": bad, "rss_warm": rss_warm,
                "alive_after": proc.poll() is None, **run}
    finally:
        stop(proc)


def series(rss_series: list[tuple[float, int]]) -> str:
    picks = [rss_series[min(len(rss_series) - 1, int(i * (len(rss_series) - 1) / 6))] for i in range(7)]
    return " ".join(f"{t:.0f}s:{b / 2**20:.0f}" for t, b in picks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="a baseline checkout (extension built in place)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--procs", type=int, default=2, help="client processes the clients are spread over")
    ap.add_argument("--changing", type=float, default=0.3, help="share of requests with a query that changes")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    logdir = build_logdir(OUT / "logdir")
    work = OUT / "work"
    work.mkdir(exist_ok=True)
    sides = [("now", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    results: dict[str, list[dict]] = {label: [] for label, _ in sides}
    urls, dropped = common_urls(sides, logdir, work)
    print(f"{len(urls)} URLs of {len(TRACE_ROUTES)} per-trace routes and the run, distributed and diff routes")
    for label, bad in dropped.items():
        if bad:
            print(f"  left out, {label} does not answer them with 200: {', '.join(u.removeprefix(PREFIX) for u in bad)}")
    for i in range(args.runs):
        for label, code in (sides if i % 2 == 0 else sides[::-1]):  # alternate: drift hits both
            r = measure(code, label, logdir, work, args, urls)
            results[label].append(r)
            print(f"run {i + 1} {label:4}: {r['requests']:6d} requests, {r['rps']:6.1f}/s, p50 {r['p50_ms']:.1f} ms, "
                  f"p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.0f} ms, errors {r['errors']} "
                  f"{r['error_statuses'] or ''}, {r['urls']} URLs, loaded in {r['loaded_s']:.1f} s, "
                  f"server alive after: {r['alive_after']}", flush=True)
            print(f"           server RSS MiB (time:MiB): {series(r['rss'])}; warm before the load "
                  f"{r['rss_warm'] / 2**20:.0f}", flush=True)
            if r["error_urls"]:
                print(f"           errors on: {r['error_urls']}", flush=True)
            if r["not_ok_before"]:
                print(f"           not answered 200 before the load: {r['not_ok_before']}", flush=True)
    print()
    print(f"{args.clients} clients x {args.seconds:.0f} s, {args.runs} runs, median of the runs:")
    med = {label: {k: statistics.median(r[k] for r in rs) for k in ("rps", "p50_ms", "p99_ms", "errors")}
           for label, rs in results.items()}
    for k, unit in (("rps", "requests/s"), ("p50_ms", "ms"), ("p99_ms", "ms"), ("errors", "errors")):
        line = f"  {k:7} now {med['now'][k]:9.1f} {unit}"
        if "base" in med:
            ratio = f"{med['now'][k] / med['base'][k]:.2f}x" if med["base"][k] else "-"
            line += f"   base {med['base'][k]:9.1f}   now/base {ratio}"
        print(line)
    for label, rs in results.items():
        peak = max(b for r in rs for _, b in r["rss"])
        grow = [(r["rss"][-1][1] - r["rss_warm"]) / 2**20 for r in rs]
        print(f"  {label}: server RSS peak {peak / 2**20:.0f} MiB; growth during a run (end - warm) "
              f"{', '.join(f'{g:+.0f}' for g in grow)} MiB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
