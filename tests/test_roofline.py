"""Roofline (issue 9, part 6): FLOPs from the trace's flops arg or from input shapes, each
counted once on its chain, bytes, achieved rates against the device's peaks, the bound,
kernels' shares; the peaks table, its lookup by whole words and its overrides. Handmade
Kineto-format traces with exact answers, and the V100 trace."""
from __future__ import annotations

import json

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.peaks import dtype_of, peaks_for
from tb_profiler.analysis.roofline import flops_from_shapes, roofline

T0 = 1_000_000
H100 = "NVIDIA H100 80GB HBM3"


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr):
    return _x("kernel", name, ts, dur, pid=0, tid=7, correlation=corr, device=0, stream=7)


def _doc(events, device=H100):
    props = [{"id": 0, "name": device, "totalGlobalMem": 85e9, "computeMajor": 9, "computeMinor": 0}] if device else []
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}


def roofline_events() -> list[dict]:
    """linear [64, 1024] x [4096, 1024]^T with the addmm inside it (counted once, on addmm:
    two kernels of 30 and 10 us), and a conv2d with the trace's own count (the cudnn op
    inside it not counted again). Shared with test_browser_roofline.py."""
    bf16 = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]
    return [
        _x("cpu_op", "aten::linear", 0, 100, **{"Input Dims": [[64, 1024], [4096, 1024], [4096]], "Input type": bf16}),
        _x("cpu_op", "aten::addmm", 10, 80, **{"Input Dims": [[4096], [64, 1024], [1024, 4096]], "Input type": bf16}),
        _x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=1), _kernel("gemm_a", 30, 30, 1),
        _x("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=2), _kernel("gemm_b", 60, 10, 2),
        _x("cpu_op", "aten::conv2d", 200, 100, flops=5_000_000_000,
           **{"Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3]], "Input type": ["float", "float"]}),
        _x("cpu_op", "aten::cudnn_convolution", 210, 80,
           **{"Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3]], "Input type": ["float", "float"],
              "Concrete Inputs": ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 220, 5, correlation=3), _kernel("conv_k", 230, 50, 3)]


@pytest.fixture
def trace(tmp_path):
    return tb_profiler.load(write_trace(tmp_path / "r.pt.trace.json", _doc(roofline_events())), cache=False)


def test_each_flop_once_with_its_rate_and_roof(trace):
    out = roofline(trace)
    ops = {r["name"]: r for r in out["operators"].to_dict("records")}
    assert set(ops) == {"aten::addmm", "aten::conv2d"}  # not linear, not cudnn_convolution
    mm = ops["aten::addmm"]
    flops = 2 * 64 * 1024 * 4096
    assert (mm["flops"], mm["source"], mm["dtype"], mm["device_ns"]) == (flops, "shapes", "bf16", 40_000)
    assert mm["bytes"] == (4096 + 64 * 1024 + 1024 * 4096 + 64 * 4096) * 2  # inputs + output, 2 bytes each
    assert mm["tflops"] == pytest.approx(flops / 40_000 / 1e3)
    assert mm["peak_tflops"] == 989.4 and mm["peak_tbps"] == 3.35
    assert mm["compute_pct"] == pytest.approx(100 * mm["tflops"] / 989.4)
    assert mm["intensity"] == pytest.approx(flops / mm["bytes"])
    assert mm["bound"] == ("compute" if mm["intensity"] >= 989.4 / 3.35 else "memory")
    conv = ops["aten::conv2d"]
    assert (conv["flops"], conv["source"], conv["dtype"], conv["device_ns"]) == (5_000_000_000, "trace flops", "fp32",
                                                                               50_000)
    assert out["device"]["name"] == H100 and "H100" in out["device"]["peaks_from"]
    # the kernels share their op's FLOPs by time: 30 us and 10 us of the addmm's 40
    k = {r["name"]: r for r in out["kernels"].to_dict("records")}
    assert (k["gemm_a"]["flops"], k["gemm_b"]["flops"]) == (round(flops * 0.75), round(flops * 0.25))
    assert k["conv_k"]["flops"] == 5_000_000_000
    assert sorted(out["points"]["name"]) == ["aten::addmm", "aten::conv2d"]


def test_formulas():
    # conv2d: 8x3x32x32 input, 16 filters 3x3, stride 2, padding 1 -> 16x16 output
    assert flops_from_shapes("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3], [16]],
                             ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]) == (2 * 8 * 16 * 16 * 16 * 3 * 9,
                                                                                  8 * 16 * 16 * 16)
    # no stride recorded: no count (a strided convolution would be counted 4x)
    assert flops_from_shapes("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3]]) == (0, 0)
    # grouped (depthwise) and padding="same"
    assert flops_from_shapes("aten::conv2d", [[1, 8, 10, 10], [8, 1, 3, 3]],
                             ["", "", "", "[1, 1]", "same", "[1, 1]", "8"]) == (2 * 8 * 100 * 1 * 9, 800)
    assert flops_from_shapes("aten::bmm", [[4, 32, 64], [4, 64, 16]]) == (2 * 4 * 32 * 64 * 16, 4 * 32 * 16)
    assert flops_from_shapes("aten::_scaled_dot_product_flash_attention",
                             [[2, 8, 128, 64], [2, 8, 256, 64], [2, 8, 256, 64]]) == (4 * 16 * 128 * 256 * 64,
                                                                                     16 * 128 * 64)
    assert flops_from_shapes("aten::mul", [[10, 10], []]) == (100, 100)
    assert flops_from_shapes("aten::sum", [[10, 10]]) == (0, 0)
    assert flops_from_shapes("aten::mm", [[3]]) == (0, 0)  # bad shapes: no count, no error


def test_no_roof_for_an_unknown_device_and_overrides(tmp_path, monkeypatch):
    ev = [_x("cpu_op", "aten::mm", 0, 50, **{"Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"]}),
          _x("cuda_runtime", "cudaLaunchKernel", 5, 5, correlation=1), _kernel("k", 10, 20, 1)]
    t = tb_profiler.load(write_trace(tmp_path / "u.pt.trace.json", _doc(ev, device="Acme NPU 9000")), cache=False)
    out = roofline(t)
    row = out["operators"].iloc[0]
    assert np.isnan(row["compute_pct"]) and row["bound"] is None and "not in the table" in out["notes"][0]
    got = roofline(t, peaks={"NPU": {"tbps": 1.0, "tflops": {"fp32": 10.0}}})
    assert got["operators"].iloc[0]["peak_tflops"] == 10.0 and "given" in got["device"]["peaks_from"]
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"Acme": {"tbps": 2.0, "tflops": {"fp32": 20.0}}}))
    monkeypatch.setenv("TB_PROFILER_PEAKS", str(path))
    assert roofline(t)["operators"].iloc[0]["peak_tbps"] == 2.0


