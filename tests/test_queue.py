"""Launch queue length (issue 9, part 3): per stream, operations launched but not finished,
exact step functions, time full, host calls blocked, the binned counter for the timeline.
Handmade Kineto-format traces and the V100 trace."""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.queue import queue_bins, queue_length, queue_series

T0 = 1_000_000


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _launch(ts, dur, corr, kernels, stream=7, call="cudaLaunchKernel"):
    out = [_x("cuda_runtime", call, ts, dur, correlation=corr)]
    out += [_x("kernel", f"k{corr}", k0, kd, pid=0, tid=stream, correlation=corr, device=0, stream=stream)
            for k0, kd in kernels]
    return out


@pytest.fixture
def trace(tmp_path):
    ev = [*_launch(0, 2, 1, [(10, 20)]), *_launch(3, 2, 2, [(30, 20)]), *_launch(6, 30, 3, [(50, 20)]),
          *_launch(100, 2, 4, [(110, 5), (115, 5), (120, 5)], call="cudaGraphLaunch"),
          *_launch(200, 2, 5, [(205, 10)], stream=9),
          _x("kernel", "orphan", 300, 5, pid=0, tid=7, device=0, stream=7)]  # no launch call in the trace
    return tb_profiler.load(write_trace(tmp_path / "q.pt.trace.json", {"traceEvents": ev}), cache=False)


def test_series_per_stream(trace):
    series = queue_series(trace)
    assert sorted(series) == [(0, 7), (0, 9)]
    t, length = series[(0, 7)]
    us = [(int(a) // 1000 - T0, int(n)) for a, n in zip(t, length)]
    # joins at the calls (0, 3, 6 us), leaves at the kernels' ends (30, 50, 70); the graph launch
    # is one entry (issue 17: its three kernels do not take a slot each) from its call (100)
    # to its last kernel's end (125)
    assert us == [(0, 1), (3, 2), (6, 3), (30, 2), (50, 1), (70, 0), (100, 1), (125, 0)]
    assert [(int(a) // 1000 - T0, int(n)) for a, n in zip(*series[(0, 9)])] == [(200, 1), (215, 0)]


def test_stream_figures_full_and_blocked(trace):
    out = queue_length(trace, full_at=2)
    s7, s9 = out["streams"].to_dict("records")
    assert (s7["operations"], s7["max_len"], s9["operations"], s9["max_len"]) == (6, 3, 1, 1)
    # length >= 2 during [3, 50) only: the graph launch is one entry
    assert s7["time_full_ns"] == 47_000 and s9["time_full_ns"] == 0
    # calls starting while 2 or more were queued: the third launch (at 6 us, 30 us long, while
    # the cudaLaunchKernel calls started on a shorter queue took 2 us: more than twice that)
    assert (s7["blocked_calls"], s7["blocked_ns"]) == (1, 30_000)
    # time-weighted mean over [0, 125) us: 1*3 + 2*3 + 3*24 + 2*20 + 1*20 + 0*30 + 1*25 = 166 us.queue
    assert s7["mean_len"] == pytest.approx(166 / 125)
    assert "1 device operations have no launch call" in out["notes"][0]
    assert queue_length(trace)["streams"]["blocked_calls"].tolist() == [0, 0]  # 1024 by default
    with pytest.raises(ValueError):
        queue_length(trace, full_at=0)


def test_bins_keep_short_peaks(trace):
    a = (T0 + 0) * 1000
    ((d, s, v), (_, _, v9)) = queue_bins(trace, a, a + 250_000, 5)  # 50 us bins
    assert (d, s) == (0, 7) and v.tolist() == [3, 1, 1, 0, 0] and v9.tolist() == [0, 0, 0, 0, 1]


def test_no_launched_work(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "c.pt.trace.json", {"traceEvents": [_x("cpu_op", "aten::mm", 0, 5)]}),
                         cache=False)
    out = queue_length(t)
    assert out["streams"].empty and "no launched device work" in out["notes"][-1] and queue_bins(t, 0, 10, 2) == []


def test_v100_queue_counts_every_launched_operation():
    t = tb_profiler.load(V100_TRACE)
    out = queue_length(t)["streams"]
    from tb_profiler.analysis.links import launch
    from tb_profiler.trace.roles import DEVICE_WORK, role_mask

    launched = role_mask(t.roles, DEVICE_WORK) & (launch(t) >= 0)
    assert int(out["operations"].sum()) == int(launched.sum())
    for (_, _), (times, length) in queue_series(t).items():
        assert length[-1] == 0 and (length >= 0).all() and (np.diff(times) > 0).all()
