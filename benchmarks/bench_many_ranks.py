#!/usr/bin/env python
"""Many-rank benchmark (issue 8): how long after `tb-profiler serve` starts the Distributed
view of an N-rank run answers, how much memory the server takes, how much cache it leaves.

    python benchmarks/bench_many_ranks.py [--ranks 64] [--size 64M] [--timeout 300]
        [--current DIR] [--code BASELINE_DIR] [--server-args '--memory-mb 8192']
        [--no-warm] [--no-summarize] [--dask] [--jobs 2] [--max-rss 12G] [--json] [--json-out FILE]

The run: benchmarks/make_many_ranks.py writes N ranks of SIZE JSON each (--size 0: the
ddp_gloo_2ranks sample's own size, ~0.4 MB) into ./bench-output/many-ranks/r{N}-{SIZE}/, once;
a later call with the same arguments reuses it. The trace files are then in the OS page
cache (a warm disk), as they are right after a job wrote them.

Per checkout measured (the one given by --current, default this one; and --code, the
baseline), each in a fresh server process, `python -m tb_profiler.cli serve LOGDIR` with
that checkout first on PYTHONPATH, TB_PROFILER_CACHE_DIR set to:
  server cold   an empty cache folder;
  server warm   the folder the cold server left (decoded columns, and summaries/ where the
                checkout writes them), a new process;
and measured from the moment the process is started:
  open          when `views`, `distributed/overlap`, `distributed/waittime` (docs/api.md's
                name for the wait view), `distributed/commops` and `distributed/gpuinfo`
                have all answered 200 for the run, polled in parallel over HTTP on
                localhost as the page does (202 = loading: poll again after 0.5 s; 404
                before discovery, or a refused connection before the server listens:
                again). None answered within --timeout: "never", with each route's last
                status and the load progress the last 202 gave;
  peak RSS      the largest sum of VmRSS over the server and every descendant (a process
                pool's workers), sampled every 0.25 s from /proc; "HWM sum" adds each
                process's own VmHWM (its peak, so it misses no spike between samples: an
                upper bound of the peak); "proc max": the started process's own peak
                (ru_maxrss from wait4), exact for a server without worker processes;
                "anon": the peak of the tree's RssAnon (heap; the rest of RSS is file pages,
                e.g. mapped cache entries, which the kernel can drop); and every 2 s what
                the server's `status` says: files loaded, traces in its memory (LRU) and
                the bytes it counts for them;
  cache         the cache folder's size on disk after the server stopped (and its
                summaries/ part).
Where the checkout has `tb-profiler summarize` (tb_profiler.summary), also
  summarize     `tb-profiler summarize RUN --jobs J` into an empty cache folder: wall time,
                peak RSS of its process tree, cache size; then a server started on that
                cache ("server after summarize");
  summarize dask  with --dask: the same on a dask LocalCluster of 2 single-thread worker
                processes (started here; its address replaces {scheduler} in --dask-args).
                Skipped with a message where tb_profiler.summary or distributed is missing.
A process tree whose heap (RssAnon) passes --max-rss is killed (the machine is shared)
and reported so; file pages (mapped cache entries) do not count there, the kernel drops
them under pressure.

--code DIR: a checkout of a baseline commit, measured in the same run, and every figure of
--current divided by it is printed as a ratio. Without touching this checkout's index:

    mkdir /tmp/tbp-base && git archive <commit> | tar -x -C /tmp/tbp-base
    (cd /tmp/tbp-base && TB_PROFILER_SKIP_FRONTEND=1 python setup.py -q build_ext --inplace)
    python benchmarks/bench_many_ranks.py --code /tmp/tbp-base

(or `git worktree add --detach /tmp/tbp-base <commit>` and the same build_ext). The JSON
API needs no UI bundle. --current takes a checkout made the same way (e.g. HEAD, when the
working tree holds someone's unfinished changes).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_many_ranks  # (benchmarks/)
from make_big_trace import parse_size

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-output" / "many-ranks"
PREFIX = "/data/plugin/pytorch_profiler/"
ROUTES = ("views", "distributed/overlap", "distributed/waittime", "distributed/commops", "distributed/gpuinfo")
POLL_S, SAMPLE_S, CURVE_S = 0.5, 0.25, 1.0
REQUEST_TIMEOUT_S = 180  # the server answers 202 itself after 5 s (loading) or 60 s (computing)
# issue 8's targets: (ranks, size) -> {figure: limit}
GOALS = {(64, 64 << 20): {"server cold open_s": 30, "server warm open_s": 2, "peak_rss_gb": 2},
         (1024, 0): {"server warm open_s": 5, "peak_rss_gb": 2, "summaries_gb": 1}}


# ------------------------------------------------------------------------------ the run

def size_label(size: int) -> str:
    if not size:
        return "sample"
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def prepare_run(ranks: int, size: int, jobs: int, out: Path = OUT) -> tuple[Path, str, dict]:
    """(logdir, run name, manifest): the generated run, reused when its manifest matches."""
    logdir = out / f"r{ranks}-{size_label(size)}"
    run = f"ddp_r{ranks}_{size_label(size)}"
    folder = logdir / run
    manifest_path = folder / make_many_ranks.MANIFEST
    if manifest_path.exists():
        m = json.loads(manifest_path.read_text())
        mine = (make_many_ranks.VERSION, ranks, size, None, 5, 0, "last")  # generate()'s defaults
        if (m.get("version"), m.get("ranks"), m.get("size"), m.get("skew_rank"), m.get("jitter_us"), m.get("seed"),
                m.get("spans")) == mine:
            m["reused"] = True
            return logdir, run, m
    print(f"generating {ranks} ranks x {size_label(size)} into {folder} ...", file=sys.stderr, flush=True)
    m = make_many_ranks.generate(folder, ranks, size, jobs=jobs)
    m["reused"] = False
    return logdir, run, m


# ------------------------------------------------------------------------------ processes

def tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def vm(pid: int) -> tuple[int, int, int]:
    """(VmRSS, VmHWM, RssAnon) of a process in bytes; zeros when it is gone. RssAnon is the
    heap part of VmRSS: the rest is file pages (mapped cache entries) and shared memory,
    which the kernel can drop or share."""
    out = {"VmRSS:": 0, "VmHWM:": 0, "RssAnon:": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line[:line.find(":") + 1]
                if key in out:
                    out[key] = int(line.split()[1]) << 10
    except OSError:
        pass
    return out["VmRSS:"], out["VmHWM:"], out["RssAnon:"]


class Sampler(threading.Thread):
    """Samples a process tree's memory until stopped; kills the tree above max_rss."""

    def __init__(self, pids: list[int], max_rss: int):
        super().__init__(daemon=True)
        self.roots, self.max_rss = pids, max_rss
        self.t0 = time.monotonic()
        self.peak = self.peak_anon = 0
        self.hwm: dict[int, int] = {}
        self.curve: list[tuple[float, int]] = []
        self.killed = None
        self.stop = threading.Event()

    def run(self) -> None:
        next_curve = 0.0
        while not self.stop.is_set():
            total = anon = 0
            for root in self.roots:
                for p in tree(root):
                    rss, hwm, heap = vm(p)
                    total, anon = total + rss, anon + heap
                    self.hwm[p] = max(self.hwm.get(p, 0), hwm)
            self.peak, self.peak_anon = max(self.peak, total), max(self.peak_anon, anon)
            t = time.monotonic() - self.t0
            if t >= next_curve:
                self.curve.append((round(t, 1), total, anon))
                next_curve = t + CURVE_S
            if anon > self.max_rss and self.killed is None:  # heap: file pages are the kernel's to drop
                self.killed = f"killed at {t:.0f} s: process tree heap (RssAnon) {anon / 2**30:.1f} GiB > --max-rss"
                for root in self.roots:
                    stop_group(root, hard=True)
            self.stop.wait(SAMPLE_S)

    def figures(self) -> dict:
        return {"peak_rss": self.peak, "peak_anon": self.peak_anon, "hwm_sum": sum(self.hwm.values()), "processes": len(self.hwm),
                "rss_curve": self.curve, "killed": self.killed}


