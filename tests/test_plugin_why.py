"""The "why is the step slow" routes (issue 9): idle, launches, steps/outliers and
trace/range_stats over the app in process (werkzeug's test client), equal to the Python
API with times made relative to the trace's origin, bounded, and strict about parameters."""
from __future__ import annotations

import json
import shutil

import pytest
from datafiles import V100_TRACE
from werkzeug.test import Client

import tb_profiler
from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.plugin import views
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from app_client import get

P = "/data/plugin/pytorch_profiler/"
RUN = "?run=v100"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("why")
    (tmp / "log" / "v100").mkdir(parents=True)
    shutil.copy(V100_TRACE, tmp / "log" / "v100" / V100_TRACE.name)
    state = ProfilerState(str(tmp / "log"), cache_dir=str(tmp / "cache"), reload_s=60, jobs=1)
    state.start()
    yield Client(ProfilerApp(state, standalone=True))
    state.stop()


@pytest.fixture(scope="module")
def trace():
    return tb_profiler.load(V100_TRACE, cache=False)




def test_step_outliers_route_is_the_api(client, trace):
    doc = get(client, "steps/outliers" + RUN + "&factor_pct=105")
    want = to_jsonable(trace.step_outliers(factor=1.05))
    t0 = int(trace.span[0])
    assert [s["start_ns"] for s in doc["steps"]] == [s["start_ns"] - t0 for s in want["steps"]]
    assert doc["stats"] == want["stats"] and doc["outliers"] == want["outliers"]
    assert [o["step"] for o in doc["outliers"]] == [5]
    assert get(client, "steps/outliers" + RUN)["stats"]["factor"] == 1.5


def test_range_stats_route_is_the_api_on_the_timeline_clock(client, trace):
    t0 = int(trace.span[0])
    a, b = 100_000_000, 110_000_000
    doc = get(client, f"trace/range_stats{RUN}&start_ns={a}&end_ns={b}")
    want = trace.range_stats(t0 + a, t0 + b)
    assert (doc["start_ns"], doc["end_ns"], doc["events"]) == (a, b, want["events"])
    assert doc["kinds"] == to_jsonable(want["kinds"]) and doc["rows"] == to_jsonable(want["rows"]) and doc["more"] == {}


def test_range_stats_rows_are_bounded(client, trace, monkeypatch):
    monkeypatch.setattr(views, "MAX_RANGE_ROWS", 3)
    lo, hi = trace.span
    doc = get(client, f"trace/range_stats{RUN}&start_ns=0&end_ns={hi - lo + 1}")
    counts = {k["kind"]: len([r for r in doc["rows"] if r["kind"] == k["kind"]]) for k in doc["kinds"]}
    assert max(counts.values()) == 3 and doc["more"]["operator"] > 0
    want = trace.range_stats(lo, hi + 1)["rows"]
    assert doc["more"]["operator"] == int((want["kind"] == "operator").sum()) - 3


def test_launches_route_leaves_out_the_per_launch_table(client, trace):
    doc = get(client, "launches" + RUN)
    want = trace.launches()
    assert "launches" not in doc and doc["launches_total"] == len(want["launches"])
    assert doc["calls"] == to_jsonable(want["calls"]) and doc["histograms"] == to_jsonable(want["histograms"])
    t0 = int(trace.span[0])
    assert [o["call_start_ns"] for o in doc["outliers"]] == [v - t0 for v in want["outliers"]["call_start_ns"]]


@pytest.mark.parametrize("route, status", [
    ("trace/range_stats?run=v100&start_ns=5", 400),
    ("trace/range_stats?run=v100&start_ns=5&end_ns=5", 400),
    ("trace/range_stats?run=v100&start_ns=a&end_ns=9", 400),
    ("steps/outliers?run=v100&factor_pct=100", 400),
    ("steps/outliers?run=v100&factor_pct=1.5", 400),
    ("idle?run=v100&kernel_wait_ns=-1", 400),
    ("launches?run=nope", 404),
])
def test_bad_parameters(client, route, status):
    r = client.get(P + route)
    assert r.status_code == status and "error" in json.loads(r.get_data())


