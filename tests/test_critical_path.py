"""Critical path of a step (issue 9, part 9): walked back from the step's end through
device work, launch calls, host time and synchronizations; device-bound vs host-bound
time; segments that tile the step. Handmade Kineto-format traces with exact answers."""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.critical_path import critical_path

T0 = 1_000_000


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _launch(call_ts, call_dur, k_ts, k_dur, corr, call="cudaLaunchKernel"):
    return [_x("cuda_runtime", call, call_ts, call_dur, correlation=corr),
            _x("kernel", f"k{corr}", k_ts, k_dur, pid=0, tid=7, correlation=corr, device=0, stream=7)]


def _path(tmp_path, events, step_dur):
    ev = [_x("user_annotation", "ProfilerStep#1", 0, step_dur), _x("cpu_op", "aten::op", 0, step_dur - 1), *events]
    t = tb_profiler.load(write_trace(tmp_path / "p.pt.trace.json", {"traceEvents": ev}), cache=False)
    out = critical_path(t)
    seg = out["segments"]
    us = [(k, (s - (T0 * 1000)) // 1000, (e - (T0 * 1000)) // 1000) for k, s, e in
          zip(seg["kind"], seg["start_ns"], seg["end_ns"])]
    return out, us


def test_device_bound_step(tmp_path):
    ev = [*_launch(0, 2, 20, 100, 1), *_launch(5, 2, 120, 100, 2), *_launch(10, 2, 220, 100, 3)]
    out, us = _path(tmp_path, ev, 330)
    assert us == [("runtime", 0, 2), ("launch", 2, 20), ("device", 20, 120), ("device", 120, 220),
                  ("device", 220, 320), ("tail", 320, 330)]
    (row,) = out["steps"].to_dict("records")
    assert (row["length_ns"], row["path_ns"], row["device_ns"], row["host_ns"]) == (330_000, 330_000, 300_000, 30_000)
    assert list(out["segments"]["name"][2:5]) == ["k1", "k2", "k3"]
    assert out["segments"]["operator"].iloc[2] == "aten::op"  # the op that launched it


def test_host_bound_step(tmp_path):
    ev = [*_launch(0, 5, 10, 10, 1), *_launch(50, 5, 60, 10, 2), *_launch(100, 5, 110, 10, 3)]
    out, us = _path(tmp_path, ev, 130)
    assert us == [("runtime", 0, 5), ("host", 5, 50), ("runtime", 50, 55), ("host", 55, 100), ("runtime", 100, 105),
                  ("launch", 105, 110), ("device", 110, 120), ("tail", 120, 130)]
    (row,) = out["steps"].to_dict("records")
    assert (row["device_ns"], row["host_ns"]) == (10_000, 120_000)
    top = out["top"].set_index(["kind", "name"])["ns"]
    assert top[("host", "aten::op")] == 90_000  # the host time between launches: charged to the op issuing them


def test_synchronization_waits_for_the_device(tmp_path):
    ev = [*_launch(0, 5, 10, 190, 1), _x("cuda_runtime", "cudaDeviceSynchronize", 20, 181),
          *_launch(205, 2, 210, 10, 2)]
    out, us = _path(tmp_path, ev, 230)
    assert us == [("runtime", 0, 5), ("launch", 5, 10), ("device", 10, 200), ("sync", 200, 205),
                  ("runtime", 205, 207), ("launch", 207, 210), ("device", 210, 220), ("tail", 220, 230)]
    (row,) = out["steps"].to_dict("records")
    assert row["sync_ns"] == 5_000 and row["device_ns"] == 200_000


def test_no_device_work_and_v100_tiles_every_step(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "c.pt.trace.json", {"traceEvents": [_x("cpu_op", "aten::mm", 0, 5)]}),
                         cache=False)
    assert critical_path(t)["segments"].empty and "no critical path" in critical_path(t)["notes"][0]
    out = critical_path(tb_profiler.load(V100_TRACE))
    steps = out["steps"]
    assert (steps["path_ns"] == steps["length_ns"]).all()
    for _, s in out["segments"].groupby("step"):
        assert (s["start_ns"].to_numpy()[1:] >= s["end_ns"].to_numpy()[:-1]).all()  # no overlap: a chain
    assert (steps["device_ns"] + steps["host_ns"] + steps["sync_ns"] + steps["other_ns"] == steps["length_ns"]).all()
    assert 0.3 < steps["device_share"].mean() < 0.5  # resnet50 with a DataLoader in the loop: host-bound


@pytest.mark.parametrize("limit", [3])
def test_segments_are_bounded(tmp_path, limit):
    ev = [*_launch(0, 2, 20, 100, 1), *_launch(5, 2, 120, 100, 2)]
    t = tb_profiler.load(write_trace(tmp_path / "b.pt.trace.json", {"traceEvents": [
        _x("user_annotation", "ProfilerStep#1", 0, 230), *ev]}), cache=False)
    out = critical_path(t, max_segments=limit)
    assert len(out["segments"]) == limit and out["truncated"] > 0 and out["notes"]
    assert np.isfinite(out["steps"]["path_ns"]).all()
