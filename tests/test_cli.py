"""tb-profiler runs / info, run as a user would: a subprocess, text and --json output."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datafiles import V100_TRACE as V100
from datafiles import V100_TRACE_B as V100_B


def run_cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(cache_dir))
    return subprocess.run([sys.executable, "-m", "tb_profiler.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    return tmp_path / "cache"


def test_info_json_on_v100_trace(cache_dir):
    proc = run_cli("info", str(V100), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["categories"] == {"cpu_op": 23646, "cuda_runtime": 11923, "kernel": 8772, "gpu_memset": 312,
                                 "gpu_memcpy": 12, "Trace": 1}
    assert doc["steps"] == [5, 6, 7, 8, 9, 10]
    assert [d["name"] for d in doc["devices"]] == ["Tesla V100-DGXS-32GB"] * 4
    assert doc["device_kinds"] == ["CUDA"]
    assert doc["span_ns"]["start"] == 1623142623460016000
    assert doc["from_cache"] is False
    again = json.loads(run_cli("info", str(V100), "--json", cache_dir=cache_dir).stdout)
    assert again["from_cache"] is True
    assert {k: v for k, v in again.items() if "seconds" not in k and k != "from_cache"} == \
        {k: v for k, v in doc.items() if "seconds" not in k and k != "from_cache"}


def test_info_text_names_steps_devices_and_categories(cache_dir):
    proc = run_cli("info", str(V100), cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    assert "ProfilerStep#5..#10" in proc.stdout
    assert "Tesla V100-DGXS-32GB" in proc.stdout
    assert "kernel" in proc.stdout and "8772" in proc.stdout


def test_info_on_a_folder_reads_every_sample_trace(sample_logdir, sample_traces, cache_dir):
    proc = run_cli("info", str(sample_logdir), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(d["path"] for d in docs) == sorted(str(p) for p in sample_traces)
    for doc in docs:
        assert doc["devices"] == [] and doc["device_kinds"] == []  # CPU-only samples
        assert len(doc["steps"]) == 2 and doc["categories"]["cpu_op"] > 0
    ddp = [d for d in docs if "ddp_gloo_2ranks" in d["path"]]
    assert {d["distributed"]["rank"] for d in ddp} == {0, 1}
    assert all(d["distributed"]["backend"] == "gloo" for d in ddp)


def test_runs_json_lists_sample_runs_workers_and_spans(sample_logdir, cache_dir):
    proc = run_cli("runs", str(sample_logdir), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    runs = {r["name"]: r for r in doc["runs"]}
    assert set(runs) == {"cnn_dataloader_0workers", "cnn_dataloader_2workers", "ddp_gloo_2ranks", "transformer_memory_snapshot"}
    assert set(runs["ddp_gloo_2ranks"]["workers"]) == {"rank0", "rank1"}
    assert all(len(spans) == 2 for r in runs.values() for spans in r["workers"].values())
    assert doc["skipped"] == []


def test_bad_trace_is_reported_on_stderr_and_others_still_shown(tmp_path, cache_dir):
    good = tmp_path / "run" / "good.1.pt.trace.json"
    good.parent.mkdir()
    good.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,'
                    ' "ts": 1.5, "dur": 2}]}')
    bad = tmp_path / "run" / "bad.1.pt.trace.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "unterminated}'))
    proc = run_cli("info", str(tmp_path / "run"), "--json", cache_dir=cache_dir)
    assert proc.returncode == 1
    assert str(bad) in proc.stderr and "byte" in proc.stderr
    assert "Traceback" not in proc.stderr
    docs = json.loads(proc.stdout)
    assert [d["path"] for d in docs] == [str(good)]
    assert docs[0]["span_ns"] == {"start": 1500, "end": 3500, "duration": 2000}


def test_missing_path_and_empty_logdir_fail_cleanly(tmp_path, cache_dir):
    proc = run_cli("info", str(tmp_path / "nope.pt.trace.json"), cache_dir=cache_dir)
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("runs", str(tmp_path), cache_dir=cache_dir)
    assert proc.returncode == 1 and "no runs found" in proc.stderr


def test_runs_reports_skipped_files(tmp_path, cache_dir):
    run = tmp_path / "run"
    run.mkdir()
    (run / "w.1.pt.trace.json").write_text('{"traceEvents": []}')
    (run / "w.2.pt.trace.json").write_bytes(b"")
    proc = run_cli("runs", str(tmp_path), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert [s["path"] for s in doc["skipped"]] == [str(run / "w.2.pt.trace.json")]
    assert "empty" in doc["skipped"][0]["reason"]
    assert "w.2.pt.trace.json" in proc.stderr


def test_usage_error_exits_2(cache_dir):
    proc = run_cli("frobnicate", cache_dir=cache_dir)
    assert proc.returncode == 2


def test_summary_json_matches_the_api(cache_dir):
    import tb_profiler

    proc = run_cli("summary", str(V100), "--json", "--top", "5", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["traces"][0]
    trace = tb_profiler.load(V100, cache=False)
    ov = trace.overview()
    assert doc["overview"]["summary"]["step_time_avg_ns"] == ov["summary"]["step_time_avg_ns"] == 177592167
    assert [r["name"] for r in doc["operators"]] == trace.operators("name")["name"].head(5).tolist()
    assert [r["calls"] for r in doc["kernels"]] == trace.kernels("name")["calls"].head(5).tolist()
    assert {r["id"] for r in doc["overview"]["recommendations"]} >= {"dataloader", "amp"}


def test_summary_text_shows_breakdown_devices_and_advice(cache_dir):
    proc = run_cli("summary", str(V100), cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "average 177.592 ms" in out and "DataLoader 33.4%" in out
    assert "GPU 0" in out and "utilization 55.5%" in out
    assert "aten::cudnn_convolution_backward_weight" in out


def test_summary_of_a_run_folder_adds_distributed(sample_logdir, cache_dir):
    proc = run_cli("summary", str(sample_logdir / "ddp_gloo_2ranks"), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["traces"]) == 2
    assert sorted(r["rank"] for r in doc["distributed"]["ranks"]) == [0, 1]
    assert all(r["communication_ns"] > 0 for r in doc["distributed"]["ranks"])


def test_diff_reports_step_time_change_and_gates_on_threshold(cache_dir):
    proc = run_cli("diff", str(V100), str(V100_B), "--json", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["step_time_avg_ns_a"] == 177592167
    assert doc["summary"]["step_time_avg_ns_b"] == 154911333
    assert round(doc["slower_pct"], 2) == -12.77
    # B -> A is 14.6% slower: a 5% gate fails with exit code 3, a 20% gate passes.
    slower = run_cli("diff", str(V100_B), str(V100), "--fail-if-slower", "5", cache_dir=cache_dir)
    assert slower.returncode == 3 and "14.6% slower" in slower.stderr
    assert run_cli("diff", str(V100_B), str(V100), "--fail-if-slower", "20", cache_dir=cache_dir).returncode == 0


def test_diff_with_a_missing_side_fails_cleanly(tmp_path, cache_dir):
    proc = run_cli("diff", str(V100), str(tmp_path / "nope"), cache_dir=cache_dir)
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_serve_allow_host_lets_a_proxy_name_through(tmp_path):
    """`tb-profiler serve --allow-host NAME`: requests naming NAME (a proxy) are answered,
    other unknown names still get 403 (DNS rebinding)."""
    import http.client
    import socket
    import subprocess
    import sys
    import time

    (tmp_path / "log").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tb_profiler.cli", "serve", str(tmp_path / "log"), "--port",
                             str(port), "--allow-host", "profiler.proxy.example"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def status(host: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/data/plugin/pytorch_profiler/runs", headers={"Host": host})
        return conn.getresponse().status

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                got = status(f"127.0.0.1:{port}")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert got == 200
        assert status("profiler.proxy.example") == 200
        assert status("evil.example") == 403
    finally:
        proc.terminate()
        proc.wait(timeout=20)
