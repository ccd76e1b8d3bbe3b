"""Kernel launch statistics (analysis.launch_stats) on hand-built Kineto traces with exact
answers in ns, on every backend's fixture, and on the real V100 trace checked against the
trace's JSON read independently.

The hand-built CUDA trace (times in us from T0; one ProfilerStep#1 [T0, T0+2000)):

    aten::mm          +100..+400   cudaLaunchKernel +150.125 (20.25 us) -> gemm +200.5 (300 us)     delay 50.375 us
    CUDAGraph::replay +480..+560   cudaGraphLaunch  +500     (30 us)    -> 3 kernels +540/+545/+550 (1, 2, 3 us)
    aten::add         +600..+650   cudaLaunchKernel +610     (10 us)    -> add  +625 (2 us): shorter than its call
    aten::relu x10    +700+50i     cudaLaunchKernel +705+50i (4 us)     -> relu +710+50i (8 us)      delay 5 us
    (no operator)                  cudaLaunchKernel +1300    (5 us)     -> late +1700 (10 us)         delay 400 us: outlier
    aten::copy_       +1720..+1740 cudaMemcpyAsync  +1725    (5 us)     -> memcpy (not a kernel launch)
                                   cudaLaunchKernel +1750    (5 us)     -> nothing: call without kernel
                                   cudaStreamSynchronize +1760           (not a launch)
                                                                           orphan kernel +1900: kernel without call
"""
from __future__ import annotations

import gzip
import json
from collections import Counter
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import (
    BACKENDS,
    COMPUTE_US,
    LAUNCH_US,
    STEPS,
    device_trace,
    write_trace,
)

import tb_profiler
from tb_profiler.analysis.launch_stats import (
    CALL_COLUMNS,
    LAUNCH_COLUMNS,
    OPERATOR_COLUMNS,
    launch_stats,
)
from tb_profiler.analysis.steps import steps

T0 = 1_000_000
T0_NS = T0 * 1000
HOST, DEV, STREAM = 4242, 0, 7


def _x(cat, name, pid, tid, ts, dur, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3)}
    if args:
        ev["args"] = args
    return ev


def _call(name, ts, dur, corr):
    return _x("cuda_runtime", name, HOST, HOST, T0 + ts, dur, correlation=corr)


def _kernel(name, ts, dur, corr=None):
    args = {"device": DEV, "stream": STREAM}
    if corr is not None:
        args["correlation"] = corr
    return _x("kernel", name, DEV, STREAM, T0 + ts, dur, **args)


def _op(name, ts, dur):
    return _x("cpu_op", name, HOST, HOST, T0 + ts, dur)


def _doc(events):
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "NVIDIA H100", "computeMajor": 9}],
            "traceEvents": events}


def cuda_trace() -> dict:
    ev = [_x("user_annotation", "ProfilerStep#1", HOST, HOST, T0, 2000),
          _op("aten::mm", 100, 300), _call("cudaLaunchKernel", 150.125, 20.25, 1), _kernel("gemm", 200.5, 300, 1),
          _op("CUDAGraph::replay", 480, 80), _call("cudaGraphLaunch", 500, 30, 2),
          _kernel("graph_k0", 540, 1, 2), _kernel("graph_k1", 545, 2, 2), _kernel("graph_k2", 550, 3, 2),
          _op("aten::add", 600, 50), _call("cudaLaunchKernel", 610, 10, 3), _kernel("add", 625, 2, 3)]
    for i in range(10):
        ev += [_op("aten::relu", 700 + 50 * i, 20), _call("cudaLaunchKernel", 705 + 50 * i, 4, 10 + i),
               _kernel("relu", 710 + 50 * i, 8, 10 + i)]
    ev += [_call("cudaLaunchKernel", 1300, 5, 30), _kernel("late", 1700, 10, 30),
           _op("aten::copy_", 1720, 20), _call("cudaMemcpyAsync", 1725, 5, 40),
           _x("gpu_memcpy", "Memcpy HtoD", DEV, STREAM, T0 + 1730, 3, device=DEV, stream=STREAM, correlation=40),
           _call("cudaLaunchKernel", 1750, 5, 41),
           _call("cudaStreamSynchronize", 1760, 5, 42),
           _kernel("orphan", 1900, 1, 99)]
    return _doc(ev)


def _load(tmp_path, doc, name="t.pt.trace.json"):
    return tb_profiler.load(write_trace(tmp_path / name, doc), cache=False)


@pytest.fixture
def cuda(tmp_path):
    return launch_stats(_load(tmp_path, cuda_trace()), bins=8)


