"""Issue 11, "what a newcomer met": the analysis fixes, each pinned by a test that fails
without it.

- the DataLoader advice does not tell a loader that already runs worker processes to add
  them (it says what to try for that case instead);
- the host_sync advice counts aten::item, blocking copies and synchronizing runtime calls
  with their real host-side time, each synchronization once;
- the "average" breakdown row's parts add up exactly to its total.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from datafiles import V100_RUN_W4, V100_TRACE, V100_W4_TRACE, real_traces, rel

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.overview import overview
from tb_profiler.analysis.recommendations import recommendations
from tb_profiler.trace import load

US = 1000  # ns per us


def make(tmp_path, events, name="t.pt.trace.json", **top):
    path = tmp_path / name
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return load(path, cache=False)


def op(name, ts, dur, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def by_id(trace):
    return {r["id"]: r for r in recommendations(trace)}


# -- 3. the average row adds up ------------------------------------------------------------------

@pytest.mark.parametrize("path", real_traces(), ids=rel)
def test_average_row_parts_sum_to_its_total_on_real_traces(path):
    frame = bd.breakdown(load(path, cache=False))
    assert len(frame) > 1
    parts = frame[bd.NS_COLUMNS].to_numpy(np.int64)
    total = frame["total_ns"].to_numpy(np.int64)
    assert (parts.sum(axis=1) == total).all()  # per-step rows and the average row
    steps = frame.iloc[:-1]
    n = len(steps)
    # The total is the mean step rounded; each part its exact mean rounded down or up.
    assert total[-1] == int(np.rint(steps["total_ns"].mean()))
    for c in bd.NS_COLUMNS:
        s = int(steps[c].sum())
        assert s // n <= int(frame[c].iloc[-1]) <= -(-s // n), c


def test_average_row_gives_the_rounding_remainder_to_the_largest_remainders(tmp_path):
    """Three steps of 100 us: kernel 10/10/11 ns-ish parts chosen so every mean has a third:
    rounding each part alone would give a row that misses its total by one ns."""
    ev = []
    # Per step (ns): kernel k, cpu_exec c, other = rest. Means: kernel 10.33, cpu 20.33,
    # other 69.33 -> rounded alone 10 + 20 + 69 = 99 of the total 100.
    for i, (k, c) in enumerate([(10, 20), (10, 21), (11, 20)]):
        t0 = 1000 * i
        ev += [op(f"ProfilerStep#{i}", t0 / 1000, 0.1, cat="user_annotation"),
               {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t0 / 1000, "dur": k / 1000,
                "args": {"device": 0, "stream": 7}},
               op("aten::add", (t0 + 50) / 1000, c / 1000)]
    frame = bd.breakdown(make(tmp_path, ev))
    steps = frame.iloc[:-1]
    assert steps["total_ns"].tolist() == [100, 100, 100]
    avg = frame.iloc[-1]
    assert int(avg["total_ns"]) == 100
    assert sum(int(avg[c]) for c in bd.NS_COLUMNS) == 100
    # Every remainder is 1/3: the one short ns goes to the highest-priority part (kernel).
    assert (int(avg["kernel_ns"]), int(avg["cpu_exec_ns"]), int(avg["other_ns"])) == (11, 20, 69)
    # The overview's headline numbers are that row.
    ov = overview(make(tmp_path, ev, name="u.pt.trace.json"))
    assert sum(ov["summary"]["average_ns"].values()) == ov["summary"]["step_time_avg_ns"] == 100
