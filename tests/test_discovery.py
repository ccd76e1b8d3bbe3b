"""Logdir discovery: runs, workers, spans, and every skipped file with its reason."""
from __future__ import annotations

import builtins
import os
from pathlib import Path

import pytest

from tb_profiler.io import discovery
from tb_profiler.io.discovery import discover, parse_trace_name

BODY = b'{"traceEvents": []}'


def touch(path: Path, data: bytes = BODY) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def reasons(d) -> dict[str, str]:
    return {os.path.basename(s.path): s.reason for s in d.skipped}


@pytest.mark.parametrize("name, expect", [
    ("w.pt.trace.json", ("w", None)),
    ("w.123.pt.trace.json.gz", ("w", "123")),
    ("host.domain_123.1690000000.pt.trace.json.gz", ("host.domain_123", "1690000000")),
    ("a.1.2.pt.trace.json", ("a.1", "2")),
    ("worker0.pt.trace.json.zst", None),
    ("trace.json", None),
])
def test_parse_trace_name(name, expect):
    assert parse_trace_name(name) == expect


def test_nested_runs_workers_spans(tmp_path):
    log = tmp_path / "log"
    touch(log / "root_w.pt.trace.json")
    touch(log / "a" / "w0.10.pt.trace.json")
    touch(log / "a" / "w0.9.pt.trace.json.gz")
    touch(log / "a" / "w1.5.pt.trace.json")
    touch(log / "a" / "b" / "host.domain_123.1690000000.pt.trace.json.gz")
    touch(log / "a" / "notes.txt", b"hello")
    (log / "empty_folder").mkdir()
    d = discover(log)
    assert [r.name for r in d.runs] == ["a", "a/b", "log"]
    assert d.skipped == []
    a = d.run("a")
    assert a.path == str(log / "a")
    assert list(a.workers) == ["w0", "w1"]
    # numeric order (text order would put "10" first), 1-based index
    assert [(s.span, s.index) for s in a.workers["w0"]] == [("9", 1), ("10", 2)]
    assert a.workers["w0"][0].path == str(log / "a" / "w0.9.pt.trace.json.gz")
    assert a.workers["w0"][0].size == len(BODY) and a.workers["w0"][0].mtime > 0
    assert list(d.run("a/b").workers) == ["host.domain_123"]
    assert d.run("a/b").workers["host.domain_123"][0].span == "1690000000"
    assert d.run("log").workers["root_w"][0].span is None


def test_root_run_name_collision(tmp_path):
    log = tmp_path / "x"
    touch(log / "w.pt.trace.json")
    touch(log / "x" / "w.pt.trace.json")
    assert [r.name for r in discover(log).runs] == [".", "x"]


def test_hidden_and_writer_temp_files_ignored(tmp_path):
    touch(tmp_path / "run" / "w.1.pt.trace.json")
    touch(tmp_path / "run" / ".w.2.pt.trace.json.tmp-1234")
    touch(tmp_path / "run" / ".w.3.pt.trace.json.gz.tmp-1234-gz", b"")
    touch(tmp_path / "run" / ".hidden.pt.trace.json")
    touch(tmp_path / ".ipynb_checkpoints" / "w.pt.trace.json")
    d = discover(tmp_path)
    assert [r.name for r in d.runs] == ["run"]
    assert [s.span for s in d.run("run").workers["w"]] == ["1"]
    assert d.skipped == []


def test_skip_reasons(tmp_path):
    run = tmp_path / "run"
    touch(run / "good.1.pt.trace.json")
    touch(run / "empty.1.pt.trace.json", b"")
    touch(run / "trace.json")                       # named otherwise, a trace by its head: worker "trace"
    touch(run / "config.json", b'{"lr": 0.1}')      # JSON in a run folder, not a trace
    touch(run / "w.pt.trace.json.zst")              # other compression
    touch(run / "w.pt.trace.json.bak")              # other suffix
    touch(run / "dup.7.pt.trace.json")
    os.utime(run / "dup.7.pt.trace.json", (1, 1))  # older: the .gz one is kept
    touch(run / "dup.7.pt.trace.json.gz")
    (run / "folder.pt.trace.json").mkdir()
    os.mkfifo(run / "fifo.pt.trace.json")
    touch(tmp_path / "other" / "config.json", b'{"lr": 0.1}')  # not a run folder: not reported
    d = discover(tmp_path)
    r = reasons(d)
    assert set(r) == {"empty.1.pt.trace.json", "config.json", "w.pt.trace.json.zst", "w.pt.trace.json.bak",
                      "dup.7.pt.trace.json", "folder.pt.trace.json", "fifo.pt.trace.json"}
    assert r["empty.1.pt.trace.json"].startswith("empty file")
    assert r["config.json"] == "JSON, but not a Kineto trace: no traceEvents in the file"
    assert "only '.gz' is supported" in r["w.pt.trace.json.zst"]
    assert "'.bak'" in r["w.pt.trace.json.bak"]
    assert "dup.7.pt.trace.json.gz" in r["dup.7.pt.trace.json"]
    assert "folder" in r["folder.pt.trace.json"]
    assert r["fifo.pt.trace.json"] == discovery.NOT_REGULAR
    assert [r.name for r in d.runs] == ["run"]
    assert sorted(d.run("run").workers) == ["dup", "good", "trace"]
    assert d.run("run").workers["dup"][0].path.endswith(".gz")