def _row(frame, **where):
    m = np.ones(len(frame), dtype=bool)
    for k, v in where.items():
        m &= (frame[k] == v).to_numpy()
    assert m.sum() == 1, (where, frame)
    return frame[m].iloc[0]


def test_frames_have_the_contract_columns_and_int_ns(cuda):
    lf = cuda["launches"]
    assert list(lf.columns) == LAUNCH_COLUMNS
    assert list(cuda["outliers"].columns) == LAUNCH_COLUMNS + ["reason"]
    assert list(cuda["calls"].columns) == CALL_COLUMNS
    assert list(cuda["operators"].columns) == OPERATOR_COLUMNS
    for c in ("call_start_ns", "call_dur_ns", "kernels", "kernel_start_ns", "kernel_dur_ns", "launch_delay_ns",
              "device", "stream", "step"):
        assert lf[c].dtype == np.int64, c
    assert len(lf) == 14  # 13 eager launches + 1 graph launch; the memcpy call is no kernel launch
    assert (lf["call_start_ns"].diff().dropna() > 0).all()  # in call order


def test_cuda_launch_exact_ns(cuda):
    r = _row(cuda["launches"], kernel="gemm")
    assert r["call"] == "cudaLaunchKernel"
    assert r["call_start_ns"] == T0_NS + 150_125
    assert r["call_dur_ns"] == 20_250
    assert r["kernels"] == 1
    assert r["kernel_start_ns"] == T0_NS + 200_500
    assert r["kernel_dur_ns"] == 300_000
    assert r["launch_delay_ns"] == 50_375
    assert (r["device"], r["stream"], r["step"]) == (0, 7, 1)
    assert r["operator"] == "aten::mm"


def test_graph_launch_is_one_row_with_its_kernels(cuda):
    r = _row(cuda["launches"], call="cudaGraphLaunch")
    assert r["kernels"] == 3
    assert r["kernel"] == "graph_k0"
    assert r["kernel_start_ns"] == T0_NS + 540_000
    assert r["launch_delay_ns"] == 40_000
    assert r["kernel_dur_ns"] == 6_000
    assert r["operator"] == "CUDAGraph::replay"
    c = _row(cuda["calls"], call="cudaGraphLaunch")
    assert (c["launches"], c["kernels"], c["call_dur_total_ns"]) == (1, 3, 30_000)
    assert any("graph launch" in n for n in cuda["notes"])


def test_short_kernels(cuda):
    # the graph launch (6 us of kernels, 30 us call) and aten::add's (2 us kernel, 10 us call)
    assert cuda["short_kernels"] == 2
    assert cuda["short_share"] == pytest.approx(2 / 14)
    assert _row(cuda["calls"], call="cudaLaunchKernel")["short_kernels"] == 1
    assert _row(cuda["calls"], call="cudaGraphLaunch")["short_kernels"] == 1


def test_calls_per_name(cuda):
    c = _row(cuda["calls"], call="cudaLaunchKernel")
    assert c["launches"] == 13 and c["kernels"] == 13
    durs = np.array([20_250, 10_000] + [4_000] * 10 + [5_000])
    delays = np.array([50_375, 15_000] + [5_000] * 10 + [400_000])
    assert c["call_dur_total_ns"] == durs.sum() and c["call_dur_max_ns"] == 20_250
    assert c["call_dur_median_ns"] == np.median(durs)
    assert c["call_dur_p90_ns"] == pytest.approx(np.quantile(durs, 0.9))
    assert c["delay_median_ns"] == 5_000 and c["delay_max_ns"] == 400_000
    assert c["delay_mean_ns"] == pytest.approx(delays.mean())
    assert c["kernel_dur_total_ns"] == 300_000 + 2_000 + 10 * 8_000 + 10_000
    assert list(cuda["calls"]["call"]) == ["cudaLaunchKernel", "cudaGraphLaunch"]  # by call time


def test_outlier_delay(cuda):
    out = cuda["outliers"]
    assert len(out) == 1
    r = out.iloc[0]
    assert (r["kernel"], r["launch_delay_ns"], r["operator"]) == ("late", 400_000, None)
    assert "p99" in r["reason"]


def test_outlier_limit(tmp_path):
    trace = _load(tmp_path, cuda_trace())
    assert launch_stats(trace, outliers=0)["outliers"].empty
    assert list(launch_stats(trace, outliers=0)["outliers"].columns) == LAUNCH_COLUMNS + ["reason"]


