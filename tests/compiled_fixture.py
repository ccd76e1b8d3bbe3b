"""A torch.compile (Inductor, Triton) trace on a GPU in Kineto's format, with known answers.

It follows ``torch/_inductor/runtime/triton_heuristics.py`` of torch 2.13:
``CachingAutotuner._pre_launch`` opens ``torch._C._profiler._RecordFunctionFast(
inductor_meta.get("kernel_name", "triton kernel"), tuple(args), get_profiler_kwargs(...))``
around the launcher, so each launch is a ``cpu_op`` named after the kernel whose args hold
``get_profiler_kwargs``'s keys (kernel_file, kernel_hash, kernel_backend "triton", stream,
num_warps, num_stages, kernel_kwargs, and kernel_name / kernel_flop / kernel_num_gb when
Inductor knew them), the record function's own ("External id", "Record function id",
"Ev Idx", the args' "Input Dims"/"Input type" under record_shapes), as torch 2.13 exports
them (checked with a real _RecordFunctionFast under the CPU profiler).  Inside it the
launcher's driver call (cuLaunchKernel, Triton's launcher) or runtime call, whose
correlation id names the kernel on stream 7, plus Kineto's ac2g flow pair.

The kernels (per call: flop, GB; device us per call):
  triton_poi_fused_add_relu_0   2 calls  no flop, 0.0123 GB           10, 14 us  (cuLaunchKernel)
  triton_tem_fused_mm_1         3 calls  4 194 304 flop, 0.000229376  20, 20, 24 us
  "triton kernel"               1 call   no kernel_name/flop/GB        5 us      (cudaLaunchKernel)
  triton_per_fused_softmax_2    1 call   1000 flop, 0.000004 GB        its kernel cut off: none
inside ``Torch-Compiled Region: 0/0`` > ``CompiledFunction``, one ProfilerStep#1.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

HOST, DEV, STREAM = 100, 0, 7
T0 = 1_000_000.0
KERNEL_FILE = "/tmp/torchinductor_user/ab/cabqz3kzbwqrk5xamgbd4jpfzbzqpx6lrfx5xm3jlkgl4ytocm2t.py"
MM_FILE = "/tmp/torchinductor_user/7q/c7qgd3uv5xqn6nnt4ff6jwe7x2xxmwd4fhsqtvvzpe2jr2uj6iv3.py"
RED_FILE = "/tmp/torchinductor_user/rd/crdw6k2i4rs2wq3t5a5wmcu7ioxrnjdxxmk6gicz6yhcwtwv2q3v.py"
SOFTMAX_FILE = "/tmp/torchinductor_user/sm/csm3tmfz4hd5wvk2hf53l3vhylj7ttxpjxm3bwqgz4ry3t5fuyjx.py"
RAW_STREAM = 94251834553776   # get_raw_stream: the cudaStream_t as an int

KERNELS = {  # name -> (event name, file, hash, warps, stages, kwargs, flop, gb, device us per call, launch call)
    "triton_poi_fused_add_relu_0": ("triton_poi_fused_add_relu_0", KERNEL_FILE, "abqz3kzbwqrk", 4, 1,
                                    "XBLOCK=1024", None, 0.0123, [10, 14], "cuLaunchKernel"),
    "triton_tem_fused_mm_1": ("triton_tem_fused_mm_1", MM_FILE, "7qgd3uv5xqn6", 8, 3,
                              "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8", 4_194_304, 0.000229376,
                              [20, 20, 24], "cuLaunchKernel"),
    "triton_red_fused_sum_3": ("triton kernel", RED_FILE, "rdw6k2i4rs2w", 2, 1, "XBLOCK=1,R0_BLOCK=2048",
                               None, None, [5], "cudaLaunchKernel"),
    "triton_per_fused_softmax_2": ("triton_per_fused_softmax_2", SOFTMAX_FILE, "sm3tmfz4hd5w", 4, 1,
                                   "XBLOCK=1", 1000, 0.000004, [None], "cuLaunchKernel"),
}
ORDER = ["triton_poi_fused_add_relu_0", "triton_tem_fused_mm_1", "triton_poi_fused_add_relu_0",
         "triton_tem_fused_mm_1", "triton_red_fused_sum_3", "triton_tem_fused_mm_1", "triton_per_fused_softmax_2"]


def _x(cat: str, name: str, pid, tid, ts: float, dur: float, args: dict | None = None) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3)}
    if args:
        ev["args"] = args
    return ev


def _profiler_kwargs(key: str) -> dict:
    """get_profiler_kwargs(stream, launcher) of one kernel."""
    _, file, khash, warps, stages, kwargs, flop, gb, _, _ = KERNELS[key]
    out = {"kernel_file": file, "kernel_hash": khash, "kernel_backend": "triton", "stream": RAW_STREAM,
           "num_warps": warps, "num_stages": stages, "kernel_kwargs": kwargs}
    if KERNELS[key][0] != "triton kernel":
        out["kernel_name"] = key
    if flop is not None:
        out["kernel_flop"] = flop
    if gb is not None:
        out["kernel_num_gb"] = gb
    return out


def _launch(key: str, call: int, t: float, corr: int, ext: int) -> list[dict]:
    """One launch: the record function's range, the launch call inside it, its kernel."""
    name, *_, device_us, call_name = KERNELS[key]
    args = {"External id": ext, "Record function id": 0, "Ev Idx": ext - 1,
            "Input Dims": [[64, 128], [128, 256], [64, 256], []],
            "Input type": ["float", "float", "float", "Scalar"], "Concrete Inputs": ["", "", "", "16384"],
            **_profiler_kwargs(key)}
    cat = "cuda_driver" if call_name.startswith("cu") and not call_name.startswith("cuda") else "cuda_runtime"
    out = [_x("cpu_op", name, HOST, HOST, t, 30, args),
           _x(cat, call_name, HOST, HOST, t + 5, 15, {"External id": ext, "cbid": 307, "correlation": corr})]
    dur = device_us[call]
    if dur is not None:
        kt = t + 40
        out += [_x("kernel", key, DEV, STREAM, kt, dur,
                   {"External id": ext, "queued": 0, "device": DEV, "context": 1, "stream": STREAM,
                    "correlation": corr, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5,
                    "warps per SM": 2.0, "grid": [64, 1, 1], "block": [128, 1, 1],
                    "est. achieved occupancy %": 3}),
                {"ph": "s", "id": corr, "pid": HOST, "tid": HOST, "ts": round(t + 5, 3), "cat": "ac2g",
                 "name": "ac2g"},
                {"ph": "f", "id": corr, "pid": DEV, "tid": STREAM, "ts": round(kt, 3), "cat": "ac2g",
                 "name": "ac2g", "bp": "e"}]
    return out


