"""The plugin over real HTTP: a real TensorBoard (and `tb-profiler serve`) in a subprocess on
a free localhost port, over real traces (the torch 2.13 samples and the real V100 run in tests/data),
hit with urllib as the frontend would.

TensorBoard finds the plugin through the `tensorboard_plugins` entry point. Where the
checkout is not pip-installed, a throwaway dist-info on PYTHONPATH declares exactly the
entry point pyproject.toml declares, so discovery goes through TensorBoard's real
entry-point code either way.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest
from datafiles import V100_RUN

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/data/plugin/pytorch_profiler/"
START_TIMEOUT = 60
LOAD_TIMEOUT = 45

pytest.importorskip("tensorboard")


# -- helpers ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, kind: str, proc: subprocess.Popen, port: int, logdir: Path, log: Path):
        self.kind, self.proc, self.port, self.logdir, self.log = kind, proc, port, logdir, log
        self.base = f"http://127.0.0.1:{port}"

    def raw(self, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
        req = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, route: str, expect: int = 200, timeout: float = LOAD_TIMEOUT):
        """JSON of a plugin route, asking again while it answers 202 (loading)."""
        end = time.monotonic() + timeout
        while True:
            status, headers, body = self.raw(PREFIX + route)
            if status != 202 or time.monotonic() > end:
                break
            time.sleep(0.2)
        assert headers.get("Content-Type", "").startswith("application/json"), (route, status, body[:200])
        assert status == expect, (route, status, body[:500])
        return json.loads(body)

    def until(self, fn, timeout: float = 30, what: str = "condition"):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = fn()
            if value:
                return value
            time.sleep(0.25)
        pytest.fail(f"{self.kind}: timed out after {timeout}s waiting for {what}\n{self.tail()}")

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


def _entry_point_shim(tmp: Path) -> Path | None:
    """A dist-info declaring pyproject's tensorboard_plugins entry point, unless installed."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["tensorboard_plugins"]
    installed = {ep.name for ep in metadata.entry_points(group="tensorboard_plugins")}
    if "pytorch_profiler" in installed:
        return None
    site = tmp / "site"
    info = site / "tb_profiler_test_shim-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tb-profiler-test-shim\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        "[tensorboard_plugins]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return site


def make_logdir(dst: Path, sample_logdir: Path) -> Path:
    dst.mkdir(parents=True)
    for run in ("cnn_dataloader_0workers", "ddp_gloo_2ranks", "transformer_memory_snapshot"):
        shutil.copytree(sample_logdir / run, dst / run)
    shutil.copytree(V100_RUN, dst / "resnet50_v100")
    for p in (dst / "resnet50_v100").iterdir():
        p.chmod(0o644)
    (dst / "broken").mkdir()
    (dst / "broken" / "w.1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": "a')
    (dst / "cnn_dataloader_0workers" / "notes.json").write_text("{}")  # a JSON file that is not a trace
    return dst


def start(kind: str, tmp: Path, sample_logdir: Path) -> Server:
    logdir = make_logdir(tmp / "logdir", sample_logdir)
    port = free_port()
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(tmp / "cache"), TB_PROFILER_RELOAD_S="0.5",
               TB_PROFILER_MEMORY_MB="512")
    paths = [str(ROOT)]
    if kind == "tensorboard":
        shim = _entry_point_shim(tmp)
        if shim is not None:
            paths.insert(0, str(shim))
        cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
               "--host", "127.0.0.1", "--load_fast=false", "--reload_interval", "1",
               "--pytorch_profiler_memory_mb", "300"]
    else:
        cmd = [sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port),
               "--reload-interval", "0.5", "--memory-mb", "300"]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log = tmp / f"{kind}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(tmp))
    server = Server(kind, proc, port, logdir, log)
    end = time.monotonic() + START_TIMEOUT
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"{kind} exited with {proc.returncode}:\n{server.tail()}")
        try:
            status, _, _ = server.raw(PREFIX + "runs")
            if status == 200:
                return server
        except OSError:
            pass
        time.sleep(0.25)
    proc.kill()
    pytest.fail(f"{kind} did not answer within {START_TIMEOUT}s:\n{server.tail()}")


@pytest.fixture(scope="module", params=["tensorboard", "serve"])
def server(request, sample_logdir, tmp_path_factory):
    srv = start(request.param, tmp_path_factory.mktemp(request.param), sample_logdir)
    yield srv
    alive = srv.proc.poll() is None
    srv.proc.terminate()
    try:
        srv.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait(timeout=10)
    assert alive, f"{srv.kind} died during the tests:\n{srv.tail()}"
    assert "Traceback" not in srv.log.read_text(errors="replace"), srv.tail()


