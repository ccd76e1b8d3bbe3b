"""Time-range statistics (issue 9, part 10): the events of a range by kind and name, each
counted inside the range only, self time less the children's. A handmade trace with known
answers, every backend's fixture, and the real V100 trace."""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import BACKENDS, device_trace, write_trace

import tb_profiler
from tb_profiler.analysis.range_stats import range_stats
from tb_profiler.analysis.steps import steps
from tb_profiler.trace.roles import Role

T0 = 1_000_000  # us


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


@pytest.fixture
def trace(tmp_path):
    """aten::linear [0, 100) > aten::mm [10, 60) > cudaLaunchKernel [20, 25) -> kernel [30, 90)
    on stream 7; a second aten::mm [120, 140) and its kernel [150, 170)."""
    ev = [_x("cpu_op", "aten::linear", 0, 100), _x("cpu_op", "aten::mm", 10, 50),
          _x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=1),
          _x("kernel", "gemm", 30, 60, pid=0, tid=7, correlation=1, device=0, stream=7),
          _x("cpu_op", "aten::mm", 120, 20),
          _x("cuda_runtime", "cudaLaunchKernel", 125, 5, correlation=2),
          _x("kernel", "gemm", 150, 20, pid=0, tid=7, correlation=2, device=0, stream=7)]
    return tb_profiler.load(write_trace(tmp_path / "r.pt.trace.json", {"traceEvents": ev}), cache=False)


def _rows(out):
    return {(r["kind"], r["name"]): (r["count"], r["total_ns"], r["self_ns"], r["avg_ns"], r["max_ns"])
            for r in out["rows"].to_dict("records")}


def test_clipped_totals_and_self_times(trace):
    a = (T0 + 40) * 1000
    out = range_stats(trace, a, a + 100_000)  # [40, 140) us
    assert _rows(out) == {
        ("operator", "aten::linear"): (1, 60_000, 40_000, 100_000, 100_000),   # [40, 100), less mm's [40, 60)
        # [40, 60) + [120, 140); self less the second one's launch [125, 130); avg of 50 and 20 us
        ("operator", "aten::mm"): (2, 40_000, 35_000, 35_000, 50_000),
        ("kernel", "gemm"): (1, 50_000, 50_000, 60_000, 60_000),              # [40, 90)
        ("runtime", "cudaLaunchKernel"): (1, 5_000, 5_000, 5_000, 5_000),    # [125, 130)
    }
    assert out["events"] == 5
    assert out["kinds"].to_dict("records") == [
        {"kind": "operator", "label": "Operators on the CPU", "count": 3, "total_ns": 100_000, "self_ns": 75_000},
        {"kind": "kernel", "label": "Kernels", "count": 1, "total_ns": 50_000, "self_ns": 50_000},
        {"kind": "runtime", "label": "Runtime calls", "count": 1, "total_ns": 5_000, "self_ns": 5_000}]
    assert [r["kind"] for r in out["rows"].to_dict("records")] == ["operator", "operator", "kernel", "runtime"]


def test_edges_and_bad_range(trace):
    a = (T0 + 100) * 1000
    out = range_stats(trace, a, a + 20_000)  # [100, 120): linear ends at 100, mm starts at 120
    assert out["events"] == 0 and out["rows"].empty and out["kinds"].empty
    with pytest.raises(ValueError, match="empty range"):
        range_stats(trace, a, a)


@pytest.mark.parametrize("backend", ["CUDA", "ROCm", "MTIA", "XPU", "PrivateUse1"])
def test_every_backend_counts_its_kernels(tmp_path, backend):
    t = tb_profiler.load(write_trace(tmp_path / f"{backend}.pt.trace.json", device_trace(backend)), cache=False)
    lo, hi = t.span
    out = range_stats(t, lo, hi + 1)
    kernels = out["rows"][out["rows"]["kind"] == "kernel"]
    assert kernels["name"].tolist() == [BACKENDS[backend].kernel]
    assert int(kernels["total_ns"].sum()) == 3 * 550_000  # 3 steps x 550 us of compute