def stop_group(pid: int, hard: bool = False) -> None:
    """Ends the process group this script started (start_new_session: pgid == pid)."""
    try:
        os.killpg(pid, signal.SIGKILL if hard else signal.SIGTERM)
    except ProcessLookupError:
        pass


def wait_rusage(proc: subprocess.Popen, timeout: float | None) -> int | None:
    """Waits for the child like Popen.wait (None past the timeout) and keeps its own peak
    RSS from wait4 (ru_maxrss), which no sampling interval can miss, in proc.maxrss."""
    end = None if timeout is None else time.monotonic() + timeout
    while proc.returncode is None:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            proc.maxrss = ru.ru_maxrss << 10  # KiB on Linux
            return proc.returncode
        if end is not None and time.monotonic() > end:
            return None
        time.sleep(0.05)
    return proc.returncode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def code_env(code: Path, cache_dir: Path | None) -> dict:
    """The environment that makes `python -m tb_profiler...` run the checkout at `code`."""
    env = dict(os.environ, PYTHONPATH=str(code) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONUNBUFFERED="1")
    if cache_dir is not None:
        env["TB_PROFILER_CACHE_DIR"] = str(cache_dir)
    return env


def check_code(code: Path) -> str:
    """The tb_profiler a child started for `code` imports (must be the checkout's own)."""
    out = subprocess.run([sys.executable, "-c", "import tb_profiler, tb_profiler._native; print(tb_profiler.__file__)"],
                         check=False, cwd=code, env=code_env(code, None), capture_output=True, text=True)
    where = out.stdout.strip()
    if out.returncode or not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"{code}: its tb_profiler (with tb_profiler._native built in place) does not import: "
                         f"{where or out.stderr.strip()[-500:]}")
    return where


