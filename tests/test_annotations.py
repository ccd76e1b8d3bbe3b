"""User annotations (issue 9, part 5): record_function ranges on the host with the kernels
launched inside them (an outer range covering its inner ones), gpu_user_annotation ranges
with the device busy time inside them; ProfilerStep#N left out. Handmade Kineto-format
traces with exact answers."""
from __future__ import annotations

import pytest
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.annotations import annotations

T0 = 1_000_000


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _launch(ts, corr, kts, kdur, stream=7):
    return [_x("cuda_runtime", "cudaLaunchKernel", ts, 2, correlation=corr),
            _x("kernel", f"k{corr}", kts, kdur, pid=0, tid=stream, correlation=corr, device=0, stream=stream)]


@pytest.fixture
def trace(tmp_path):
    ev = [_x("user_annotation", "ProfilerStep#1", 0, 1000),
          _x("user_annotation", "model", 10, 500),
          _x("user_annotation", "attention", 20, 100), *_launch(30, 1, 100, 40), *_launch(40, 2, 140, 60),
          _x("user_annotation", "mlp", 200, 100), *_launch(210, 3, 300, 50),
          _x("user_annotation", "attention", 400, 50), *_launch(410, 4, 500, 10, stream=9),
          *_launch(600, 5, 700, 30),  # outside every range
          _x("gpu_user_annotation", "attention", 100, 100, pid=0, tid=7, device=0),
          _x("gpu_user_annotation", "mlp", 290, 80, pid=0, tid=7, device=0)]
    return tb_profiler.load(write_trace(tmp_path / "a.pt.trace.json", {"traceEvents": ev}), cache=False)


def test_host_ranges_and_the_kernels_they_launched(trace):
    out = annotations(trace)
    rows = {r["name"]: r for r in out["host"].to_dict("records")}
    assert list(rows) == ["model", "attention", "mlp"]  # by total time; ProfilerStep#1 left out
    assert rows["model"] == {"name": "model", "count": 1, "total_ns": 500_000, "mean_ns": 500_000, "max_ns": 500_000,
                             "kernels": 4, "kernel_ns": 160_000}  # covers attention x2 and mlp
    assert rows["attention"] == {"name": "attention", "count": 2, "total_ns": 150_000, "mean_ns": 75_000,
                                 "max_ns": 100_000, "kernels": 3, "kernel_ns": 110_000}
    assert (rows["mlp"]["kernels"], rows["mlp"]["kernel_ns"]) == (1, 50_000)


def test_device_ranges_and_the_busy_time_inside(trace):
    rows = annotations(trace)["device"].to_dict("records")
    # attention [100, 200) on device 0: k1 [100, 140) and k2 [140, 200); mlp [290, 370): k3 [300, 350)
    assert rows == [
        {"device": 0, "name": "attention", "count": 1, "total_ns": 100_000, "mean_ns": 100_000, "max_ns": 100_000,
         "kernels": 2, "kernel_ns": 100_000},
        {"device": 0, "name": "mlp", "count": 1, "total_ns": 80_000, "mean_ns": 80_000, "max_ns": 80_000,
         "kernels": 1, "kernel_ns": 50_000}]


def test_no_annotations_and_no_device_side(tmp_path):
    plain = tb_profiler.load(write_trace(tmp_path / "p.pt.trace.json", {"traceEvents": [
        _x("cpu_op", "aten::mm", 0, 10)]}), cache=False)
    out = annotations(plain)
    assert out["host"].empty and out["device"].empty and "no user annotations" in out["notes"][0]
    host_only = tb_profiler.load(write_trace(tmp_path / "h.pt.trace.json", {"traceEvents": [
        _x("user_annotation", "fwd", 0, 100), *_launch(10, 1, 50, 20)]}), cache=False)
    out = annotations(host_only)
    assert out["host"]["kernels"].tolist() == [1] and out["device"].empty
    assert "gpu_user_annotation" in out["notes"][0]
