"""Summaries of many files: a local process pool, a Dask cluster (a real LocalCluster of 2
worker processes), progress per file, one bad file costing nothing else, stored summaries
read instead of rebuilt, ``tb_profiler.summarize`` / ``Run.summaries`` and
``tb-profiler summarize``."""
from __future__ import annotations

import json
import shutil

import pytest
from test_summary import FACTS, assert_same_summary

import tb_profiler
from tb_profiler.summary import SummaryWarning, TraceSummary, ingest, summarize_files
from datafiles import benchmark_module


@pytest.fixture(scope="module")
def gloo_files(sample_logdir) -> list[str]:
    """Every file of the sample gloo run (2 ranks x 2 spans)."""
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache=False)
    return [s.path for s in run.info.files]


def _progress():
    calls = []
    return calls, lambda done, total, path: calls.append((done, total, path))


def _no_build_here(monkeypatch):
    """A build in this process fails: the pool's processes and Dask's workers import their own."""
    monkeypatch.setattr(ingest, "summarize_trace", lambda *a, **k: pytest.fail("built in the calling process"))


def test_two_processes_give_what_one_gives_with_progress(gloo_files, tmp_path, monkeypatch):
    one = summarize_files(gloo_files, jobs=1, cache_dir=tmp_path / "one")
    calls, progress = _progress()
    _no_build_here(monkeypatch)
    two = summarize_files(gloo_files, jobs=2, cache_dir=tmp_path / "two", progress=progress)
    assert all(isinstance(s, TraceSummary) for s in two)
    for a, b in zip(one, two):
        assert_same_summary(a, b)
    n = len(gloo_files)
    assert [c[:2] for c in calls] == [(i, n) for i in range(1, n + 1)]
    assert sorted(c[2] for c in calls) == sorted(gloo_files)


def test_stored_summaries_are_read_not_rebuilt(gloo_files, tmp_path, monkeypatch):
    first = summarize_files(gloo_files, jobs=2, cache_dir=tmp_path)  # built (and stored) by the pool

    def tripwire(*a, **k):
        raise AssertionError("rebuilt a stored summary")

    monkeypatch.setattr(ingest, "summarize_trace", tripwire)
    calls, progress = _progress()
    again = summarize_files(gloo_files, jobs=2, cache_dir=tmp_path, progress=progress)
    for a, b in zip(first, again):
        assert_same_summary(a, b)
    assert [c[0] for c in calls] == list(range(1, len(gloo_files) + 1))


@pytest.mark.parametrize("jobs", [1, 2])
def test_one_bad_file_gives_its_exception_and_costs_nothing_else(gloo_files, tmp_path, jobs):
    bad = tmp_path / "broken.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    missing = tmp_path / "gone.pt.trace.json"
    paths = [gloo_files[0], str(bad), gloo_files[1], str(missing)]
    out = summarize_files(paths, jobs=jobs, cache_dir=tmp_path / "cache", workers=["a", "b", "c", "d"])
    assert isinstance(out[1], tb_profiler.TraceFormatError) and "broken.pt.trace.json" in str(out[1])
    assert isinstance(out[3], tb_profiler.TraceFormatError) and "gone.pt.trace.json" in str(out[3])
    assert [out[0].worker, out[2].worker] == ["a", "c"]
    assert not out[0].collectives.empty


