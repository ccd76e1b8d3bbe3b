"""Collectives: bytes, group size, bandwidth, orphan kernels and one-timeline overlap.

The NCCL traces here are handmade, written by the tests in Kineto's format as torch 2.x
writes them on a 2-rank NCCL job (cpu_op ``c10d::allreduce_`` with TensorList Input Dims
around a ``record_param_comms`` cpu_op with the collective's args, around the
``nccl:all_reduce`` user_annotation around the ``cudaLaunchKernel`` cuda_runtime call of an
``ncclDevKernel_*`` kernel linked by its correlation id), gzipped into tmp_path.  Every
expected number is worked out by hand in the comments.  The gloo sample is a real torch run
(samples/ddp.py, the ``sample_logdir`` fixture).
"""
from __future__ import annotations

import gzip
import json
import math

import pytest

import tb_profiler
from tb_profiler.analysis.collectives import bus_factor, collective_family, collectives
from tb_profiler.analysis.distributed import distributed
from tb_profiler.plugin.views import dist_commops, dist_overlap, run_summaries

US = 1000  # the traces are written in µs; results are ns
HOST, DEV = 100, 0  # pid of the host process, and of GPU 0's rows (Kineto writes the device id)
MAIN, COMPUTE, NCCL, NCCL2 = 100, 7, 13, 14  # host thread; CUDA streams
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
ALLREDUCE_K = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER_K = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _ev(cat, name, ts, dur, pid=HOST, tid=MAIN, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, stream, **args):
    return _ev("kernel", name, ts, dur, pid=DEV, tid=stream, **{
        "queued": 0, "device": 0, "context": 1, "stream": stream, "correlation": corr, "registers per thread": 96,
        "shared memory": 0, "blocks per SM": 0.25, "grid": [2, 1, 1], "block": [640, 1, 1],
        "est. achieved occupancy %": 0, **args})


def _launch(ts, corr, ext):
    return _ev("cuda_runtime", "cudaLaunchKernel", ts, 2, **{"External id": ext, "cbid": 211, "correlation": corr})


def _param_comms(ts, dur, ext, rank, name, n_in, n_out, seq):
    """torch >= 2.1's record_param_comms cpu_op (Process Group Ranks written as a string)."""
    return _ev("cpu_op", "record_param_comms", ts, dur, **{
        "External id": ext, "Collective name": name, "dtype": "Float", "In msg nelems": n_in, "Out msg nelems": n_out,
        "In split size": "[]", "Out split size": "[]", "Global rank start": 0, "Global rank stride": 1,
        "Group size": 2, "Process Group Name": "0", "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1]", "Rank": rank, "Seq": seq})


def _write(tmp_path, name, events, rank, backend="nccl", info=True):
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85,
                                                    "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "distributedInfo": {"backend": backend, "rank": rank, "world_size": 2, "pg_count": 1,
                               "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                              "pg_size": 2, "ranks": [0, 1]}]},
           "traceEvents": events}
    if not info:
        del doc["distributedInfo"]
    path = tmp_path / f"{name}.1700000000000000000.pt.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return tb_profiler.load(path, cache=False)


