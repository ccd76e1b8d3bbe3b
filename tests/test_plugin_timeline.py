"""The trace view's backend over HTTP (in-process WSGI): search, flows in a window, device
utilization counters. A hand-made trace whose kernel intervals, links and names are known
gives exact expected values; the real V100 run (tests/data) and a torch 2.13 CPU sample check the
same answers against the trace model computed another way.
"""
from __future__ import annotations

import json
import shutil
import time
from urllib.parse import quote

import numpy as np
import pytest
from datafiles import H100_AFTER_FIX, H100_BEFORE_FIX, LEGACY, V100X4, plain_trace_copies
from datafiles import V100_RUN as V100
from werkzeug.test import Client

import tb_profiler
from tb_profiler.analysis.intervals import merge_intervals
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.plugin.timeline import bin_edges
from tb_profiler.trace.categories import Kind

P = "/data/plugin/pytorch_profiler/"
BASE_US = 1_000_000  # absolute ts of the hand-made trace's first event, µs
MARKUP = '<img src=x onerror="alert(1)"> & f(x)'


def _x(name, cat, pid, tid, start_ns, dur_ns, **args):
    """A complete event at BASE + start_ns, written in µs with 3 decimals as Kineto does."""
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
          "ts": round(BASE_US + start_ns / 1000, 3), "dur": round(dur_ns / 1000, 3)}
    if args:
        ev["args"] = args
    return ev


def _flow(ph, start_ns, fid, pid=100, tid=100, **extra):
    return {"ph": ph, "cat": "fwdbwd", "name": "fwdbwd", "id": fid, "pid": pid, "tid": tid,
            "ts": round(BASE_US + start_ns / 1000, 3), **extra}


# Kernel intervals (relative ns) per device, and what each 10 ns bin of [0, 1000) must read.
KERNELS_DEV0 = [(100, 150, 7), (200, 100, 8), (400, 5, None), (452, 2, None), (456, 2, None)]
KERNELS_DEV1 = [(0, 3, None), (7, 3, None)]


def handmade_events() -> list[dict]:
    cpu = {"pid": 100, "tid": 100}
    ev = [
        _x("ProfilerStep#1", "user_annotation", start_ns=0, dur_ns=1000, **cpu),
        _x("aten::MatMul", "cpu_op", start_ns=10, dur_ns=190, **cpu, **{"External id": 5}),
        _x("cudaLaunchKernel", "cuda_runtime", start_ns=20, dur_ns=10, **cpu, correlation=7, **{"External id": 5}),
        _x("aten::matmul", "cpu_op", start_ns=300, dur_ns=100, **cpu),
        _x(MARKUP, "cpu_op", start_ns=500, dur_ns=10, **cpu),
        _x("MatMulBackward0", "cpu_op", start_ns=600, dur_ns=100, **cpu),
        _x("Memcpy HtoD", "gpu_memcpy", 0, 7, start_ns=600, dur_ns=100, device=0, stream=7),
    ]
    for k, (start, dur, corr) in enumerate(KERNELS_DEV0):
        args = {"device": 0, "stream": 7}
        if corr is not None:  # the first two: launched by aten::MatMul; the rest: no link at all
            args.update({"correlation": corr, "External id": 5})
        ev.append(_x(f"gemm_kernel_{k}", "kernel", 0, 7, start_ns=start, dur_ns=dur, **args))
    for k, (start, dur, _) in enumerate(KERNELS_DEV1):
        ev.append(_x(f"relu_kernel_{k}", "kernel", 1, 9, start_ns=start, dur_ns=dur, device=1, stream=9))
    ev += [_flow("s", 10, 1), _flow("f", 600, 1, bp="e")]
    return ev


