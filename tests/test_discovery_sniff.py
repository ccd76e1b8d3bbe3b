"""Every trace file is seen: JSON files not named ``*.pt.trace.json[.gz]`` (HTA's test data,
job launchers: ``rank-0.json.gz``, ``trace.json``, ``..._trace.json.gz``) are traces when
their head says so, named by their file name; every other JSON file in a run folder is
listed with its reason. Discovery reads only heads, once per file version.
"""
from __future__ import annotations

import builtins
import gzip
import json
import os
import time
from pathlib import Path

import pytest
from werkzeug.test import Client

import tb_profiler
from tb_profiler import cli
from tb_profiler.io import discovery, read
from tb_profiler.io.discovery import SNIFF_BYTES, classify_head, discover, sniff, worker_name
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState

P = "/data/plugin/pytorch_profiler/"


def rank_trace(rank: int, world: int = 2, steps: int = 3) -> dict:
    """A Kineto trace of one rank: steps of 1 ms, an op and an allreduce in each."""
    events = [{"ph": "M", "name": "process_name", "pid": 100 + rank, "tid": 0, "args": {"name": f"rank {rank}"}}]
    for s in range(steps):
        t0 = 1_000_000 + 1000 * s
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 100 + rank, "tid": 1,
             "ts": t0, "dur": 1000},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100 + rank, "tid": 1, "ts": t0 + 100, "dur": 300},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100 + rank, "tid": 1, "ts": t0 + 500,
             "dur": 200, "args": {"Collective name": "allreduce", "Process Group Name": "0", "Seq": s}},
        ]
    return {"schemaVersion": 1,
            "deviceProperties": [{"id": d, "name": "NVIDIA H100", "totalGlobalMem": 85e9} for d in range(8)],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "traceEvents": events}


def write(path: Path, doc, gz: bool | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if (gz if gz is not None else path.suffix == ".gz") else data)
    return path


@pytest.fixture
def two_ranks(tmp_path) -> Path:
    """A real job's folder: two ranks named by the launcher, next to other JSON files."""
    run = tmp_path / "job"
    write(run / "rank-0.json.gz", rank_trace(0))
    write(run / "rank-1.json.gz", rank_trace(1))
    # Named like a trace, but Chrome's trace-viewer export of something else: no traceEvents.
    write(run / "trace.json", {"displayTimeUnit": "ns", "systemTraceEvents": "", "otherData": {}})
    write(run / "config.json", {"lr": 0.1, "batch_size": 32})
    write(run / "metrics.json.gz", [1.5, 1.25, 1.0])
    return run


SKIP_REASONS = {
    "config.json": "JSON, but not a Kineto trace: no traceEvents in the file",
    "metrics.json.gz": 'a JSON array, but not of trace events (no "ph" in the file)',
    "trace.json": "JSON, but not a Kineto trace: no traceEvents in the file",
}


def reasons(skipped) -> dict[str, str]:
    return {os.path.basename(s.path if hasattr(s, "path") else s["path"]): s.reason if hasattr(s, "reason")
            else s["reason"] for s in skipped}


def test_two_rank_folder_is_one_run(two_ranks):
    d = discover(two_ranks)
    assert [r.name for r in d.runs] == ["job"]
    workers = d.run("job").workers
    assert list(workers) == ["rank-0", "rank-1"]
    assert [(s.span, s.index, os.path.basename(s.path)) for s in workers["rank-1"]] == [(None, 1, "rank-1.json.gz")]
    assert reasons(d.skipped) == SKIP_REASONS


def test_load_run_sees_both_ranks(two_ranks):
    run = tb_profiler.load_run(two_ranks, cache=False)
    assert run.workers == ["rank-0", "rank-1"]
    dist = run.distributed()
    assert dist["ranks"]["rank"].tolist() == [0, 1]
    assert dist["ranks"]["worker"].tolist() == ["rank-0", "rank-1"]
    assert reasons(run.skipped) == SKIP_REASONS


def test_cli_runs_and_info_agree(two_ranks, tmp_path, capsys):
    assert cli.main(["runs", "--json", str(two_ranks)]) == cli.EXIT_OK
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [r["name"] for r in doc["runs"]] == ["job"]
    assert list(doc["runs"][0]["workers"]) == ["rank-0", "rank-1"]
    assert reasons(doc["skipped"]) == SKIP_REASONS
    assert "no runs found" not in captured.err

    assert cli.main(["info", "--json", "--cache-dir", str(tmp_path / "cache"), str(two_ranks)]) == cli.EXIT_OK
    docs = json.loads(capsys.readouterr().out)
    assert [os.path.basename(d["path"]) for d in docs] == ["rank-0.json.gz", "rank-1.json.gz"]
    assert [d["distributed"]["rank"] for d in docs] == [0, 1]
    assert [d["steps"] for d in docs] == [[1, 2, 3], [1, 2, 3]]


