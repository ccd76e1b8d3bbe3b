"""The trace writer: torch-compatible names, atomic publication, gzip, fsspec URLs."""
from __future__ import annotations

import gzip
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tb_profiler import writer
from tb_profiler.io.discovery import discover
from tb_profiler.writer import is_temp_name, tensorboard_trace_handler

ROOT = Path(__file__).resolve().parent.parent
NAME_RE = re.compile(r"^(?P<worker>.+)\.(?P<ns>\d{19})\.pt\.trace\.json(?P<gz>\.gz)?$")


def _profile(handler, steps_per_cycle: int = 4, repeat: int = 2) -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    a = torch.randn(16, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=repeat),
                                on_trace_ready=handler) as prof:
        for _ in range(steps_per_cycle * repeat):
            (a @ a).relu_()
            prof.step()


class FakeProf:
    """Stands in for torch's profiler: writes a JSON trace, optionally slowly."""

    def __init__(self, chunks: int = 1, delay: float = 0.0, fail: bool = False):
        self.chunks, self.delay, self.fail, self.paths = chunks, delay, fail, []

    def export_chrome_trace(self, path: str, use_python_export: bool = False) -> None:
        self.paths.append(path)
        events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(2000)]
        text = json.dumps({"traceEvents": events})
        step = len(text) // self.chunks + 1
        with open(path, "w") as f:
            for i in range(0, len(text), step):
                f.write(text[i:i + step])
                f.flush()
                if self.fail and i > 0:
                    raise RuntimeError("export died")
                time.sleep(self.delay)


def test_same_signature_as_torch():
    torch = pytest.importorskip("torch")
    ours = inspect.signature(tensorboard_trace_handler).parameters
    theirs = inspect.signature(torch.profiler.tensorboard_trace_handler).parameters
    assert [(p.name, p.default) for p in ours.values()] == [(p.name, p.default) for p in theirs.values()]


def test_repeat_two_writes_two_files(tmp_path):
    run = tmp_path / "run"  # created by the handler
    _profile(tensorboard_trace_handler(str(run), worker_name="w0"))
    names = sorted(os.listdir(run))
    assert len(names) == 2, names
    stamps = []
    for n in names:
        m = NAME_RE.match(n)
        assert m and m["worker"] == "w0" and not m["gz"], n
        stamps.append(int(m["ns"]))
        doc = json.loads((run / n).read_text())
        assert any(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])
    assert stamps[0] < stamps[1]
    d = discover(run)
    assert [len(s) for s in d.runs[0].workers.values()] == [2]


def test_gzip_reads_back(tmp_path):
    _profile(tensorboard_trace_handler(tmp_path, worker_name="gz", use_gzip=True))
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2 and all(NAME_RE.match(n)["gz"] for n in names), names
    for n in names:
        raw = (tmp_path / n).read_bytes()
        assert raw[:2] == b"\x1f\x8b"
        assert "traceEvents" in json.loads(gzip.decompress(raw))


def test_default_worker_name_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    theirs, ours = FakeProf(), FakeProf()
    torch.profiler.tensorboard_trace_handler(str(tmp_path / "t"))(theirs)
    written = tensorboard_trace_handler(str(tmp_path / "o"))(ours)
    expect = f"{socket.gethostname()}_{os.getpid()}"
    assert NAME_RE.match(os.path.basename(theirs.paths[0]))["worker"] == expect
    assert NAME_RE.match(os.path.basename(written))["worker"] == expect
    assert writer.default_worker_name() == expect


def test_temp_name_is_hidden_and_not_a_trace(tmp_path):
    prof = FakeProf()
    final = tensorboard_trace_handler(tmp_path, worker_name="w")(prof)
    tmp = os.path.basename(prof.paths[0])
    assert tmp.startswith(".") and is_temp_name(tmp) and not tmp.endswith((".json", ".gz"))
    assert os.path.basename(final) in tmp
    assert os.listdir(tmp_path) == [os.path.basename(final)]


def test_published_with_os_replace(tmp_path, monkeypatch):
    calls = []
    real = os.replace
    monkeypatch.setattr(writer.os, "replace", lambda a, b: (calls.append((a, b)), real(a, b))[1])
    for gz in (False, True):
        final = tensorboard_trace_handler(tmp_path, worker_name=f"w{gz}", use_gzip=gz)(FakeProf())
        src, dst = calls[-1]
        assert dst == final and is_temp_name(os.path.basename(src)) and os.path.dirname(src) == str(tmp_path)