def expected_bins(kernels, bins: int = 100, bin_ns: int = 10) -> list[float]:
    covered = np.zeros(bins * bin_ns, dtype=bool)
    for start, dur, _ in kernels:
        covered[start:start + dur] = True
    return [round(float(covered[k * bin_ns:(k + 1) * bin_ns].mean()), 4) for k in range(bins)]


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory, sample_logdir):
    logdir = tmp_path_factory.mktemp("timeline_log")
    (logdir / "handmade").mkdir()
    (logdir / "handmade" / "w.1.pt.trace.json").write_text(json.dumps({"traceEvents": handmade_events()}))
    shutil.copytree(sample_logdir / "transformer_memory_snapshot", logdir / "transformer_memory_snapshot")
    shutil.copytree(V100, logdir / "v100")
    state = ProfilerState(str(logdir), reload_s=0.5, cache_dir=str(tmp_path_factory.mktemp("cache")))
    app = ProfilerApp(state, standalone=True)
    state.start()
    c = Client(app)
    deadline = time.monotonic() + 120
    while get(c, "status").get("loading") and time.monotonic() < deadline:
        time.sleep(0.1)
    yield c
    state.stop()
    app.close()


def get(c: Client, route: str, expect: int = 200) -> dict:
    for _ in range(600):  # 202 while a trace loads
        r = c.get(P + route)
        if r.status_code != 202:
            break
        time.sleep(0.1)
    assert r.status_code == expect, (route, r.status_code, r.get_data()[:300])
    assert r.headers["Content-Type"].startswith("application/json")
    return json.loads(r.get_data())


def by_name(c: Client, run: str, name: str) -> dict:
    hits = get(c, f"trace/search?run={run}&q={quote(name)}&limit=10")["matches"]
    return next(m for m in hits if m["name"] == name)


# -- search -----------------------------------------------------------------------------------
def test_search_is_case_insensitive_in_time_order(client):
    low = get(client, "trace/search?run=handmade&q=matmul")
    up = get(client, "trace/search?run=handmade&q=MATMUL")
    assert low["count"] == up["count"] == 3
    assert low["matches"] == up["matches"]
    assert [m["name"] for m in low["matches"]] == ["aten::MatMul", "aten::matmul", "MatMulBackward0"]
    assert [m["ts_ns"] for m in low["matches"]] == [10, 300, 600]
    first = low["matches"][0]
    assert (first["dur_ns"], first["track"], first["depth"]) == (190, 0, 1)
    assert low["names"] == 3 and not low["truncated"]
    detail = get(client, f"trace/event?run=handmade&i={first['i']}")
    assert detail["event"]["name"] == "aten::MatMul" and detail["event"]["ts_ns"] == 10


def test_search_limit_and_offset_page_through_the_matches(client):
    whole = get(client, "trace/search?run=handmade&q=kernel")["matches"]
    assert len(whole) == len(KERNELS_DEV0) + len(KERNELS_DEV1) + 1  # + cudaLaunchKernel
    one = get(client, "trace/search?run=handmade&q=kernel&limit=2")
    assert one["count"] == len(whole) and one["truncated"] and one["matches"] == whole[:2]
    tail = get(client, f"trace/search?run=handmade&q=kernel&limit=2&offset={len(whole) - 1}")
    assert tail["matches"] == whole[-1:] and not tail["truncated"]
    assert get(client, "trace/search?run=handmade&q=kernel&offset=1000")["matches"] == []


def test_search_returns_markup_as_data_and_never_as_a_pattern(client):
    hit = get(client, "trace/search?run=handmade&q=" + quote("<IMG src=x"))
    assert hit["count"] == 1 and hit["matches"][0]["name"] == MARKUP
    assert get(client, "trace/search?run=handmade&q=" + quote("f(x)"))["count"] == 1
    assert get(client, "trace/search?run=handmade&q=" + quote(".*"))["count"] == 0
    assert get(client, "trace/search?run=handmade&q=nothing-like-this")["count"] == 0


@pytest.mark.parametrize("query, message", [
    ("", "missing query parameter 'q'"),
    ("q=", "must not be empty"),
    ("q=%20%20", "must not be empty"),
    ("q=" + "a" * 201, "longer than 200"),
    ("q=a%01b", "control character"),
    ("q=a&q=b", "given 2 times"),
    ("q=a&limit=0", "between 1 and 5000"),
    ("q=a&limit=5001", "between 1 and 5000"),
    ("q=a&limit=ten", "decimal integer"),
    ("q=a&offset=-1", "between 0"),
])
def test_search_rejects_bad_parameters_with_400(client, query, message):
    body = get(client, f"trace/search?run=handmade&{query}", expect=400)
    assert message in body["error"]


