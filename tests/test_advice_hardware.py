"""Advice states only hardware facts of the device it names (issue 17).

The V100 trace (compute capability 7.0) was told "Automatic Mixed Precision ... or TF32
would": a V100 has no TF32 (tensor cores run TF32 and bfloat16 from compute capability 8.0,
float8 from 8.9; torch.compile's Triton needs 7.0). Every recommendation's text is checked
against the deviceProperties of the trace it was given, read from the raw JSON: the real
V100 traces, and handmade traces in Kineto's format (the launch-bound and device-idle shapes
of test_analysis_overview.py) with the deviceProperties Kineto writes for a P100, V100,
T4, A100, A10, L4 and H100 (name, computeMajor/computeMinor as cudaGetDeviceProperties
gives them), an MI250X under ROCm, and two different GPUs in one trace.
"""
from __future__ import annotations

import json

import pytest
from datafiles import V100_TRACE, V100X4, read_bytes

import tb_profiler
from tb_profiler.analysis.recommendations import recommendations

CUDA_GPUS = {  # name, (computeMajor, computeMinor)
    "P100": ("Tesla P100-PCIE-16GB", (6, 0)), "V100": ("Tesla V100-SXM2-16GB", (7, 0)),
    "T4": ("Tesla T4", (7, 5)), "A100": ("NVIDIA A100-SXM4-40GB", (8, 0)), "A10": ("NVIDIA A10", (8, 6)),
    "L4": ("NVIDIA L4", (8, 9)), "H100": ("NVIDIA H100 80GB HBM3", (9, 0)),
}


def props(name: str, cc: tuple[int, int], did: int = 0) -> dict:
    return {"id": did, "name": name, "totalGlobalMem": 16 << 30, "computeMajor": cc[0], "computeMinor": cc[1],
            "numSms": 80}


def x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch_bound_events(devices=(0,), launch="cudaLaunchKernel"):
    """Step 0-1000 us under aten::mm (tensor-core eligible): 20 "sgemm_small" kernels of
    2 us (no tensor cores), each launched by a 10 us call, spread over ``devices``."""
    ev = [x("user_annotation", "ProfilerStep#1", 0, 1000), x("cpu_op", "aten::mm", 1, 800)]
    for i in range(20):
        d = devices[i % len(devices)]
        ev += [x("cuda_runtime", launch, 10 + 20 * i, 10, correlation=i + 1),
               x("kernel", "sgemm_small", 15 + 20 * i, 2, pid=d, tid=7, device=d, stream=7, correlation=i + 1)]
    return ev


def idle_events():
    """Step 0-1000: kernels 0-100 and 900-1000 (launched at 0 and 2), the device idle in
    between while aten::cat (150-450) and Python run on the host."""
    return [x("user_annotation", "ProfilerStep#1", 0, 1000),
            x("cuda_runtime", "cudaLaunchKernel", 0, 2, correlation=1),
            x("kernel", "a", 0, 100, pid=0, tid=7, device=0, stream=7, correlation=1),
            x("cuda_runtime", "cudaLaunchKernel", 2, 2, correlation=2),
            x("kernel", "b", 900, 100, pid=0, tid=7, device=0, stream=7, correlation=2),
            x("cpu_op", "aten::cat", 150, 300)]


def load(tmp_path, events, properties, name="t.pt.trace.json"):
    doc = {"schemaVersion": 1, "traceEvents": events}
    if properties is not None:
        doc["deviceProperties"] = properties
    (tmp_path / name).write_text(json.dumps(doc))
    return tb_profiler.load(tmp_path / name, cache=False), doc


