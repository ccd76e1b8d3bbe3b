"""The plugin's app in process (werkzeug's test client): loading order and progress, the
memory cap, rediscovery, static files, parameter parsing. The same app is served over
real HTTP by TensorBoard and `tb-profiler serve` in test_plugin_http.py."""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from datafiles import LEGACY, SMALL_TRACES, plain_trace_copies
from werkzeug.test import Client

import tb_profiler.api as api_pkg  # the plugin loads through tb_profiler.api.load
from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.plugin import app as app_mod
from tb_profiler.plugin import static
from tb_profiler.plugin.app import ApiError, Params, ProfilerApp
from tb_profiler.plugin.state import ProfilerState

P = "/data/plugin/pytorch_profiler/"


def wait_for(fn, what: str = "condition", timeout: float = 20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def get(client, route, expect=200):
    r = client.get(P + route)
    assert r.status_code == expect, (route, r.status_code, r.get_data()[:300])
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    return json.loads(r.get_data())


@pytest.fixture
def logdir(tmp_path, sample_logdir) -> Path:
    d = tmp_path / "log"
    shutil.copytree(sample_logdir / "cnn_dataloader_0workers", d / "a_fast")
    shutil.copytree(sample_logdir / "transformer_memory_snapshot", d / "z_slow")
    return d


@pytest.fixture
def make(tmp_path):
    made = []

    def _make(logdir, **kw):
        kw.setdefault("reload_s", 0.2)
        kw.setdefault("cache_dir", str(tmp_path / "cache"))
        state = ProfilerState(str(logdir), **kw)
        app = ProfilerApp(state, standalone=True)
        made.append(app)
        state.start()
        return app, Client(app)

    yield _make
    for app in made:
        app.state.stop()
        app.close()


def test_first_run_answers_while_another_is_still_loading(logdir, make, monkeypatch):
    release = threading.Event()
    real_load = api_pkg.load

    def slow_load(path, **kw):
        if "z_slow" in str(path):
            release.wait(30)
        return real_load(path, **kw)

    monkeypatch.setattr(api_pkg, "load", slow_load)
    monkeypatch.setattr(app_mod, "LOAD_WAIT_S", 0.3)
    app, c = make(logdir, threads=2)
    try:
        runs = get(c, "runs")
        assert runs["runs"] == ["a_fast", "z_slow"] and runs["loading"] is True
        assert get(c, "overview?run=a_fast")["summary"]["num_steps"] == 2
        status = get(c, "status")
        slow = next(r for r in status["runs"] if r["name"] == "z_slow")
        assert slow["state"] == "loading" and slow["loaded_bytes"] < slow["total_bytes"]
        pending = get(c, "overview?run=z_slow", expect=202)
        assert pending["loading"] is True and pending["run"] == "z_slow"
        assert 0 <= pending["loaded_bytes"] < pending["total_bytes"]
    finally:
        release.set()
    assert get(c, "overview?run=z_slow")["summary"]["num_steps"] == 2
    wait_for(lambda: not get(c, "status")["loading"], what="loading to end")
    status = get(c, "status")
    assert status["loaded_bytes"] == status["total_bytes"] > 0


def test_memory_cap_evicts_yet_every_request_answers(logdir, make):
    app, c = make(logdir, memory_bytes=1)  # smaller than any trace: one trace stays at a time
    wait_for(lambda: not get(c, "status")["loading"], what="loading to end")
    first = get(c, "operation/table?run=a_fast&span=1")
    second = get(c, "operation/table?run=z_slow&span=1")
    assert get(c, "status")["memory"]["traces_in_memory"] == 1
    app.responses = app_mod.ResponseCache(1 << 20)  # forget answers: recompute from reloaded traces
    assert get(c, "operation/table?run=a_fast&span=1") == first
    assert get(c, "operation/table?run=z_slow&span=1") == second


def test_broken_and_rewritten_files(logdir, make):
    bad = logdir / "a_fast" / "extra.1.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    app, c = make(logdir)
    wait_for(lambda: any(s["path"] == "a_fast/extra.1.pt.trace.json" for s in get(c, "skipped")["skipped"]),
             what="the broken file listed")
    assert get(c, "workers?run=a_fast") == ["cnn_dataloader_0workers"]  # the broken worker is not offered
    assert "Overview" in get(c, "views?run=a_fast")
    err = get(c, "overview?run=a_fast&worker=extra", expect=404)
    assert "extra.1.pt.trace.json" in err["error"]
    # the writer finishes the file: it is loaded again and offered
    good = sorted((logdir / "z_slow").glob("*.pt.trace.json*"))[0]
    shutil.copy(good, bad)
    wait_for(lambda: get(c, "workers?run=a_fast") == ["cnn_dataloader_0workers", "extra"], what="the rewritten file")
    assert get(c, "overview?run=a_fast&worker=extra")["summary"]["num_steps"] >= 1
    assert not [s for s in get(c, "skipped")["skipped"] if s["path"].startswith("a_fast/")]


def test_vanished_logdir_is_reported_not_fatal(tmp_path, make, sample_logdir):
    d = tmp_path / "gone"
    shutil.copytree(sample_logdir / "cnn_dataloader_0workers", d / "r")
    app, c = make(d)
    assert get(c, "runs")["runs"] == ["r"]
    shutil.rmtree(d)
    wait_for(lambda: get(c, "status")["scan_error"], what="the scan error")
    assert str(d) not in get(c, "status")["scan_error"]
    d.mkdir()
    wait_for(lambda: get(c, "runs")["runs"] == [], what="an empty logdir")


def test_static_files_stay_in_their_folder(tmp_path, monkeypatch, make, logdir):
    root = tmp_path / "static"
    (root / "assets").mkdir(parents=True)
    (root / "index.js").write_text("export function render() {}\n")
    (root / "assets" / "app.css").write_text("body{}\n")
    (tmp_path / "secret.txt").write_text("secret")
    monkeypatch.setattr(static, "STATIC_DIR", str(root))
    app, c = make(logdir)
    r = c.get(P + "index.js")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/javascript")
    r = c.get(P + "assets/app.css")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/css")
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    for bad in ("../secret.txt", "assets/../../secret.txt", "%2e%2e/secret.txt", "assets/..%2F..%2Fsecret.txt",
                ".hidden", "assets/", "a\\..\\secret.txt"):
        r = c.get(P + bad)
        assert r.status_code == 404 and b"secret" not in r.get_data().replace(b"secret.txt", b""), bad
    r = c.get("/")
    assert r.status_code == 200 and b"_standalone_entry.js" in r.get_data()
    assert c.get(P + "_standalone_entry.js").get_data().startswith(b'import("./index.js")')


def test_unbuilt_bundle_says_so(tmp_path, monkeypatch, make, logdir):
    monkeypatch.setattr(static, "STATIC_DIR", str(tmp_path / "nothing"))
    app, c = make(logdir)
    r = c.get(P + "index.js")
    assert r.status_code == 200 and b"not built" in r.get_data() and b"export function render" in r.get_data()
    r = c.get("/")
    assert r.status_code == 503 and b"not built" in r.get_data() and b"npm run build" in r.get_data()


def test_params_are_strict():
    from werkzeug.datastructures import MultiDict

    p = Params(MultiDict([("n", "12"), ("neg", "-3"), ("big", "9" * 30), ("f", "1.5"), ("two", "1"),
                          ("two", "2"), ("long", "x" * 5000), ("nul", "a\x00b")]))
    assert p.integer("n", None, 0, 100) == 12
    assert p.integer("missing", 7, 0, 100) == 7
    for name, lo, hi in (("neg", 0, 10), ("big", 0, 1 << 62), ("f", 0, 10), ("n", 0, 5)):
        with pytest.raises(ApiError) as e:
            p.integer(name, None, lo, hi)
        assert e.value.status == 400
    for name in ("two", "long", "nul"):
        with pytest.raises(ApiError):
            p.text(name)
    with pytest.raises(ApiError):
        p.text("missing", required=True)
    assert p.choice("missing", ("a", "b"), "a") == "a"


def test_to_jsonable_makes_strict_json():
    import numpy as np
    import pandas as pd

    doc = to_jsonable({"a": np.float64("nan"), "b": float("inf"), 3: np.int64(4),
                       "df": pd.DataFrame({"x": [1.0, np.nan]}), "arr": np.array([1, 2])})
    assert json.dumps(doc, allow_nan=False) == \
        '{"a": null, "b": null, "3": 4, "df": [{"x": 1.0}, {"x": null}], "arr": [1, 2]}'


ROUTES = ["overview", "operation", "operation/table", "operation/table?group_by=OperationAndInputShape",
          "kernel", "kernel/table", "kernel/table?group_by=Kernel", "kernel/tc_pie", "memory", "memory_curve",
          "memory_events", "module", "tree", "trace?width=800", "trace/event?i=0"]
DIST = ["distributed/overlap", "distributed/gpuinfo", "distributed/commops", "distributed/waittime"]


def test_every_route_answers_on_every_real_trace(tmp_path, make):
    """Old formats (bare array, PyTorch 1.8, legacy autograd), tiny H100 and 4xV100 traces
    (the small ones as plain JSON, as they were published)."""
    d = tmp_path / "all"
    shutil.copytree(LEGACY, d / "legacy")
    plain_trace_copies(SMALL_TRACES, d / "tiny")
    app, c = make(d)
    wait_for(lambda: not get(c, "status")["loading"], timeout=60, what="loading to end")
    assert get(c, "skipped")["skipped"] == []
    runs = get(c, "runs")["runs"]
    assert len(runs) == 7
    for run in runs:
        views = get(c, f"views?run={run}")
        for worker in get(c, f"workers?run={run}"):
            for route in ROUTES:
                sep = "&" if "?" in route else "?"
                get(c, f"{route}{sep}run={run}&worker={worker}")
        for route in DIST:
            get(c, f"{route}?run={run}", expect=200 if "Distributed" in views else 404)
        get(c, f"diff?run={run}&exp_run=tiny")
    assert "Distributed" in get(c, "views?run=tiny")


def test_fsspec_logdir(make, sample_logdir):
    import fsspec

    fs = fsspec.filesystem("memory")
    for f in sorted((sample_logdir / "cnn_dataloader_0workers").iterdir()):
        fs.pipe(f"/plugin_test_log/run1/{f.name}", f.read_bytes())
    try:
        app, c = make("memory://plugin_test_log")
        assert get(c, "runs")["runs"] == ["run1"]
        assert get(c, "spans?run=run1") == ["1", "2"]
        assert get(c, "overview?run=run1")["summary"]["num_steps"] == 2
        r = c.get(P + "trace/raw?run=run1&span=1")
        assert r.status_code == 200 and r.get_data()[:2] == b"\x1f\x8b"
    finally:
        fs.rm("/plugin_test_log", recursive=True)


def _held(path: Path) -> list[str]:
    """What of this process still refers to path: open descriptors, memory maps."""
    target = str(path)
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link in (target, target + " (deleted)"):
            fds.append(f"fd {fd}: {link}")
    with open("/proc/self/maps") as f:
        maps = [line.strip() for line in f if target in line]
    return fds + maps


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc (Linux)")
def test_a_deleted_or_replaced_trace_is_let_go(tmp_path, make):
    """Issue 18: a plain JSON trace's args text stays in the file (decode.args_text.FileArgs),
    so a loaded trace holds the file open; once discovery sees it deleted (or replaced by
    another file) the server closes it, and its disk space comes back without a restart."""
    from datafiles import V100_TRACE, read_bytes

    text = read_bytes(V100_TRACE)
    logdir = tmp_path / "log"
    for run in ("gone", "replaced", "kept"):
        (logdir / run).mkdir(parents=True)
        (logdir / run / "w.pt.trace.json").write_bytes(text)
    _, c = make(logdir)
    for run in ("gone", "replaced", "kept"):
        assert get(c, f"trace/event?run={run}&i=0")["args"] is not None
    wait_for(lambda: not get(c, "status")["loading"], "loading to end")
    gone, replaced, kept = (logdir / run / "w.pt.trace.json" for run in ("gone", "replaced", "kept"))
    assert _held(gone) and _held(replaced) and _held(kept)  # what makes this test able to fail

    os.unlink(gone)
    fresh = tmp_path / "fresh.json"
    fresh.write_bytes(text)
    os.replace(fresh, replaced)  # the old file, unlinked, lives on only through what holds it
    wait_for(lambda: get(c, "runs")["runs"] == ["kept", "replaced"], "the deleted run to leave the list")
    wait_for(lambda: not _held(gone), "the deleted file let go")
    wait_for(lambda: not [h for h in _held(replaced) if "(deleted)" in h], "the replaced file let go")
    assert get(c, "trace/event?run=replaced&i=0")["args"] is not None  # the new one loads and reads
    assert get(c, "trace/event?run=kept&i=0")["args"] is not None and _held(kept)