def test_dask_local_cluster_gives_the_local_pool_summaries(gloo_files, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    local = summarize_files(gloo_files, jobs=2, cache_dir=tmp_path / "local")
    bad = tmp_path / "broken.pt.trace.json"
    bad.write_text("[")
    calls, progress = _progress()
    _no_build_here(monkeypatch)
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = summarize_files([*gloo_files, str(bad)], dask=client, cache_dir=tmp_path / "dask", progress=progress)
        by_address = summarize_files(gloo_files[:1], dask=cluster.scheduler_address, cache_dir=tmp_path / "addr")
    assert isinstance(remote[-1], tb_profiler.TraceFormatError)
    for a, b in zip(local, remote[:-1]):
        assert_same_summary(a, b)
    assert_same_summary(local[0], by_address[0])
    assert len(calls) == len(gloo_files) + 1
    # the summaries came back and were stored here: read without any build
    for a, b in zip(local, summarize_files(gloo_files, jobs=1, cache_dir=tmp_path / "dask")):
        assert_same_summary(a, b)


def test_dask_gives_the_local_pool_summaries_of_a_64_rank_run(sample_logdir, tmp_path, monkeypatch):
    """Issue 8's check at its own scale in ranks: 64 ranks (benchmarks/make_many_ranks.py
    from the real gloo pair, at the sample's size, shifted clocks and ids) summarized by
    the local pool of 2 processes and by a LocalCluster of 2 worker processes give the
    same summaries, rank by rank, and the same cross-rank analysis."""
    distributed = pytest.importorskip("distributed")
    from test_summary import assert_same_result

    from tb_profiler.analysis.distributed import distributed_from_summaries

    mmr = benchmark_module("make_many_ranks")
    mmr.generate(tmp_path / "r64", 64, 0, source=sample_logdir / "ddp_gloo_2ranks", jitter_us=5, seed=2)
    files = sorted(str(p) for p in (tmp_path / "r64").glob("*.pt.trace.json"))
    assert len(files) == 64
    pool = summarize_files(files, jobs=2, cache_dir=tmp_path / "pool")
    _no_build_here(monkeypatch)
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dask = summarize_files(files, dask=client, cache_dir=tmp_path / "dask")
    assert {s.rank for s in dask} == set(range(64))
    for a, b in zip(pool, dask):
        assert_same_summary(a, b)
    assert_same_result(distributed_from_summaries(pool), distributed_from_summaries(dask))


def _url(folder) -> str:
    """A folder as an fsspec URL (local:// goes through fsspec, as s3:// or gs:// would)."""
    return f"local://{folder}"


def _entries(folder) -> list:
    return sorted(p.name for p in folder.glob("*.tbpc")) if folder.exists() else []


def test_summaries_kept_in_a_folder_given_by_url(gloo_files, tmp_path, monkeypatch):
    """--summaries URL: the summaries are written to and read from that folder through
    fsspec, not to the cache folder; a second pass builds nothing."""
    shared = tmp_path / "sums"
    first = summarize_files(gloo_files, jobs=2, cache_dir=tmp_path / "cache", summaries=_url(shared))
    assert len(_entries(shared)) == len(gloo_files) and not _entries(tmp_path / "cache" / "summaries")
    _no_build_here(monkeypatch)
    again = summarize_files(gloo_files, jobs=1, cache_dir=tmp_path / "other", summaries=_url(shared))
    for a, b in zip(first, again):
        assert_same_summary(a, b)
    runs = tb_profiler.summarize(sample_dir(gloo_files), span=1, jobs=1, summaries=_url(shared))
    assert [s.worker for s in runs] == ["rank0", "rank1"]


def test_summaries_folder_unreachable_still_gives_the_summaries(gloo_files, tmp_path):
    from tb_profiler.cache_folder import CacheWarning

    with pytest.warns(CacheWarning, match="nosuchproto://"):
        out = summarize_files(gloo_files[:1], jobs=1, cache_dir=tmp_path, summaries="nosuchproto://bucket/sums")
    assert isinstance(out[0], TraceSummary) and not out[0].collectives.empty


def test_dask_workers_write_to_the_shared_summaries_folder(gloo_files, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    local = summarize_files(gloo_files, jobs=1, cache_dir=tmp_path / "local")
    shared = tmp_path / "sums"
    _no_build_here(monkeypatch)
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = summarize_files(gloo_files, dask=client, cache_dir=tmp_path / "here", summaries=_url(shared))
        assert len(_entries(shared)) == len(gloo_files)  # written by the workers
        again = summarize_files(gloo_files, dask=client, cache_dir=tmp_path / "here", summaries=_url(shared))
    assert not _entries(tmp_path / "here" / "summaries")  # nothing stored by the caller
    for a, b, c in zip(local, remote, again):
        assert_same_summary(a, b)
        assert_same_summary(a, c)


def sample_dir(files: list[str]) -> str:
    import os

    return os.path.dirname(files[0])


def test_summarize_and_run_summaries(sample_logdir, tmp_path):
    run_dir = tmp_path / "ddp_gloo_2ranks"
    shutil.copytree(sample_logdir / "ddp_gloo_2ranks", run_dir)
    got = tb_profiler.summarize(run_dir, span=1, jobs=1, cache_dir=tmp_path / "cache")
    assert [(s.worker, s.span, s.rank) for s in got] == [("rank0", 1, 0), ("rank1", 1, 1)]
    run = tb_profiler.load_run(run_dir, cache_dir=tmp_path / "cache")
    latest = run.summaries()
    assert [s.span for s in latest] == [2, 2] and not run._traces  # no trace was loaded
    (run_dir / "rank2.1.pt.trace.json").write_text("{")
    with pytest.warns(SummaryWarning, match="rank2.1.pt.trace.json"):
        assert len(tb_profiler.load_run(run_dir, cache_dir=tmp_path / "cache").summaries(1)) == 2


def test_cli_summarize_prints_progress_and_a_table(sample_logdir, tmp_path, capsys):
    from tb_profiler.cli import main

    run = str(sample_logdir / "ddp_gloo_2ranks")
    assert main(["summarize", run, "--span", "1", "--jobs", "2", "--cache-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    progress = captured.err.splitlines()
    assert [line.split()[0] for line in progress] == ["[1/2]", "[2/2]"]
    assert all(line.endswith(" s") and ".pt.trace.json" in line for line in progress)
    assert "2 of 2 trace(s) summarized" in captured.out and "rank0" in captured.out
    assert main(["summarize", run, "--json", "--cache-dir", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(f["worker"], f["rank"], f["steps"], f["error"]) for f in doc["files"]] == \
        [("rank0", 0, 2, None), ("rank1", 1, 2, None)]
    assert all(0 < f["summary_bytes"] < 50_000 for f in doc["files"])
    assert main(["summarize", run, "--span", "9", "--cache-dir", str(tmp_path)]) == 1
    assert "has no span 9" in capsys.readouterr().err
    shared = tmp_path / "sums"
    assert main(["summarize", run, "--json", "--jobs", "1", "--summaries", _url(shared)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(0 < f["summary_bytes"] < 50_000 for f in doc["files"]) and len(_entries(shared)) == 2


def test_facts_named_by_the_comparison_exist():
    assert set(FACTS) <= {f for f in TraceSummary.__dataclass_fields__}


def test_pool_processes_see_the_environment_of_now(gloo_files, tmp_path, monkeypatch):
    """A setting made after the first summaries (the workers' start: they are kept) reaches the pool's
    processes: here a trace-size limit that every file is over."""
    first = summarize_files(gloo_files[:2], jobs=2, cache_dir=tmp_path / "a")
    assert all(isinstance(s, TraceSummary) for s in first)
    monkeypatch.setenv("TB_PROFILER_MAX_TRACE_BYTES", "1000")
    _no_build_here(monkeypatch)
    limited = summarize_files(gloo_files[:2], jobs=2, cache_dir=tmp_path / "b")
    assert all(isinstance(s, Exception) and "over the limit" in str(s) for s in limited), limited


# -- the worker processes (summary/procs.py) --------------------------------------------------

def _die_once_command(flag) -> str:
    """A shell command (run by a worker through os.system) that kills the worker running it
    the first time (no flag file yet) and exits 0 the second."""
    return f'if [ -e "{flag}" ]; then exit 0; fi; touch "{flag}"; kill -9 $PPID; sleep 1'


def test_a_task_whose_process_dies_is_tried_again_in_a_new_one(tmp_path):
    import os

    from tb_profiler.summary import procs

    got = dict(procs.run_tasks(os.system, [("dies once", (_die_once_command(tmp_path / "flag"),)),
                                           ("fine", ("exit 3",))], 2))
    assert got["dies once"] == 0 and (tmp_path / "flag").exists()  # second attempt, in a new process
    assert os.waitstatus_to_exitcode(got["fine"]) == 3


def test_a_task_that_kills_every_process_gets_worker_died(tmp_path):
    import os

    from tb_profiler.summary import procs

    got = dict(procs.run_tasks(os.system, [("killer", ("kill -9 $PPID; sleep 1",)), ("fine", ("exit 0",))], 2))
    assert isinstance(got["killer"], procs.WorkerDied) and "killed by SIGKILL" in str(got["killer"])
    assert got["fine"] == 0


def test_workers_are_kept_for_the_next_call_and_take_its_folder(tmp_path, monkeypatch):
    import os

    from tb_profiler.summary import procs

    first = {pid for _, pid in procs.run_tasks(os.getpid, [(i, ()) for i in range(4)], 2)}
    assert first and first <= set(procs.worker_pids()) and os.getpid() not in first
    monkeypatch.chdir(tmp_path)
    again = dict(procs.run_tasks(os.getcwd, [(0, ())], 2))
    assert again[0] == str(tmp_path)
    assert {pid for _, pid in procs.run_tasks(os.getpid, [(0, ())], 1)} <= first  # a kept one, not a new one


def test_a_worker_is_retired_after_its_share_of_tasks(monkeypatch):
    import collections
    import os
    import time

    from tb_profiler.summary import procs

    procs.stop_all()
    monkeypatch.setattr(procs, "TASKS_PER_WORKER", 2)
    pids = collections.Counter(pid for _, pid in procs.run_tasks(os.getpid, [(i, ()) for i in range(6)], 1))
    assert sorted(pids.values()) == [2, 2, 2]  # three processes, two tasks each
    deadline = time.monotonic() + 60
    while set(pids) & set(procs.worker_pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(pids) & set(procs.worker_pids())  # a retired one ended (its pipe was closed)


def test_idle_workers_end_by_themselves(monkeypatch):
    import os
    import time

    from tb_profiler.summary import procs

    procs.stop_all()
    monkeypatch.setattr(procs, "IDLE_S", 0.5)
    pids = {pid for _, pid in procs.run_tasks(os.getpid, [(0, ()), (1, ())], 2)}
    deadline = time.monotonic() + 60
    while pids & set(procs.worker_pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pids & set(procs.worker_pids())


def test_workers_end_when_their_parent_is_killed(tmp_path):
    """SIGKILL runs no handler: the workers notice their parent is gone and end."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, sys, time\n"
            "from tb_profiler.summary.procs import run_tasks\n"
            "pids = sorted({p for _, p in run_tasks(os.getpid, [(i, ()) for i in range(4)], 2)})\n"
            "print(' '.join(map(str, pids)), flush=True)\n"
            "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert pids

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except OSError:
            return False

    deadline = time.monotonic() + 60
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]


def test_signal_handlers_are_set_and_put_back():
    import signal

    from tb_profiler.summary import procs

    before = signal.getsignal(signal.SIGHUP)
    replaced = procs.stop_on_signals([signal.SIGHUP])
    try:
        assert getattr(signal.getsignal(signal.SIGHUP), "_tb_profiler_stop", False)
        assert procs.stop_on_signals([signal.SIGHUP]) == {}  # set once, not chained to itself
    finally:
        procs.restore_signals(replaced)
    assert signal.getsignal(signal.SIGHUP) == before
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert procs.stop_on_signals([signal.SIGHUP]) == {}  # nohup: stays ignored
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_forked_child_neither_uses_nor_stops_the_parents_workers():
    """os.fork in user code (or a fork-started DataLoader worker) copies the registry of
    workers: the child forgets them, so its exit cannot stop the parent's."""
    import os

    from tb_profiler.summary import procs

    mine = {pid for _, pid in procs.run_tasks(os.getpid, [(0, ()), (1, ())], 2)}
    assert mine <= set(procs.worker_pids())
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's verdict is its exit status
        ok = procs.worker_pids() == []
        procs.stop_all()  # what its atexit does: nothing of the parent's to stop
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert mine <= set(procs.worker_pids())
    assert {pid for _, pid in procs.run_tasks(os.getpid, [(0, ())], 1)} <= mine  # still alive, still used


def test_work_asked_while_exiting_is_refused_plainly(monkeypatch):
    """After the exit began (procs._at_exit), no worker is started: ProcessExiting, an
    ordinary end, not a bug."""
    import os
    import threading

    from tb_profiler.errors import ProcessExiting
    from tb_profiler.summary import procs

    procs.stop_all()
    closed = threading.Event()
    closed.set()
    monkeypatch.setattr(procs, "_CLOSED", closed)
    with pytest.raises(ProcessExiting, match="exiting"):
        list(procs.run_tasks(os.getpid, [(0, ())], 1))


def test_a_server_stopped_while_summarizing_says_so_without_a_traceback(tmp_path, monkeypatch, caplog):
    """TensorBoard stopped while the summary thread worked: one plain line in the log (the
    files are marked not summarized), not a traceback as for a bug."""
    import logging

    from datafiles import V100_TRACE

    from tb_profiler.errors import ProcessExiting
    from tb_profiler.plugin.loading import S_FAILED
    from tb_profiler.plugin.state import ProfilerState

    (tmp_path / "log" / "run").mkdir(parents=True)
    shutil.copy(V100_TRACE, tmp_path / "log" / "run" / V100_TRACE.name)

    def exiting(self, chunk):
        raise ProcessExiting("tb_profiler: this process is exiting: no new summary worker is started")

    monkeypatch.setattr(ProfilerState, "_summarize", exiting)
    state = ProfilerState(str(tmp_path / "log"), reload_s=3600, cache_dir=str(tmp_path / "cache")).start()
    try:
        with caplog.at_level(logging.INFO, logger="tb_profiler"):
            entries = state.entries()
            assert entries
            state.request_summaries(entries)
            assert state.wait_summarized(entries, 30)
        assert all(e.summary_state == S_FAILED for e in entries)
        said = [r for r in caplog.records if "summaries not made" in r.getMessage()]
        assert said and all(r.exc_info is None and r.levelno == logging.INFO for r in said)
        assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    finally:
        state.stop()
