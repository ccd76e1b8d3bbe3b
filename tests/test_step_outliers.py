"""Outlier steps (issue 9, part 7): per-step time with median, mean and p90, the steps above
factor x the median, and each one's breakdown against the median step. Handmade traces in
Kineto's format with known answers, and the real V100 trace."""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import device_trace, write_trace

import tb_profiler
from tb_profiler.analysis.breakdown import CATEGORIES, breakdown
from tb_profiler.analysis.step_outliers import step_outliers


def _steps_trace(tmp_path, durs_us, stall_us=None):
    """A host-only trace whose step k lasts durs_us[k]; stall_us[k] of it inside a
    DataLoader (enumerate(DataLoader)#...) range at its start."""
    ev, t = [], 1_000_000
    for k, d in enumerate(durs_us):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k + 1}", "pid": 1, "tid": 1,
                   "ts": t, "dur": d, "args": {}})
        stall = (stall_us or [0] * len(durs_us))[k]
        if stall:
            ev.append({"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                       "pid": 1, "tid": 1, "ts": t + 1, "dur": stall, "args": {}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 1 + stall, "dur": 50,
                   "args": {}})
        t += d
    return tb_profiler.load(write_trace(tmp_path / "steps.pt.trace.json", {"traceEvents": ev}), cache=False)


def test_the_slow_step_is_found_with_its_cause(tmp_path):
    trace = _steps_trace(tmp_path, [100, 104, 98, 400, 102], stall_us=[0, 0, 0, 300, 0])
    out = step_outliers(trace)
    assert out["stats"] == {"steps": 5, "mean_ns": 160_800, "median_ns": 102_000, "p90_ns": 281_600,
                            "min_ns": 98_000, "max_ns": 400_000, "factor": 1.5}
    assert out["steps"]["outlier"].tolist() == [False, False, False, True, False]
    assert out["steps"]["ratio"].iloc[3] == pytest.approx(400 / 102)
    (row,) = out["outliers"].to_dict("records")
    assert (row["step"], row["dur_ns"], row["excess_ns"]) == (4, 400_000, 298_000)
    assert row["cause"] == "dataloader" and row["cause_label"]
    assert row["dataloader_ns"] == 300_000 and row["dataloader_delta_ns"] == 300_000
    # the breakdown of the outlier adds up to its duration, each category against the median's
    assert sum(row[c + "_ns"] for c in CATEGORIES) == 400_000
    assert all(row[c + "_delta_ns"] == row[c + "_ns"] - out["median_step"][c + "_ns"] for c in CATEGORIES)


def test_factor_and_no_outlier(tmp_path):
    trace = _steps_trace(tmp_path, [100, 104, 98, 130, 102])
    assert step_outliers(trace)["outliers"].empty
    assert step_outliers(trace, factor=1.2)["outliers"]["step"].tolist() == [4]
    with pytest.raises(ValueError, match="factor"):
        step_outliers(trace, factor=1.0)


def test_outliers_slowest_first(tmp_path):
    trace = _steps_trace(tmp_path, [100, 300, 100, 500, 100, 100])
    assert step_outliers(trace)["outliers"]["step"].tolist() == [4, 2]


def test_too_few_steps_and_no_steps(tmp_path):
    two = _steps_trace(tmp_path, [100, 900])
    out = step_outliers(two)
    assert out["outliers"].empty and "too few" in out["notes"][0] and out["stats"]["median_ns"] == 500_000
    flat = tmp_path / "flat.pt.trace.json"
    none = tb_profiler.load(write_trace(flat, {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 5, "args": {}}]}),
        cache=False)
    got = step_outliers(none)
    assert got["stats"]["steps"] == 1 and got["outliers"].empty  # the whole trace is one step


def test_device_trace_steps_equal_the_breakdown(tmp_path):
    trace = tb_profiler.load(write_trace(tmp_path / "cuda.pt.trace.json", device_trace("CUDA")), cache=False)
    out = step_outliers(trace)
    bd = breakdown(trace)
    assert out["steps"]["dur_ns"].tolist() == bd["total_ns"].iloc[:-1].tolist()
    assert out["stats"]["mean_ns"] == bd["total_ns"].iloc[-1]  # the same average as the Overview's


def test_v100_statistics_are_the_steps():
    trace = tb_profiler.load(V100_TRACE)
    out = step_outliers(trace)
    dur = breakdown(trace)["total_ns"].iloc[:-1].to_numpy()
    assert out["stats"]["median_ns"] == int(np.rint(np.median(dur)))
    assert out["stats"]["p90_ns"] == int(np.rint(np.percentile(dur, 90)))
    assert out["outliers"].empty  # its 6 steps are within 6 % of the median
    assert step_outliers(trace, factor=1.05)["outliers"]["step"].tolist() == [5]
