#!/usr/bin/env python
"""The long fuzzing run of the native decoder, outside CI (issue 11, section 2): millions of
executions under AddressSanitizer + UBSan, each with the split-vs-single check.

    nice -n 10 python benchmarks/fuzz_long.py --executions 10000000
    python benchmarks/fuzz_long.py --executions 200000 --jobs 2       a short run (rate check)
    python benchmarks/fuzz_long.py --seconds 3600 --seed 7            one hour, other inputs
    python benchmarks/fuzz_long.py --minimize test-output/fuzz/long-.../crash-XXXX.bin

1. Builds an ASan+UBSan copy of the package in a temporary folder with .ci/asan_build.sh
   (the build .ci/asan_tests.sh uses; --build-dir DIR reuses or keeps one).
2. Runs --jobs worker processes (default: one per CPU this process may use) of the fuzz
   loop of tests/test_decode_fuzz.py (``--worker``) on small seeds (``small_seeds()``, at
   most 4 KB each, written once under the output folder), each in chunks of --chunk
   executions with its own seed (``--seed`` * 1000003 + the chunk's number): a crash loses
   only its chunk's count, and a progress line is printed after every chunk.
   One execution: one mutated input, decoded by decode()/decode_bytes() (invariants or a
   sound TraceFormatError), then with one thread and split between 2 to 8 threads with
   tiny parts (the same outcome, test_decode_parallel's comparison), and one time in
   --keep-input-every also read-only (keep_input) against the in-place decode.
3. Stops at --executions (default 10,000,000) or after --seconds, and prints and writes
   the figures (summary.json): executions, accepted/rejected, split and keep_input checks,
   decodes, exec/s (all workers, and per worker process), exec per CPU second, wall time,
   sanitizer reports, crashes, failures.

Everything goes under test-output/fuzz/long-<date>-<time>/ (--out): every input that
crashed a worker (crash-<sha1>.bin, with the worker's stderr and sanitizer logs next to it)
or failed a check (failure-<sha1>.bin, with why) is kept there and printed. Exit status 0
when there were no crash, no failure and no sanitizer report; 1 otherwise; 2 when the build
failed.

--minimize FILE: shrinks a kept input (delta debugging, whole chunks then single bytes)
while it still fails the same way (crash: the worker dies; failure: the same kind of check
fails), under the ASan build, and writes FILE.min next to it: the regression test's input.

Rate (2-core AMD EPYC VM, ASan+UBSan, small seeds, default checks, `nice -n 10`; the machine
was shared with other work, so the rates varied with its load): one worker alone 1,800 to
2,300 exec/s; two workers (the default here) 1,500 to 2,100 exec/s each, 2,900 to 4,100
together, so 10M executions take 40 to 57 minutes (at the busiest, 2,500 exec/s: 66 min);
--jobs 3 gave 3,350 to 4,100 together (a split decode's threads leave a core idle while they
start and join). Where the time goes (one worker profiled, CPU time per execution): about
100 us for the mutation, the decode and the invariants; 350 to 550 us for the split check,
most of it the start and join of the split decode's helper threads under ASan (100 to 300
us of CPU each: the decoder starts a thread per part and decode, and ASan maps, clears and
unmaps each thread's state) and ASan's allocator (every decoder part allocates its columns);
60 to 120 us for the keep_input checks. Python (mutate, current.bin) is under 10%. The
ASan options tried (a 16 MB quarantine, no release to the OS, 1 MiB thread stacks) gained
under 8% and are not used: the run keeps .ci/asan_tests.sh's options. --ci-seeds: about 600
exec/s per worker.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FUZZ = TESTS / "test_decode_fuzz.py"
BUILD_SCRIPT = ROOT / ".ci" / "asan_build.sh"
ASAN_EXITCODE = 86
COUNTERS = ("iterations", "accepted", "rejected", "split_checks", "keep_input_checks", "reference_checks", "decodes")


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ---------------------------------------------------------------- the ASan build

def build(build_dir: Path) -> str:
    """Builds the ASan+UBSan copy into build_dir (reused when it already holds one); returns
    the LD_PRELOAD value (libasan:libubsan)."""
    stamp = build_dir / "asan-preload.txt"
    if stamp.exists() and list((build_dir / "tb_profiler").glob("_native*.so")):
        print(f"fuzz: reusing the ASan build in {build_dir}", flush=True)
        return stamp.read_text().strip()
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), str(build_dir)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-6000:] + proc.stderr[-6000:], flush=True)
        print(f"fuzz: the ASan build failed (exit status {proc.returncode})", flush=True)
        raise SystemExit(2)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("ASAN_PRELOAD=")]
    if not lines:
        print(f"fuzz: {BUILD_SCRIPT} printed no ASAN_PRELOAD line:\n{proc.stdout[-3000:]}", flush=True)
        raise SystemExit(2)
    preload = lines[-1].split("=", 1)[1]
    stamp.write_text(preload + "\n")
    print(f"fuzz: built the ASan+UBSan copy in {build_dir}", flush=True)
    return preload


def sanitized_env(build_dir: Path, preload: str, logs: Path) -> dict:
    """The environment .ci/asan_tests.sh gives its tests: the ASan copy first on the path,
    libasan + libubsan preloaded, every report into `logs` (halt on the first)."""
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({
        "LD_PRELOAD": preload,
        "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode={ASAN_EXITCODE}"
                        f":log_path={logs}/asan:log_exe_name=1",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan",
        "PYTHONPATH": os.pathsep.join([str(build_dir), str(TESTS)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


def check_build(build_dir: Path, env: dict) -> None:
    code = ("import sys, tb_profiler._native as n; assert n.__file__.startswith(sys.argv[1]), n.__file__; "
            "print(n.__file__)")
    proc = subprocess.run([sys.executable, "-c", code, str(build_dir)], env=env, cwd=str(build_dir),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"fuzz: the ASan build does not import: {proc.stdout}{proc.stderr[-3000:]}", flush=True)
        raise SystemExit(2)
    print(f"fuzz: testing {proc.stdout.strip()}", flush=True)


def ci_seeds() -> list:
    sys.path.insert(0, str(TESTS))
    from test_decode_fuzz import seeds

    return seeds()


def write_seeds(folder: Path) -> int:
    """small_seeds() as files (the workers read them instead of inflating the real traces)."""
    sys.path.insert(0, str(TESTS))
    from test_decode_fuzz import small_seeds

    folder.mkdir(parents=True, exist_ok=True)
    corpus = small_seeds()
    for k, (_, data) in enumerate(corpus):
        (folder / f"seed-{k:03d}.json").write_bytes(data)
    return len(corpus)


# ---------------------------------------------------------------- the run

class Chunk:
    def __init__(self, number: int, seed: int, iterations: int, folder: Path, proc: subprocess.Popen, logs: Path):
        self.number, self.seed, self.iterations, self.folder, self.proc, self.logs = (
            number, seed, iterations, folder, proc, logs)
        self.started = time.monotonic()


def start_chunk(number: int, args, out: Path, build_dir: Path, preload: str, seeds_dir: Path,
                iterations: int, seconds: float) -> Chunk:
    seed = args.seed * 1000003 + number
    folder = out / "chunks" / f"chunk-{number:05d}"
    logs = folder / "sanitizer"
    env = sanitized_env(build_dir, preload, logs)
    cmd = [sys.executable, str(FUZZ), "--worker", "--seconds", f"{seconds:.1f}", "--seed", str(seed),
           "--iterations", str(iterations), "--out", str(folder), "--keep-input-every", str(args.keep_input_every)]
    if not args.ci_seeds:
        cmd += ["--seeds-dir", str(seeds_dir)]
    if args.no_split:
        cmd.append("--no-split")
    if args.differential:
        cmd.append("--differential")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"chunk-{number:05d}.out", "w") as stdout, \
            open(folder.parent / f"chunk-{number:05d}.err", "w") as stderr:
        proc = subprocess.Popen(cmd, env=env, cwd=str(build_dir), stdout=stdout, stderr=stderr)
    return Chunk(number, seed, iterations, folder, proc, logs)


def sanitizer_reports(logs: Path) -> list[Path]:
    return sorted(p for p in logs.glob("*") if p.is_file()) if logs.exists() else []


def finish_chunk(ch: Chunk, out: Path, totals: dict, events: list) -> None:
    """Adds a finished chunk's figures to totals; keeps its crash or failing inputs in out."""
    rc = ch.proc.returncode
    out_file = ch.folder.parent / f"chunk-{ch.number:05d}.out"
    err_file = ch.folder.parent / f"chunk-{ch.number:05d}.err"
    report = None
    for line in out_file.read_text(errors="replace").splitlines():
        if line.startswith('{"stats"'):
            report = json.loads(line)
    reports = sanitizer_reports(ch.logs)
    totals["chunks"] += 1
    totals["sanitizer_reports"] += len(reports)
    if rc != 0 or report is None:
        totals["crashes"] += 1
        current = ch.folder / "current.bin"
        how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        if rc == ASAN_EXITCODE:
            how += " (a sanitizer report)"
        entry = {"kind": "crash", "chunk": ch.number, "seed": ch.seed, "how": how}
        if current.exists():
            data = current.read_bytes()
            keep = out / f"crash-{hashlib.sha1(data).hexdigest()[:12]}.bin"
            shutil.copyfile(current, keep)
            entry.update(file=str(keep), size=len(data), head=repr(data[:300]))
        else:
            entry["file"] = None
        logs_kept = out / f"crash-chunk-{ch.number:05d}"
        logs_kept.mkdir(exist_ok=True)
        shutil.copyfile(err_file, logs_kept / "stderr.txt")
        for r in reports:
            shutil.copyfile(r, logs_kept / r.name)
        entry["logs"] = str(logs_kept)
        stderr_tail = err_file.read_text(errors="replace")[-3000:]
        sanitizer_head = "".join(r.read_text(errors="replace")[:3000] for r in reports[:1])
        entry["report"] = (sanitizer_head or stderr_tail)[:3000]
        events.append(entry)
        print(f"fuzz: CRASH in chunk {ch.number} (seed {ch.seed}, {how}): input {entry['file']}\n"
              f"{entry['report']}", flush=True)
        return
    stats = report["stats"]
    for k in COUNTERS:
        totals[k] += stats.get(k, 0)
    totals["worker_seconds"] += stats.get("seconds", 0.0)
    totals["cpu_seconds"] += stats.get("cpu_seconds", 0.0)
    for f in report["failures"]:
        src = Path(f["file"])
        keep = out / src.name
        shutil.copyfile(src, keep)
        (out / (src.name + ".why.txt")).write_text(f["why"] + "\n")
        totals["failures"] += 1
        entry = {"kind": "failure", "chunk": ch.number, "seed": ch.seed, "file": str(keep), "why": f["why"]}
        events.append(entry)
        print(f"fuzz: FAILURE in chunk {ch.number} (seed {ch.seed}): input {keep}\n  {f['why'][:1500]}", flush=True)
    if reports:  # a report while the worker still exited 0 (should not happen: halt_on_error)
        kept = out / f"sanitizer-chunk-{ch.number:05d}"
        kept.mkdir(exist_ok=True)
        for r in reports:
            shutil.copyfile(r, kept / r.name)
        events.append({"kind": "sanitizer report", "chunk": ch.number, "seed": ch.seed, "logs": str(kept)})
        print(f"fuzz: SANITIZER REPORT in chunk {ch.number}: {kept}", flush=True)
    if not report["failures"] and not reports:  # nothing to keep
        shutil.rmtree(ch.folder, ignore_errors=True)
        out_file.unlink(missing_ok=True)
        err_file.unlink(missing_ok=True)