def _api_trace(path: Path):
    from tb_profiler.api import load

    return load(path, cache=False)


# -- tests ------------------------------------------------------------------------------------
def test_plugin_is_listed_with_its_module_entry(server):
    if server.kind != "tensorboard":
        pytest.skip("plugins_listing is TensorBoard's")
    status, _, body = server.raw("/data/plugins_listing")
    assert status == 200
    listing = json.loads(body)
    meta = listing["pytorch_profiler"]
    assert meta["enabled"] is True
    assert meta["loading_mechanism"] == {"type": "IFRAME", "module_path": PREFIX + "index.js"}
    status, headers, body = server.raw("/data/plugin_entry.html?name=pytorch_profiler")
    assert status == 200 and b"index.js" in body


def test_runs_workers_spans_and_the_broken_file(server):
    runs = server.until(lambda: (d := server.get("runs")) and "resnet50_v100" in d["runs"] and d,
                        what="runs listed")
    assert {"cnn_dataloader_0workers", "ddp_gloo_2ranks", "transformer_memory_snapshot", "resnet50_v100"} <= set(runs["runs"])
    assert server.get("workers?run=resnet50_v100") == ["worker0"]
    assert server.get("spans?run=resnet50_v100&worker=worker0") == ["1", "2"]
    assert server.get("workers?run=ddp_gloo_2ranks") == ["rank0", "rank1"]
    assert server.get("workers?run=ddp_gloo_2ranks&view=Distributed") == ["All"]

    def broken_listed():
        return [s for s in server.get("skipped")["skipped"] if s["path"] == "broken/w.1.pt.trace.json"]

    (broken,) = server.until(broken_listed, what="the broken file in skipped")
    assert broken["run"] == "broken" and "byte" in broken["reason"] and str(server.logdir) not in broken["reason"]
    notes = [s for s in server.get("skipped")["skipped"] if s["path"] == "cnn_dataloader_0workers/notes.json"]
    assert notes and notes[0]["reason"] == "JSON, but not a Kineto trace: no traceEvents in the file"
    assert "broken" in server.get("runs")["runs"]  # listed, its views say why it fails
    err = server.get("overview?run=broken", expect=404)
    assert "byte" in err["error"]
    # the others still work
    assert server.get("views?run=cnn_dataloader_0workers")[:2] == ["Overview", "Operator"]
    status = server.until(lambda: (s := server.get("status")) and not s["loading"] and s, timeout=LOAD_TIMEOUT,
                          what="loading to finish")
    assert status["memory"]["cap_bytes"] == 300 << 20  # the flag wins over TB_PROFILER_MEMORY_MB
    by_name = {r["name"]: r for r in status["runs"]}
    assert by_name["broken"]["state"] == "failed" and by_name["resnet50_v100"]["state"] == "ready"
    assert by_name["resnet50_v100"]["loaded_bytes"] == by_name["resnet50_v100"]["total_bytes"] > 2_000_000


def test_overview_operators_kernels_equal_the_python_api(server):
    from tb_profiler.analysis.jsonable import to_jsonable
    from tb_profiler.analysis.overview import overview

    path = sorted(V100_RUN.iterdir())[-1]  # span 2, the default
    trace = _api_trace(path)
    want = to_jsonable(overview(trace, records=True))
    got = server.get("overview?run=resnet50_v100&worker=worker0")
    t0 = int(got["origin_ns"])
    assert t0 == trace.span[0]
    assert got["summary"] == want["summary"]
    assert got["devices"] == want["devices"]
    assert got["breakdown"] == want["breakdown"]
    assert [s["start_ns"] + t0 for s in got["steps"]] == [s["start_ns"] for s in want["steps"]]
    assert got["environments"][1] == {"title": "Device Type", "value": "GPU"}
    assert server.get("overview?run=resnet50_v100&span=2") == got

    ops = server.get("operation/table?run=resnet50_v100&group_by=Operation")
    assert ops["rows"] == to_jsonable(trace.operators("name"))
    kern = server.get("kernel/table?run=resnet50_v100&group_by=Kernel")
    assert kern["rows"] == to_jsonable(trace.kernels("name"))
    pie = server.get("kernel?run=resnet50_v100&top=5")
    assert len(pie["rows"]) == 6 and sum(r["value_ns"] for r in pie["rows"]) == pie["total_ns"]
    tc = server.get("kernel/tc_pie?run=resnet50_v100")
    assert tc["total_ns"] == pie["total_ns"]
    span1 = server.get("overview?run=resnet50_v100&span=1")
    assert span1["summary"] != got["summary"]