def _nccl_rank(tmp_path, rank, gemm_end, ar_start, ag_start, param_comms=True):
    """One step [0, 200] µs on one rank:

    - a gemm kernel [20, gemm_end] and an elementwise kernel [100, 115] (stream 7);
    - c10d::allreduce_ [30, 45] (Input Dims: a TensorList) > record_param_comms (1000
      floats, group of 2, process group "0", Seq 1) > nccl:all_reduce > cudaLaunchKernel
      of an NCCL all_reduce kernel [ar_start, 80] (stream 13);
    - c10d::_allgather_base_ [88, 100] (Input Dims: [[512], [256]], the output buffer then
      the input) > record_param_comms (256 in, 512 out, Seq 2) > nccl:_all_gather_base
      (Input Dims [[256]]) > cudaLaunchKernel of an all_gather kernel [ag_start, 130];
    - an all_gather kernel [125, 135] on stream 14 whose launch is not in the trace: it
      overlaps the all_gather's kernel, so it joins that collective;
    - an NCCL kernel [150, 154] whose launch is not in the trace either (a lost record): it
      overlaps no collective.

    Without ``param_comms``, the trace is torch < 2.1's: no record_param_comms."""
    def wrap(ts, dur, ext, name, n_in, n_out, seq):
        return [_param_comms(ts, dur, ext, rank, name, n_in, n_out, seq)] if param_comms else []

    ev = [_ev("user_annotation", "ProfilerStep#1", 0, 200),
          _ev("cpu_op", "aten::mm", 10, 4, **{"External id": 1}), _launch(11, 1, 1),
          _kernel(GEMM, 20, gemm_end - 20, 1, COMPUTE),
          _ev("cpu_op", "c10d::allreduce_", 30, 15, **{
              "External id": 2, "Input Dims": [[[1000]], [], [], [], []],
              "Input type": ["TensorList", "", "", "", "Scalar"], "Concrete Inputs": ["", "", "", "", "True"]}),
          *wrap(31, 13, 3, "allreduce", 1000, 1000, 1),
          _ev("user_annotation", "nccl:all_reduce", 32, 11, **{"External id": 4, "Input Dims": [[1000]],
                                                               "Input type": ["float"]}),
          _launch(33, 2, 4),
          _kernel(ALLREDUCE_K, ar_start, 80 - ar_start, 2, NCCL),
          _ev("cpu_op", "aten::add", 84, 4, **{"External id": 5}), _launch(85, 4, 5),
          _kernel("void at::native::vectorized_elementwise_kernel<4>", 100, 15, 4, COMPUTE),
          _ev("cpu_op", "c10d::_allgather_base_", 88, 12, **{
              "External id": 6, "Input Dims": [[512], [256], [], []], "Input type": ["float", "float", "", ""]}),
          *wrap(89, 10, 7, "_allgather_base", 256, 512, 2),
          _ev("user_annotation", "nccl:_all_gather_base", 90, 8, **{"External id": 8, "Input Dims": [[256]],
                                                                     "Input type": ["float"]}),
          _launch(91, 3, 8),
          _kernel(ALLGATHER_K, ag_start, 130 - ag_start, 3, NCCL),
          _kernel(ALLGATHER_K, 125, 10, 901, NCCL2),
          _kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 150, 4, 900, NCCL)]
    return _write(tmp_path, f"rank{rank}", ev, rank)


@pytest.fixture
def nccl_pair(tmp_path):
    # rank 0: gemm [20, 60], all_reduce kernel [50, 80], all_gather kernel [110, 130]
    # rank 1: gemm [20, 45], all_reduce kernel [40, 80], all_gather kernel [105, 130]
    return [_nccl_rank(tmp_path, 0, 60, 50, 110), _nccl_rank(tmp_path, 1, 45, 40, 105)]


def test_bytes_group_and_bandwidth_per_call(nccl_pair):
    c = collectives(nccl_pair[0])
    assert c["name"].tolist() == ["allreduce", "_allgather_base"]
    assert c["family"].tolist() == ["all_reduce", "all_gather"]
    # this rank's input message: 1000 floats = 4000 B (not the TensorList's 0), 256 floats =
    # 1024 B (not the [[512], [256]] output + input = 3072 B); output: 4000 B and 512 floats
    assert c["bytes"].tolist() == [4000, 1024]
    assert c["out_bytes"].tolist() == [4000, 2048]
    assert c["group_size"].tolist() == [2, 2] and c["pg_name"].tolist() == ["0", "0"]
    assert c["seq"].tolist() == [1, 2] and set(c["time_on"]) == {"device"}
    # all_reduce: S = 4000 B over its kernel [50, 80] = 30 µs -> 4000 / 30000 B/ns;
    # busbw x 2(n-1)/n = 1 for n = 2.  all_gather: S = n x input = 2048 B over [110, 135]
    # (its kernel and the orphan kernel that joined it) = 25 µs; busbw x (n-1)/n = 1/2.
    assert c["size_bytes"].tolist() == [4000, 2048]
    assert c[["start", "end"]].values.tolist() == [[50 * US, 80 * US], [110 * US, 135 * US]]
    assert c["algbw_gbps"].tolist() == pytest.approx([4000 / 30000, 2048 / 25000], rel=1e-12)
    assert c["busbw_gbps"].tolist() == pytest.approx([4000 / 30000 * 1.0, 2048 / 25000 * 0.5], rel=1e-12)


def test_old_torch_bytes_come_from_the_backend_range(tmp_path):
    """Without record_param_comms (torch < 2.1) the size is the nccl:* range's Input Dims,
    never the c10d:: op's (0 B from a TensorList, output + input for _allgather_base_); n
    is distributedInfo's world size (no process group named)."""
    c = collectives(_nccl_rank(tmp_path, 0, 60, 50, 110, param_comms=False))
    assert c["name"].tolist() == ["c10d::allreduce_", "c10d::_allgather_base_"]
    assert c["family"].tolist() == ["all_reduce", "all_gather"]
    assert c["bytes"].tolist() == [4000, 1024]
    assert c["out_bytes"].isna().all() and c["seq"].isna().all()
    assert c["group_size"].tolist() == [2, 2] and c["pg_name"].tolist() == ["", ""]
    assert c["size_bytes"].tolist() == [4000, 2048]