def test_cli_wording_without_traces(tmp_path, capsys):
    write(tmp_path / "empty_run" / "config.json", {"lr": 0.1})
    assert cli.main(["runs", str(tmp_path / "empty_run")]) == cli.EXIT_BAD_INPUT
    assert "no runs found (no trace files)" in capsys.readouterr().err
    assert cli.main(["info", str(tmp_path / "empty_run")]) == cli.EXIT_BAD_INPUT
    assert "no trace files found" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no trace files found"):
        tb_profiler.load_run(tmp_path / "empty_run")


def test_plugin_lists_the_run_its_workers_and_the_skipped_files(two_ranks, tmp_path):
    state = ProfilerState(str(two_ranks.parent), reload_s=0.2, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        c = Client(app)

        def get(route):
            r = c.get(P + route)
            assert r.status_code == 200, (route, r.status_code, r.get_data()[:300])
            return json.loads(r.get_data())

        end = time.monotonic() + 30
        while get("status")["loading"] and time.monotonic() < end:
            time.sleep(0.05)
        assert get("runs")["runs"] == ["job"]
        assert get("workers?run=job") == ["rank-0", "rank-1"]
        assert get("spans?run=job&worker=rank-1") == ["1"]
        assert reasons(get("skipped")["skipped"]) == SKIP_REASONS
        assert get("overview?run=job&worker=rank-1&span=1")["summary"]["num_steps"] == 3
    finally:
        state.stop()
        app.close()


def test_both_namings_in_one_folder_form_one_run(tmp_path):
    run = tmp_path / "mixed"
    write(run / "w.1700000000.pt.trace.json", rank_trace(0))
    write(run / "rank-3_trace.json", rank_trace(3, 4))
    write(run / "step.trace.json.gz", rank_trace(2, 4))
    write(run / "rank-10.json", rank_trace(1, 4))
    d = discover(tmp_path)
    assert [r.name for r in d.runs] == ["mixed"] and d.skipped == []
    assert list(d.run("mixed").workers) == ["rank-3", "rank-10", "step", "w"]  # rank-3 before rank-10
    assert d.run("mixed").workers["w"][0].span == "1700000000"


def test_a_folder_holding_only_trace_json_is_a_run(tmp_path):
    write(tmp_path / "hta" / "trace.json", rank_trace(0, 1))
    run = tb_profiler.load_run(tmp_path / "hta", cache=False)
    assert run.workers == ["trace"] and len(run.trace().steps) == 3


@pytest.mark.parametrize("name, worker", [
    ("rank-0.json.gz", "rank-0"), ("trace.json", "trace"), ("step_trace.json.gz", "step"),
    ("node1.rank7.trace.json", "node1.rank7"), ("_trace.json", "_trace"),
    ("w.5.pt.trace.json.gz", "w"),
])
def test_worker_names(name, worker):
    assert worker_name(name)[0] == worker


@pytest.mark.parametrize("head, trace", [
    (b'{"traceEvents": [', True),
    (b'\xef\xbb\xbf \n{"schemaVersion": 1, "traceEvents"  :\n [{"ph": "X"}]}', True),
    (b'[{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}]', True),  # the legacy bare array
    (b'[\n  {"ph": "X"', True),
    (b'{"events": [{"ph": "X"}], "note": "traceEvents"}', False),  # the word, not the key
    # a 1,024-rank job's distributedInfo can fill the head before "traceEvents" comes
    (b'{"schemaVersion": 1, "deviceProperties": [{"id": 0}], "distributedInfo": {"pg_config": [', True),
    (b'{"schemaVersion": "2.0", "name": "some other tool"}', False),
    (b'[1, 2, {"ph": 3}]', False),
    (b'[]', False),
    (b'name,ts\nmm,1\n', False),
    (b'   ', False),
])
def test_classify_head(head, trace):
    assert classify_head(head).trace is trace


def test_trace_events_beyond_the_head_is_not_found_and_says_where_it_looked(tmp_path):
    doc = {"schemaVersion": 1, "blob": "x" * (SNIFF_BYTES + 10), "traceEvents": []}
    p = write(tmp_path / "run" / "late.json", doc)
    found = sniff(str(p), p.stat().st_size, p.stat().st_mtime)
    assert not found.trace and found.reason == "JSON, but not a Kineto trace: no traceEvents in its first 64 KiB"


def test_sniff_reads_only_the_head_of_a_big_gzip(tmp_path, monkeypatch):
    doc = rank_trace(0, steps=20_000)
    data = gzip.compress(json.dumps(doc).encode())
    p = tmp_path / "run" / "big.json.gz"
    p.parent.mkdir()
    p.write_bytes(data[: len(data) // 2])  # cut in half: only a full read would notice
    read_bytes = []
    real = read.open_regular

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            out = self.f.read(n)
            read_bytes.append(len(out))
            return out

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(read, "open_regular", lambda path: Counting(real(path)))
    d = discover(tmp_path)
    assert list(d.run("run").workers) == ["big"]
    assert 0 < sum(read_bytes) <= SNIFF_BYTES and p.stat().st_size > 4 * sum(read_bytes)
    monkeypatch.undo()
    # The load reports the damage the head could not show.
    with pytest.raises(tb_profiler.TraceFormatError, match="truncated gzip"):
        tb_profiler.load(p, cache=False)


def test_unchanged_files_are_not_read_again(two_ranks, monkeypatch):
    first = discover(two_ranks.parent)

    def no_open(*a, **k):
        raise AssertionError(f"discover opened a file again: {a}")

    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    assert discover(two_ranks.parent) == first
    monkeypatch.undo()
    # A new version (size and mtime change) is read again: now a trace.
    write(two_ranks / "config.json", rank_trace(5, 6))
    again = discover(two_ranks.parent)
    assert list(again.run("job").workers) == ["config", "rank-0", "rank-1"]


def test_empty_and_corrupt_json_in_a_run_folder_are_listed(two_ranks):
    (two_ranks / "rank-2.json").write_bytes(b"")
    (two_ranks / "rank-3.json.gz").write_bytes(b"\x1f\x8b" + b"\xff" * 64)
    r = reasons(discover(two_ranks).skipped)
    assert r["rank-2.json"] == discovery.EMPTY
    assert r["rank-3.json.gz"].startswith("not a readable gzip file")


def test_non_trace_json_outside_run_folders_is_not_reported(tmp_path):
    write(tmp_path / "run" / "rank-0.json", rank_trace(0))
    write(tmp_path / "configs" / "model.json", {"layers": 50})
    d = discover(tmp_path)
    assert [r.name for r in d.runs] == ["run"] and d.skipped == []


def test_memory_filesystem_traces_by_content():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = "/tbp-sniff"
    try:
        fs.pipe(f"{root}/job/rank-0.json.gz", gzip.compress(json.dumps(rank_trace(0)).encode()))
        fs.pipe(f"{root}/job/rank-1.json", json.dumps(rank_trace(1)).encode())
        fs.pipe(f"{root}/job/config.json", b'{"lr": 0.1}')
        d = discover(f"memory:/{root}")
        assert [r.name for r in d.runs] == ["job"]
        assert list(d.run("job").workers) == ["rank-0", "rank-1"]
        assert reasons(d.skipped) == {"config.json": SKIP_REASONS["config.json"]}
        run = tb_profiler.load_run(f"memory:/{root}/job", cache=False)
        assert run.distributed()["ranks"]["rank"].tolist() == [0, 1]
    finally:
        fs.rm(root, recursive=True)


def test_plugin_orders_workers_as_discovery_does(tmp_path):
    for rank in (10, 2):
        write(tmp_path / "log" / "job" / f"rank-{rank}.json", rank_trace(rank, 11))
    state = ProfilerState(str(tmp_path / "log"), reload_s=0.2, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        c = Client(app)
        assert json.loads(c.get(P + "runs").get_data())["runs"] == ["job"]
        end = time.monotonic() + 30
        while json.loads(c.get(P + "status").get_data())["loading"] and time.monotonic() < end:
            time.sleep(0.05)
        assert json.loads(c.get(P + "workers?run=job").get_data()) == ["rank-2", "rank-10"]
        status = json.loads(c.get(P + "status").get_data())
        assert list(status["runs"][0]["workers"]) == ["rank-2", "rank-10"]
    finally:
        state.stop()
        app.close()