def test_unreadable(tmp_path, monkeypatch):
    touch(tmp_path / "run" / "ok.pt.trace.json")
    locked = touch(tmp_path / "run" / "locked.pt.trace.json")
    real = os.access
    monkeypatch.setattr(discovery.os, "access", lambda p, m: False if str(p) == str(locked) else real(p, m))
    d = discover(tmp_path)
    assert reasons(d) == {"locked.pt.trace.json": discovery.UNREADABLE}
    assert list(d.run("run").workers) == ["ok"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_for_real(tmp_path):
    locked = touch(tmp_path / "run" / "locked.pt.trace.json")
    locked.chmod(0)
    try:
        assert reasons(discover(tmp_path)) == {"locked.pt.trace.json": discovery.UNREADABLE}
    finally:
        locked.chmod(0o644)


def test_symlinks(tmp_path):
    log, outside = tmp_path / "log", tmp_path / "outside"
    secret = touch(outside / "secret.pt.trace.json")
    touch(outside / "run" / "w.pt.trace.json")
    real = touch(log / "run" / "w.1.pt.trace.json")
    (log / "run" / "latest.pt.trace.json").symlink_to(real)          # inside: fine
    (log / "run" / "leak.pt.trace.json").symlink_to(secret)          # file outside
    (log / "run" / "broken.pt.trace.json").symlink_to(log / "nope")  # dangling
    (log / "linked_run").symlink_to(outside / "run")                 # folder outside
    (log / "alias").symlink_to(log / "run")                          # folder inside
    (log / "run" / "up.pt.trace.json").symlink_to("../../outside/secret.pt.trace.json")
    d = discover(log)
    r = reasons(d)
    assert r == {"leak.pt.trace.json": discovery.LINK_OUTSIDE, "broken.pt.trace.json": discovery.BROKEN_LINK,
                 "linked_run": discovery.LINK_OUTSIDE, "alias": discovery.LINK_DIR_INSIDE,
                 "up.pt.trace.json": discovery.LINK_OUTSIDE}
    assert [r.name for r in d.runs] == ["run"]
    assert sorted(d.run("run").workers) == ["latest", "w"]
    assert all(str(outside) not in s.path for run in d.runs for s in run.files)


def test_no_content_reads_and_repeatable(tmp_path, monkeypatch):
    touch(tmp_path / "run" / "w.1.pt.trace.json")
    first = discover(tmp_path)

    def no_open(*a, **k):
        raise AssertionError(f"discover opened a file: {a}")

    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    again = discover(tmp_path)
    assert again == first
    monkeypatch.undo()
    touch(tmp_path / "run" / "w.2.pt.trace.json")
    assert discover(tmp_path) != first


def test_missing_logdir(tmp_path):
    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "nope")


def test_memory_logdir():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = "/tbp-discovery"
    try:
        fs.pipe(f"{root}/r1/w.2.pt.trace.json", BODY)
        fs.pipe(f"{root}/r1/w.10.pt.trace.json.gz", BODY)
        fs.pipe(f"{root}/r1/sub/host.domain_1.5.pt.trace.json", BODY)
        fs.pipe(f"{root}/r1/empty.pt.trace.json", b"")
        fs.pipe(f"{root}/r1/.w.3.pt.trace.json.tmp-1", BODY)
        fs.pipe(f"{root}/r1/a/../escape.pt.trace.json", BODY)
        fs.pipe(f"{root}/top.pt.trace.json", BODY)
        d = discover(f"memory:/{root}")
        assert [r.name for r in d.runs] == ["r1", "r1/sub", "tbp-discovery"]
        w = d.run("r1").workers["w"]
        assert [(s.span, s.index) for s in w] == [("2", 1), ("10", 2)]
        assert w[0].path == f"memory://{root}/r1/w.2.pt.trace.json" and w[0].size == len(BODY)
        assert fsspec.open(w[0].path).open().read() == BODY
        assert list(d.run("r1/sub").workers) == ["host.domain_1"]
        assert reasons(d) == {"empty.pt.trace.json": discovery.EMPTY, "escape.pt.trace.json": discovery.DOTDOT}
    finally:
        fs.rm(root, recursive=True)
