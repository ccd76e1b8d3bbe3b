"""Across ranks, from summaries: clock alignment (baseTimeNanoseconds, then the collectives),
one row per collective instance, and runs whose ranks do not all belong together
(missing, duplicated, another run's world size or backend, other steps, collectives that
match nobody's, a file that cannot be read): the run still opens, the notes say why, and
the analyses use the ranks that agree.

The traces are handmade, host-only and gloo-like (a ``gloo:all_reduce`` range on a gloo
thread holding a ``record_param_comms`` with the process group and Seq); times in µs."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import tb_profiler
from tb_profiler.analysis.distributed import INSTANCE_COLUMNS, distributed

US = 1000
MS = 1000 * US
BASE = 1_790_000_000_000_000_000  # a baseTimeNanoseconds of 2026


def _ev(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _allreduce(start, end, seq, pg="0"):
    """A gloo all_reduce on the gloo thread, with record_param_comms' process group and Seq."""
    return [_ev("user_annotation", "gloo:all_reduce", start, end - start, tid=2),
            _ev("cpu_op", "record_param_comms", start, end - start, tid=2, **{
                "Collective name": "allreduce", "In msg nelems": 100, "Out msg nelems": 100, "dtype": "Float",
                "Group size": 2, "Process Group Name": pg, "Seq": seq})]


def _rank(folder, rank, calls, *, shift=0, base=None, world=2, backend="gloo", steps=(1,), name=None):
    """One rank: steps of 100 µs from 0, an aten::add [45, 55] µs of each, and the all_reduces
    ``calls`` ((start, end, seq[, pg]) µs); every ts moved by ``shift`` µs."""
    ev = []
    for i, n in enumerate(steps):
        ev += [_ev("user_annotation", f"ProfilerStep#{n}", 100 * i, 100),
               _ev("cpu_op", "aten::add", 100 * i + 45, 10)]
    for call in calls:
        ev += _allreduce(*call)
    for e in ev:
        e["ts"] += shift
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": backend, "rank": rank, "world_size": world},
           "traceEvents": ev}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    path = folder / f"{name or f'rank{rank}'}.1.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


# rank 0 arrives first at Seq 1 and waits for rank 1, which arrives just as rank 0's range
# ends (the tightest constraint: a collective cannot end on one rank before it starts on
# another); rank 1 arrives first at Seq 2 and waits 10 µs for rank 0.
RANK0 = [(10, 40, 1), (60, 70, 2)]
RANK1 = [(40, 45, 1), (50, 70, 2)]


def _load(*paths):
    return [tb_profiler.load(p, cache=False) for p in paths]


@pytest.fixture
def pair(tmp_path):
    return distributed(_load(_rank(tmp_path, 0, RANK0), _rank(tmp_path, 1, RANK1)))


def test_pair_by_hand_and_its_instances(pair):
    ranks = pair["ranks"].set_index("rank")
    assert ranks["wait_ns"].tolist() == [30 * US, 10 * US]
    assert pair["clock"][["rank", "clock_offset_ns", "clock_method"]].values.tolist() == [[0, 0, "none"],
                                                                                          [1, 0, "none"]]
    inst = pair["instances"]
    assert list(inst.columns) == INSTANCE_COLUMNS
    assert inst[["name", "matched_by", "seq", "ranks", "complete", "first_arrival_ns", "last_arrival_ns", "skew_ns",
                 "slowest_rank", "bytes"]].values.tolist() == [
        ["allreduce", "seq", 1, 2, True, 10 * US, 40 * US, 30 * US, 1, 400],
        ["allreduce", "seq", 2, 2, True, 50 * US, 60 * US, 10 * US, 0, 400]]
    # mean duration of Seq 1: (30 + 5) / 2 µs; algbw of rank 1's 400 B in 5 µs is the largest
    assert inst["mean_duration_ns"].tolist() == [17.5 * US, 15 * US]
    assert inst["algbw_min_gbps"][0] == pytest.approx(400 / 30000)
    assert inst["algbw_median_gbps"][0] == pytest.approx((400 / 30000 + 400 / 5000) / 2)