def test_operator_attribution(cuda):
    ops = cuda["operators"]
    mm = _row(ops, operator="aten::mm")
    assert (mm["launches"], mm["call_ns"], mm["kernel_ns"]) == (1, 20_250, 300_000)
    assert mm["delay_median_ns"] == 50_375
    assert mm["overhead_share"] == pytest.approx(20_250 / 320_250)
    relu = _row(ops, operator="aten::relu")
    assert (relu["launches"], relu["call_ns"], relu["kernel_ns"]) == (10, 40_000, 80_000)
    assert relu["overhead_share"] == pytest.approx(1 / 3)
    assert ops["operator"].iloc[-1] is None  # launches outside any operator, last
    assert ops["launches"].iloc[-1] == 1
    assert "aten::copy_" not in set(ops["operator"].dropna())  # a memcpy call is no kernel launch
    assert ops["launches"].sum() == len(cuda["launches"])


def test_unmatched(cuda):
    assert cuda["unmatched"] == {"calls_without_kernel": 1, "kernels_without_call": 1}
    assert "orphan" not in set(cuda["launches"]["kernel"])
    assert any("no launching call" in n for n in cuda["notes"])
    assert any("no device event" in n for n in cuda["notes"])


def test_histograms(cuda):
    assert set(cuda["histograms"]) == {"call_dur_ns", "launch_delay_ns", "kernel_dur_ns"}
    for name, h in cuda["histograms"].items():
        edges, counts = h["edges"], h["counts"]
        assert len(edges) == 9 and len(counts) == 8, name
        assert all(isinstance(e, int) for e in edges) and all(isinstance(c, int) for c in counts)
        assert all(b > a for a, b in pairwise(edges)), edges
        assert sum(counts) == 14, name
        vals = cuda["launches"][name]
        assert edges[0] <= vals.min() and edges[-1] >= vals.max()
    d = cuda["histograms"]["launch_delay_ns"]
    assert d["edges"][0] == 5_000 and d["edges"][-1] == 400_000
    assert d["counts"][0] == 10 and d["counts"][-1] == 1  # the ten 5 us delays; the outlier


def test_histogram_tiny_range_and_negative_delay(tmp_path):
    # a kernel whose timestamp precedes its call (clock skew): a negative delay, kept exact
    doc = _doc([_op("aten::mm", 0, 100), _call("cudaLaunchKernel", 10, 0.001, 1), _kernel("k", 9.999, 0.002, 1),
                _call("cudaLaunchKernel", 20, 0.002, 2), _kernel("k", 20.003, 0.001, 2)])
    res = launch_stats(_load(tmp_path, doc), bins=30)
    assert list(res["launches"]["launch_delay_ns"]) == [-1, 3]
    for h in res["histograms"].values():
        assert len(h["edges"]) == 31 and sum(h["counts"]) == 2
        assert all(b > a for a, b in pairwise(h["edges"]))
    assert any("negative" in n for n in res["notes"])
    assert list(res["launches"]["step"]) == [0, 0]  # no ProfilerStep: the whole trace is step 0


def test_hip_launch(tmp_path):
    doc = _doc([_x("user_annotation", "ProfilerStep#4", HOST, HOST, T0, 500),
                _op("aten::mm", 10, 100), _call("hipLaunchKernel", 20, 7.5, 1), _kernel("Cijk_gemm", 40.25, 12, 1),
                _op("aten::add", 200, 100), _call("hipGraphLaunch", 210, 9, 2),
                _kernel("g0", 230, 4, 2), _kernel("g1", 240, 5, 2)])
    doc["deviceProperties"] = [{"id": DEV, "name": "AMD Instinct MI300X"}]
    trace = _load(tmp_path, doc)
    assert trace.device_kinds[0] == "ROCm"
    res = launch_stats(trace)
    lf = res["launches"]
    hip = _row(lf, call="hipLaunchKernel")
    assert (hip["call_start_ns"], hip["call_dur_ns"]) == (T0_NS + 20_000, 7_500)
    assert (hip["kernel_dur_ns"], hip["launch_delay_ns"], hip["operator"], hip["step"]) == (12_000, 20_250, "aten::mm", 4)
    g = _row(lf, call="hipGraphLaunch")
    assert (g["kernels"], g["kernel_dur_ns"], g["launch_delay_ns"], g["operator"]) == (2, 9_000, 20_000, "aten::add")
    assert res["short_kernels"] == 0
    assert res["unmatched"] == {"calls_without_kernel": 0, "kernels_without_call": 0}