def test_cpu_views_memory_modules_distributed(server):
    views = server.get("views?run=transformer_memory_snapshot")
    assert "Module" in views and "Kernel" not in views
    mod = server.get("module?run=transformer_memory_snapshot")
    assert mod["rows"] and mod["rows"][0]["parent_id"] == -1
    tree = server.get("tree?run=transformer_memory_snapshot")
    assert tree["nodes"] and all(c["start_ns"] >= 0 for c in tree["calls"])
    curve = server.get("memory_curve?run=cnn_dataloader_0workers")
    assert curve["devices"] == ["CPU"] and curve["curves"]["CPU"]
    assert all(0 <= p["ts_ns"] < 10**12 for p in curve["curves"]["CPU"])
    events = server.get("memory_events?run=cnn_dataloader_0workers&limit=5")
    assert len(events["rows"]) == 5 and events["truncated"] and events["total"] > 5
    assert server.get("memory?run=cnn_dataloader_0workers")["rows"]
    assert "Distributed" in server.get("views?run=ddp_gloo_2ranks")
    overlap = server.get("distributed/overlap?run=ddp_gloo_2ranks")
    assert [r["worker"] for r in overlap["ranks"]] == ["rank0", "rank1"]
    assert server.get("distributed/commops?run=ddp_gloo_2ranks")["rows"]
    assert server.get("distributed/waittime?run=ddp_gloo_2ranks")["ranks"]
    assert len(server.get("distributed/gpuinfo?run=ddp_gloo_2ranks")["workers"]) == 2
    server.get("distributed/overlap?run=transformer_memory_snapshot", expect=404)
    diff = server.get("diff?run=transformer_memory_snapshot&span=1&exp_run=transformer_memory_snapshot&exp_span=2")
    assert diff["summary"]["traces_a"] == 1 and diff["operators"]
    roots = server.get("diffnode?run=transformer_memory_snapshot&span=1&exp_run=transformer_memory_snapshot&exp_span=2")
    assert roots["children"] and all("/" not in c["path"] for c in roots["children"])


def test_timeline_window_is_bounded(server):
    whole = server.get("trace?run=resnet50_v100&width=10000&max_events=100")
    assert whole["window"]["start_ns"] == 0 and whole["span"]["end_ns"] > 0
    assert len(whole["events"]) == 100 and whole["truncated"]
    assert {t["kind"] for t in whole["tracks"]} >= {"host", "device"}
    busy = whole["busy"]  # columns: one list per field
    assert sorted(busy) == ["count", "depth", "end_ns", "start_ns", "track"]
    assert len({len(col) for col in busy.values()}) == 1 and len(busy["count"]) == whole["counts"]["busy"]
    assert whole["counts"]["in_window"] == len(whole["events"]) + sum(busy["count"])
    assert len(busy["count"]) < whole["counts"]["in_window"]
    ev = whole["events"][0]
    detail = server.get(f"trace/event?run=resnet50_v100&i={ev['i']}")
    assert detail["event"]["name"] == ev["name"] and isinstance(detail["args"], dict)
    a, b = ev["ts_ns"], ev["ts_ns"] + 1_000_000
    zoom = server.get(f"trace?run=resnet50_v100&start_ns={a}&end_ns={b}&width=1000")
    assert zoom["window"] == {"start_ns": a, "end_ns": b}
    assert all(e["ts_ns"] < b and e["ts_ns"] + e["dur_ns"] >= a for e in zoom["events"])


def test_new_runs_and_new_files_appear_without_restart(server, sample_logdir):
    shutil.copytree(sample_logdir / "cnn_dataloader_2workers", server.logdir / "later" / "cnn")
    server.until(lambda: "later/cnn" in server.get("runs")["runs"], what="the new run")
    assert server.get("overview?run=later/cnn")["summary"]["num_steps"] >= 1
    src = sorted((sample_logdir / "transformer_memory_snapshot").glob("*.pt.trace.json*"))[-1]
    dst = server.logdir / "transformer_memory_snapshot" / "transformer.9999999999999999999.pt.trace.json"
    shutil.copy(src, dst)
    server.until(lambda: server.get("spans?run=transformer_memory_snapshot") == ["1", "2", "3"], what="the new span")
    assert server.get("overview?run=transformer_memory_snapshot&span=3")["summary"]["num_steps"] >= 1