def test_search_of_a_missing_run_is_404(client):
    assert "no run named" in get(client, "trace/search?run=nope&q=a", expect=404)["error"]


# -- flows ------------------------------------------------------------------------------------
def test_window_flows_launch_and_forward_backward(client):
    step = get(client, "trace?run=handmade&width=1000")
    flows = {(f["kind"], f["from"], f["to"]) for f in step["flows"]}
    launch_call = by_name(client, "handmade", "cudaLaunchKernel")
    matmul = by_name(client, "handmade", "aten::MatMul")
    backward = by_name(client, "handmade", "MatMulBackward0")
    kernel0 = by_name(client, "handmade", "gemm_kernel_0")
    kernel1 = by_name(client, "handmade", "gemm_kernel_1")
    memcpy = by_name(client, "handmade", "Memcpy HtoD")
    assert ("launch", launch_call["i"], kernel0["i"]) in flows           # correlation 7
    assert ("launch", matmul["i"], kernel1["i"]) in flows                # no runtime call: External id 5
    assert ("fwdbwd", matmul["i"], backward["i"]) in flows
    assert all(f["to"] != memcpy["i"] for f in step["flows"])            # no correlation, no External id
    assert step["counts"]["flows"] == step["counts"]["flows_in_window"] == len(step["flows"])
    f = next(f for f in step["flows"] if f["to"] == kernel0["i"])
    assert (f["from_ts_ns"], f["from_track"], f["from_depth"]) == (20, launch_call["track"], 2)
    assert (f["to_ts_ns"], f["to_track"], f["to_depth"]) == (100, kernel0["track"], 0)


def test_window_flows_only_touch_the_window_and_are_bounded(client):
    early = get(client, "trace?run=handmade&start_ns=20&end_ns=30&width=100")  # only cudaLaunchKernel's time
    assert {(f["from"], f["to"]) for f in early["flows"]} >= {
        (by_name(client, "handmade", "cudaLaunchKernel")["i"], by_name(client, "handmade", "gemm_kernel_0")["i"])}
    assert all(f["kind"] != "fwdbwd" or f["from_ts_ns"] <= 30 for f in early["flows"])
    quiet = get(client, "trace?run=handmade&start_ns=500&end_ns=520&width=100")
    assert quiet["flows"] == [] and quiet["counts"]["flows_in_window"] == 0
    late = get(client, "trace?run=handmade&start_ns=650&end_ns=700&width=100")
    assert [f["kind"] for f in late["flows"]] == ["fwdbwd"]
    capped = get(client, "trace?run=handmade&width=1000&max_flows=1")
    assert len(capped["flows"]) == 1 and capped["flows_truncated"] and capped["counts"]["flows_in_window"] == 3
    none = get(client, "trace?run=handmade&width=1000&max_flows=0")
    assert none["flows"] == [] and none["flows_truncated"]
    assert "between 0 and 20000" in get(client, "trace?run=handmade&max_flows=20001", expect=400)["error"]


def test_event_detail_lists_the_recorded_flow_both_ways(client):
    matmul = by_name(client, "handmade", "aten::MatMul")
    backward = by_name(client, "handmade", "MatMulBackward0")
    fwd = get(client, f"trace/event?run=handmade&i={matmul['i']}")["links"]
    bwd = get(client, f"trace/event?run=handmade&i={backward['i']}")["links"]
    link = next(link for link in fwd if link["relation"] == "backward")
    assert (link["i"], link["name"], link["ts_ns"], link["depth"]) == (backward["i"], "MatMulBackward0", 600, 1)
    assert next(link for link in bwd if link["relation"] == "forward")["i"] == matmul["i"]
    kernel = get(client, f"trace/event?run=handmade&i={by_name(client, 'handmade', 'gemm_kernel_0')['i']}")
    rel = {link["relation"]: link["name"] for link in kernel["links"]}
    assert rel == {"launched_by": "cudaLaunchKernel", "operator": "aten::MatMul"}
    assert all("depth" in link and "track" in link for link in kernel["links"])


