"""The Distributed view's first sentence (analysis.stragglers.verdict, issue 21): who arrives
last, who waits most and for whom, and the ranks without a trace said once as ranges; on
built tables, and on the real two-rank gloo sample through the route."""
from __future__ import annotations

import pandas as pd

from tb_profiler.analysis.stragglers import LATE_COLUMNS, late_ranks, rank_ranges, verdict
from tb_profiler.api import load_run


def _late(rows):
    return pd.DataFrame([{**{c: None for c in LATE_COLUMNS}, **r} for r in rows], columns=LATE_COLUMNS)


def test_rank_ranges():
    assert rank_ranges([]) == ""
    assert rank_ranges([7, 0, 1, 2, 5, 8]) == "0-2, 5, 7-8"
    assert rank_ranges(range(1024)) == "0-1023"


def test_the_sentence_names_the_late_rank_and_the_one_that_waits():
    late = _late([{"rank": 1, "instances": 10, "last": 8, "late_ns": 900, "late_per_step_ns": 2_000_000},
                  {"rank": 0, "instances": 10, "last": 2, "late_ns": 100, "late_per_step_ns": 50}])
    colls = pd.DataFrame({"rank": [0, 0, 1], "name": ["c10d::alltoall_base_", "c10d::allreduce_", "c10d::allreduce_"],
                          "wait_ns": [229_200_000, 10_000_000, 1_000]})
    ranks = pd.DataFrame({"rank": [0, 1], "steps": [2, 2]})
    v = verdict(late, colls, ranks, [2, 3, 4, 6])
    assert v["late"] == {"rank": 1, "last": 8, "instances": 10, "late_per_step_ns": 2_000_000}
    assert v["waits"] == {"rank": 0, "name": "c10d::alltoall_base_", "wait_per_step_ns": 114_600_000}
    assert v["sentence"] == ("Rank 1 arrives last in 8 of 10 collectives, 2.0 ms late per step; rank 0 waits most, "
                             "in c10d::alltoall_base_, 114.6 ms per step. Waiting is time spent in a collective until "
                             "the last rank arrives: rank 0 waits for rank 1. Ranks 2-4, 6 have no trace.")
    assert v["missing_ranks"] == "2-4, 6"


def test_nobody_late_says_so():
    v = verdict(_late([]), pd.DataFrame(columns=["rank", "name", "wait_ns"]), pd.DataFrame(columns=["rank", "steps"]),
                [])
    assert v["late"] is None and v["waits"] is None and v["sentence"].startswith("No rank waits")


def test_the_gloo_sample(sample_logdir):
    run = load_run(sample_logdir / "ddp_gloo_2ranks")
    res = run.distributed()
    late = late_ranks(res, run.summaries())
    v = verdict(late["ranks"], res["collectives"], res["ranks"], [])
    top = late["ranks"].iloc[0]
    assert v["late"]["rank"] == int(top["rank"]) and v["late"]["last"] == int(top["last"])
    assert v["sentence"].startswith(f"Rank {int(top['rank'])} arrives last in {int(top['last'])} of "
                                    f"{int(top['instances'])} collectives")
