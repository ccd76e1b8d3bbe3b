"""Stragglers at the collectives (issue 9, part 8): per rank and step how late each rank
arrived at the matched collective instances, who was last, and the operators that ran
long on the latest rank (from its summary, no events). Four handmade gloo ranks in
Kineto's format: rank 2's aten::mm takes 40 us longer in steps 2 and 3."""
from __future__ import annotations

import json
import time

import pytest
from werkzeug.test import Client

import tb_profiler
from tb_profiler.analysis.distributed import distributed_from_summaries
from tb_profiler.analysis.stragglers import late_ranks
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.summary import summarize_trace

N, SLOW, STEPS, PERIOD, T0 = 4, 2, 3, 1000, 5_000_000_000


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _rank(rank: int) -> dict:
    pid = 100 + rank
    ev = []
    for s in range(STEPS):
        at = s * PERIOD
        extra = 40 if rank == SLOW and s >= 1 else 0
        ev += [_x("user_annotation", f"ProfilerStep#{s + 1}", pid, pid, at, 500),
               _x("cpu_op", "aten::mm", pid, pid, at + 10, 100 + extra),
               _x("cpu_op", "aten::relu", pid, pid, at + 120 + extra, 10),
               _x("cpu_op", "c10d::allreduce_", pid, pid, at + 140 + extra, 200 - extra),
               _x("cpu_op", "record_param_comms", pid, pid, at + 140 + extra, 200 - extra,
                  **{"Collective name": "allreduce", "In msg nelems": 256, "Out msg nelems": 256, "dtype": "Float",
                     "Group size": N, "Process Group Name": "0", "Seq": s + 1})]
    info = {"backend": "gloo", "rank": rank, "world_size": N,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": N, "ranks": list(range(N))}]}
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("late") / "log" / "job"
    d.mkdir(parents=True)
    for r in range(N):
        (d / f"rank{r}.{1000 + r}.pt.trace.json").write_text(json.dumps(_rank(r)))
    return d


@pytest.fixture(scope="module")
def summaries(run_dir):
    return [summarize_trace(tb_profiler.load(p, cache=False)) for p in sorted(run_dir.glob("*.json"))]


def test_the_late_rank_and_its_steps(summaries):
    result = distributed_from_summaries(summaries)
    arr = result["arrivals"]
    slow = arr[arr["rank"] == SLOW].set_index("step")
    assert slow.loc[1, "late_ns"] == 0 and slow.loc[2, "late_ns"] == 40_000 and slow.loc[3, "late_ns"] == 40_000
    assert slow["last"].tolist() == [0, 1, 1] and slow["instances"].tolist() == [1, 1, 1]
    assert int(arr[arr["rank"] != SLOW]["late_ns"].sum()) == 0

    late = late_ranks(result, summaries)
    top = late["ranks"].iloc[0]
    assert (top["rank"], top["instances"], top["last"], top["late_ns"], top["late_max_ns"]) == (SLOW, 3, 2, 80_000,
                                                                                                 40_000)
    assert top["last_share"] == pytest.approx(2 / 3) and top["late_per_step_ns"] == 26_667  # rounded to the ns
    assert (top["worst_step"], top["worst_step_late_ns"]) == (2, 40_000)
    assert late["ranks"]["late_ns"].tolist()[1:] == [0, 0, 0]
    # what kept it: aten::mm, 80 us more over 3 steps than the median rank's (per step); not the collective
    (op,) = late["operators"].to_dict("records")
    assert op["rank"] == SLOW and op["name"] == "aten::mm" and op["excess_ns"] == round(80_000 / 3)


def test_no_matched_collective(summaries):
    result = distributed_from_summaries(summaries[:1])
    out = late_ranks(result, summaries[:1])
    assert out["ranks"].empty and "nobody waited" in out["notes"][0]


def test_route(run_dir):
    state = ProfilerState(str(run_dir.parent), cache_dir=str(run_dir.parent.parent / "cache"), jobs=1, reload_s=60)
    state.start()
    try:
        c = Client(ProfilerApp(state, standalone=True))
        end = time.monotonic() + 60
        while (r := c.get("/data/plugin/pytorch_profiler/distributed/stragglers?run=job")).status_code == 202:
            assert time.monotonic() < end
            time.sleep(0.1)
        assert r.status_code == 200
        doc = json.loads(r.get_data())
        assert doc["ranks"][0]["rank"] == SLOW and doc["operators"][0]["name"] == "aten::mm"
        assert doc["arrivals_total"] == N * STEPS and doc["arrivals"][0]["rank"] == SLOW
        assert doc["info"]["world_size"] == N
    finally:
        state.stop()