def has(code: Path, module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], check=False, cwd=code,
                          env=code_env(code, None), capture_output=True).returncode == 0


# ------------------------------------------------------------------------------ polling

@dataclass
class Route:
    """One route's polling: when it first answered 200, and what it said last."""

    name: str
    ok_s: float | None = None
    last_status: str = "no answer"
    progress: str = ""
    polls: int = 0
    detail: dict = field(default_factory=dict)


def poll(base: str, run: str, route: Route, t0: float, deadline: float, done: threading.Event) -> None:
    url = f"{base}{PREFIX}{route.name}?run={urllib.parse.quote(run)}"
    while time.monotonic() < deadline and not done.is_set():
        route.polls += 1
        try:
            with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as r:
                body = r.read()
                if r.status == 200:
                    route.ok_s, route.last_status = time.monotonic() - t0, "200"
                    route.detail = summarize_body(route.name, body)
                    return
                route.last_status = str(r.status)
                route.progress = progress_of(body)
        except urllib.error.HTTPError as exc:
            route.last_status = f"{exc.code} {exc.read()[:200].decode('utf-8', 'replace')}"
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            route.last_status = f"no answer ({type(getattr(exc, 'reason', exc)).__name__})"
        done.wait(POLL_S)


def watch_status(base: str, done: threading.Event, t0: float, out: list) -> None:
    """The server's own view while it loads (`status`, every 2 s): (s, files loaded, traces
    in its memory, bytes it counts for them), to tell loading from computing from churn."""
    while not done.wait(2.0):
        try:
            with urllib.request.urlopen(f"{base}{PREFIX}status", timeout=10) as r:
                d = json.loads(r.read())
        except (OSError, ValueError):
            continue
        mem = d.get("memory") or {}
        loaded = sum(run.get("loaded_files", 0) for run in d.get("runs", []))
        out.append((round(time.monotonic() - t0, 1), loaded, mem.get("traces_in_memory"), mem.get("used_bytes")))


def progress_of(body: bytes) -> str:
    """What a 202 says: the bytes of the needed traces loaded, or that it computes."""
    try:
        d = json.loads(body)
    except ValueError:
        return ""
    if d.get("computing"):
        return "computing"
    if "total_bytes" in d:
        return f"loaded {d.get('loaded_bytes', 0) / 2**30:.2f}/{d['total_bytes'] / 2**30:.2f} GiB"
    return ""