def _poll_during_writes(folder: Path, handler, use_gzip: bool):
    """Write two traces slowly through ``handler`` while a thread reads every trace it sees."""
    stop, seen, temps, errors = threading.Event(), set(), set(), []

    def poll_once():
        for name in os.listdir(folder):
            if is_temp_name(name):
                temps.add(name)
                continue
            try:
                raw = (folder / name).read_bytes()
                json.loads(gzip.decompress(raw) if use_gzip else raw)
                seen.add(name)
            except Exception as e:  # noqa: BLE001
                errors.append((name, repr(e)))
        listed = [os.path.basename(f.path) for r in discover(folder).runs for f in r.files]
        errors.extend(("listed temp", n) for n in listed if is_temp_name(n))

    def poll():
        while not stop.is_set():
            poll_once()

    t = threading.Thread(target=poll)
    t.start()
    try:
        for _ in range(2):
            handler(FakeProf(chunks=20, delay=0.01))
    finally:
        stop.set()
        t.join()
    poll_once()  # the last file may land after the poller's last look
    return seen, temps, errors


@pytest.mark.parametrize("use_gzip", [False, True])
def test_poller_never_sees_a_partial_file(tmp_path, use_gzip):
    seen, temps, errors = _poll_during_writes(
        tmp_path, tensorboard_trace_handler(tmp_path, worker_name="slow", use_gzip=use_gzip), use_gzip)
    assert not errors, errors
    assert temps, "the poller should have caught a temp file mid-write"
    assert len(seen) == 2 and all(NAME_RE.match(n) for n in seen)
    assert discover(tmp_path).skipped == []


def test_poller_catches_torchs_partial_files(tmp_path):
    """Control: the same poller does see half-written files from torch's own handler."""
    torch = pytest.importorskip("torch")
    _, _, errors = _poll_during_writes(
        tmp_path, torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="torch"), False)
    assert errors


def test_failed_export_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="export died"):
        tensorboard_trace_handler(tmp_path, worker_name="w")(FakeProf(chunks=5, fail=True))
    assert os.listdir(tmp_path) == []


def test_cannot_create_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RuntimeError, match="Can't create directory"):
        tensorboard_trace_handler(str(blocker / "sub"))(FakeProf())


def test_file_url(tmp_path):
    final = tensorboard_trace_handler(f"file://{tmp_path}/r", worker_name="w")(FakeProf())
    assert os.path.dirname(final) == f"{tmp_path}/r" and os.path.exists(final)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_memory_url(use_gzip):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    url = f"memory://tbp-writer-{use_gzip}/run"
    try:
        _profile(tensorboard_trace_handler(url, worker_name="mem", use_gzip=use_gzip))
        names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"/tbp-writer-{use_gzip}/run", detail=False))
        assert len(names) == 2 and all(NAME_RE.match(n) for n in names), names
        for n in names:
            raw = fs.cat(f"/tbp-writer-{use_gzip}/run/{n}")
            assert "traceEvents" in json.loads(gzip.decompress(raw) if use_gzip else raw)
        d = discover(url)
        assert [len(v) for v in d.runs[0].workers.values()] == [2] and not d.skipped
    finally:
        fs.rm(f"/tbp-writer-{use_gzip}", recursive=True)


def test_memory_url_failed_upload_leaves_nothing(monkeypatch):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    monkeypatch.setattr(type(fs), "mv", lambda self, *a, **k: (_ for _ in ()).throw(OSError("network down")))
    with pytest.raises(OSError, match="network down"):
        tensorboard_trace_handler("memory://tbp-writer-fail/run", worker_name="w")(FakeProf())
    assert fs.find("/tbp-writer-fail") == []


def test_import_does_not_import_torch():
    code = ("import sys, tb_profiler, tb_profiler.writer, tb_profiler.io.discovery\n"
            "h = tb_profiler.tensorboard_trace_handler('/nonexistent-never-called')\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("use_gzip", [False, True])
def test_records_source_roots(tmp_path, use_gzip):
    """Every file carries the process's source roots (cwd, sys.path folders), readable by
    the loader as a top-level key; torch's relative frame names resolve against them."""
    from tb_profiler.trace import load

    _profile(tensorboard_trace_handler(tmp_path, worker_name="w", use_gzip=use_gzip), repeat=1)
    (name,) = os.listdir(tmp_path)
    raw = (tmp_path / name).read_bytes()
    doc = json.loads(gzip.decompress(raw) if use_gzip else raw)
    roots = doc[writer.SOURCE_ROOTS_KEY]
    assert os.getcwd() in roots
    assert [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) not in roots] == []
    assert all(os.path.isabs(r) and os.path.isdir(r) for r in roots)
    assert roots == sorted(roots, reverse=True)  # torch's prefix order: the deepest first
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])
    assert load(str(tmp_path / name), cache=False).metadata[writer.SOURCE_ROOTS_KEY] == roots


@pytest.mark.parametrize("text", ['{"traceEvents": []}', '{"traceEvents": [],\n "traceName": "x" }\n\n  ',
                                  '{"a": 1,"traceEvents": [{"ph": "X"}]}', '{"traceEvents": []}' + " " * 300])