@pytest.mark.parametrize("backend", [b for b, spec in BACKENDS.items() if spec.runtime_cat])
def test_every_backend_fixture(tmp_path, backend):
    """CUDA, ROCm, MTIA, XPU, PrivateUse1, HPU: each backend's launch call, found by
    correlation (no per-backend name list)."""
    res = launch_stats(_load(tmp_path, device_trace(backend)))
    lf = res["launches"]
    assert len(lf) == STEPS
    assert set(lf["call"]) == {BACKENDS[backend].launch}
    assert (lf["call_dur_ns"] == LAUNCH_US * 1000).all()
    assert (lf["kernel_dur_ns"] == COMPUTE_US * 1000).all()
    assert (lf["launch_delay_ns"] == 50_000).all()
    assert (lf["operator"] == "aten::mm").all()
    assert list(lf["step"]) == list(range(STEPS))
    assert (lf["device"] == 0).all() and (lf["stream"] == 7).all()
    assert res["unmatched"] == {"calls_without_kernel": 0, "kernels_without_call": 0}


def test_range_profiler_kernels_without_calls(tmp_path):
    res = launch_stats(_load(tmp_path, device_trace("CUPTI range")))
    assert res["launches"].empty
    assert res["unmatched"] == {"calls_without_kernel": 0, "kernels_without_call": STEPS}


def test_cpu_only_trace(tmp_path):
    doc = {"schemaVersion": 1, "traceEvents": [
        _x("user_annotation", "ProfilerStep#0", HOST, HOST, T0, 100), _op("aten::mm", 10, 50),
        _op("aten::add", 70, 20)]}
    res = launch_stats(_load(tmp_path, doc))
    assert res["launches"].empty and list(res["launches"].columns) == LAUNCH_COLUMNS
    assert res["launches"]["launch_delay_ns"].dtype == np.int64
    assert res["calls"].empty and list(res["calls"].columns) == CALL_COLUMNS
    assert res["operators"].empty and list(res["operators"].columns) == OPERATOR_COLUMNS
    assert res["outliers"].empty and list(res["outliers"].columns) == LAUNCH_COLUMNS + ["reason"]
    assert res["short_kernels"] == 0 and res["short_share"] == 0.0
    assert res["unmatched"] == {"calls_without_kernel": 0, "kernels_without_call": 0}
    assert all(h == {"edges": [], "counts": []} for h in res["histograms"].values())
    assert any("no kernel launches" in n for n in res["notes"])


def test_bins_validated(tmp_path):
    with pytest.raises(ValueError):
        launch_stats(_load(tmp_path, cuda_trace()), bins=0)


def _ns(us) -> int:
    return round(us * 1000)


def test_v100_real_trace():
    trace = tb_profiler.load(V100_TRACE)
    res = launch_stats(trace)
    lf = res["launches"]
    # independently, from the JSON: correlation ids shared by a Runtime call and a Kernel
    doc = json.loads(gzip.decompress(V100_TRACE.read_bytes()))
    calls = {e["args"]["correlation"]: e for e in doc["traceEvents"]
             if e.get("cat") == "Runtime" and "correlation" in e.get("args", {})}
    first = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "Kernel" and e.get("args", {}).get("correlation") in calls:
            c = e["args"]["correlation"]
            first[c] = min(first.get(c, e["ts"]), e["ts"])
    assert len(lf) == len(first) == 8772
    expected = Counter(_ns(ts) - _ns(calls[c]["ts"]) for c, ts in first.items())
    assert Counter(lf["launch_delay_ns"].tolist()) == expected
    assert (lf["launch_delay_ns"] >= 0).all()  # no clock skew in this trace
    assert not any("negative" in n for n in res["notes"])
    assert (lf["kernels"] == 1).all() and set(lf["call"]) == {"cudaLaunchKernel"}
    assert lf["operator"].notna().all()
    assert set(lf["step"]) <= set(steps(trace)["step"]) | {-1}
    for h in res["histograms"].values():
        assert sum(h["counts"]) == len(lf)
    assert res["short_kernels"] == int((lf["kernel_dur_ns"] < lf["call_dur_ns"]).sum())
    assert res["operators"]["launches"].sum() == len(lf)
    assert res["operators"]["call_ns"].sum() == lf["call_dur_ns"].sum()
    assert res["calls"]["launches"].sum() == len(lf)
    assert res["unmatched"] == {"calls_without_kernel": 0, "kernels_without_call": 0}
    assert isinstance(res["outliers"], pd.DataFrame)