def summary(totals: dict, wall: float, jobs: int) -> dict:
    s = dict(totals)
    s["wall_seconds"] = round(wall, 1)
    s["jobs"] = jobs
    s["exec_per_s"] = round(totals["iterations"] / wall, 1) if wall > 0 else 0.0
    # per worker process: its executions over its own running time (start-up excluded)
    s["exec_per_s_per_process"] = (round(totals["iterations"] / totals["worker_seconds"], 1)
                                   if totals["worker_seconds"] else 0.0)
    s["exec_per_cpu_s"] = round(totals["iterations"] / totals["cpu_seconds"], 1) if totals["cpu_seconds"] else 0.0
    s["worker_seconds"] = round(totals["worker_seconds"], 1)
    s["cpu_seconds"] = round(totals["cpu_seconds"], 1)
    return s


def progress_line(totals: dict, target: int, wall: float, jobs: int) -> str:
    s = summary(totals, wall, jobs)
    done = totals["iterations"]
    eta = (target - done) / s["exec_per_s"] if s["exec_per_s"] else float("inf")
    return (f"fuzz: {done:,}/{target:,} executions ({100 * done / max(target, 1):.1f}%) in {wall / 60:.1f} min, "
            f"{s['exec_per_s']:,.0f} exec/s ({s['exec_per_s_per_process']:,.0f} per process), "
            f"accepted {totals['accepted']:,}, rejected {totals['rejected']:,}, split checks "
            f"{totals['split_checks']:,}, keep_input checks {totals['keep_input_checks']:,}; crashes "
            f"{totals['crashes']}, failures {totals['failures']}, sanitizer reports {totals['sanitizer_reports']}"
            + (f"; about {eta / 60:.1f} min left" if done < target and eta != float("inf") else ""))