def test_memcpy_route_is_the_api_on_the_timeline_clock(client, trace):
    doc = get(client, "memcpy" + RUN + "&bins=20")
    want = trace.memcpy(bins=20)
    t0 = int(trace.span[0])
    assert doc["copies_total"] == len(want["copies"]) == 12
    assert [c["start_ns"] for c in doc["copies"]] == [v - t0 for v in want["copies"]["start_ns"]]
    assert doc["directions"] == to_jsonable(want["directions"])
    assert doc["over_time"]["edges"] == [e - t0 for e in want["over_time"]["edges"]]
    assert doc["over_time"]["H2D"] == pytest.approx(want["over_time"]["H2D"])


def test_idle_route_is_the_api_with_the_longest_gaps(client, trace, monkeypatch):
    monkeypatch.setattr(views, "MAX_GAPS", 5)
    doc = get(client, "idle" + RUN + "&kernel_wait_ns=10000")
    want = trace.idle(kernel_wait_ns=10_000)
    assert doc["devices"] == to_jsonable(want["devices"]) and doc["streams"] == to_jsonable(want["streams"])
    assert doc["gaps_total"] == len(want["gaps"]) and len(doc["gaps"]) == 5 and doc["threshold_ns"] == 10_000
    t0 = int(trace.span[0])
    longest = want["gaps"].nlargest(5, "dur_ns").sort_values("start_ns", kind="stable")
    assert [g["start_ns"] for g in doc["gaps"]] == [v - t0 for v in longest["start_ns"]]


def test_cli_why_json_and_text(capsys):
    from tb_profiler.cli import main

    assert main(["why", str(V100_TRACE), "--json", "--top", "3", "--factor", "1.05", "--range", "0:10000000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (t,) = doc["traces"]
    assert [o["step"] for o in t["steps"]["outliers"]] == [5]
    assert t["launches"]["calls"][0]["call"] == "cudaLaunchKernel" and len(t["idle"]["gaps"]) == 3
    assert all(g["stream"] == -1 for g in t["idle"]["gaps"]) and t["memcpy"]["directions"][0]["direction"] == "H2D"
    assert t["range"]["start_ns"] > 0 and t["range"]["rows"]
    assert main(["why", str(V100_TRACE), "--only", "idle"]) == 0
    out = capsys.readouterr().out
    assert "device idle time inside the steps" in out and "kernel launches" not in out
    assert main(["why", str(V100_TRACE), "--only", "nope"]) == 2
    assert "--only nope" in capsys.readouterr().err
    assert main(["why", str(V100_TRACE), "--range", "9:3"]) == 1
    assert "END must be above START" in capsys.readouterr().err


def test_annotations_route_is_the_api(client, trace):
    doc = get(client, "annotations" + RUN)
    assert doc == to_jsonable(trace.annotations())


def test_queue_route_and_the_timeline_queue_counter(client, trace):
    doc = get(client, "queue" + RUN + "&full_at=500")
    assert doc == to_jsonable(trace.queue(full_at=500))
    (row,) = doc["streams"]
    assert row["max_len"] > 500 and row["time_full_ns"] > 0
    lo, hi = trace.span
    window = get(client, f"trace{RUN}&start_ns=0&end_ns={hi - lo}&width=200")
    queues = [c for c in window["counters"] if c["kind"] == "queue"]
    assert [(c["device"], c["stream"]) for c in queues] == [("0", 7)]
    assert len(queues[0]["values"]) == 200 and max(queues[0]["values"]) == row["max_len"]
    assert get(client, "queue" + RUN + "&full_at=0", expect=400)


def test_roofline_route_is_the_api(client, trace):
    doc = get(client, "roofline" + RUN)
    want = trace.roofline()
    assert doc["operators"] == to_jsonable(want["operators"]) and doc["kernels"] == to_jsonable(want["kernels"])
    assert doc["device"]["name"] == "Tesla V100-DGXS-32GB" and doc["operators_total"] == len(want["operators"])


def test_critical_path_route_is_the_api_for_the_longest_step(client, trace):
    doc = get(client, "critical_path" + RUN)
    want = trace.critical_path()
    longest = int(want["steps"].loc[want["steps"]["length_ns"].idxmax(), "step"])
    assert doc["step"] == longest == 5 and doc["steps"] == to_jsonable(want["steps"])
    mine = want["segments"][want["segments"]["step"] == 5]
    t0 = int(trace.span[0])
    assert doc["segments_total"] == len(mine) and [s["start_ns"] for s in doc["segments"]] == \
        [v - t0 for v in mine["start_ns"]]
    assert get(client, "critical_path" + RUN + "&step=7")["step"] == 7
    assert get(client, "critical_path" + RUN + "&step=99", expect=404)