def facts(doc: dict) -> tuple[bool, tuple[int, int] | None]:
    """(a CUDA trace?, the lowest compute capability of the devices its kernels ran on),
    from the raw JSON: hip* runtime calls or AMD device names make it ROCm."""
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    cat = [str(e.get("cat", "")).lower() for e in ev]  # PyTorch 1.9 wrote "Kernel", "Runtime", ...
    rocm = any(c in ("cuda_runtime", "runtime") and str(e.get("name", "")).startswith("hip") for c, e in zip(cat, ev))
    props_ = doc.get("deviceProperties") or doc.get("computeProperties") or []
    rocm = rocm or any("AMD" in str(p.get("name", "")) for p in props_)
    used = {e["args"].get("device", e.get("pid")) for c, e in zip(cat, ev)
            if c in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")}
    ccs = [(p.get("computeMajor", p.get("major")), p.get("computeMinor", p.get("minor", 0))) for p in props_
           if p.get("id", 0) in used and p.get("computeMajor", p.get("major")) is not None]  # older traces: major
    return not rocm, min(ccs) if ccs else None


def assert_states_only_facts(recs: list[dict], doc: dict) -> None:
    """Each recommendation claims only what the device has: TF32/bfloat16 from 8.0, float8
    from 8.9, tensor cores from 7.0, torch.compile (Triton) from 7.0, all on CUDA."""
    cuda, cc = facts(doc)
    for r in recs:
        text = r["text"]
        if "TF32" in text or "bfloat16" in text:
            assert cuda and cc is not None and cc >= (8, 0), (cc, text)
        if "float8" in text.lower() or "fp8" in text.lower():
            assert cuda and cc is not None and cc >= (8, 9), (cc, text)
        if r["id"] == "amp":
            assert cuda and cc is not None and cc >= (7, 0), (cc, text)
            assert f"compute capability {cc[0]}.{cc[1]}" in text
        if "torch.compile" in text and cuda and cc is not None:
            assert cc >= (7, 0), (cc, text)


# -- real traces --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [V100_TRACE, V100X4], ids=["resnet50_v100", "v100x4"])
def test_v100_is_told_float16_not_tf32(path):
    doc = json.loads(read_bytes(path))
    recs = {r["id"]: r for r in recommendations(tb_profiler.load(path, cache=False))}
    assert facts(doc) == (True, (7, 0))
    amp = recs["amp"]
    assert "TF32" not in amp["text"] and "bfloat16" not in amp["text"]
    assert "torch.autocast with dtype=torch.float16" in amp["text"]
    name = next(p["name"] for p in doc.get("deviceProperties") or doc["computeProperties"] if p["id"] == 0)
    assert f"The {name} (compute capability 7.0) runs float16 on its tensor cores" in amp["text"]
    assert amp["evidence"]["tensor_core_formats"] == ["float16"] and amp["evidence"]["compute_capability"] == "7.0"
    assert_states_only_facts(list(recs.values()), doc)


# -- each generation -----------------------------------------------------------------------------

@pytest.mark.parametrize("gpu", list(CUDA_GPUS))
def test_tensor_core_and_compile_advice_follow_the_compute_capability(tmp_path, gpu):
    name, cc = CUDA_GPUS[gpu]
    t, doc = load(tmp_path, launch_bound_events(), [props(name, cc)])
    recs = {r["id"]: r for r in recommendations(t)}
    assert_states_only_facts(list(recs.values()), doc)
    lb = recs["launch_bound"]["text"]
    assert "CUDA graphs" in lb
    assert ("torch.compile" in lb) == (cc >= (7, 0))
    if cc < (7, 0):  # no tensor cores: no tensor-core advice
        assert "amp" not in recs
        return
    amp = recs["amp"]
    want = ["float16"] + (["bfloat16", "TF32"] if cc >= (8, 0) else []) + (["float8"] if cc >= (8, 9) else [])
    assert amp["evidence"]["tensor_core_formats"] == want
    assert amp["evidence"]["device_name"] == name and amp["evidence"]["compute_capability"] == f"{cc[0]}.{cc[1]}"
    assert ("TF32" in amp["text"]) == ("bfloat16" in amp["text"]) == (cc >= (8, 0))
    assert ("float8" in amp["text"]) == (cc >= (8, 9))


def test_idle_advice_on_a_gpu_too_old_for_triton(tmp_path):
    t, doc = load(tmp_path, idle_events(), [props(*CUDA_GPUS["P100"])])
    recs = {r["id"]: r for r in recommendations(t)}
    assert "let CUDA graphs cut host overhead" in recs["device_idle"]["text"]
    assert_states_only_facts(list(recs.values()), doc)
    t, doc = load(tmp_path, idle_events(), [props(*CUDA_GPUS["A100"])], name="a100.pt.trace.json")
    recs = {r["id"]: r for r in recommendations(t)}
    assert "let CUDA graphs or torch.compile cut host overhead" in recs["device_idle"]["text"]


def test_two_gpus_are_advised_for_the_less_capable(tmp_path):
    """Kernels on an A100 (device 0) and a V100 (device 1): advice that must hold on both
    names the V100 and float16 only."""
    t, doc = load(tmp_path, launch_bound_events(devices=(0, 1)),
                  [props(*CUDA_GPUS["A100"], did=0), props(*CUDA_GPUS["V100"], did=1)])
    assert facts(doc) == (True, (7, 0))
    amp = {r["id"]: r for r in recommendations(t)}["amp"]
    assert amp["evidence"]["device"] == 1 and amp["evidence"]["tensor_core_formats"] == ["float16"]
    assert_states_only_facts(recommendations(t), doc)


def test_rocm_is_claimed_no_cuda_capability(tmp_path):
    """ROCm writes hipDeviceProp's major/minor (9.0 on an MI250X) in computeMajor/Minor: no
    format is claimed from them (an MI250X has no TF32); torch.compile runs on ROCm."""
    t, doc = load(tmp_path, launch_bound_events(launch="hipLaunchKernel"), [props("AMD Instinct MI250X", (9, 0))])
    assert t.device_kinds[:1] == ("ROCm",) and facts(doc)[0] is False
    recs = {r["id"]: r for r in recommendations(t)}
    assert "amp" not in recs
    assert "HIP graphs or torch.compile" in recs["launch_bound"]["text"]
    assert_states_only_facts(list(recs.values()), doc)


def test_no_compute_capability_no_tensor_core_claim(tmp_path):
    t, doc = load(tmp_path, launch_bound_events(), None)
    recs = {r["id"]: r for r in recommendations(t)}
    assert "amp" not in recs and "launch_bound" in recs
    assert_states_only_facts(list(recs.values()), doc)
