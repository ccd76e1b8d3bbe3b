"""Traces in Kineto's format holding the fields Kineto added in 2025-2026 (issue 19,
"New fields, used where they belong"), small enough to check every figure by hand.

Each builder follows one libkineto writer (pytorch/kineto, ``libkineto/src/output_json.cpp``
unless said otherwise; ``tests/data/kineto_fields/README.md`` names them per file):

- hardware counters (``ChromeTraceLogger::handleCounterEvent``, ActivityType
  HARDWARE_COUNTERS): one ``ph: "C"`` event per counter and sample, ``cat:
  "hardware_counters"``, ``pid: "GPU <device> Counters"`` (a string), ``tid`` the resource
  id, ``name`` the counter and ``args: {"": value}``; MTIA counters (MTIA_COUNTERS): one
  event per sample, ``pid`` the device id, ``name`` the activity, every counter in args.
- the ``overhead`` activity (``CuptiActivityProfiler::handleOverheadActivity``,
  ``OverheadActivity``: pid -1, name from ``overheadKindString``: "Buffer Flush",
  "Instrumentation", ...), a ``ph: "X"`` event.
- ``host_name`` (``EnvMetadata.h`` ``getEnvMetadata``, written among the top-level
  metadata by ``handleTraceStart``) and ``Comms Id`` in a collective's args
  (``appendCollectiveArgs``).
- kernels' ``occupancy`` args (``CuptiActivity.h``: ``limitingFactors`` from
  ``limitingFactorsToString``, ``blockLimit*``), ``priority``, ``channel``.
- XPU (``src/plugin/xpupti/XpuptiActivityHandlers.cpp``): ``xpu_sync`` events from
  ``handleSynchronizationActivity`` (device -1, so pid -1, tid the host thread) and XCCL
  collectives from ``handleCommunicationActivity`` (``collective_comm``, name
  ``xccl::<op>``, pid the process, ``Communicator_id`` in args).
- ROCm (``src/RocprofActivity_inl.h`` ``GpuActivity::visitTypedMetadata``): device work
  with ``hsa_queue`` (uint64) beside ``stream``.

``python tests/kineto_fields_fixtures.py`` rewrites the gzipped files in
tests/data/kineto_fields/ from these builders.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "kineto_fields"
HOST_PID, HOST_TID, DEV, STREAM = 3000, 3001, 0, 7
T0 = 5_000_000  # us
STEP = 1000     # us


def _x(cat: str, name: str, pid, tid, ts: float, dur: float, **args) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def _meta(pid, tid, what: str, name: str) -> dict:
    return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": {"name": name}}


def _kernel(name: str, ts: float, dur: float, corr: int, **extra) -> dict:
    return _x("kernel", name, DEV, STREAM, ts, dur, **{"External id": corr, "device": DEV, "stream": STREAM,
                                                        "correlation": corr, "grid": [132, 1, 1],
                                                        "block": [128, 1, 1], **extra})


# -- hardware counters + overhead (counters.json.gz) ------------------------------------------
# Per step k (1000 us): kernel "gemm" [+100, +300), kernel "relu" [+500, +600).
# Counters on "GPU 0 Counters", sampled every 200 us from 0 (sample i at 200*i us, held until
# the next): "sm__throughput" 10*(i+1), "dram__bytes" 2*i+1.  Over gemm [+100, +300) of step 0:
# sm (10*100 + 20*100)/200 = 15, of step 1 [1100, 1300): (60+70)/2 = 65 -> gemm 40; relu
# [+500, +600): 30 and 80 -> 55.  dram: gemm 2 and 12 -> 7, relu 5 and 15 -> 10.
def SM_VALUE(i: int) -> float:
    return 10.0 * (i + 1)


def DRAM_VALUE(i: int) -> float:
    return 2.0 * i + 1
# CUPTI overhead events (step, at us, dur us, name).  Step 0 [0, 1000): 250-270 with 255-265 inside
# it, 700-705, and 990-1010 crossing into step 1 -> 20 + 5 + 10 = 35 us, 4 starting in it;
# step 1: 1000-1010 and 1400-1430 -> 40 us, 1 starting in it.  Whole trace: 75 us covered;
# "Buffer Flush" 3 events 70 us, "Instrumentation" 2 events 15 us.
OVERHEAD = [(0, 250, 20, "Buffer Flush"), (0, 255, 10, "Instrumentation"), (0, 700, 5, "Instrumentation"),
            (0, 990, 20, "Buffer Flush"), (1, 400, 30, "Buffer Flush")]


def counters_trace(steps: int = 2) -> dict:
    """Two steps of two kernels, hardware counters sampled every 200 us, MTIA-style counters
    and CUPTI overhead events."""
    ev = [_meta(HOST_PID, 0, "process_name", "python3"), _meta(DEV, 0, "process_name", "GPU 0"),
          _meta(DEV, STREAM, "thread_name", "stream 7")]
    for k in range(steps):
        t = k * STEP
        c = 100 + 10 * k
        ev += [_x("user_annotation", f"ProfilerStep#{k}", HOST_PID, HOST_TID, t, STEP),
               _x("cpu_op", "aten::mm", HOST_PID, HOST_TID, t + 10, 80, **{"External id": c}),
               _x("cuda_runtime", "cudaLaunchKernel", HOST_PID, HOST_TID, t + 20, 10, correlation=c,
                  **{"External id": c}),
               _kernel("gemm", t + 100, 200, c),
               _x("cpu_op", "aten::relu", HOST_PID, HOST_TID, t + 400, 50, **{"External id": c + 1}),
               _x("cuda_runtime", "cudaLaunchKernel", HOST_PID, HOST_TID, t + 410, 10, correlation=c + 1,
                  **{"External id": c + 1}),
               _kernel("relu", t + 500, 100, c + 1)]
    # counter samples every 200 us over the whole span (10 samples for 2 steps)
    for i in range(5 * steps):
        ts = T0 + 200 * i
        ev.append({"ph": "C", "cat": "hardware_counters", "name": "sm__throughput", "pid": "GPU 0 Counters",
                   "tid": 0, "ts": ts, "args": {"": SM_VALUE(i)}})
        ev.append({"ph": "C", "cat": "hardware_counters", "name": "dram__bytes", "pid": "GPU 0 Counters",
                   "tid": 0, "ts": ts, "args": {"": DRAM_VALUE(i)}})
    for k, at, dur, name in OVERHEAD:
        ev.append(_x("overhead", name, -1, 0, k * STEP + at, dur))
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev, "traceName": "counters fixture"}


# MTIA counters: pid is the device id; one event per sample with every counter in args.
MTIA_DEV = 17


def mtia_counters_trace() -> dict:
    """A kernel [+100, +300) on MTIA 17 and mtia_counters samples at +0, +200 (hbm_read 4 then 8,
    sfu_util 0.5 then 0.25): over the kernel hbm_read averages 6, sfu_util 0.375."""
    ev = [_meta(MTIA_DEV, 0, "process_name", f"MTIA {MTIA_DEV}"),
          _x("user_annotation", "ProfilerStep#0", HOST_PID, HOST_TID, 0, STEP),
          _x("mtia_ccp_events", "fc_job", MTIA_DEV, 101, 100, 200, stream=101)]
    for i, (hbm, sfu) in enumerate([(4.0, 0.5), (8.0, 0.25), (2.0, 1.0)]):
        ev.append({"ph": "C", "cat": "mtia_counters", "name": "MTIA Counters", "pid": MTIA_DEV, "tid": 5,
                   "ts": T0 + 200 * i, "args": {"hbm_read": hbm, "sfu_util": sfu}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": MTIA_DEV, "name": "ARTEMIS"}], "traceEvents": ev}


# -- Comms Id and host_name (comms_rank0/1.json.gz) ------------------------------------------
ALLREDUCE_K = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ID_A, ID_B = 12345, 18446744073709551557  # ID_B > 2**63: a uint64 that no float or int64 holds as is
JOB = {"PT_PROFILER_JOB_NAME": "llm_pretrain", "PT_PROFILER_JOB_VERSION": "2", "PT_PROFILER_JOB_ATTEMPT_INDEX": "0"}


def comms_rank(rank: int, host: str, calls: list[tuple[int, float, float]], comms_id: bool = True) -> dict:
    """One step [0, 100) us of NCCL all_reduce kernels carrying the collective's args, as
    modern Kineto copies them onto the kernel (appendCollectiveArgs), with "Comms Id" and no
    "Seq"; calls: (comms id, start us, end us).  Top level: host_name and the job's
    PT_PROFILER_JOB_* values (getEnvMetadata)."""
    ev = [_x("user_annotation", "ProfilerStep#4", HOST_PID, HOST_TID, 0, 100)]
    for i, (cid, start, end) in enumerate(calls):
        args = {"device": DEV, "stream": 13, "correlation": 500 + i, "Collective name": "allreduce",
                "In msg nelems": 256, "Out msg nelems": 256, "dtype": "Float", "Group size": 2,
                "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": rank}
        if comms_id:
            args["Comms Id"] = cid
        ev.append(_x("kernel", ALLREDUCE_K, DEV, 13, start, end - start, **args))
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "NVIDIA H100 80GB HBM3"}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "host_name": host, **JOB, "traceEvents": ev}


# rank 1's trace lost the first all_reduce (ID_A): by order rank 0's first call [10, 20) would
# pair with rank 1's only one; by Comms Id, ID_B [40, 60) on rank 0 pairs with [30, 60) on rank 1.
RANK_CALLS = {0: [(ID_A, 10, 20), (ID_B, 40, 60)], 1: [(ID_B, 30, 60)]}
HOSTS = {0: "node-a", 1: "node-b"}


# -- kernels' occupancy limits, priority, channel (kernel_fields.json.gz) --------------------
# CuptiActivity.h visitTypedMetadata: "occupancy" is a nested object ({"activeBlocksPerMultiprocessor",
# "limitingFactors", "blockLimitRegs", "blockLimitSharedMem", "blockLimitWarps", "blockLimitBlocks",
# "blockLimitBarriers", "allocatedRegistersPerBlock", "allocatedSharedMemPerBlock"}), then
# "priority" (CUDA >= 13.1), "channel" and "channel_type" (CUDA >= 12).
# (name, limitingFactors, (regs, smem, warps, blocks, barriers), priority, channel) per call:
# gemm: "REGS" twice, "REGS|SMEM" once -> REGS; blockLimitRegs 2, 2, 1 -> 2; priority 0, 0, -1 -> 0;
# channel 5, 6, 5 -> 5.  relu: one call each of priority -2 and -3 (a tie: the earlier call's, -2).
# "old_kernel": none of the fields (an older CUDA), so its columns are null.
KERNEL_CALLS = [("gemm", "REGS", (2, 4, 8, 32, 0), 0, 5), ("relu", "none", (16, 16, 8, 32, 0), -2, 3),
                ("gemm", "REGS", (2, 4, 8, 32, 0), 0, 6), ("gemm", "REGS|SMEM", (1, 1, 8, 32, 0), -1, 5),
                ("relu", "none", (16, 16, 8, 32, 0), -3, 3), ("old_kernel", None, None, None, None)]


def _occupancy(factors: str, limits: tuple[int, ...]) -> dict:
    regs, smem, warps, blocks, barriers = limits
    return {"activeBlocksPerMultiprocessor": min(limits[:4]), "limitingFactors": factors, "blockLimitRegs": regs,
            "blockLimitSharedMem": smem, "blockLimitWarps": warps, "blockLimitBlocks": blocks,
            "blockLimitBarriers": barriers, "allocatedRegistersPerBlock": 8192, "allocatedSharedMemPerBlock": 0}


def kernel_fields_trace() -> dict:
    """One step of the KERNEL_CALLS, each 10 us apart, with the args a CUDA 13.1 CUPTI kernel
    record carries (the last kernel without them)."""
    ev = [_meta(HOST_PID, 0, "process_name", "python3"), _meta(DEV, STREAM, "thread_name", "stream 7"),
          _x("user_annotation", "ProfilerStep#0", HOST_PID, HOST_TID, 0, STEP)]
    for i, (name, factors, limits, prio, channel) in enumerate(KERNEL_CALLS):
        extra = {} if factors is None else {"est. achieved occupancy %": 25, "occupancy": _occupancy(factors, limits),
                                             "priority": prio, "channel": channel, "channel_type": 1}
        ev.append(_kernel(name, 100 + 10 * i, 5, 900 + i, **extra))
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev}


# -- XPU: xpu_sync and XCCL collectives (xpu.json.gz) ----------------------------------------
# Step 0 [0, 1000): aten::mm [10, 90) holding zeCommandListAppendLaunchKernel [20, 30) that
# launches "gemm_xpu" [100, 300) on XPU 0; zeEventHostSynchronize (xpu_sync, pid -1) [300, 400);
# xccl::allreduce (collective_comm, Communicator_id 7) [500, 700).  Breakdown by hand:
# kernel 200, communication 200, runtime 10 + 100 = 110, cpu_exec 80 - 10 = 70, other 420.
XPU_COMMUNICATOR = 7


def xpu_trace() -> dict:
    ev = [_meta(HOST_PID, 0, "process_name", "python3"),
          _x("user_annotation", "ProfilerStep#0", HOST_PID, HOST_TID, 0, STEP),
          _x("cpu_op", "aten::mm", HOST_PID, HOST_TID, 10, 80, **{"External id": 1}),
          _x("xpu_runtime", "zeCommandListAppendLaunchKernel", HOST_PID, HOST_TID, 20, 10, correlation=1,
             **{"External id": 1}),
          _x("kernel", "gemm_xpu", DEV, 2, 100, 200, correlation=1, device=DEV, **{"External id": 1}),
          _x("xpu_sync", "zeEventHostSynchronize", -1, HOST_TID, 300, 100, correlation=2, Type="HOST_EVENT",
             Context_handle="0x5581c0", Queue_handle="0x5581d0", Event_handle="0x5581e0",
             Number_wait_events=0, Return_code=0),
          _x("collective_comm", "xccl::allreduce", HOST_PID, HOST_TID, 500, 200,
             Communicator_id=XPU_COMMUNICATOR)]
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "Intel(R) Data Center GPU Max 1550"}],
            "traceEvents": ev}


# -- ROCm: hsa_queue beside the stream (rocm_hsa_queue.json.gz) ------------------------------
# Kernels on streams 3 and 4 of GPU 0 (pid the device, tid the stream), each stream on its
# own HSA queue; a memcpy on stream 3.
HSA_QUEUES = {3: 0x7F3A5C001000, 4: 0x7F3A5C002000}


def rocm_trace() -> dict:
    ev = [_meta(HOST_PID, 0, "process_name", "python3"),
          _x("user_annotation", "ProfilerStep#0", HOST_PID, HOST_TID, 0, STEP)]
    for i, (stream, name, cat) in enumerate([(3, "Cijk_Ailk_Bljk_gemm", "kernel"), (4, "elementwise_kernel", "kernel"),
                                             (3, "Memcpy DtoH (Device -> Host)", "gpu_memcpy")]):
        corr = 40 + i
        ev.append(_x("cuda_runtime", "hipLaunchKernel" if cat == "kernel" else "hipMemcpyAsync", HOST_PID, HOST_TID,
                     10 + 20 * i, 5, correlation=corr, **{"External id": corr}))
        args = {"device": DEV, "stream": stream, "hsa_queue": HSA_QUEUES[stream], "correlation": corr,
                "kind": "Dispatch Kernel" if cat == "kernel" else "DtoH"}
        if cat == "kernel":
            args.update(grid=[256, 1, 1], block=[256, 1, 1])
        else:
            args["bytes"] = 4096
        ev.append(_x(cat, name, DEV, stream, 100 + 100 * i, 50, **args))
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "AMD Instinct MI300X"}], "traceEvents": ev}


FIXTURES = {"counters.json.gz": counters_trace, "mtia_counters.json.gz": mtia_counters_trace,
            **{f"comms_rank{r}.json.gz": (lambda r=r: comms_rank(r, HOSTS[r], RANK_CALLS[r])) for r in (0, 1)},
            "kernel_fields.json.gz": kernel_fields_trace, "xpu.json.gz": xpu_trace,
            "rocm_hsa_queue.json.gz": rocm_trace}


def write_all(folder: Path = DATA) -> None:
    """Writes every fixture gzipped (mtime 0, so the bytes depend on the JSON only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, build in FIXTURES.items():
        data = json.dumps(build(), indent=0).encode()
        (folder / name).write_bytes(gzip.compress(data, 9, mtime=0))


if __name__ == "__main__":
    write_all()