# -- utilization ------------------------------------------------------------------------------
def test_utilization_bins_equal_the_known_kernel_intervals(client):
    w = get(client, "trace?run=handmade&start_ns=0&end_ns=1000&width=100")
    counters = {c["device"]: c for c in w["counters"] if c["kind"] == "utilization"}  # then the queue counters
    assert sorted(counters) == ["0", "1"]
    dev0, dev1 = counters["0"], counters["1"]
    assert dev0["name"] == "GPU 0 utilization" and dev0["kind"] == "utilization"
    assert (dev0["start_ns"], dev0["end_ns"], dev0["bins"]) == (0, 1000, 100)
    assert dev0["values"] == expected_bins(KERNELS_DEV0)   # memcpy at 600..700 does not count
    assert dev1["values"] == expected_bins(KERNELS_DEV1)
    assert dev0["values"][10:30] == [1.0] * 20 and dev0["values"][40] == 0.5 and dev0["values"][45] == 0.4
    assert dev1["values"][0] == 0.6


def test_utilization_in_a_zoomed_window_and_below_a_nanosecond_per_bin(client):
    zoom = get(client, "trace?run=handmade&start_ns=390&end_ns=410&width=100")  # 0.2 ns per bin
    dev0 = next(c for c in zoom["counters"] if c["device"] == "0" and c["kind"] == "utilization")
    edges = bin_edges(390, 410, 100)[:-1]
    assert dev0["values"] == [1.0 if 400 <= e < 405 else 0.0 for e in edges.tolist()]
    half = get(client, "trace?run=handmade&start_ns=0&end_ns=1000&width=200")
    dev0 = next(c for c in half["counters"] if c["device"] == "0" and c["kind"] == "utilization")
    assert dev0["values"][80] == 1.0 and dev0["values"][81] == 0.0  # [400, 405) fills one 5 ns bin


def test_bin_edges_are_exact_integers_for_any_window():
    assert bin_edges(0, 10, 4).tolist() == [0, 2, 5, 7, 10]
    big = bin_edges(-(1 << 62), 1 << 62, 10000)
    assert big[0] == -(1 << 62) and big[-1] == 1 << 62 and (np.diff(big) > 0).all()


# -- real traces (tests/data) ----------------------------------------------------------------------
def test_cpu_trace_has_forward_backward_flows_and_no_utilization(client):
    w = get(client, "trace?run=transformer_memory_snapshot&width=1500")
    assert w["counters"] == []
    kinds = {f["kind"] for f in w["flows"]}
    assert kinds == {"fwdbwd"} and len(w["flows"]) > 10
    f = w["flows"][0]
    fwd = get(client, f"trace/event?run=transformer_memory_snapshot&i={f['from']}")
    bwd = get(client, f"trace/event?run=transformer_memory_snapshot&i={f['to']}")
    assert fwd["event"]["ts_ns"] == f["from_ts_ns"] and bwd["event"]["ts_ns"] == f["to_ts_ns"] > f["from_ts_ns"]
    assert any(link["relation"] == "backward" and link["i"] == f["to"] for link in fwd["links"])


def test_v100_search_flows_and_utilization_agree_with_the_trace(client):
    entry = max(V100.glob("*.pt.trace.json*"))
    trace = tb_profiler.load(entry)
    names = trace.events.df(["name"])["name"].astype(str)
    want = int(names.str.lower().str.contains("conv", regex=False).sum())
    got = get(client, "trace/search?run=v100&q=CoNv&limit=5000")
    assert got["count"] == want > 0
    ts = [m["ts_ns"] for m in got["matches"]]
    assert ts == sorted(ts) and all("conv" in m["name"].lower() for m in got["matches"])

    w = get(client, "trace?run=v100&width=1000")
    (gpu, queue) = w["counters"]  # GPU 0's utilization, then its stream 7's launch queue
    assert (gpu["kind"], queue["kind"], queue["stream"]) == ("utilization", "queue", 7)
    ev = trace.events
    k = ev["kind"] == Kind.KERNEL
    ms, me = merge_intervals(ev["ts"][k], ev["ts"][k] + ev["dur"][k])
    edges = bin_edges(w["window"]["start_ns"], w["window"]["end_ns"], 1000)
    busy = float(np.dot(gpu["values"], np.diff(edges)))
    # each of the 1000 values is rounded to 4 decimals: at most 0.00005 of a bin off
    assert abs(busy - float((me - ms).sum())) <= 1000 * 0.00005 * np.diff(edges).max() + 1
    assert 0.0 <= min(gpu["values"]) and 0.9 < max(gpu["values"]) <= 1.0

    assert w["flows_truncated"] and 0 < len(w["flows"]) <= 2000 < w["counts"]["flows_in_window"]
    drawn = {e["i"] for e in w["events"]}  # truncated: only flows with an end drawn as an event
    assert all(f["from"] in drawn or f["to"] in drawn for f in w["flows"])
    f = next(f for f in w["flows"] if f["kind"] == "launch")
    kernel = get(client, f"trace/event?run=v100&i={f['to']}")
    assert any(link["relation"] == "launched_by" and link["i"] == f["from"] for link in kernel["links"])
    assert kernel["args"]["correlation"] == get(client, f"trace/event?run=v100&i={f['from']}")["args"]["correlation"]


