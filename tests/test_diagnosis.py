"""analysis/diagnosis.py: what bounds the step, in one sentence (issue 21).

Every figure the sentence quotes is the breakdown's or idle time's, so each case checks
the verdict and that its figures are those analyses' numbers: built traces (Kineto's
format, test_idle's builder) for each rule, the real V100 ResNet50 trace, a CPU-only one,
and the CLI's ``why`` leading with the same verdict.
"""
from __future__ import annotations

import json

import pytest
from datafiles import TENSORLIST_OPS, V100_TRACE
from test_idle import _Builder

import tb_profiler
from tb_profiler.analysis.breakdown import LABELS
from tb_profiler.analysis.diagnosis import IDLE_BOUND, diagnosis
from tb_profiler.analysis.idle import idle_time
from tb_profiler.analysis.overview import overview
from tb_profiler.cli import main as cli_main


def _trace(tmp_path, launch_us: float, run: tuple[float, float], host_op: tuple[float, float] | None = None):
    b = _Builder()
    b.step(0, 0, 1000)
    if host_op:
        b.cpu_op(*host_op)
    b.work(launch_us, [run])
    return b.load(tmp_path)


def _figures_are_the_analyses(trace, d):
    idle = idle_time(trace)["devices"]
    row = idle[(idle["step"] == -1) & (idle["device"] == d["figures"]["device"])].iloc[0]
    assert d["figures"]["idle_pct"] == pytest.approx(100 * row["idle_ns"] / row["window_ns"])
    assert d["figures"]["host_wait_pct_of_idle"] == pytest.approx(100 * row["host_wait_ns"] / max(row["idle_ns"], 1))
    avg = overview(trace)["summary"]["average_ns"]
    largest = d["figures"]["largest"]
    assert largest["ns_per_step"] == avg[largest["category"]] and largest["label"] == LABELS[largest["category"]]


def test_a_busy_device_is_bound_by_its_largest_device_work(tmp_path):
    t = _trace(tmp_path, 5, (12, 980))
    d = diagnosis(t)
    assert d["bound_by"] == "kernel" and d["label"] == "Device compute"
    assert d["figures"]["idle_pct"] < 100 * IDLE_BOUND
    assert "Kernel takes" in d["sentence"] and d["evidence"]["view"] == "Kernel"
    _figures_are_the_analyses(t, d)


def test_a_device_waiting_on_the_host_is_host_bound(tmp_path):
    t = _trace(tmp_path, 885, (892, 90), host_op=(0, 880))
    d = diagnosis(t)
    assert d["bound_by"] == "host" and d["figures"]["host_wait_pct_of_idle"] >= 50
    assert "waiting on the host" in d["sentence"] and d["figures"]["largest"]["category"] == "cpu_exec"
    assert "CPU Exec" in d["sentence"]
    _figures_are_the_analyses(t, d)


def test_work_issued_that_does_not_run_is_waits(tmp_path):
    t = _trace(tmp_path, 2, (600, 390))    # launched at once, ran 600 us later: in flight, not the host
    d = diagnosis(t)
    assert d["bound_by"] == "waits" and d["figures"]["host_wait_pct_of_idle"] < 50
    assert "issued that did not run" in d["sentence"]
    _figures_are_the_analyses(t, d)


def test_the_v100_resnet_is_bound_by_the_host_its_dataloader_named():
    t = tb_profiler.load(V100_TRACE)
    d = diagnosis(t)
    assert d["bound_by"] == "host" and d["figures"]["largest"]["category"] == "dataloader"
    assert d["sentence"].startswith("GPU idle 43.4% of the step, 97.1% of it waiting on the host; DataLoader, 59.3 ms")
    _figures_are_the_analyses(t, d)
    assert overview(t)["diagnosis"] == d


def test_a_cpu_only_trace_is_host_time():
    d = diagnosis(tb_profiler.load(TENSORLIST_OPS))
    assert d["bound_by"] == "host" and d["sentence"].startswith("CPU-only trace")
    assert d["figures"]["idle_pct"] is None


def test_why_leads_with_the_verdict(capsys):
    assert cli_main(["why", str(V100_TRACE), "--json", "--only", "idle"]) == 0
    doc = json.loads(capsys.readouterr().out)["traces"][0]
    assert list(doc)[:2] == ["path", "verdict"]
    v = doc["verdict"]
    d = diagnosis(tb_profiler.load(V100_TRACE))
    assert v["finding"] == d["sentence"] and v["bound_by"] == "host" and v["evidence"]["path"] == str(V100_TRACE)
    lo, hi = v["evidence"]["time_range_ns"]
    assert 0 <= lo < hi
    assert cli_main(["why", str(V100_TRACE), "--only", "idle"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"  verdict      Host: {d['sentence']}"


def test_the_verdict_names_the_events_that_carry_its_cost():
    """The evidence a link opens: the longest DataLoader events inside the steps, as the raw
    JSON has them (ProfilerStep#N ranges and the enumerate(DataLoader) events), longest first,
    and the step of the first."""
    import gzip

    raw = json.load(gzip.open(V100_TRACE))["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in raw
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    loads = sorted(((e["dur"], e["ts"]) for e in raw if e.get("ph") == "X"
                    and e.get("name", "").startswith("enumerate(DataLoader)") and steps[0][0] <= e["ts"]),
                   key=lambda x: -x[0])[:5]
    trace = tb_profiler.load(str(V100_TRACE))
    ev = diagnosis(trace)["evidence"]
    got = [(int(trace.events["dur"][i]) // 1000, int(trace.events["ts"][i]) // 1000) for i in ev["event_ids"]]
    assert got == loads
    first_ts = loads[0][1]
    assert ev["step"] == next(n for a, b, n in steps if a <= first_ts < b)
