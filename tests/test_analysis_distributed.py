"""Distributed analysis: handmade two-rank traces with every number worked out by hand,
and the real two-process gloo DDP sample."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tb_profiler
from tb_profiler.analysis.distributed import COLLECTIVE_COLUMNS, RANK_COLUMNS, collectives, distributed
from tb_profiler.analysis.intervals import intersect, merge_intervals, per_group_subtract, subtract

US = 1000  # the handmade traces are written in µs; results are ns


def _ev(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launch(ts, corr, kernel, kts, kdur, stream=7, **kargs):
    """A cudaLaunchKernel on the host thread and the kernel it launched."""
    return [_ev("cuda_runtime", "cudaLaunchKernel", ts, 2, correlation=corr),
            _ev("kernel", kernel, kts, kdur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **kargs)]


def _write(tmp_path, name, events, rank=None, world=2, backend="nccl"):
    doc = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": backend, "rank": rank, "world_size": world}
    path = tmp_path / f"{name}.1.pt.trace.json"
    path.write_text(json.dumps(doc))
    return tb_profiler.load(path, cache=False)


def _gpu_rank(tmp_path, rank, gemm_dur, ar_start, bc_start, world=2):
    """One step [0, 100] µs: a gemm kernel from 20 µs, an NCCL all_reduce (record_param_comms,
    1000 floats, process group "0") ending at 80 µs, an old-style nccl:broadcast op (Input
    Dims [[256, 2]] of c10::Half) whose kernel ends at 95 µs."""
    ev = [_ev("user_annotation", "ProfilerStep#1", 0, 100),
          _ev("cpu_op", "aten::mm", 10, 10), *_launch(12, 1, "volta_sgemm_128x64_nn", 20, gemm_dur),
          _ev("cpu_op", "c10d::allreduce_", 30, 10),
          _ev("cpu_op", "record_param_comms", 31, 8, **{
              "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
              "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": [0, 1]}),
          *_launch(33, 2, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", ar_start, 80 - ar_start,
                   stream=13),
          _ev("cpu_op", "nccl:broadcast", 41, 6, **{"Input Dims": [[256, 2]], "Input type": ["c10::Half"]}),
          *_launch(42, 3, "ncclKernel_Broadcast_RING_LL_Sum_half(ncclWorkElem)", bc_start, 95 - bc_start,
                   stream=13)]
    return _write(tmp_path, f"rank{rank}", ev, rank=rank, world=world)


@pytest.fixture
def gpu_pair(tmp_path):
    # rank 0: gemm [20, 60], all_reduce [50, 80], broadcast [85, 95]
    # rank 1: gemm [20, 45], all_reduce [40, 80], broadcast [82, 95]
    return [_gpu_rank(tmp_path, 0, 40, 50, 85), _gpu_rank(tmp_path, 1, 25, 40, 82)]


def test_gpu_two_ranks_by_hand(gpu_pair):
    r = distributed(gpu_pair)
    assert r["notes"] == []
    assert r["info"]["backend"] == "nccl" and r["info"]["world_size"] == 2
    assert r["info"]["measured_on"] == {0: "device", 1: "device"}
    ranks = r["ranks"].set_index("rank")
    assert list(r["ranks"].columns) == RANK_COLUMNS
    # rank 0: computation = gemm [20,60] = 40; communication = [50,80] + [85,95] = 40;
    # overlap = [50,60] = 10; other = 100 - (40 + 40 - 10) = 30.
    # The all_reduce's last arrival is rank 0 (50 > 40) and the broadcast's too (85 > 82):
    # rank 0 waits 0, all 40 is transfer.
    assert ranks.loc[0, ["step_ns", "computation_ns", "communication_ns", "overlap_ns", "other_ns",
                         "wait_ns", "transfer_ns"]].tolist() == [x * US for x in (100, 40, 40, 10, 30, 0, 40)]
    # rank 1: computation = [20,45] = 25; communication = [40,80] + [82,95] = 53;
    # overlap = [40,45] = 5; other = 100 - (25 + 53 - 5) = 27;
    # wait = (50 - 40) + (85 - 82) = 13; transfer = 53 - 13 = 40.
    assert ranks.loc[1, ["step_ns", "computation_ns", "communication_ns", "overlap_ns", "other_ns",
                         "wait_ns", "transfer_ns"]].tolist() == [x * US for x in (100, 25, 53, 5, 27, 13, 40)]
    assert ranks["steps"].tolist() == [1, 1]


def test_gpu_collectives_by_hand(gpu_pair):
    c = distributed(gpu_pair)["collectives"]
    assert list(c.columns) == COLLECTIVE_COLUMNS
    got = {(row.rank, row.name): row for row in c.itertuples()}
    ar0, ar1 = got[(0, "allreduce")], got[(1, "allreduce")]
    # bytes: In msg nelems 1000 × Float (4 bytes) = 4000
    assert (ar0.calls, ar0.bytes, ar0.pg_name) == (1, 4000, "0")
    assert (ar0.total_ns, ar0.wait_ns, ar0.transfer_ns) == (30 * US, 0, 30 * US)
    assert (ar1.total_ns, ar1.wait_ns, ar1.transfer_ns) == (40 * US, 10 * US, 30 * US)
    bc0, bc1 = got[(0, "nccl:broadcast")], got[(1, "nccl:broadcast")]
    # bytes: Input Dims [256, 2] × c10::Half (2 bytes) = 1024; no process group in the trace
    assert (bc0.calls, bc0.bytes, bc0.pg_name) == (1, 1024, "")
    assert (bc1.total_ns, bc1.avg_ns, bc1.wait_ns, bc1.transfer_ns) == (13 * US, 13 * US, 3 * US, 10 * US)


def test_gpu_kernel_args_and_orphan_kernel(tmp_path):
    """Modern Kineto puts the collective's args on the kernel itself: such a kernel is a
    collective even without its launch; a kernel with neither its launch nor args, and
    overlapping no collective, is in no collective (noted) but still communication time."""
    def rank(r, start):
        ev = [_ev("user_annotation", "ProfilerStep#3", 0, 100),
              _ev("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", start, 60 - start,
                  pid=0, tid=13, device=0, stream=13, **{"Collective name": "_allgather_base",
                                                         "In msg nelems": 16, "dtype": "BFloat16",
                                                         "Process Group Name": "3"}),
              _ev("kernel", "ncclKernel_SendRecv(x)", 70, 10, pid=0, tid=13, device=0, stream=13)]
        return _write(tmp_path, f"r{r}", ev, rank=r)

    r = distributed([rank(0, 10), rank(1, 30)])
    c = r["collectives"].set_index(["rank", "name"])
    # allgather: 16 × bfloat16 = 32 bytes; rank 0 starts at 10, rank 1 at 30: rank 0 waits 20
    assert c.loc[(0, "_allgather_base"), ["bytes", "total_ns", "wait_ns"]].tolist() == [32, 50 * US, 20 * US]
    assert c.loc[(1, "_allgather_base"), ["bytes", "total_ns", "wait_ns"]].tolist() == [32, 30 * US, 0]
    assert c.loc[(0, "_allgather_base"), "pg_name"] == "3"
    assert "ncclKernel_SendRecv(x)" not in set(r["collectives"]["name"])
    assert "rank 0 (r0): 1 communication kernel (10.0 us) with no launch in the trace (cut off by the profiling " \
           "window?) and overlapping no collective: counted as communication time, in no collective" in r["notes"]
    ranks = r["ranks"].set_index("rank")
    # no compute kernel: computation 0; communication [10,60] + [70,80] = 60 on rank 0
    assert ranks.loc[0, ["computation_ns", "communication_ns", "other_ns", "wait_ns"]].tolist() == \
        [0, 60 * US, 40 * US, 20 * US]


def _gloo_rank(tmp_path, rank, gloo_start, world=2):
    """Host-only, gloo-like: main thread (tid 1) aten::mm [10,40], c10d::allreduce_ [40,45]
    (the enqueue), aten::add [50,70], aten::outer [76,96] around a record_param_comms
    [80,90] (a blocking call); the gloo worker thread (tid 2) runs gloo:all_reduce
    [gloo_start, 75] on a [10, 10] float tensor."""
    ev = [_ev("user_annotation", "ProfilerStep#1", 0, 100),
          _ev("cpu_op", "aten::mm", 10, 30),
          _ev("cpu_op", "c10d::allreduce_", 40, 5, **{"Input Dims": [[[10, 10]]], "Input type": ["TensorList"]}),
          _ev("cpu_op", "aten::add", 50, 20),
          _ev("cpu_op", "aten::outer", 76, 20),
          _ev("cpu_op", "record_param_comms", 80, 10, **{"Collective name": "barrier"}),
          _ev("user_annotation", "gloo:all_reduce", gloo_start, 75 - gloo_start, tid=2,
              **{"Input Dims": [[10, 10]], "Input type": ["float"]})]
    return _write(tmp_path, f"rank{rank}", ev, rank=rank, world=world, backend="gloo")


def test_host_gloo_by_hand(tmp_path):
    r = distributed([_gloo_rank(tmp_path, 0, 45), _gloo_rank(tmp_path, 1, 55)])
    assert r["info"]["measured_on"] == {0: "host", 1: "host"} and r["info"]["backend"] == "gloo"
    ranks = r["ranks"].set_index("rank")
    # computation (both ranks): mm 30 + add 20 + (outer [76,96] minus the record_param_comms
    # [80,90] inside it on the same thread) 10 = 60; the c10d enqueue is not computation.
    # rank 0: communication = gloo:all_reduce [45,75] = 30; overlap with add [50,70] = 20;
    # other = 100 - (60 + 30 - 20) = 30; wait = 55 - 45 = 10 (rank 1 arrives at 55).
    assert ranks.loc[0, ["computation_ns", "communication_ns", "overlap_ns", "other_ns", "wait_ns",
                         "transfer_ns"]].tolist() == [x * US for x in (60, 30, 20, 30, 10, 20)]
    # rank 1: communication [55,75] = 20; overlap [55,70] = 15; other = 100 - (60 + 20 - 15) = 35
    assert ranks.loc[1, ["computation_ns", "communication_ns", "overlap_ns", "other_ns", "wait_ns",
                         "transfer_ns"]].tolist() == [x * US for x in (60, 20, 15, 35, 0, 20)]
    c = r["collectives"]
    # one collective per rank: the gloo range (the c10d enqueue and the barrier call hold none);
    # bytes = 10 × 10 floats × 4 = 400
    assert c[["rank", "name", "calls", "bytes", "total_ns", "wait_ns"]].values.tolist() == [
        [0, "gloo:all_reduce", 1, 400, 30 * US, 10 * US], [1, "gloo:all_reduce", 1, 400, 20 * US, 0]]


def test_missing_rank_and_single_trace(tmp_path):
    t0 = _gloo_rank(tmp_path, 0, 45, world=4)
    t1 = _gloo_rank(tmp_path, 1, 55, world=4)
    r = distributed([t0, t1])
    assert r["info"]["missing_ranks"] == [2, 3]
    assert any("partial result" in n and "2, 3" in n and "world size 4" in n for n in r["notes"])
    assert r["ranks"]["rank"].tolist() == [0, 1]
    one = distributed([t0])
    assert any("only one rank" in n for n in one["notes"])
    assert one["ranks"]["wait_ns"].tolist() == [0]
    assert one["ranks"]["transfer_ns"].tolist() == one["ranks"]["communication_ns"].tolist()


def test_notes_no_communication_no_steps_duplicates_mismatch(tmp_path):
    quiet = _write(tmp_path, "quiet", [_ev("cpu_op", "aten::mm", 10, 30)], rank=0)
    r = distributed([quiet])
    assert any("no communication events" in n for n in r["notes"])
    assert any("whole trace" in n for n in r["notes"])  # no ProfilerStep: one step
    assert r["ranks"][["computation_ns", "communication_ns", "other_ns"]].values.tolist() == [[30 * US, 0, 0]]
    assert r["collectives"].empty and list(r["collectives"].columns) == COLLECTIVE_COLUMNS

    a = _gloo_rank(tmp_path, 0, 45)
    extra = [_ev("user_annotation", "ProfilerStep#1", 0, 100),
             _ev("user_annotation", "gloo:all_reduce", 50, 10, tid=2),
             _ev("user_annotation", "gloo:all_reduce", 60, 10, tid=2)]
    b = _write(tmp_path, "rank1", extra, rank=1, backend="gloo")
    r = distributed([a, b, a])
    assert any("rank 0 given twice" in n for n in r["notes"])
    assert any("different numbers of calls" in n and "rank 0: 1" in n and "rank 1: 2" in n for n in r["notes"])

    empty = _write(tmp_path, "empty", [], rank=0)
    r = distributed([empty])
    assert r["ranks"][["rank", "steps", "step_ns", "communication_ns"]].values.tolist() == [[0, 0, 0, 0]]
    assert any("no steps" in n for n in r["notes"])

    nothing = distributed([])
    assert nothing["ranks"].empty and nothing["notes"] == ["no traces given"]


def test_clock_skew_is_reported(tmp_path):
    # rank 1's all_reduce starts after rank 0's ended: impossible with agreeing clocks
    a = _write(tmp_path, "rank0", [_ev("user_annotation", "ProfilerStep#1", 0, 100),
                                   _ev("user_annotation", "gloo:all_reduce", 10, 10, tid=2)], rank=0)
    b = _write(tmp_path, "rank1", [_ev("user_annotation", "ProfilerStep#1", 0, 100),
                                   _ev("user_annotation", "gloo:all_reduce", 50, 10, tid=2)], rank=1)
    r = distributed([a, b])
    assert any("clocks disagree" in n for n in r["notes"])
    assert r["ranks"]["wait_ns"].tolist() == [10 * US, 0]  # capped at its duration


def test_interval_helpers():
    a = merge_intervals(np.array([0, 5, 20]), np.array([10, 8, 30]))
    b = merge_intervals(np.array([5, 25]), np.array([22, 40]))
    # a = [0,10) [20,30); b = [5,22) [25,40)
    assert [x.tolist() for x in intersect(a, b)] == [[5, 20, 25], [10, 22, 30]]
    assert [x.tolist() for x in subtract(a, b)] == [[0, 22], [5, 25]]
    # per thread: thread 0 [0,10) minus its own cut [2,4); thread 1 [3,6) is not cut by
    # thread 0's cut; epoch-sized timestamps must not overflow the per-thread shift
    big = 1_700_000_000_000_000_000
    s, e = per_group_subtract(np.array([0, 3]) + big, np.array([10, 6]) + big, np.array([0, 7]),
                               np.array([2]) + big, np.array([4]) + big, np.array([0]))
    # [0,2) [4,10) on thread 0, [3,6) on thread 1: union [0,2) [3,10)
    assert [(s - big).tolist(), (e - big).tolist()] == [[0, 3], [2, 10]]


def test_real_gloo_ddp_sample(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache=False)
    r = distributed(run.traces(span=1))
    assert r["notes"] == []
    assert r["info"]["backend"] == "gloo" and r["info"]["world_size"] == 2
    assert r["ranks"]["rank"].tolist() == [0, 1]
    assert r["ranks"]["worker"].tolist() == ["rank0", "rank1"]
    ranks = r["ranks"]
    assert (ranks["communication_ns"] > 0).all() and (ranks["computation_ns"] > 0).all()
    # the identity every row keeps
    assert ((ranks["computation_ns"] + ranks["communication_ns"] - ranks["overlap_ns"] + ranks["other_ns"])
            == ranks["step_ns"]).all()
    assert (ranks["wait_ns"] + ranks["transfer_ns"] == ranks["communication_ns"]).all()
    c = r["collectives"]
    assert set(c["name"]) == {"gloo:all_reduce"}
    assert (c["bytes"] > 0).all() and (c["calls"] > 0).all()
    # DDP's gradient bucket (64*128 + 128 + 128*10 + 10 = 9610 floats) and the scalar loss, per step
    per_call = collectives(run.trace("rank0", 1))["bytes"].tolist()
    assert set(per_call) == {9610 * 4, 4}
    # one span of one rank: a partial result naming the missing rank
    part = distributed([run.trace("rank0", 1)])
    assert any("rank 1 of world size 2 missing" in n for n in part["notes"])