def test_v100_a_whole_step_adds_up():
    t = tb_profiler.load(V100_TRACE)
    st = steps(t)
    a, b = int(st["start_ns"].iloc[1]), int(st["end_ns"].iloc[1])
    out = range_stats(t, a, b)
    rows = out["rows"]
    assert (rows["self_ns"] <= rows["total_ns"]).all() and (rows["total_ns"] <= rows["count"] * (b - a)).all()
    assert (rows["self_ns"] >= 0).all()
    # kernels: the clipped sum computed here independently
    ev = t.events
    is_k = t.roles == Role.COMPUTE
    ts, end = ev["ts"], ev["ts"] + ev["dur"]
    hit = is_k & (ts < b) & (end > a)
    expect = int((np.minimum(end[hit], b) - np.maximum(ts[hit], a)).sum())
    assert int(rows.loc[rows["kind"] == "kernel", "total_ns"].sum()) == expect


def test_children_overlapping_each_other_clamp_the_self_time_at_zero_with_a_note(tmp_path):
    """A range whose two children each partly cover the other (neither nests in the other,
    so both are its children) on the same thread: Kineto writes each `ph: X` event as it
    was recorded, and record_function ranges closed out of order (handles exited by hand,
    or ended on another code path) overlap this way. The children add up to 110 us in a
    100 us parent: its self time is 0, not -10 us, and the notes say one was clamped."""
    from tb_profiler.plugin.views import range_stats as route

    ev = [_x("user_annotation", "outer", 0, 100), _x("user_annotation", "first", 10, 60),
          _x("user_annotation", "second", 40, 50), _x("cpu_op", "aten::add", 200, 10)]
    t = tb_profiler.load(write_trace(tmp_path / "o.pt.trace.json", {"traceEvents": ev}), cache=False)
    a = T0 * 1000
    out = range_stats(t, a, a + 300_000)
    got = {r["name"]: (r["total_ns"], r["self_ns"]) for r in out["rows"].to_dict("records")}
    assert got == {"outer": (100_000, 0), "first": (60_000, 60_000), "second": (50_000, 50_000),
                   "aten::add": (10_000, 10_000)}
    assert (out["rows"]["self_ns"] >= 0).all() and (out["kinds"]["self_ns"] >= 0).all()
    assert len(out["notes"]) == 1 and out["notes"][0].startswith("1 event(s)") and "0, not negative" in out["notes"][0]
    t0 = int(t.span[0])
    assert route(t, a - t0, a - t0 + 300_000)["notes"] == out["notes"]  # the route carries the note
    assert range_stats(t, a + 200_000, a + 300_000)["notes"] == []  # nothing clamped there


def test_v100_kernels_name_the_operator_that_launched_them():
    """launched_by: per device name, the operator whose launches issued most of its time in
    the range (links.launching_op, counted here event by event); None for host rows."""
    from collections import Counter

    from tb_profiler.analysis.links import launching_op

    t = tb_profiler.load(V100_TRACE)
    st = steps(t)
    a, b = int(st["start_ns"].iloc[1]), int(st["end_ns"].iloc[1])   # one whole step
    rows = range_stats(t, a, b)["rows"]
    ev, op = t.events, launching_op(t)
    kernels = rows[rows["kind"] == "kernel"]
    assert len(kernels) and kernels["launched_by"].notna().all()
    for _, r in kernels.head(5).iterrows():
        hit = np.flatnonzero((t.roles == Role.COMPUTE) & (t.str(ev["name"]) == r["name"]) & (ev["ts"] < b)
                             & (ev["ts"] + ev["dur"] > a))
        clipped = np.minimum(ev["ts"][hit] + ev["dur"][hit], b) - np.maximum(ev["ts"][hit], a)
        by = Counter()
        for i, c in zip(hit, clipped):
            if op[i] >= 0:
                by[t.str(ev["name"][op[i]])] += int(c)
        assert r["launched_by"] == max(sorted(by), key=lambda n: by[n])
    assert rows[rows["kind"] == "operator"]["launched_by"].isna().all()