def test_add_source_roots_keeps_valid_json(tmp_path, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert writer.add_source_roots(str(path), ["/a", "/b\u00e9"])
    doc = json.loads(path.read_text())
    assert doc == {**json.loads(text), writer.SOURCE_ROOTS_KEY: ["/a", "/b\u00e9"]}


@pytest.mark.parametrize("text", ["[]", '[{"ph": "X"}]', "{}", " {  }\n", "", "garbage"])
def test_add_source_roots_leaves_other_files_alone(tmp_path, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert not writer.add_source_roots(str(path), ["/a"])
    assert path.read_text() == text


def test_source_roots_skip_what_is_not_a_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", ["", str(tmp_path / "missing.zip"), str(tmp_path), 3])
    roots = writer.source_roots()
    assert str(tmp_path) in roots and os.getcwd() in roots
    assert str(tmp_path / "missing.zip") not in roots


def test_failed_roots_write_leaves_the_trace_as_exported(tmp_path, monkeypatch):
    """A write that fails half way (disk full) is undone: the trace stays valid JSON."""
    import io

    text = '{"traceEvents": [{"ph": "X", "name": "a"}], "traceName": "x"}\n'
    path = tmp_path / "t.json"
    path.write_text(text)
    real_write = io.FileIO.write

    class Short(io.FileIO):
        def write(self, data):
            if len(data) > 8:  # the roots entry, not the restore
                return real_write(self, bytes(data)[:8])
            return real_write(self, data)

    monkeypatch.setattr(writer, "open", lambda p, mode, buffering=-1: Short(p, "r+"), raising=False)
    assert not writer.add_source_roots(str(path), ["/a" * 50])
    assert path.read_text() == text


def _doc(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


@pytest.mark.parametrize("use_gzip,use_python_export", [(False, False), (True, False), (False, True)])
def test_trace_name_is_the_final_path_as_torchs_handler_writes_it(tmp_path, use_gzip, use_python_export):
    """traceName is the path the file is published at, in the form torch's own handler
    gives it (os.path.join(dir_name, file_name): dir_name as the caller wrote it), never
    our temporary name; with use_gzip too (torch's handler writes its temp file's name
    there then)."""
    torch = pytest.importorskip("torch")
    ours_dir, theirs_dir = tmp_path / "ours", tmp_path / "theirs"
    _profile(tensorboard_trace_handler(str(ours_dir), worker_name="w", use_gzip=use_gzip,
                                       use_python_export=use_python_export), repeat=1)
    _profile(torch.profiler.tensorboard_trace_handler(str(theirs_dir), worker_name="w",
                                                      use_python_export=use_python_export), repeat=1)
    (ours,), (theirs,) = os.listdir(ours_dir), os.listdir(theirs_dir)
    assert _doc(theirs_dir / theirs)["traceName"] == os.path.join(str(theirs_dir), theirs)  # torch's form
    doc = _doc(ours_dir / ours)
    assert doc["traceName"] == os.path.join(str(ours_dir), ours)
    assert not is_temp_name(os.path.basename(doc["traceName"]))
    assert doc[writer.SOURCE_ROOTS_KEY] and any(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])


def test_trace_name_of_a_relative_folder_and_a_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    final = tensorboard_trace_handler("rel/run", worker_name="w")(FakeProf())  # FakeProf writes no traceName
    assert final.startswith("rel/run/") and _doc(tmp_path / final)["traceName"] == final  # added, as given
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    try:
        url = tensorboard_trace_handler("memory://tbp-writer-name/run", worker_name="w", use_gzip=True)(FakeProf())
        name = url.rsplit("/", 1)[-1]
        assert json.loads(gzip.decompress(fs.cat(f"/tbp-writer-name/run/{name}")))["traceName"] == \
            f"memory://tbp-writer-name/run/{name}"
    finally:
        fs.rm("/tbp-writer-name", recursive=True)


@pytest.mark.parametrize("text,expect_name", [
    ('{"traceEvents": [],"traceName": "/d/.w.1.pt.trace.json.tmp-12" }\n', "/d/w.1.pt.trace.json"),  # Kineto's
    ('{"traceEvents": [],\n"traceName": "/d/.w.tmp-1 \\" q"\n}\n', "/d/w.1.pt.trace.json"),  # torch's Python export
    ('{"traceEvents": []}', "/d/w.1.pt.trace.json"),  # none: added
    ('{"traceName": "first", "traceEvents": []}', "first"),  # not the last key: left alone
])
def test_add_source_roots_sets_the_trace_name(tmp_path, text, expect_name):
    path = tmp_path / "t.json"
    path.write_text(text)
    assert writer.add_source_roots(str(path), ["/a"], trace_name="/d/w.1.pt.trace.json")
    doc = json.loads(path.read_text())
    assert doc["traceName"] == expect_name and doc[writer.SOURCE_ROOTS_KEY] == ["/a"]
    assert doc["traceEvents"] == [] and path.read_text().count('"traceName"') == 1