def summarize_body(route: str, body: bytes) -> dict:
    """A check that the answer is about every rank: ranks seen and notes."""
    try:
        d = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(d, dict):
        return {"items": len(d)} if isinstance(d, list) else {}
    info = d.get("info") or {}
    return {"ranks": len(info.get("ranks") or []), "notes": len(d.get("notes") or []), "bytes": len(body)}


# ------------------------------------------------------------------------------ scenarios

def dir_size(path: Path) -> dict:
    """Bytes on disk (allocated blocks) of a folder, and of its summaries/ part."""
    def walk(p: Path) -> tuple[int, int]:
        total = files = 0
        for root, _, names in os.walk(p):
            for n in names:
                try:
                    total += os.lstat(os.path.join(root, n)).st_blocks * 512
                    files += 1
                except OSError:
                    pass
        return total, files
    total, files = walk(path)
    summ, summ_files = walk(path / "summaries") if (path / "summaries").is_dir() else (None, 0)
    return {"cache_bytes": total, "cache_files": files, "summaries_bytes": summ, "summaries_files": summ_files}


def serve_once(code: Path, logdir: Path, run: str, cache_dir: Path, args, log: Path) -> dict:
    """One server process from start to the Distributed view's answers (or the timeout)."""
    port = free_port()
    cmd = [sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port),
           *args.server_args.split()]
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=code, env=code_env(code, cache_dir), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    sampler = Sampler([proc.pid], args.max_rss)
    sampler.start()
    routes = [Route(r) for r in ROUTES]
    done = threading.Event()
    deadline = t0 + args.timeout
    threads = [threading.Thread(target=poll, args=(f"http://127.0.0.1:{port}", run, r, t0, deadline, done),
                                daemon=True) for r in routes]
    status: list = []
    watcher = threading.Thread(target=watch_status, args=(f"http://127.0.0.1:{port}", done, t0, status), daemon=True)
    for t in (*threads, watcher):
        t.start()
    while any(t.is_alive() for t in threads):
        if wait_rusage(proc, 0) is not None or sampler.killed:
            done.set()
        time.sleep(0.2)
    exit_code = wait_rusage(proc, 0)  # None: still running (stopped here)
    stop_group(proc.pid)
    if wait_rusage(proc, 15) is None:
        stop_group(proc.pid, hard=True)
        wait_rusage(proc, None)
    done.set()
    sampler.stop.set()
    sampler.join()
    opened = [r.ok_s for r in routes]
    res = {"open_s": max(opened) if all(x is not None for x in opened) else None, "expected_ranks": args.ranks,
           "routes": {r.name: {"ok_s": r.ok_s, "last": r.last_status[:300], "progress": r.progress,
                               "polls": r.polls, **r.detail} for r in routes},
           "exited": exit_code, "status_curve": status, **sampler.figures(), "maxrss": proc.maxrss, **dir_size(cache_dir),
           **log_problems(log)}
    return res


