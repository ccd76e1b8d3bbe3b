"""Tensor cores: which operators could use them, and which kernels did.

Why by name: traces carry no "this kernel ran on tensor cores" flag, but the libraries
that use them (cuBLAS, cuDNN, CUTLASS, flash attention) spell it in their kernel names
(``volta_h884gemm``, ``ampere_s16816gemm``, ``sm80_xmma_gemm``, ``cutlass_tensorop``,
``sm90_..._wgmma``, ``nvjet``), and the operators that can reach those kernels are the
autocast-to-half ops (convolutions, matmuls, RNN cells, attention). AMD's matrix cores
are the same idea: hipBLASLt/Tensile name the MFMA instruction a GEMM runs on
(``Cijk_..._MI16x16x16x1_...``) and composable_kernel says ``xdl`` (xdlops) or ``mfma``.

The lists start from the old torch-tb-profiler's (itself from NVIDIA PyProf's tc.py and
autocast_mode.cpp) and add what newer GPUs and PyTorch releases write. Matching runs
once per distinct name (``map_string_ids``-style), never per event.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from tb_profiler.trace.strings import safe_ids, used_ids

# Kernel-name fragments of tensor-core kernels (matched lower-cased, as substrings).
# The first block is the old plugin's list (PyProf tc.py); the second adds Ampere/Hopper
# cuBLAS/cuDNN/CUTLASS/flash-attention spellings.
TC_KERNEL_PATTERNS: tuple[str, ...] = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
    "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
    "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm", "xmma_sparse_gemm", "c1688",
    # newer: tf32/bf16/fp8/int8 MMA shapes, Hopper warpgroup MMA, CUTLASS tensor ops,
    # cuDNN v8 xmma convolutions, cuBLASLt nvjet, WMMA, flash attention.
    "16832", "imma", "wmma", "wgmma", "gmma", "tensorop",
    "xmma_fprop", "xmma_dgrad", "xmma_wgrad", "nvjet", "flash_fwd", "flash_bwd",
)
# Fragments that mark a CUDA-core (FFMA/SIMT) variant of an otherwise matching family,
# e.g. ``sm80_xmma_gemm_f32f32_..._ffma_...`` or ``cutlass_80_simt_sgemm``.
NOT_TC_KERNEL_PATTERNS: tuple[str, ...] = ("ffma", "_simt_", "simt_sgemm", "simt_dgemm")
# AMD matrix-core kernels: Tensile's macro-tile + MFMA instruction field (case matters:
# "MI" then the instruction's M x N x K), and composable_kernel's xdlops / mfma kernels.
AMD_MATRIX_RE = re.compile(r"_MI\d+x\d+x\d+|_xdl_|xdlops|mfma")

# Operators eligible for tensor cores: the old plugin's list (autocast fp16 ops and the
# backward ops seen to launch TC kernels) plus PyTorch 2.x names.
TC_ELIGIBLE_OPS: frozenset[str] = frozenset({
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm",
    "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
    # PyTorch 2.x
    "aten::convolution_backward", "aten::cudnn_convolution_relu", "aten::cudnn_convolution_add_relu",
    "aten::_convolution_double_backward", "ConvolutionBackward", "BaddbmmBackward", "LinearBackward",
    "aten::baddbmm_", "aten::addbmm_", "aten::_addmm_activation", "aten::_int_mm", "aten::_scaled_mm",
    "aten::_grouped_mm", "aten::_scaled_grouped_mm",
    "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::_cudnn_rnn",
    "aten::_cudnn_rnn_backward", "CudnnRnnBackward", "aten::scaled_dot_product_attention",
    "aten::_flash_attention_forward", "aten::_flash_attention_backward",
    "aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
    "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd",
})
# Any op whose name starts with one of these (all scaled-dot-product variants, their
# backward ops and autograd nodes).
TC_ELIGIBLE_PREFIXES: tuple[str, ...] = (
    "aten::_scaled_dot_product_", "ScaledDotProduct", "aten::_fused_sdp", "FlashAttention",
    "EfficientAttention",
)
_DIGITS = "0123456789"


_TC_KERNEL_RE = re.compile("|".join(map(re.escape, TC_KERNEL_PATTERNS)))
_NOT_TC_KERNEL_RE = re.compile("|".join(map(re.escape, NOT_TC_KERNEL_PATTERNS)))


def _kernel_uses_tc(name: str) -> bool:
    # one alternation per list (a scan of the name each), not one ``in`` per pattern
    low = name.lower()
    if _NOT_TC_KERNEL_RE.search(low):
        return False
    return _TC_KERNEL_RE.search(low) is not None or AMD_MATRIX_RE.search(name) is not None


def _op_eligible(name: str) -> bool:
    # Autograd nodes carry a version suffix in PyTorch >= 1.10 (MmBackward0).
    return (name in TC_ELIGIBLE_OPS or name.rstrip(_DIGITS) in TC_ELIGIBLE_OPS
            or name.startswith(TC_ELIGIBLE_PREFIXES))


def _by_distinct(names, fn) -> np.ndarray:
    """fn over each distinct name of ``names`` (strings, None allowed), broadcast back.

    Distinct names by hashing (pandas.factorize), never through a fixed-width string
    copy: that is as wide as the longest name for every name (one 50 MB name among twelve
    made 2.3 GiB)."""
    arr = np.asarray(list(names) if not isinstance(names, np.ndarray) else names, dtype=object)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=bool)
    inv, uniq = pd.factorize(arr.reshape(-1), sort=False)  # None / NaN -> -1
    lut = np.zeros(len(uniq) + 1, dtype=bool)  # last slot: the missing ones
    lut[:-1] = np.fromiter((bool(u) and fn(u if isinstance(u, str) else str(u)) for u in uniq.tolist()),
                           dtype=bool, count=len(uniq))
    return lut[inv].reshape(arr.shape)


def uses_tensor_cores(kernel_names: Iterable[str] | np.ndarray) -> np.ndarray:
    """Boolean mask: does each kernel name look like a tensor-core kernel?"""
    return _by_distinct(kernel_names, _kernel_uses_tc)


def tc_eligible(names: Iterable[str] | np.ndarray) -> np.ndarray:
    """Boolean mask: is each operator name one that can run on tensor cores?

    Name only. ``operators()`` also marks an op eligible when a child op is, or when it
    launched a tensor-core kernel itself (the old plugin's rule).  ``_op_eligible`` over
    every name, by ``map`` of str methods and set lookups (no Python frame per name: a
    trace may hold millions of distinct ones).
    """
    arr = np.asarray(list(names) if not isinstance(names, np.ndarray) else names, dtype=object)
    flat = [n if isinstance(n, str) else "" if n is None else str(n) for n in arr.reshape(-1).tolist()]
    ops = TC_ELIGIBLE_OPS.__contains__
    hit = np.fromiter(map(ops, flat), dtype=bool, count=len(flat))
    hit |= np.fromiter(map(ops, map(str.rstrip, flat, itertools.repeat(_DIGITS))), dtype=bool, count=len(flat))
    hit |= np.fromiter(map(str.startswith, flat, itertools.repeat(TC_ELIGIBLE_PREFIXES)), dtype=bool,
                       count=len(flat))
    return hit.reshape(arr.shape)


def string_id_mask(ids: np.ndarray, strings: np.ndarray, predicate) -> np.ndarray:
    """``predicate`` (a name -> mask function above) over a string-id column, evaluated
    once per distinct used id."""
    ids = np.asarray(ids)
    n = len(strings)
    used = used_ids(ids, n)
    lut = np.zeros(n + 1, dtype=bool)
    if len(used):
        lut[used] = predicate(strings[used])
    return lut.take(safe_ids(ids, n))  # take: int32 ids, no slow cast path


__all__ = [
    "TC_ELIGIBLE_OPS",
    "TC_KERNEL_PATTERNS",
    "string_id_mask",
    "tc_eligible",
    "uses_tensor_cores",
]
