"""What a device has, from the facts its trace gives: the one place advice asks.

Why: advice that suggests a number format or a compiler the device does not have is
wrong advice (telling a V100 to try TF32, which it cannot run). Every recommendation that
names a hardware feature asks here, for the device it names.

On NVIDIA GPUs, by compute capability (deviceProperties' computeMajor/computeMinor):
tensor cores run float16 from 7.0 (Volta), bfloat16 and TF32 from 8.0 (Ampere; torch's
``torch.cuda.is_bf16_supported`` asks major >= 8), float8 from 8.9 (Ada, Hopper);
torch.compile's GPU backend, Triton, needs 7.0 (torch._inductor's GPUTooOldForTriton:
"Triton only supports devices of CUDA Capability >= 7.0"). ROCm writes hipDeviceProp's
major/minor in the same fields, but they are no such levels (an MI250 is 9.0 and has no
TF32), so no format is claimed from them; torch counts every ROCm device Triton-capable.
"""
from __future__ import annotations

# NVIDIA compute capability from which a device has each feature.
TENSOR_CORE_CC = (7, 0)
BF16_TF32_CC = (8, 0)
FP8_CC = (8, 9)
TRITON_CC = (7, 0)


def capability(trace):
    """The least capable CUDA device that ran device work, by compute capability (advice
    must hold on every device of the trace), as a ``trace.devices`` Device; None on other
    backends or where the trace's deviceProperties give no compute capability."""
    if trace.device_kinds[:1] != ("CUDA",):
        return None
    dev = [d for d in trace.devices if d.seen_in_events and d.compute_major is not None]
    return min(dev, key=lambda d: (d.compute_major, d.compute_minor or 0, d.id)) if dev else None


def tensor_core_formats(major: int, minor: int = 0) -> list[str]:
    """The formats an NVIDIA GPU of compute capability major.minor runs on tensor cores
    (none below 7.0)."""
    cc = (major, minor)
    return ((["float16"] if cc >= TENSOR_CORE_CC else []) + (["bfloat16", "TF32"] if cc >= BF16_TF32_CC else [])
            + (["float8"] if cc >= FP8_CC else []))


def compiles(trace) -> bool:
    """Whether torch.compile's GPU backend (Triton) runs on the trace's devices: not on a
    CUDA device below compute capability 7.0; where the trace does not say, not ruled out."""
    d = capability(trace)
    return d is None or (d.compute_major, d.compute_minor or 0) >= TRITON_CC


__all__ = ["BF16_TF32_CC", "FP8_CC", "TENSOR_CORE_CC", "TRITON_CC", "capability", "compiles", "tensor_core_formats"]
