"""A process stopped by SIGTERM or SIGHUP (or SIGINT, SIGQUIT, SIGKILL) while it builds
summaries leaves nothing behind (issue 17): ``tb-profiler serve``, ``tb-profiler
summarize`` and TensorBoard with the plugin, each a real subprocess over a run of many
ranks (written here from the sample gloo run by benchmarks/make_many_ranks.py), is sent
the signal once its summary worker processes run; then no process it started is alive,
none of multiprocessing's ``/tmp/pymp-*`` folders is left in its private TMPDIR, and it
ended as the signal says.

Every process the subprocess starts inherits a marker in its environment, so the check
finds each one through /proc whatever became of its parent (a worker orphaned by its
parent's death is re-parented, and a ppid chain no longer leads to it).  Before the fix,
the forkserver, a pool worker and the resource tracker (85-146 MB each) outlived
SIGTERM and SIGHUP, with their pymp folders."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from datafiles import benchmark_module

WORKER_MARKS = (b"tb_profiler.summary.worker", b"multiprocessing")  # ours; multiprocessing's before
BOUND_S = 60.0  # how long a check waits for something to happen (a bound, not a timing claim)

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


@pytest.fixture(scope="module")
def busy_run(sample_logdir, tmp_path_factory) -> Path:
    """12 ranks of ~8 MB (the sample gloo ranks repeated): seconds of summarizing."""
    mmr = benchmark_module("make_many_ranks")
    logdir = tmp_path_factory.mktemp("busy")
    mmr.generate(logdir / "ranks", 12, 8 << 20, source=sample_logdir / "ddp_gloo_2ranks", jitter_us=5, seed=1)
    return logdir


def _marked(marker: bytes) -> list[int]:
    """Live processes (not zombies) whose environment holds the marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker not in f.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ")
    except OSError:
        return b""


def _wait_for(what, predicate, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + BOUND_S * 3  # TensorBoard starts slowly on a busy machine
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"ended ({proc.returncode}) before {what}:\n{_tail(proc)}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} in {BOUND_S * 3:.0f} s:\n{_tail(proc)}")
        time.sleep(0.1)


def _tail(proc: subprocess.Popen) -> str:
    log = Path(proc.args_log)  # type: ignore[attr-defined]
    return log.read_text(errors="replace")[-4000:] if log.exists() else ""


def _start(args: list[str], tmp_path: Path, marker: str) -> subprocess.Popen:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), TB_PROFILER_CACHE_DIR=str(tmp_path / "cache"),
               TB_PROFILER_SIGNAL_TEST=marker, PYTHONUNBUFFERED="1")
    log = tmp_path / "log.txt"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(tmp_path))
    proc.args_log = str(log)  # type: ignore[attr-defined]
    return proc


def _commands(kind: str, logdir: Path) -> list[str]:
    if kind == "serve":
        return [sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", "0", "--jobs", "2"]
    if kind == "summarize":
        return [sys.executable, "-m", "tb_profiler.cli", "summarize", str(logdir / "ranks"), "--jobs", "2"]
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", "0", "--load_fast", "false"]


# SIGTERM, SIGHUP: handled (the workers stopped, then the process ends by the signal);
# SIGINT: KeyboardInterrupt; SIGQUIT, SIGKILL (a process manager's last word): no handler
# runs, the workers see their parent gone and end by themselves
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGKILL],
                         ids=lambda s: s.name)
@pytest.mark.parametrize("kind", ["serve", "summarize", "tensorboard"])
def test_a_stopped_process_leaves_no_process_and_no_pymp_folder(busy_run, tmp_path, kind, signum):
    if kind == "tensorboard":
        pytest.importorskip("tensorboard")
    marker = f"tbp-{uuid.uuid4().hex}"
    proc = _start(_commands(kind, busy_run), tmp_path, marker)
    try:
        mark = marker.encode()

        def workers_run() -> bool:
            return any(any(m in _cmdline(p) for m in WORKER_MARKS) for p in _marked(mark) if p != proc.pid)

        _wait_for("summary worker process", workers_run, proc)
        started = [p for p in _marked(mark) if p != proc.pid]
        proc.send_signal(signum)
        rc = proc.wait(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + BOUND_S
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: _cmdline(p).decode(errors="replace")[:200] for p in _marked(mark)}
    for p in left:  # do not leave them to the next test
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    assert started, "no process was started"
    assert not left, f"{kind} stopped by {signum.name} left processes running: {left}\n{_tail(proc)}"
    pymp = sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("pymp-"))
    assert not pymp, f"left in TMPDIR: {pymp}"
    # ended as the signal says: by the signal itself, or TensorBoard's own SIGTERM exit (status 0);
    # SIGINT is Python's KeyboardInterrupt (clean before too): a stop (serve: 0), 130, or the signal
    expected = {0} if (kind, signum) == ("tensorboard", signal.SIGTERM) else {-signum}
    if signum == signal.SIGINT:
        expected = {0, 128 + signum, -signum}
    assert rc in expected, f"{kind}: exit status {rc}, expected {expected}\n{_tail(proc)}"
    if kind == "tensorboard" and signum == signal.SIGTERM:
        assert "TensorBoard caught SIGTERM" in _tail(proc)