def test_peaks_table():
    assert peaks_for("NVIDIA L40S")[0] is None and peaks_for("NVIDIA L4")[0]["tbps"] == 0.3  # whole words
    assert peaks_for("NVIDIA A100-SXM4-80GB")[0]["tbps"] == 2.039 and peaks_for("NVIDIA A100-PCIE-40GB")[0]["tbps"] == 1.555
    assert peaks_for("NVIDIA H100 PCIe")[0]["tflops"]["bf16"] == 756.0
    assert peaks_for(None)[0] is None
    assert (dtype_of("c10::BFloat16"), dtype_of("float"), dtype_of("c10::Half"), dtype_of("Scalar")) == \
        ("bf16", "fp32", "fp16", None)


def test_cpu_only_and_v100(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "c.pt.trace.json", _doc([_x("cpu_op", "aten::sum", 0, 5)], None)),
                         cache=False)
    out = roofline(t)
    assert out["operators"].empty and any("no operator with a FLOP count" in n for n in out["notes"])
    v = roofline(tb_profiler.load(V100_TRACE))
    ops = v["operators"]
    assert "aten::mm" in set(ops["name"]) and (ops["compute_pct"].dropna() <= 100).all()
    assert any("convolution calls have no FLOP count" in n for n in v["notes"])


def test_a_zero_dim_tensor_is_one_element_not_a_scalar(tmp_path):
    """torch writes a 0-dim tensor's Input Dims as [] with its dtype as Input type, and a
    scalar argument as [] with "Scalar" (or "Int", "Double"...): as torch 2.13 records
    ``s * s`` (s = torch.tensor(2.)): [[], []] / ["float", "float"]; ``x + s``: [[4, 4], [],
    []] / ["float", "float", "Scalar"] (alpha); ``x * 3.0``: the number as a 0-dim double
    tensor. A 0-dim tensor is one element, in FLOPs and in bytes; a scalar is neither."""
    assert flops_from_shapes("aten::mul", [[], []], types=["float", "float"]) == (1, 1)
    assert flops_from_shapes("aten::mul", [[], []], types=["Scalar", "Double"]) == (0, 0)
    assert flops_from_shapes("aten::mul", [[], []]) == (0, 0)  # no types: [] cannot be told from a scalar
    assert flops_from_shapes("aten::add", [[], [], []], types=["c10::BFloat16", "Tensor(float)", "Scalar"]) == (1, 1)
    assert flops_from_shapes("aten::add", [[4, 4], [], []], types=["float", "float", "Scalar"]) == (16, 16)
    # integer tensors do no floating-point work: BatchNorm's num_batches_tracked += 1, as the
    # V100 trace records it ([[], [], []] / ["long int", "long int", "Int"]), and bool masks
    assert flops_from_shapes("aten::add", [[], [], []], types=["long int", "long int", "Int"]) == (0, 0)
    assert flops_from_shapes("aten::mul", [[4, 4], [4, 4]], types=["bool", "bool"]) == (0, 0)
    assert flops_from_shapes("aten::mul", [[4, 4], []], types=["long int", "float"]) == (16, 16)
    ev = [_x("cpu_op", "aten::mul", 0, 50, **{"Input Dims": [[], []], "Input type": ["float", "float"]}),
          _x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1), _kernel("mul_k", 20, 10, 1),
          _x("cpu_op", "aten::add", 100, 50, **{"Input Dims": [[4, 4], [], []],
                                                 "Input type": ["float", "float", "Scalar"]}),
          _x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=2), _kernel("add_k", 120, 10, 2),
          _x("cpu_op", "aten::mul", 200, 50, **{"Input Dims": [[4, 4], []], "Input type": ["float", "double"]}),
          _x("cuda_runtime", "cudaLaunchKernel", 210, 5, correlation=3), _kernel("mul_k", 220, 10, 3)]
    t = tb_profiler.load(write_trace(tmp_path / "z.pt.trace.json", _doc(ev)), cache=False)
    ops = roofline(t)["operators"]
    got = {(r["name"], r["calls"]): (r["flops"], r["bytes"]) for r in ops.to_dict("records")}
    # s * s: 1 FLOP, 2 inputs + 1 output of 4 bytes; x + s: 16 FLOPs, (16 + 1) in + 16 out;
    # x * 3.0: 16 FLOPs, (16 + 1) in + 16 out, at the float's 4 bytes (the op's first floating type)
    assert got == {("aten::mul", 2): (1 + 16, (2 + 1) * 4 + (17 + 16) * 4), ("aten::add", 1): (16, (17 + 16) * 4)}
