"""Handmade traces in Kineto's format, one per accelerator backend, with known answers.

Why handmade: the failures these reproduce were seen on real traces the project cannot
ship (an MTIA training job, a CUPTI range-profiler run, ROCm, XPU, PrivateUse1 and HPU
jobs). Each trace here is written the way Kineto writes that backend (its activity
categories from libkineto's ActivityType, device rows with the device id as pid and the
stream as tid, runtime calls joined to device events by ``correlation``, ProfilerStep#N
ranges, deviceProperties), small enough that every figure can be computed by hand:

    per step (1000 us on the host):   +100 aten::mm            300 us
                                       +150  launch call         20 us  -> compute +200..+750
                                       +500 aten::copy_          100 us
                                       +510  copy call           10 us  -> copy    +800..+850

so per step: compute 550 us (55 % of the step), copy 50 us, runtime 20 us (the copy call
hides behind the compute), CPU exec 80 us, other 300 us.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

HOST_PID, HOST_TID = 4242, 4242
DEVICE_PID, STREAM = 0, 7
STEP_US, STEPS, T0_US = 1000, 3, 1_000_000
COMPUTE_US, COPY_US, LAUNCH_US = 550, 50, 20


@dataclass(frozen=True)
class Backend:
    """How one backend writes its events (Kineto categories and API names)."""

    name: str                  # what trace.device_kinds says
    word: str                  # what the UI calls one device
    device_name: str           # deviceProperties name
    runtime_cat: str | None    # category of launch/copy calls (None: no launches recorded)
    launch: str
    copy_call: str
    compute_cat: str           # category of device compute
    kernel: str                # name of the compute event
    copy_cat: str | None = "gpu_memcpy"
    device_arg: bool = True    # device events carry args.device (else only the pid says it)


BACKENDS = {
    "CUDA": Backend("CUDA", "GPU", "NVIDIA H100 80GB HBM3", "cuda_runtime", "cudaLaunchKernel", "cudaMemcpyAsync",
                    "kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"),
    "ROCm": Backend("ROCm", "GPU", "AMD Instinct MI300X", "cuda_runtime", "hipLaunchKernel", "hipMemcpyAsync",
                    "kernel", "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_AMAS3_BL1_GRVW8_K1_WG32_8_1"),
    "MTIA": Backend("MTIA", "MTIA", "ARTEMIS", "mtia_runtime", "mtiaLaunchKernel", "mtiaMemcpyAsync",
                    "mtia_ccp_events", "fused_linear_relu_job", device_arg=False),
    "XPU": Backend("XPU", "XPU", "Intel(R) Data Center GPU Max 1550", "xpu_runtime",
                   "zeCommandListAppendLaunchKernel", "zeCommandListAppendMemoryCopy", "kernel", "gemm_kernel"),
    "PrivateUse1": Backend("PrivateUse1", "NPU", "Ascend910B2", "privateuse1_runtime", "aclrtLaunchKernel",
                           "aclrtMemcpyAsync", "kernel", "MatMulV2"),
    "HPU": Backend("HPU", "HPU", "GAUDI2", "hpu_op", "synLaunch", "synMemCopyAsync", "kernel", "gemm_bf16"),
    # The CUPTI range profiler: kernel ranges on the device's pid, no runtime calls, no copies.
    "CUPTI range": Backend("CUDA", "GPU", "NVIDIA A100-SXM4-40GB", None, "", "", "cuda_profiler_range",
                           "__kernel_range_0 ampere_sgemm_128x64_tn", copy_cat=None, device_arg=False),
}


def _x(cat: str, name: str, pid: int, tid: int, ts_us: float, dur_us: float, **args) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts_us, 3),
          "dur": round(dur_us, 3)}
    if args:
        ev["args"] = args
    return ev


def _device_args(b: Backend, corr: int | None, ext: int) -> dict:
    args = {"External id": ext, "stream": STREAM}
    if corr is not None:
        args["correlation"] = corr
    if b.device_arg:
        args["device"] = DEVICE_PID
    return args


def _step(b: Backend, k: int) -> list[dict]:
    t = T0_US + k * STEP_US
    corr, ext = 100 + 10 * k, 1000 + 10 * k
    out = [_x("user_annotation", f"ProfilerStep#{k}", HOST_PID, HOST_TID, t, STEP_US),
           _x("cpu_op", "aten::mm", HOST_PID, HOST_TID, t + 100, 300, **{"External id": ext}),
           _x("cpu_op", "aten::copy_", HOST_PID, HOST_TID, t + 500, 100, **{"External id": ext + 1})]
    launched = b.runtime_cat is not None
    if launched:
        out += [_x(b.runtime_cat, b.launch, HOST_PID, HOST_TID, t + 150, LAUNCH_US,
                   correlation=corr, **{"External id": ext}),
                _x(b.runtime_cat, b.copy_call, HOST_PID, HOST_TID, t + 510, 10,
                   correlation=corr + 1, **{"External id": ext + 1})]
    kernel_args = _device_args(b, corr if launched else None, ext)
    if b.compute_cat == "kernel":
        kernel_args.update({"grid": [132, 1, 1], "block": [128, 1, 1], "blocks per SM": 1.0,
                            "est. achieved occupancy %": 50, "registers per thread": 168,
                            "shared memory": 65536})
    out.append(_x(b.compute_cat, b.kernel, DEVICE_PID, STREAM, t + 200, COMPUTE_US, **kernel_args))
    if b.copy_cat:
        out.append(_x(b.copy_cat, "Memcpy HtoD (Pinned -> Device)", DEVICE_PID, STREAM, t + 800, COPY_US,
                      bytes=1 << 20, **_device_args(b, corr + 1 if launched else None, ext + 1)))
    return out


def device_trace(backend: str) -> dict:
    """A 3-step training-like trace of ``backend`` (a key of BACKENDS) in Kineto's format."""
    b = BACKENDS[backend]
    events = [{"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "args": {"name": "python3"}},
              {"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": HOST_TID, "args": {"name": "thread 1"}},
              # Kineto names device rows after the device; the range profiler's pid-0 row was
              # seen named after the host program.
              {"ph": "M", "name": "process_name", "pid": DEVICE_PID, "tid": 0,
               "args": {"name": "python3" if backend == "CUPTI range" else f"{b.word} {DEVICE_PID}"}}]
    for k in range(STEPS):
        events += _step(b, k)
    return {"schemaVersion": 1,
            "deviceProperties": [{"id": DEVICE_PID, "name": b.device_name, "totalGlobalMem": 68719476736}],
            "traceEvents": events, "traceName": f"{backend} fixture"}


def write_trace(path: Path, doc: dict) -> Path:
    """Writes ``doc`` as JSON (gzipped when the name ends in .gz); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


# Per-step figures every backend's trace above must show (ns).
EXPECTED_STEP_NS = {"kernel": COMPUTE_US * 1000, "memcpy": COPY_US * 1000, "memset": 0, "communication": 0,
                    "runtime": LAUNCH_US * 1000, "dataloader": 0, "cpu_exec": 80_000, "other": 300_000}