BAD = [
    ("overview", 400), ("overview?run=", 404), ("overview?run=nope", 404),
    ("overview?run=cnn_dataloader_0workers&span=abc", 400), ("overview?run=cnn_dataloader_0workers&span=0", 400),
    ("overview?run=cnn_dataloader_0workers&span=99", 404), ("overview?run=cnn_dataloader_0workers&span=1e3", 400),
    ("overview?run=cnn_dataloader_0workers&worker=nobody", 404), ("overview?run=cnn_dataloader_0workers&run=ddp_gloo_2ranks", 400),
    ("operation?run=cnn_dataloader_0workers&group_by=Bogus", 400), ("operation?run=cnn_dataloader_0workers&top=1000", 400),
    ("operation/stack?run=cnn_dataloader_0workers", 400), ("operation/stack?run=cnn_dataloader_0workers&op_name=no::such", 404),
    ("trace?run=cnn_dataloader_0workers&width=5", 400), ("trace?run=cnn_dataloader_0workers&start_ns=10&end_ns=5", 400),
    ("trace?run=cnn_dataloader_0workers&start_ns=99999999999999999999999", 400),
    ("trace/event?run=cnn_dataloader_0workers&i=-1", 400), ("trace/event?run=cnn_dataloader_0workers&i=999999999", 404),
    ("memory?run=cnn_dataloader_0workers&device=GPU7", 404), ("memory_events?run=cnn_dataloader_0workers&limit=0", 400),
    ("tree?run=cnn_dataloader_0workers&step=x", 400), ("diffnode?run=transformer_memory_snapshot&exp_run=transformer_memory_snapshot&path=No/Such", 404),
    ("nosuchroute", 404),
]


@pytest.mark.parametrize("route,status", BAD, ids=[b[0] for b in BAD])
def test_bad_parameters_answer_json_errors(server, route, status):
    got = server.get(route, expect=status)
    assert set(got) == {"error"} and got["error"] and "Traceback" not in got["error"]


TRAVERSAL = [
    PREFIX + "../../../../etc/passwd", PREFIX + "..%2F..%2F..%2Fetc%2Fpasswd", PREFIX + "%2e%2e/%2e%2e/setup.py",
    PREFIX + "static/../app.py", PREFIX + "../plugin/app.py", PREFIX + "app.py", PREFIX + "state.py",
    PREFIX + "/etc/passwd", PREFIX + "trace/raw?run=../../etc", PREFIX + "runs/../../../etc/passwd",
    PREFIX + "overview?run=%2Fetc%2Fpasswd", PREFIX + "trace/raw?run=broken/../../..",
]


@pytest.mark.parametrize("path", TRAVERSAL)
def test_paths_never_leave_the_logdir_or_static_folder(server, path):
    status, headers, body = server.raw(path)
    assert status in (400, 404), (path, status, body[:200])
    assert b"root:" not in body and b"import " not in body and b"def " not in body


def test_every_response_carries_the_csp(server):
    for path in ("runs", "overview?run=nope", "index.js", "trace/raw?run=cnn_dataloader_0workers"):
        status, headers, body = server.raw(PREFIX + path)
        csp = headers.get("Content-Security-Policy", "")
        assert "default-src 'self'" in csp and "http" not in csp, (path, headers)
        assert headers.get("X-Content-Type-Options") == "nosniff"
    status, headers, body = server.raw(PREFIX + "index.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"render" in body
    status, headers, body = server.raw(PREFIX + "trace/raw?run=cnn_dataloader_0workers")
    assert status == 200 and gzip.decompress(body).lstrip().startswith(b"{")
    if server.kind == "serve":
        status, headers, body = server.raw("/")
        assert status in (200, 503) and "Content-Security-Policy" in headers and b"pytorch_profiler" in body


def test_gzip_when_accepted(server):
    status, headers, body = server.raw(PREFIX + "operation/table?run=resnet50_v100",
                                       headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert json.loads(gzip.decompress(body))["rows"]


def test_log_names_failed_requests_only(server):
    """The UI polls: a log line per request would bury the ones that matter (and fill
    any pipe nobody reads). Failed requests are still logged, with their path."""
    marker = "no-such-route-for-the-log"
    for _ in range(3):
        assert server.raw(PREFIX + "runs")[0] == 200
    assert server.raw(PREFIX + marker)[0] == 404
    if server.kind == "serve":  # TensorBoard's own server logs no requests either way
        end = time.monotonic() + 10  # the line is written just after the response
        while marker not in server.log.read_text(errors="replace") and time.monotonic() < end:
            time.sleep(0.1)
        assert marker in server.log.read_text(errors="replace")
    assert "GET " + PREFIX + "runs HTTP/" not in server.log.read_text(errors="replace")  # the 200s