def compiled_trace() -> dict:
    """The whole trace document (see the module docstring)."""
    ev = [{"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python3"}},
          {"ph": "M", "name": "thread_name", "pid": HOST, "tid": HOST, "args": {"name": "thread 100 (python3)"}},
          {"ph": "M", "name": "process_name", "pid": DEV, "tid": 0, "args": {"name": "GPU 0"}},
          {"ph": "M", "name": "thread_name", "pid": DEV, "tid": STREAM, "args": {"name": "stream 7"}},
          _x("user_annotation", "ProfilerStep#1", HOST, HOST, T0, 1000, {"External id": 1}),
          _x("cpu_op", "Torch-Compiled Region: 0/0", HOST, HOST, T0 + 10, 900, {"External id": 2}),
          _x("cpu_op", "CompiledFunction", HOST, HOST, T0 + 20, 850, {"External id": 3}),
          _x("user_annotation", "## Call CompiledFxGraph fbx2fsgzpyc5m7ts6cnv4jvxvy4k6afp5twtjtj5okdq3z7zmsfz ##",
             HOST, HOST, T0 + 25, 840, {"External id": 4})]
    calls: dict[str, int] = {}
    for i, key in enumerate(ORDER):
        call = calls.get(key, 0)
        calls[key] = call + 1
        ev += _launch(key, call, T0 + 40 + 100 * i, corr=500 + i, ext=10 + i)
    return {"schemaVersion": 1, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9,
         "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
         "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132}],
        "traceEvents": ev, "traceName": "compiled fixture", "displayTimeUnit": "ms"}


def write(path: Path) -> Path:
    """The trace, gzipped, at ``path`` (tests/data/compiled/ holds the committed copy)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(compiled_trace(), indent=0).encode(), mtime=0))
    return path