def test_collectives_table_and_overlap_by_hand(nccl_pair):
    r = distributed(nccl_pair)
    # the kernel [150, 154] overlaps no collective: noted on both ranks, counted as communication
    loose = ("communication kernel (4.0 us) with no launch in the trace (cut off by the profiling window?) and "
             "overlapping no collective: counted as communication time, in no collective")
    assert [n for n in r["notes"] if "communication kernel" in n] == [f"rank 0 (rank0): 1 {loose}",
                                                                        f"rank 1 (rank1): 1 {loose}"]
    ranks = r["ranks"].set_index("rank")
    cols = ["computation_ns", "communication_ns", "overlap_ns", "other_ns", "wait_ns", "transfer_ns"]
    # rank 0: computation = [20,60] + [100,115] = 55; communication = [50,80] + [110,135] +
    # [150,154] = 59; overlap = [50,60] + [110,115] = 15; other = 200 - (55 + 59 - 15) = 101;
    # rank 0 arrives last at both collectives (50 > 40, 110 > 105): wait 0.
    assert ranks.loc[0, cols].tolist() == [x * US for x in (55, 59, 15, 101, 0, 59)]
    # rank 1: computation = [20,45] + [100,115] = 40; communication = [40,80] + [105,135] +
    # [150,154] = 74; overlap = [40,45] + [105,115] = 15; other = 200 - (40 + 74 - 15) = 101;
    # wait = (50 - 40) + (110 - 105) = 15
    assert ranks.loc[1, cols].tolist() == [x * US for x in (40, 74, 15, 101, 15, 59)]
    c = r["collectives"].set_index(["rank", "name"])
    assert c.loc[(0, "allreduce"), ["family", "pg_name", "group_size", "calls", "bytes", "out_bytes", "total_ns",
                                    "time_on"]].tolist() == ["all_reduce", "0", 2, 1, 4000, 4000, 30 * US, "device"]
    assert c.loc[(1, "_allgather_base"), ["bytes", "out_bytes", "total_ns", "wait_ns"]].tolist() == \
        [1024, 2048, 30 * US, 5 * US]
    # rank 1's all_gather: S = 2048 B over [105, 135] = 30 µs; busbw = algbw / 2
    assert c.loc[(1, "_allgather_base"), "algbw_gbps"] == pytest.approx(2048 / 30000, rel=1e-12)
    assert c.loc[(1, "_allgather_base"), "busbw_gbps"] == pytest.approx(2048 / 30000 / 2, rel=1e-12)
    assert c.loc[(1, "allreduce"), ["algbw_gbps", "busbw_gbps"]].tolist() == pytest.approx([0.1, 0.1], rel=1e-12)
    assert ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)" not in
            set(r["collectives"]["name"]))  # the orphan joined its collective


def test_communication_line_uses_the_overview_figure(nccl_pair):
    r = distributed(nccl_pair)
    row = r["ranks"].set_index("rank").loc[0]
    # The Overview's Communication (step breakdown, rank 0's one step): communication
    # kernels and host communication calls, [30,45] [50,80] [88,100] [110,135] [150,154],
    # less the kernels [20,60] [100,115] that come first: 0 + 20 + 12 + 20 + 4 = 56 µs.  Here:
    # the communication kernels' union, 59 µs.
    assert row["overview_communication_ns"] == 56 * US
    assert nccl_pair[0].overview()["summary"]["average_ns"]["communication"] == 56 * US
    assert row["communication_note"] == (
        "Communication: 59.0 us per step here (59.0 us total over 1 step: all the time communication kernels run); "
        "the Overview counts 56.0 us per step: the part not hidden behind kernels, memcpy or memset, host "
        "communication calls included")
    assert dist_overlap(run_summaries(nccl_pair))["ranks"][0]["communication_note"] == row["communication_note"]