def log_problems(log: Path) -> dict:
    """Tracebacks and errors the server printed (the last lines, when any)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [ln for ln in text.splitlines() if "Traceback" in ln or "Error" in ln or "error" in ln.lower()[:40]]
    return {"log_errors": len(lines), "log_tail": text.splitlines()[-8:] if lines else []}


def summarize_once(code: Path, logdir: Path, run: str, cache_dir: Path, args, log: Path,
                   scheduler: str | None = None, extra_pids: list[int] = ()) -> dict:
    """`tb-profiler summarize` (template --summarize-args / --dask-args) on an empty cache."""
    template = args.dask_args if scheduler else args.summarize_args
    argv = template.format(run=str(logdir / run), jobs=args.jobs, scheduler=scheduler or "").split()
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tb_profiler.cli", *argv], cwd=code,
                                env=code_env(code, cache_dir), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    sampler = Sampler([proc.pid, *extra_pids], args.max_rss)
    sampler.start()
    rc = wait_rusage(proc, args.timeout)
    seconds = time.monotonic() - t0
    if rc is None:
        stop_group(proc.pid, hard=True)
        rc = wait_rusage(proc, None)
    sampler.stop.set()
    sampler.join()
    return {"seconds": seconds if rc == 0 else None, "exit": rc, "command": " ".join(argv),
            **sampler.figures(), "maxrss": proc.maxrss, **dir_size(cache_dir), **log_problems(log)}


def dask_cluster(code: Path, workers: int = 2) -> tuple[subprocess.Popen, str]:
    """A LocalCluster of single-thread worker processes in a child process that imports
    the checkout's tb_profiler; (the process, the scheduler address)."""
    script = ("import sys\nfrom distributed import LocalCluster\n"
              f"c = LocalCluster(n_workers={workers}, threads_per_worker=1, processes=True, dashboard_address=None)\n"
              "print(c.scheduler_address, flush=True)\nsys.stdin.read()\nc.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=code, env=code_env(code, None),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    address = proc.stdout.readline().strip()
    if not address:
        raise RuntimeError("the dask LocalCluster did not start")
    return proc, address


def measure(label: str, code: Path, logdir: Path, run: str, args, work: Path) -> dict:
    """Every scenario for one checkout."""
    print(f"[{label}] tb_profiler from {check_code(code)}", file=sys.stderr, flush=True)
    out = {}

    def fresh(name: str) -> Path:
        d = work / f"{label}-{name}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d

    def step(name: str, fn, *a, **kw):
        print(f"[{label}] {name} ...", file=sys.stderr, flush=True)
        out[name] = fn(*a, **kw)
        r = out[name]
        shown = r.get("open_s", r.get("seconds"))
        print(f"[{label}] {name}: {'never' if shown is None else f'{shown:.1f} s'}, peak RSS "
              f"{r['peak_rss'] / 2**30:.2f} GiB{'; ' + r['killed'] if r.get('killed') else ''}",
              file=sys.stderr, flush=True)

    cache = fresh("cache-serve")
    step("server cold", serve_once, code, logdir, run, cache, args, work / f"{label}-serve-cold.log")
    if not args.no_warm:
        step("server warm", serve_once, code, logdir, run, cache, args, work / f"{label}-serve-warm.log")
    if args.no_summarize:
        return out
    if not has(code, "tb_profiler.summary") or subprocess.run(
            [sys.executable, "-m", "tb_profiler.cli", "summarize", "--help"], check=False, cwd=code,
            env=code_env(code, None), capture_output=True).returncode != 0:
        out["summarize"] = {"skipped": "tb_profiler.summary / `tb-profiler summarize` not in this checkout"}
        print(f"[{label}] summarize: skipped ({out['summarize']['skipped']})", file=sys.stderr)
        return out
    cache = fresh("cache-summarize")
    step("summarize", summarize_once, code, logdir, run, cache, args, work / f"{label}-summarize.log")
    if not args.no_warm:
        step("server after summarize", serve_once, code, logdir, run, cache, args,
             work / f"{label}-serve-summarized.log")
    if args.dask:
        if not has(code, "distributed"):
            out["summarize dask"] = {"skipped": "distributed (dask) is not importable"}
            return out
        cluster, address = dask_cluster(code)
        try:
            step("summarize dask", summarize_once, code, logdir, run, fresh("cache-dask"), args,
                 work / f"{label}-summarize-dask.log", scheduler=address, extra_pids=[cluster.pid])
        finally:
            cluster.stdin.close()
            try:
                cluster.wait(20)
            except subprocess.TimeoutExpired:
                stop_group(cluster.pid, hard=True)
    return out


# ------------------------------------------------------------------------------ report

FIGURES = (("open_s", "s"), ("seconds", "s"), ("peak_rss", "GiB"), ("peak_anon", "GiB"), ("maxrss", "GiB"), ("hwm_sum", "GiB"),
           ("cache_bytes", "MiB"),
           ("summaries_bytes", "MiB"))


def fmt(value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "GiB":
        return f"{value / 2**30:.2f}"
    if unit == "MiB":
        return f"{value / 2**20:.1f}"
    return f"{value:.2f}"


def print_table(result: dict) -> None:
    m = result["run"]
    made = "reused" if m["reused"] else f"generated in {m['seconds']} s"
    print(f"run: {m['ranks']} ranks x {size_label(m['size'])} "
          f"({m['json_bytes'] / 2**30:.2f} GiB of JSON, {m['files']} files, {m['copies']} copies per rank), "
          f"{result['logdir']}  [{made}]")
    print(f"timeout {result['timeout_s']} s, {result['cpus']} CPUs; open = all of {', '.join(ROUTES)} answered 200")
    head = f"{'scenario':<24}{'code':<10}{'open/time s':>12}{'peak RSS':>10}{'anon':>7}{'proc max':>9}{'HWM sum':>9}" \
           f"{'cache MiB':>11}" \
           f"{'summ. MiB':>10}  note"
    print(head)
    print("-" * len(head))
    for label, scenarios in result["codes"].items():
        for name, r in scenarios.items():
            if "skipped" in r:
                print(f"{name:<24}{label:<10}  skipped: {r['skipped']}")
                continue
            t = r.get("open_s", r.get("seconds"))
            print(f"{name:<24}{label:<10}{'never' if t is None else f'{t:.2f}':>12}{fmt(r['peak_rss'], 'GiB'):>10}"
                  f"{fmt(r['peak_anon'], 'GiB'):>7}{fmt(r['maxrss'], 'GiB'):>9}{fmt(r['hwm_sum'], 'GiB'):>9}{fmt(r['cache_bytes'], 'MiB'):>11}"
                  f"{fmt(r['summaries_bytes'], 'MiB'):>10}  {note(r)}")
    for label, scenarios in result["codes"].items():
        for name, r in scenarios.items():
            if r.get("rss_curve"):
                print(f"RSS curve [{label}] {name} (s: RSS/anon GiB): {curve_text(r['rss_curve'])}")
            if r.get("status_curve"):
                print(f"  its status (s: files loaded, traces in memory, MiB it counts): "
                      f"{status_text(r['status_curve'])}")
    if result.get("ratios"):
        print("ratios current / baseline (below 1: the current code is faster / smaller):")
        for name, figs in result["ratios"].items():
            print(f"  {name:<24}" + "  ".join(f"{k} {v:.2f}x" for k, v in figs.items()))
    for line in result.get("goals", []):
        print(line)


def note(r: dict) -> str:
    parts = []
    if r.get("killed"):
        parts.append(r["killed"])
    if r.get("open_s") is None and "routes" in r:
        parts.append("; ".join(f"{k}: {v['last'][:60]}{' ' + v['progress'] if v['progress'] else ''}"
                               for k, v in r["routes"].items() if v["ok_s"] is None))
    elif "routes" in r:
        parts.append("first 200s " + ", ".join(f"{k.split('/')[-1]} {v['ok_s']:.1f}" for k, v in r["routes"].items()))
        seen = {v.get("ranks") for k, v in r["routes"].items() if k.startswith("distributed/")}
        if seen != {r.get("expected_ranks")}:
            parts.append(f"ranks in the answers: {sorted(x for x in seen if x is not None)}")
    if r.get("exit") not in (None, 0):
        parts.append(f"exit {r['exit']}")
    if r.get("exited") is not None and not r.get("killed"):
        parts.append(f"the server exited by itself ({r['exited']}): " + " | ".join(r.get("log_tail", [])[-2:]))
    if r.get("log_errors"):
        parts.append(f"{r['log_errors']} error lines in the log")
    return "; ".join(parts)


def curve_text(curve: list, points: int = 12) -> str:
    """About `points` (time, RSS) pairs, evenly spaced over the run, and the peak."""
    step = max(1, len(curve) // points)
    picked = curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else [])
    return " ".join(f"{t:.0f}:{rss / 2**30:.1f}/{anon / 2**30:.1f}" for t, rss, anon in picked)


def status_text(curve: list, points: int = 8) -> str:
    step = max(1, len(curve) // points)
    picked = curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else [])
    return " ".join(f"{t:.0f}:{n}/{m}/{(b or 0) / 2**20:.0f}" for t, n, m, b in picked)


def ratios(cur: dict, base: dict) -> dict:
    out = {}
    for name, r in cur.items():
        b = base.get(name, {})
        figs = {}
        for key, _ in FIGURES:
            if r.get(key) and b.get(key):
                figs[key] = r[key] / b[key]
        if figs:
            out[name] = figs
    return out


def goal_lines(result: dict) -> list[str]:
    """Issue 8's targets for this run's shape, against the current code's figures."""
    m = result["run"]
    goals = GOALS.get((m["ranks"], m["size"]))
    if not goals:
        return [(f"(issue 8's targets are for 64 ranks x 64M and 1024 ranks x sample size; "
                 f"this run is {m['ranks']} x {size_label(m['size'])})")]
    cur = result["codes"]["current"]
    lines = ["issue 8 targets, current code:"]
    goals = dict(goals)
    if "server warm open_s" in goals and "server after summarize" in cur:  # summaries cached, either way
        goals["server after summarize open_s"] = goals["server warm open_s"]
    for figure, limit in goals.items():
        if figure == "peak_rss_gb":
            vals = [r["peak_rss"] / 2**30 for r in cur.values() if "peak_rss" in r and "open_s" in r]
            value = max(vals) if vals else None
        elif figure == "summaries_gb":
            vals = [r["summaries_bytes"] / 2**30 for r in cur.values() if r.get("summaries_bytes")]
            value = max(vals) if vals else None
        else:
            scenario, key = figure.rsplit(" ", 1)
            value = cur.get(scenario, {}).get(key, "absent")
            if value == "absent":
                value = None
            elif value is None:
                value = float("inf")
        shown = "not measured" if value is None else "never" if value == float("inf") else f"{value:.2f}"
        verdict = "" if value is None else "met" if value <= limit else "NOT met"
        lines.append(f"  {figure:<34} <= {limit:<5} {shown:>12}  {verdict}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--size", type=parse_size, default=parse_size("64M"),
                    help="JSON per rank (64M, 1G; 0: the sample's own size)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a scenario may take before 'never'")
    ap.add_argument("--current", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    ap.add_argument("--code", type=Path, help="a baseline checkout measured in the same run (ratios against it)")
    ap.add_argument("--server-args", default="", help="more `tb-profiler serve` options, e.g. '--memory-mb 8192'")
    ap.add_argument("--no-warm", action="store_true", help="no warm-cache server runs")
    ap.add_argument("--no-summarize", action="store_true", help="no `tb-profiler summarize` runs")
    ap.add_argument("--dask", action="store_true", help="also summarize on a dask LocalCluster of 2 workers")
    ap.add_argument("--summarize-args", default="summarize {run} --jobs {jobs}")
    ap.add_argument("--dask-args", default="summarize {run} --dask {scheduler}")
    ap.add_argument("--jobs", type=int, default=2, help="processes for generating the run and for summarize")
    ap.add_argument("--max-rss", type=parse_size, default=parse_size("12G"),
                    help="kill a process tree whose heap (RssAnon) passes this (default 12G)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--json-out", type=Path, help="also write the results as JSON to this file")
    args = ap.parse_args(argv)

    logdir, run, manifest = prepare_run(args.ranks, args.size, args.jobs)
    work = Path(tempfile.mkdtemp(prefix="bench-many-", dir=OUT))
    codes = {"current": args.current.resolve()}
    if args.code:
        codes["baseline"] = args.code.resolve()
    result = {"run": {k: v for k, v in manifest.items() if k != "offsets_us"}, "logdir": str(logdir / run),
              "timeout_s": args.timeout, "cpus": os.cpu_count(), "load_before": os.getloadavg(),
              "paths": {k: str(v) for k, v in codes.items()}, "work": str(work), "codes": {}}
    try:
        for label, code in codes.items():
            result["codes"][label] = measure(label, code, logdir, run, args, work)
    finally:
        for d in work.glob("*-cache-*"):  # logs stay in `work` for reading
            shutil.rmtree(d, ignore_errors=True)
    if "baseline" in result["codes"]:
        result["ratios"] = ratios(result["codes"]["current"], result["codes"]["baseline"])
    result["goals"] = goal_lines(result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