def test_a_rank_whose_clock_is_5ms_ahead_is_aligned_by_its_collectives(tmp_path, pair):
    r = distributed(_load(_rank(tmp_path, 0, RANK0), _rank(tmp_path, 1, RANK1, shift=5 * MS // US)))
    assert r["clock"][["rank", "clock_offset_ns", "clock_method"]].values.tolist() == [
        [0, 0, "none"], [1, -5 * MS, "collectives"]]
    for key in ("ranks", "steps", "collectives", "instances"):  # the unshifted pair's numbers
        pd.testing.assert_frame_equal(r[key], pair[key], obj=key)
    assert any("clocks disagree: rank 1 (rank1) is shifted by -5.0 ms (clock_offset_ns)" in n and
               "2 of its 2 collectives" in n for n in r["notes"])


def test_a_rank_behind_by_a_different_base_is_aligned_by_the_bases(tmp_path, pair):
    """Rank 0's ts count from BASE, rank 1's from BASE + 5 ms: the same instants, other ts."""
    r = distributed(_load(_rank(tmp_path, 0, RANK0, shift=5 * MS // US, base=BASE),
                          _rank(tmp_path, 1, RANK1, base=BASE + 5 * MS)))
    assert r["clock"][["rank", "base_time_ns", "clock_offset_ns", "clock_method"]].values.tolist() == [
        [0, BASE, 0, "baseTimeNanoseconds"], [1, BASE + 5 * MS, 5 * MS, "baseTimeNanoseconds"]]
    pd.testing.assert_frame_equal(r["ranks"], pair["ranks"])
    assert not any("clocks disagree" in n for n in r["notes"])
    # instances are on rank 0's clock: 5 ms later than the pair's
    assert (r["instances"]["first_arrival_ns"] - pair["instances"]["first_arrival_ns"]).tolist() == [5 * MS] * 2


def test_a_base_on_some_ranks_only_is_not_used(tmp_path):
    r = distributed(_load(_rank(tmp_path, 0, RANK0, base=BASE), _rank(tmp_path, 1, RANK1)))
    assert any("rank 1 have no baseTimeNanoseconds while the others do" in n for n in r["notes"])
    assert r["ranks"]["wait_ns"].tolist() == [30 * US, 10 * US]


def _same_ranks(result, pair):
    pd.testing.assert_frame_equal(result["ranks"], pair["ranks"])
    pd.testing.assert_frame_equal(result["instances"], pair["instances"])


def test_a_rank_of_another_world_size_or_backend_is_left_out(tmp_path, pair):
    paths = [_rank(tmp_path, 0, RANK0), _rank(tmp_path, 1, RANK1),
             _rank(tmp_path, 2, RANK1, world=8, name="stray8"), _rank(tmp_path, 3, RANK1, backend="nccl", name="nccl")]
    r = tb_profiler.load_run(tmp_path, cache_dir=tmp_path / "cache").distributed()
    assert r["excluded"].values.tolist() == [[2, "stray8", "its distributedInfo world size is 8, the others' 2"],
                                             [3, "nccl", "its distributedInfo backend is nccl, the others' gloo"]]
    assert any(n.startswith("rank 2 (stray8) left out: its distributedInfo world size is 8") for n in r["notes"])
    _same_ranks(r, pair)
    assert r["info"]["ranks"] == [0, 1] and r["info"]["world_size"] == 2 and r["info"]["backend"] == "gloo"
    assert len(paths) == 4


def test_a_rank_with_other_steps_is_left_out_and_partial_steps_noted(tmp_path):
    r = distributed(_load(_rank(tmp_path, 0, RANK0, world=3), _rank(tmp_path, 1, RANK1, world=3),
                          _rank(tmp_path, 2, RANK1, world=3, steps=(7,))))
    assert r["excluded"].values.tolist() == [[2, "rank2", "its steps (7) are none of the others' (1)"]]
    assert r["ranks"]["rank"].tolist() == [0, 1] and r["info"]["missing_ranks"] == [2]
    assert any("partial result: rank 2 of world size 3 missing" in n for n in r["notes"])
    r = distributed(_load(_rank(tmp_path, 0, RANK0), _rank(tmp_path, 1, RANK1, steps=(1, 2))))
    assert r["excluded"].empty and r["ranks"]["steps"].tolist() == [1, 2]
    assert "rank 1 (rank1) profiled steps 1, 2, the others 1: its totals cover other steps" in r["notes"]


def test_a_rank_whose_collectives_match_nobody_is_left_out(tmp_path, pair):
    stranger = [(c[0], c[1], c[2], "9") for c in RANK1]  # another process group: another job
    r = distributed(_load(_rank(tmp_path, 0, RANK0, world=3), _rank(tmp_path, 1, RANK1, world=3),
                          _rank(tmp_path, 2, stranger, world=3)))
    assert r["excluded"].values.tolist() == [[2, "rank2", "none of its collectives matches another rank's"]]
    assert r["ranks"]["wait_ns"].tolist() == [30 * US, 10 * US]
    pd.testing.assert_frame_equal(r["instances"], pair["instances"])


def test_duplicated_missing_and_unreadable_ranks_still_open(tmp_path, pair):
    _rank(tmp_path, 0, RANK0, world=3)
    _rank(tmp_path, 1, RANK1, world=3)
    _rank(tmp_path, 1, RANK1, world=3, name="rank1_again")
    (tmp_path / "rank9.1.pt.trace.json").write_text('{"traceEvents": [{"ph": ')
    r = tb_profiler.load_run(tmp_path, cache_dir=tmp_path / "cache").distributed()
    assert any(n.startswith("not summarized, left out:") and "rank9.1.pt.trace.json" in n for n in r["notes"])
    assert any("rank 1 given twice (rank1.1.pt.trace.json and rank1_again.1.pt.trace.json)" in n for n in r["notes"])
    assert any("partial result: rank 2 of world size 3 missing" in n for n in r["notes"])
    assert r["ranks"]["wait_ns"].tolist() == [30 * US, 10 * US]