def test_seq_matches_the_same_collective_when_a_rank_lost_one(tmp_path):
    """Rank 1's trace starts after the first all_reduce (Seq 1): matching by order would
    pair rank 0's Seq 1 with rank 1's Seq 2; by (process group, Seq) Seq 2 pairs with Seq 2."""
    def rank(r, calls):
        ev = [_ev("user_annotation", "ProfilerStep#4", 0, 100)]
        for seq, start, end in calls:
            ev.append(_kernel(ALLREDUCE_K, start, end - start, 100 + seq, NCCL, **{
                "Collective name": "allreduce", "In msg nelems": 256, "Out msg nelems": 256, "dtype": "Float",
                "Group size": 2, "Process Group Name": "0", "Process Group Ranks": [0, 1], "Rank": r, "Seq": seq}))
        return _write(tmp_path, f"rank{r}", ev, r)

    r = distributed([rank(0, [(1, 10, 20), (2, 40, 60)]), rank(1, [(2, 30, 60)])])
    # Seq 2: rank 1 starts at 30, rank 0 at 40: rank 1 waits 10, rank 0 nothing; Seq 1 has no
    # partner: no wait (by order, rank 0's Seq 1 [10, 20] would have waited for rank 1's 30)
    assert r["ranks"]["wait_ns"].tolist() == [0, 10 * US]
    assert any("1 collective calls have no call with the same process group and Seq" in n for n in r["notes"])
    assert not any("different numbers of calls" in n for n in r["notes"])


def test_unknown_group_size_leaves_busbw_empty_with_a_note(tmp_path):
    """No "Group size", no "Process Group Ranks", no distributedInfo: n is unknown, so an
    all_reduce has no busbw (its factor needs n) while a broadcast's factor is 1."""
    ev = [_ev("user_annotation", "ProfilerStep#1", 0, 100)]
    for i, (name, start) in enumerate((("allreduce", 10), ("broadcast", 50))):
        ev.append(_kernel(ALLREDUCE_K if i == 0 else "ncclDevKernel_Broadcast_RING_LL", start, 20, 200 + i, NCCL, **{
            "Collective name": name, "In msg nelems": 500, "dtype": "Float", "Process Group Name": "5"}))
    trace = _write(tmp_path, "rank0", ev, 0, info=False)
    c = collectives(trace)
    assert c["group_size"].isna().all() and c["bytes"].tolist() == [2000, 2000]
    assert c["algbw_gbps"].tolist() == pytest.approx([2000 / 20000] * 2, rel=1e-12)
    assert math.isnan(c["busbw_gbps"][0]) and c["busbw_gbps"][1] == pytest.approx(2000 / 20000, rel=1e-12)
    r = distributed([trace])
    assert "rank 0 (rank0): group size unknown for 1 collective calls (allreduce): no 'Group size' or 'Process " \
           "Group Ranks' in the trace and no distributedInfo for their process group, so their bus bandwidth is " \
           "left empty" in r["notes"]
    assert dist_commops(run_summaries([trace]))["rows"][0]["busbw_gbps"] is None


def _gloo_cuda_rank(tmp_path, rank, gloo_start):
    """gloo with CUDA tensors: a compute kernel [20, 60] on the GPU, and the all_reduce only
    on the host (gloo:all_reduce [gloo_start, 75] on a gloo thread), no NCCL kernel."""
    ev = [_ev("user_annotation", "ProfilerStep#1", 0, 100),
          _ev("cpu_op", "aten::mm", 10, 4, **{"External id": 1}), _launch(11, 1, 1),
          _kernel(GEMM, 20, 40, 1, COMPUTE),
          _ev("cpu_op", "c10d::allreduce_", 62, 3, **{"Input Dims": [[[64]]], "Input type": ["TensorList"]}),
          _ev("user_annotation", "gloo:all_reduce", gloo_start, 75 - gloo_start, tid=MAIN + 1,
              **{"Input Dims": [[64]], "Input type": ["float"]})]
    return _write(tmp_path, f"rank{rank}", ev, rank, backend="gloo")


def test_gloo_with_cuda_tensors_has_no_overlap(tmp_path):
    traces = [_gloo_cuda_rank(tmp_path, 0, 45), _gloo_cuda_rank(tmp_path, 1, 50)]
    r = distributed(traces)
    assert r["info"]["measured_on"] == {0: "mixed", 1: "mixed"}
    assert any("rank 0 (rank0): computation is measured on the GPU (kernels) but the collectives only on the host"
               in n and "overlap and other are unknown" in n for n in r["notes"])
    ranks = r["ranks"].set_index("rank")
    # computation: the kernel [20, 60] = 40; communication: gloo:all_reduce [45, 75] = 30;
    # they would "overlap" [45, 60] if host and device clocks were one timeline: unknown
    assert ranks.loc[0, ["computation_ns", "communication_ns"]].tolist() == [40 * US, 30 * US]
    assert ranks["overlap_ns"].isna().all() and ranks["other_ns"].isna().all()
    assert r["steps"]["overlap_ns"].isna().all()
    doc = dist_overlap(run_summaries(traces))
    assert [row["overlap_ns"] for row in doc["ranks"]] == [None, None]
    assert [row["other_ns"] for row in doc["steps"]] == [None, None]
    rows = dist_commops(run_summaries(traces))["rows"]
    # 64 floats on the host, over [45, 75] = 30 µs on rank 0
    assert [(x["name"], x["bytes"], x["time_on"], x["group_size"]) for x in rows] == \
        [("gloo:all_reduce", 256, "host", 2)] * 2
    assert rows[0]["algbw_gbps"] == pytest.approx(256 / 30000, rel=1e-12)


