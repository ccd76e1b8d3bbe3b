"""Issue 19, "New fields, used where they belong": device counters and profiler overhead.

The fixtures (tests/data/kineto_fields/, built by tests/kineto_fields_fixtures.py; the
README there names the libkineto writer each follows) are small enough that every figure
below is computed by hand in the fixture module's comments.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from bad_fields_corpus import get_settled
from kineto_fields_fixtures import (
    DATA,
    HOSTS,
    ID_A,
    ID_B,
    JOB,
    RANK_CALLS,
    comms_rank,
    counters_trace,
    mtia_counters_trace,
)
from kineto_fixtures import device_trace, write_trace
from werkzeug.test import Client

import tb_profiler
from tb_profiler.analysis.collectives import collectives
from tb_profiler.analysis.distributed import distributed
from tb_profiler.analysis.hw_counters import (
    CounterSeries,
    counter_series,
    interval_means,
    kernel_counters,
)
from tb_profiler.analysis.overhead import overhead_per_step, profiler_overhead
from tb_profiler.analysis.step_outliers import step_outliers
from tb_profiler.plugin import ROUTE_PREFIX
from tb_profiler.plugin.timeline import window

US = 1000


@pytest.fixture(scope="module")
def counters():
    return tb_profiler.load(DATA / "counters.json.gz", cache=False)


@pytest.fixture(scope="module")
def mtia():
    return tb_profiler.load(DATA / "mtia_counters.json.gz", cache=False)


def test_fixtures_are_what_the_builders_write():
    import gzip

    from kineto_fields_fixtures import FIXTURES

    assert counters_trace in FIXTURES.values() and mtia_counters_trace in FIXTURES.values()
    for name, build in FIXTURES.items():
        assert json.loads(gzip.decompress((DATA / name).read_bytes())) == build()


# -- hardware_counters / mtia_counters --------------------------------------------------------
def test_hardware_counter_series(counters):
    series = {s.counter: s for s in counter_series(counters)}
    assert set(series) == {"sm__throughput", "dram__bytes"}
    sm = series["sm__throughput"]
    assert (sm.category, sm.device, sm.track) == ("hardware_counters", 0, "GPU 0 Counters")
    assert sm.values.tolist() == [10.0 * (i + 1) for i in range(10)]
    assert np.diff(sm.ts).tolist() == [200 * US] * 9


def test_kernel_averages_are_time_weighted(counters):
    df = kernel_counters(counters).set_index(["name", "counter"])
    assert df.loc[("gemm", "sm__throughput"), "avg"] == pytest.approx(40.0)  # 15 and 65, 200 us each
    assert df.loc[("relu", "sm__throughput"), "avg"] == pytest.approx(55.0)  # 30 and 80
    assert df.loc[("gemm", "dram__bytes"), "avg"] == pytest.approx(7.0)
    assert df.loc[("relu", "dram__bytes"), "avg"] == pytest.approx(10.0)
    assert df.loc[("gemm", "sm__throughput"), "calls"] == 2
    assert df.loc[("gemm", "sm__throughput"), "covered_ns"] == 400 * US


def test_mtia_counters_one_series_per_member(mtia):
    series = {s.counter: s for s in counter_series(mtia)}
    assert set(series) == {"MTIA Counters: hbm_read", "MTIA Counters: sfu_util"}
    assert series["MTIA Counters: hbm_read"].device == 17
    df = kernel_counters(mtia).set_index("counter")
    assert df.loc["MTIA Counters: hbm_read", "avg"] == pytest.approx(6.0)
    assert df.loc["MTIA Counters: sfu_util", "avg"] == pytest.approx(0.375)


def test_interval_means_edges():
    s = CounterSeries("hardware_counters", 0, "GPU 0 Counters", "c", np.array([100, 200, 300]),
                      np.array([1.0, 3.0, 5.0]))
    mean, covered = interval_means(s, np.array([0, 150, 150, 250, 400, 250]), np.array([50, 250, 150, 350, 500, 250]))
    assert covered.tolist() == [0, 100, 0, 50, 0, 0]
    assert np.isnan(mean[0]) and np.isnan(mean[4])  # before the first / after the last sample: unknown
    assert mean[1] == pytest.approx(2.0)   # 1 for 50 ns, 3 for 50 ns
    assert mean[2] == pytest.approx(1.0)   # zero-length: the value held at its start
    assert mean[3] == pytest.approx(3.0)   # clipped at the last sample
    assert mean[5] == pytest.approx(3.0)


def test_counter_tracks_on_the_timeline(counters):
    w = window(counters, None, None, 20, 1000)
    tracks = {c["name"]: c for c in w["counters"] if c["kind"] == "hardware_counters"}
    sm = tracks["GPU 0 Counters: sm__throughput"]
    # the samples span [0, 1800 us) of the 2000 us trace: 18 bins of 100 us, the value held twice each
    assert (sm["start_ns"], sm["end_ns"], sm["bins"]) == (0, 1800 * US, 18)
    assert sm["values"] == [10.0 * (i // 2 + 1) for i in range(18)]
    assert any(c["kind"] == "utilization" for c in w["counters"])  # the older tracks stay


def test_no_counters_no_rows(tmp_path):
    plain = tb_profiler.load(write_trace(tmp_path / "p.json", device_trace("CUDA")), cache=False)
    assert counter_series(plain) == [] and kernel_counters(plain).empty
    assert overhead_per_step(plain)["profiler_overhead_ns"].tolist() == [0, 0, 0]


def test_kernel_counters_route(tmp_path):
    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    (tmp_path / "run").mkdir()
    shutil.copy(DATA / "counters.json.gz", tmp_path / "run" / "w.pt.trace.json.gz")
    state = ProfilerState(str(tmp_path), reload_s=3600, cache=False, jobs=1)
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        assert state.wait_scanned(60)
        r = get_settled(Client(app), f"{ROUTE_PREFIX}kernel_counters?run=run&worker=w")
        assert r.status_code == 200, r.get_data()[:300]
        body = json.loads(r.get_data())
        rows = {(x["name"], x["counter"]): x for x in body["rows"]}
        assert rows[("relu", "sm__throughput")]["avg"] == pytest.approx(55.0)
        assert {c["counter"] for c in body["counters"]} == {"sm__throughput", "dram__bytes"}
        assert body["notes"] == [] and body["rows_total"] == 4
    finally:
        state.stop()
        app.close()


# -- overhead --------------------------------------------------------------------------------
def test_overhead_per_step(counters):
    df = overhead_per_step(counters)
    assert df["profiler_overhead_ns"].tolist() == [35 * US, 40 * US]  # overlap counted once, split at the edge
    assert df["overhead_events"].tolist() == [4, 1]
    assert df["overhead_pct"].tolist() == pytest.approx([3.5, 4.0])


def test_overhead_totals_and_kinds(counters):
    out = profiler_overhead(counters)
    assert out["total_ns"] == 75 * US
    assert out["share"] == pytest.approx(75 / 2000)
    kinds = out["kinds"].set_index("name")
    assert kinds.loc["Buffer Flush", "events"] == 3 and kinds.loc["Buffer Flush", "total_ns"] == 70 * US
    assert kinds.loc["Instrumentation", "events"] == 2 and kinds.loc["Instrumentation", "total_ns"] == 15 * US
    assert "subtracted nowhere" in out["notes"][0]


def test_step_analysis_shows_overhead_and_keeps_step_time(counters):
    st = step_outliers(counters)["steps"]
    assert st["profiler_overhead_ns"].tolist() == [35 * US, 40 * US]
    assert st["dur_ns"].tolist() == [1000 * US, 1000 * US]  # not subtracted


# -- Comms Id and host_name -------------------------------------------------------------------
@pytest.fixture(scope="module")
def comms_pair():
    return [tb_profiler.load(DATA / f"comms_rank{r}.json.gz", cache=False) for r in (0, 1)]


def test_comms_id_is_read_exactly(comms_pair):
    recs = collectives(comms_pair[0])
    ids = recs["comms_id"].to_numpy(np.int64).view(np.uint64).tolist()
    assert ids == [ID_A, ID_B]  # 2**64 - 59 survives: never read through a float


def test_comms_id_matches_where_order_would_not(comms_pair, tmp_path):
    r = distributed(comms_pair)
    inst = r["instances"].set_index("comms_id")
    assert set(r["instances"]["matched_by"]) == {"comms_id"}
    assert inst.loc[str(ID_B), "ranks"] == 2 and bool(inst.loc[str(ID_B), "complete"])
    assert inst.loc[str(ID_A), "ranks"] == 1 and not bool(inst.loc[str(ID_A), "complete"])
    # ID_B: rank 1 starts at 30, rank 0 at 40: rank 1 waits 10 us, rank 0 none
    assert r["ranks"]["wait_ns"].tolist() == [0, 10 * US]
    assert any("same Comms Id" in n for n in r["notes"])
    # the same traces without Comms Id (and without Seq) match by order: rank 0's first call
    # [10, 20) pairs with rank 1's only call, a different collective
    plain = [tb_profiler.load(write_trace(tmp_path / f"r{k}.json", comms_rank(k, HOSTS[k], RANK_CALLS[k],
                                                                                 comms_id=False)), cache=False)
             for k in (0, 1)]
    p = distributed(plain)
    assert set(p["instances"]["matched_by"]) == {"order"}
    first = p["instances"].sort_values("occurrence").iloc[0]
    assert first["ranks"] == 2 and first["occurrence"] == 0  # the mismatch Comms Id avoids


def test_hosts_split_intra_from_inter_node(comms_pair, tmp_path):
    r = distributed(comms_pair)
    assert r["info"]["hosts"] == {0: "node-a", 1: "node-b"} and r["info"]["host_count"] == 2
    assert r["info"]["job"] == JOB
    assert set(r["collectives"]["scope"]) == {"inter-node"} and set(r["collectives"]["hosts"]) == {2}
    assert set(r["instances"]["scope"]) == {"inter-node"}
    split = r["scopes"].set_index("rank")
    assert split.loc[0, "scope"] == "inter-node" and split.loc[0, "total_ns"] == 30 * US  # [10,20) + [40,60)
    same = [tb_profiler.load(write_trace(tmp_path / f"s{k}.json", comms_rank(k, "node-a", RANK_CALLS[k])),
                             cache=False) for k in (0, 1)]
    s = distributed(same)
    assert set(s["collectives"]["scope"]) == {"intra-node"} and set(s["collectives"]["hosts"]) == {1}
    assert s["scopes"]["total_ns"].tolist() == [30 * US, 30 * US]
    unknown = [tb_profiler.load(write_trace(tmp_path / "u0.json", comms_rank(0, "", RANK_CALLS[0])), cache=False),
               same[1]]
    u = distributed(unknown)
    assert u["collectives"]["scope"].isna().all() and u["info"]["hosts"][0] is None
    assert set(u["scopes"]["scope"]) == {"unknown"}


def test_summary_keeps_host_and_job(comms_pair):
    from tb_profiler.summary import summarize_trace
    from tb_profiler.analysis.trace_summary import SUMMARY_VERSION

    s = summarize_trace(comms_pair[1])
    assert (s.host_name, s.job) == ("node-b", JOB) and SUMMARY_VERSION >= 3


def test_commops_route_data_has_scopes(comms_pair):
    from tb_profiler.plugin.views import dist_commops, run_summaries

    out = json.loads(json.dumps(dist_commops(run_summaries(comms_pair))))
    assert {r["scope"] for r in out["rows"]} == {"inter-node"}
    assert [(s["rank"], s["scope"], s["total_ns"]) for s in out["scopes"]] == [(0, "inter-node", 30 * US),
                                                                             (1, "inter-node", 30 * US)]


# -- kernels' occupancy limits, priority, channel (kernel_fields.json.gz) ---------------------
@pytest.fixture(scope="module")
def kfields():
    return tb_profiler.load(DATA / "kernel_fields.json.gz", cache=False)


def test_kernel_fields_most_common_per_name(kfields):
    from tb_profiler.analysis.kernels import kernels

    df = kernels(kfields).set_index("name")
    # gemm: REGS twice, REGS|SMEM once; blockLimitRegs 2, 2, 1; priority 0, 0, -1; channel 5, 6, 5
    assert df.loc["gemm", "limiting_factors"] == "REGS"
    assert df.loc["gemm", ["block_limit_regs", "block_limit_shared_mem", "block_limit_warps", "block_limit_blocks",
                           "block_limit_barriers", "priority", "channel"]].tolist() == [2, 4, 8, 32, 0, 0, 5]
    # relu: priority -2 and -3 once each, a tie: the earlier call's
    assert (df.loc["relu", "limiting_factors"], df.loc["relu", "priority"], df.loc["relu", "channel"]) == ("none", -2, 3)
    assert df.loc["old_kernel", ["priority", "channel", "block_limit_regs"]].isna().all()
    assert kernels(kfields, "op").set_index("name").loc["gemm", "limiting_factors"] == "REGS"


def test_kernel_fields_route_json(kfields):
    from tb_profiler.plugin.views import kernel_table

    rows = {r["name"]: r for r in json.loads(json.dumps(kernel_table(kfields, "Kernel")["rows"]))}
    assert rows["relu"]["limiting_factors"] == "none" and rows["relu"]["block_limit_regs"] == 16
    assert rows["old_kernel"]["limiting_factors"] is None and rows["old_kernel"]["channel"] is None


def test_kernel_fields_read_a_bounded_sample(kfields, monkeypatch):
    from tb_profiler.analysis import kernel_fields as kf
    from tb_profiler.trace.roles import Role

    monkeypatch.setattr(kf, "SAMPLE", 2)
    rows = np.flatnonzero(kfields.roles == Role.COMPUTE)  # gemm, relu, gemm, gemm, relu, old_kernel
    sample = kf._sample(kfields, rows)
    assert sample.tolist() == rows[[0, 1, 2, 4, 5]].tolist()  # gemm's third call is not read
    # the probe for the keys reads each name's first call only
    read = []
    real_mentioned = kf.keys_mentioned
    monkeypatch.setattr(kf, "keys_mentioned", lambda t, r, keys: read.append(sorted(r.tolist())) or real_mentioned(t, r, keys))
    kf.kernel_fields.__wrapped__(kfields)
    assert read == [rows[[0, 1, 5]].tolist()]


def test_no_kernel_fields_no_columns(counters):
    from datafiles import TINY_H100

    from tb_profiler.analysis.kernels import kernels

    real = tb_profiler.load(TINY_H100 / "after_fix_trace.json.gz", cache=False)
    for trace in (counters, real):
        assert len(kernels(trace)) and "limiting_factors" not in kernels(trace).columns
        assert "priority" not in kernels(trace, "op").columns


# -- XPU: xpu_sync and XCCL collectives (xpu.json.gz) -----------------------------------------
@pytest.fixture(scope="module")
def xpu():
    return tb_profiler.load(DATA / "xpu.json.gz", cache=False)


def _row(trace, name: str) -> int:
    return int(np.flatnonzero(trace.events["name"] == trace.strings.tolist().index(name))[0])


def test_xpu_breakdown_by_hand(xpu):
    from tb_profiler.analysis.breakdown import breakdown

    row = breakdown(xpu).iloc[0]
    got = {c: int(row[c + "_ns"]) // US for c in ("kernel", "communication", "runtime", "cpu_exec", "other")}
    assert got == {"kernel": 200, "communication": 200, "runtime": 110, "cpu_exec": 70, "other": 420}


def test_xpu_sync_is_a_host_sync(xpu):
    from tb_profiler.analysis.recommendations import host_syncs

    assert np.flatnonzero(host_syncs(xpu)["counted"]).tolist() == [_row(xpu, "zeEventHostSynchronize")]


def test_xccl_collective_is_communication(xpu):
    from tb_profiler.analysis.communication import comm_calls, is_comm_name

    assert np.flatnonzero(comm_calls(xpu)).tolist() == [_row(xpu, "xccl::allreduce")]
    assert is_comm_name("xccl::allgather") and not is_comm_name("xccl_helper::x")
    df = collectives(xpu)
    assert df[["name", "family", "time_on"]].values.tolist() == [["xccl::allreduce", "all_reduce", "host"]]
    assert (int(df["end"][0]) - int(df["start"][0])) // US == 200


# -- ROCm: hsa_queue on the stream's track ----------------------------------------------------
def test_rocm_stream_tracks_show_hsa_queue(counters):
    from kineto_fields_fixtures import HSA_QUEUES

    from tb_profiler.plugin.timeline import timeline_index

    rocm = tb_profiler.load(DATA / "rocm_hsa_queue.json.gz", cache=False)
    threads = [t["thread"] for t in timeline_index(rocm).tracks if t["kind"] == "device"]
    assert threads == [f"stream {s} · hsa_queue {hex(q)}" for s, q in sorted(HSA_QUEUES.items())]
    assert threads[0] == "stream 3 · hsa_queue 0x7f3a5c001000"
    cuda = [t["thread"] for t in timeline_index(counters).tracks if t["kind"] == "device"]
    assert cuda and not any("hsa_queue" in t for t in cuda)
