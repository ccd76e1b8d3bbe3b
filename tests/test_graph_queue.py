"""The launch queue on CUDA/HIP graphs (issue 17): a graph launch is one entry.

``analysis.queue`` counts launches pending on a stream.  A graph launch
(``cudaGraphLaunch``, ``hipGraphLaunch``) is one call whose kernels all carry its
correlation id; counted once per kernel, HTA's V100 trace ``tests/data/trace_diff/test/
test.json.gz`` (facebookresearch/HolisticTraceAnalysis: 12 graph launches of 315 and 502
kernels behind a backlog) showed a queue of 1,338, above CUDA's ~1,024 pending launches,
and 3,594 "blocked" calls that took their usual 7 us.  Now it is one entry per launch
call and stream, from the call's start to the end of its last kernel on that stream:
that trace's longest queue is 1,014 and no call is blocked.

The fixture is written as that trace writes its events (PyTorch 1.12-era Kineto on a
V100: integer-us ``ts``/``dur``; ``cudaGraphLaunch`` args ``{"External id", "cbid": 311,
"correlation"}``, ``cudaLaunchKernel`` ``{"External id", "cbid": 211, "correlation"}``;
kernels on pid 1 (the device) tid 7 (the stream) with ``{"External id", "queued": 0,
"device": 1, "context": 1, "stream": 7, "correlation", "registers per thread", "grid",
"block", ...}``): a 990 us kernel holds the stream, a graph launch at 100 us issues
GRAPH_KERNELS 1 us kernels that run after it, and EAGER ordinary launches every 50 us from
200 us (7 us calls, one of 40 us) queue 2 us kernels behind them all.
"""
from __future__ import annotations

import numpy as np
import pytest
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.queue import DEFAULT_FULL_AT, queue_length, queue_series

HOST, DEV, STREAM = 2568503, 1, 7
T0 = 1_661_938_466_000_000
GRAPH_KERNELS, EAGER, SLOW = 1200, 50, 25
CALL_US, SLOW_US = 7, 40


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _call(name, ts, dur, corr, cbid):
    return _x("cuda_runtime", name, HOST, HOST, ts, dur, cbid=cbid, correlation=corr, **{"External id": corr})


def _kernel(name, ts, dur, corr, stream=STREAM):
    return _x("kernel", name, DEV, stream, ts, dur, queued=0, device=DEV, context=1, stream=stream, correlation=corr,
              grid=[2, 1, 1], block=[128, 1, 1], **{"External id": corr, "registers per thread": 32,
                                                     "shared memory": 0, "blocks per SM": 0.025})


def graph_queue_trace(streams=(STREAM,)) -> dict:
    ev = [_x("cpu_op", "CompiledFunction", HOST, HOST, 0, 3000, **{"External id": 1})]
    ev += [_call("cudaLaunchKernel", 0, CALL_US, 10, 211), _kernel("backlog_kernel", 10, 990, 10)]
    ev.append(_call("cudaGraphLaunch", 100, 40, 20, 311))
    ev += [_kernel(f"graph_kernel_{k % 7}", 1000 + k, 1, 20, streams[k % len(streams)]) for k in range(GRAPH_KERNELS)]
    for i in range(EAGER):
        corr = 100 + i
        ev += [_call("cudaLaunchKernel", 200 + 50 * i, SLOW_US if i == SLOW else CALL_US, corr, 211),
               _kernel("eager_kernel", 3000 + 2 * i, 2, corr)]
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "Tesla V100-SXM2-16GB",
                                                      "computeMajor": 7, "computeMinor": 0, "numSms": 80}],
            "traceEvents": ev}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = write_trace(tmp_path_factory.mktemp("gq") / "graph_queue.pt.trace.json", graph_queue_trace())
    return tb_profiler.load(path, cache=False)


def test_a_graph_launch_is_one_entry(trace):
    t, length = queue_series(trace)[(DEV, STREAM)]
    us = dict(zip((t // 1000 - T0).tolist(), length.tolist()))
    assert us[0] == 1 and us[100] == 2  # the backlog's call, then the graph launch: one entry
    # at 1000 us the backlog leaves as the 17th eager call joins: the graph and 17 eager calls
    assert us[1000] == 1 + 17
    # the graph leaves with its last kernel's end (2200 us) as the 41st eager call joins
    assert us[1000 + GRAPH_KERNELS] == 41
    assert int(length.max()) == EAGER and length[-1] == 0
    # counted per kernel the graph alone would have filled CUDA's queue
    assert GRAPH_KERNELS > DEFAULT_FULL_AT


def test_nothing_is_blocked_behind_a_graph(trace):
    out = queue_length(trace)
    row = out["streams"].iloc[0].to_dict()
    # operations still count the device work: the backlog kernel, the graph's kernels, the eager ones
    assert row["operations"] == 1 + GRAPH_KERNELS + EAGER
    assert (row["max_len"], row["time_full_ns"], row["blocked_calls"], row["blocked_ns"]) == (EAGER, 0, 0, 0)


def test_blocked_calls_took_longer_than_usual(trace):
    """With a queue 'full' at 2 entries every eager call starts on a full queue; all took
    their usual 7 us (the cudaLaunchKernel started on a shorter queue) but one of 40 us."""
    row = queue_length(trace, full_at=2)["streams"].iloc[0]
    assert row["time_full_ns"] > 0
    assert (int(row["blocked_calls"]), int(row["blocked_ns"])) == (1, SLOW_US * 1000)


def test_a_call_without_a_usual_time_counts_as_blocked(trace):
    """full_at=1: the graph launch (at 100 us, one entry queued) is the only call of its
    name and started on a full queue: nothing to compare it with, so it counts, and a
    note says so."""
    out = queue_length(trace, full_at=1)
    row = out["streams"].iloc[0]
    assert (int(row["blocked_calls"]), int(row["blocked_ns"])) == (2, (SLOW_US + 40) * 1000)
    assert any(n.startswith("1 launch calls started on a full queue and no call of their name") for n in out["notes"])


def test_a_graph_over_two_streams_is_one_entry_on_each(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "two.pt.trace.json", graph_queue_trace(streams=(7, 8))), cache=False)
    series = queue_series(t)
    t8, n8 = series[(DEV, 8)]
    # stream 8 has the odd kernels, the last [2199, 2200) us
    assert (t8 // 1000 - T0).tolist() == [100, 1000 + GRAPH_KERNELS] and n8.tolist() == [1, 0]
    t7, n7 = series[(DEV, 7)]
    assert int(n7[np.searchsorted(t7, (T0 + 100) * 1000)]) == 2
    assert int(n7.max()) == EAGER