@pytest.mark.parametrize("name, family", [
    ("allreduce", "all_reduce"), ("c10d::allreduce_", "all_reduce"), ("nccl:all_reduce", "all_reduce"),
    ("_c10d_functional::all_reduce", "all_reduce"), ("allreduce_coalesced", "all_reduce"),
    (ALLREDUCE_K, "all_reduce"), ("_allgather_base", "all_gather"), ("all_gather_into_tensor", "all_gather"),
    ("all_gather_into_tensor_coalesced", "all_gather"), ("nccl:_all_gather_base", "all_gather"),
    ("reduce_scatter_tensor", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reduce_scatter"), ("alltoall_base", "all_to_all"),
    ("all_to_all_single", "all_to_all"), ("c10d::alltoall_base_", "all_to_all"), ("broadcast", "broadcast"),
    ("gloo:broadcast", "broadcast"), ("send", "send"), ("recv", "recv"), ("recv_anysource", "recv"),
    ("ncclDevKernel_SendRecv", "send_recv"), ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"),
    ("barrier", "barrier"), ("nccl:barrier", "barrier"), ("coalesced", ""), ("aten::mm", ""), (None, "")])
def test_family_of_every_spelling(name, family):
    assert collective_family(name) == family


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == bus_factor("all_to_all", 8) == 7 / 8
    assert bus_factor("broadcast", float("nan")) == bus_factor("reduce", 4) == bus_factor("send", 2) == 1
    assert math.isnan(bus_factor("all_reduce", float("nan"))) and math.isnan(bus_factor("barrier", 4))
    assert math.isnan(bus_factor("", 4))


def test_real_gloo_sample_bytes_are_the_gradient_bucket(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache=False)
    traces = run.traces(span=1)
    per_rank = [collectives(t) for t in traces]
    for c in per_rank:
        # DDP's gradient bucket: Linear(64, 128) + Linear(128, 10) = 64*128 + 128 + 128*10 + 10
        # = 9610 floats; and the logged loss, one float.  Every all_reduce has its size.
        assert set(c["family"]) == {"all_reduce"} and (c["bytes"] > 0).all()
        assert sorted(set(c["bytes"])) == [4, 9610 * 4]
        assert (c["group_size"] == 2).all() and set(c["time_on"]) == {"host"}
        assert (c["algbw_gbps"] > 0).all() and (c["busbw_gbps"] == c["algbw_gbps"]).all()  # n = 2: factor 1
    assert per_rank[0]["bytes"].tolist() == per_rank[1]["bytes"].tolist()
    table = distributed(traces)["collectives"]
    assert (table["bytes"] == 2 * (9610 * 4 + 4)).all()  # two steps per span
    assert (table["algbw_gbps"] > 0).all()


def test_cli_summary_prints_collectives_and_the_communication_line(nccl_pair, tmp_path, monkeypatch, capsys):
    from tb_profiler.cli import main

    monkeypatch.setenv("TB_PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    dist = out[out.index("\ndistributed\n"):]
    assert "  rank 0       Communication: 59.0 us per step here (59.0 us total over 1 step" in dist
    rows = [line.split() for line in dist.splitlines() if line.startswith("    allreduce ")]
    # name, rank, process group, group size, calls, bytes, out bytes (4000 B, in the UI's KiB), total,
    # algbw, busbw, on, wait
    assert rows == [["allreduce", "0", "0", "2", "1", "3.9", "KiB", "3.9", "KiB", "30.000", "µs", "0.1333", "0.1333", "device",
                     "0", "ns"],
                    ["allreduce", "1", "0", "2", "1", "3.9", "KiB", "3.9", "KiB", "40.000", "µs", "0.1", "0.1", "device",
                     "10.000", "µs"]]