def build_folder(args) -> tuple[Path, str | None]:
    """(where the ASan copy is built, the temporary folder to remove after, or None when
    --build-dir names one to keep)."""
    if args.build_dir:
        build_dir = args.build_dir.resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        return build_dir, None
    tmp = tempfile.mkdtemp(prefix="tb_profiler_fuzz_asan.")
    return Path(tmp), tmp


def run(args) -> int:
    out = args.out or ROOT / "test-output" / "fuzz" / time.strftime("long-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    build_dir, tmp = build_folder(args)
    try:
        preload = build(build_dir)
        check_build(build_dir, sanitized_env(build_dir, preload, out / "probe-sanitizer"))
        shutil.rmtree(out / "probe-sanitizer", ignore_errors=True)
        seeds_dir = out / "seeds"
        n_seeds = write_seeds(seeds_dir) if not args.ci_seeds else len(ci_seeds())
        print(f"fuzz: {args.jobs} worker processes, {n_seeds} seeds, chunks of {args.chunk:,} executions, "
              f"target {args.executions:,} executions" + (f" or {args.seconds:.0f} s" if args.seconds else "")
              + f"; output in {out}", flush=True)
        totals = {k: 0 for k in COUNTERS}
        totals.update(chunks=0, crashes=0, failures=0, sanitizer_reports=0, worker_seconds=0.0, cpu_seconds=0.0)
        events: list = []
        running: list[Chunk] = []
        started = time.monotonic()
        deadline = started + args.seconds if args.seconds else None
        assigned = 0  # executions given to chunks that have not crashed
        number = 0
        last_print = 0.0
        interrupted = False
        try:
            while True:
                now = time.monotonic()
                while (len(running) < args.jobs and assigned < args.executions
                       and (deadline is None or now < deadline - 5)):
                    n = min(args.chunk, args.executions - assigned)
                    seconds = (deadline - now) if deadline else 7 * 24 * 3600
                    running.append(start_chunk(number, args, out, build_dir, preload, seeds_dir, n, seconds))
                    assigned += n
                    number += 1
                if not running:
                    break
                time.sleep(0.2)
                for ch in [c for c in running if c.proc.poll() is not None]:
                    running.remove(ch)
                    before = totals["iterations"]
                    finish_chunk(ch, out, totals, events)
                    # a crashed chunk's executions are not counted: give them out again; a chunk
                    # stopped by the deadline did fewer than it was given
                    assigned -= ch.iterations - (totals["iterations"] - before)
                    if time.monotonic() - last_print > args.print_every and running:
                        last_print = time.monotonic()
                        print(progress_line(totals, args.executions, time.monotonic() - started, args.jobs), flush=True)
                if totals["crashes"] + totals["failures"] >= args.max_problems:
                    print(f"fuzz: stopping: {args.max_problems} crashes or failures", flush=True)
                    break
        except KeyboardInterrupt:
            interrupted = True
            print("fuzz: interrupted", flush=True)
        for ch in running:  # the deadline, too many problems, or ^C: the chunks still running
            if ch.proc.poll() is None:
                ch.proc.send_signal(signal.SIGTERM)
            try:
                ch.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                ch.proc.kill()
                ch.proc.wait()
        wall = time.monotonic() - started
        s = summary(totals, wall, args.jobs)
        s.update(target=args.executions, seed=args.seed, chunk=args.chunk, keep_input_every=args.keep_input_every,
                 split=not args.no_split, seeds=n_seeds, ci_seeds=args.ci_seeds, interrupted=interrupted,
                 problems=events, build=str(build_dir), nice=os.nice(0), machine=f"{cpus()} CPUs")
        (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
        print(progress_line(totals, args.executions, wall, args.jobs), flush=True)
        print(f"fuzz: {totals['iterations']:,} executions in {wall / 60:.1f} min ({s['exec_per_s']:,.0f} exec/s, "
              f"{s['exec_per_s_per_process']:,.0f} per process, {s['exec_per_cpu_s']:,.0f} per CPU second), "
              f"{totals['decodes']:,} decodes; crashes {totals['crashes']}, failures {totals['failures']}, "
              f"sanitizer reports {totals['sanitizer_reports']}; summary in {out / 'summary.json'}", flush=True)
        for e in events:
            print(f"fuzz: kept {e['kind']}: {e.get('file') or e.get('logs')}", flush=True)
        ok = not events and totals["sanitizer_reports"] == 0
        if ok and not any(out.glob("chunks/*/*")):
            shutil.rmtree(out / "chunks", ignore_errors=True)
        return 0 if ok else 1
    finally:
        if tmp and not args.keep_build:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp:
            print(f"fuzz: ASan build kept in {tmp}", flush=True)


# ---------------------------------------------------------------- minimizing a kept input

CHECK_CODE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import test_decode_fuzz as F
data = open(sys.argv[2], "rb").read()
print("PROBLEMS " + json.dumps(F.check_all(data)), flush=True)
"""


def failure_kind(problems: list[str]) -> str | None:
    """The kind of check a problem comes from (what minimizing keeps): 'split', 'keep_input',
    'invariants', 'decode' (a bad error or exception from decode())."""
    if not problems:
        return None
    first = problems[0]
    for kind in ("split", "keep_input", "invariants"):
        if first.startswith(kind):
            return kind
    return "decode"


def shrink(data: bytes, still_fails, report=lambda size, n: None) -> bytes:
    """Delta debugging: removes chunks of len/2, len/4, ... down to single bytes while
    still_fails(the shorter input) holds, until no single byte can go."""
    granularity = 2
    while len(data) >= 2:
        size = max(1, len(data) // granularity)
        shrunk = False
        at = 0
        while at < len(data):
            candidate = data[:at] + data[at + size:]
            if candidate and still_fails(candidate):
                data = candidate
                shrunk = True
            else:
                at += size
        report(size, len(data))
        if size == 1 and not shrunk:
            break
        if not shrunk:
            granularity = min(granularity * 2, len(data))
    return data


def minimize(args) -> int:
    src = args.minimize.resolve()
    data = src.read_bytes()
    build_dir, tmp = build_folder(args)
    work = Path(tempfile.mkdtemp(prefix="tb_profiler_fuzz_min."))
    try:
        preload = build(build_dir)
        tries = [0]

        def outcome(candidate: bytes) -> str | None:
            """'crash', a failure kind, or None (passes)."""
            tries[0] += 1
            path = work / "candidate.bin"
            path.write_bytes(candidate)
            logs = work / f"logs-{tries[0]}"
            proc = subprocess.run([sys.executable, "-c", CHECK_CODE, str(TESTS), str(path)],
                                  env=sanitized_env(build_dir, preload, logs), cwd=str(build_dir),
                                  capture_output=True, text=True, timeout=600)
            shutil.rmtree(logs, ignore_errors=True)
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBLEMS ")]
            if proc.returncode != 0 or not line:
                return "crash"
            return failure_kind(json.loads(line[0][9:]))

        want = outcome(data)
        if want is None:
            print(f"fuzz: {src} passes every check now: nothing to minimize", flush=True)
            return 1
        print(f"fuzz: {src} ({len(data)} bytes) fails: {want}; minimizing", flush=True)
        data = shrink(data, lambda candidate: outcome(candidate) == want,
                      lambda size, n: print(f"fuzz:   {n} bytes after removing chunks of {size} "
                                            f"({tries[0]} tries)", flush=True))
        dst = src.with_name(src.name + ".min")
        dst.write_bytes(data)
        print(f"fuzz: minimized to {len(data)} bytes in {tries[0]} tries: {dst}\n  {data!r}", flush=True)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if tmp and not args.keep_build:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--executions", type=int, default=10_000_000, help="target executions (default 10,000,000)")
    ap.add_argument("--seconds", type=float, default=0, help="time limit (default: none)")
    ap.add_argument("--jobs", type=int, default=cpus(), help=f"worker processes (default: the CPUs, {cpus()})")
    ap.add_argument("--chunk", type=int, default=100_000,
                    help="executions per worker process run (default 100,000: about a minute)")
    ap.add_argument("--seed", type=int, default=1, help="chunk k's seed is SEED * 1000003 + k (default 1)")
    ap.add_argument("--keep-input-every", type=int, default=4, metavar="N",
                    help="a keep_input check once in N executions on average (0: none; default 4)")
    ap.add_argument("--no-split", action="store_true", help="no split-vs-single check (not the issue's run)")
    ap.add_argument("--differential", action="store_true", help="also against the reference decoder (much slower)")
    ap.add_argument("--ci-seeds", action="store_true",
                    help="the CI's seeds (up to 85 KB: more cuts per split, about 3x slower) instead of small ones")
    ap.add_argument("--out", type=Path, help="output folder (default test-output/fuzz/long-<date>-<time>)")
    ap.add_argument("--build-dir", type=Path, help="build the ASan copy here, or reuse the one already here")
    ap.add_argument("--keep-build", action="store_true", help="keep the temporary ASan build (path printed)")
    ap.add_argument("--print-every", type=float, default=30, help="seconds between progress lines (default 30)")
    ap.add_argument("--max-problems", type=int, default=50, help="stop after this many crashes + failures")
    ap.add_argument("--minimize", type=Path, metavar="FILE", help="minimize a kept input (see above)")
    args = ap.parse_args()
    if args.minimize:
        return minimize(args)
    if args.jobs < 1 or args.chunk < 1 or args.executions < 1:
        ap.error("--jobs, --chunk and --executions must be at least 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