def test_every_real_trace_answers_window_search_and_event(tmp_path):
    """Old formats (bare array, PyTorch 1.8, legacy autograd), tiny H100 and 4xV100 traces:
    flows bind or are left out, counters only where kernels ran, never an error."""
    d = tmp_path / "all"
    shutil.copytree(LEGACY, d / "legacy")
    plain_trace_copies([H100_AFTER_FIX, H100_BEFORE_FIX, V100X4], d / "tiny")
    state = ProfilerState(str(d), reload_s=0.5, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        c = Client(app)
        runs = get(c, "runs")["runs"]
        assert len(runs) == 7
        for run in runs:
            for worker in get(c, f"workers?run={run}"):
                at = f"run={quote(run)}&worker={quote(worker)}"
                w = get(c, f"trace?{at}&width=800")
                found = get(c, f"trace/search?{at}&q=A&limit=5000")  # nearly every name has an "a"
                ts = [m["ts_ns"] for m in found["matches"]]
                assert found["count"] >= len(ts) > 0 and ts == sorted(ts)
                assert all("a" in m["name"].lower() for m in found["matches"])
                for f in w["flows"]:
                    assert f["kind"] in ("launch", "fwdbwd", "flow") and f["from"] != f["to"]
                for counter in w["counters"]:
                    top = 1.0 if counter["kind"] == "utilization" else float("inf")  # a queue counts operations
                    assert len(counter["values"]) == 800 and all(0.0 <= v <= top for v in counter["values"])
                if w["flows"]:
                    f = w["flows"][0]
                    links = get(c, f"trace/event?{at}&i={f['to']}")["links"]
                    assert f["from"] in {link["i"] for link in links}
    finally:
        state.stop()
        app.close()


def test_event_detail_frames_carry_the_resolved_path(tmp_path):
    """A python_function event's ``source`` and a legacy ``Call stack`` arg's frames get the
    absolute path of the file found under the trace's recorded roots; a frame whose file
    is nowhere keeps only what was recorded."""
    from tb_profiler.plugin.timeline import event_detail
    from tb_profiler.writer import SOURCE_ROOTS_KEY

    src = tmp_path / "proj" / "model.py"
    src.parent.mkdir()
    src.write_text("x = 1\n" * 10)
    events = [{"ph": "X", "cat": "python_function", "name": "model.py(7): forward", "pid": 1, "tid": 1,
               "ts": 0, "dur": 10},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
               "args": {"Call stack": "model.py(3): f;gone.py(9): g"}}]
    path = tmp_path / "logs" / "w.1.pt.trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"traceEvents": events, SOURCE_ROOTS_KEY: [str(src.parent)]}))
    trace = tb_profiler.load(str(path), cache=False)
    names = [trace.str(n) for n in trace.events["name"]]
    fn, op = names.index("model.py(7): forward"), names.index("aten::mm")
    assert event_detail(trace, fn)["source"] == {"file": "model.py", "line": 7, "func": "forward", "path": str(src)}
    detail = event_detail(trace, op)
    assert "source" not in detail
    assert detail["stacks"] == {"Call stack": [
        {"file": "model.py", "line": 3, "func": "f", "path": str(src)},
        {"file": "gone.py", "line": 9, "func": "g"}]}
