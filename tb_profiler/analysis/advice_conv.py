"""Advice: convolutions that fall to PyTorch's slow fallback on a device.

Why a rule: a convolution on a GPU normally runs cuDNN (MIOpen on ROCm). When that library
is turned off (``torch.backends.cudnn.enabled = False``) or cannot take the inputs (float64,
some dtypes and layouts), ATen runs its own im2col + GEMM kernels instead:
``aten::_slow_conv2d_forward`` / ``_backward`` (``thnn_conv2d``), ``slow_conv3d``,
``slow_conv_dilated2d/3d``, ``slow_conv_transpose2d/3d``. Nothing fails; the step is just
several times slower, and the trace is the only place that says so. On a CPU-only trace those
operators are ATen's ordinary CPU path and nothing is said.
"""
from __future__ import annotations

import re

import numpy as np

from tb_profiler.analysis.advice_text import fmt_ns, rec
from tb_profiler.analysis.shared import name_map
from tb_profiler.analysis.steps import step_of, steps_frame
from tb_profiler.trace.categories import Kind

SLOW_CONV_RE = re.compile(r"\Aaten::(thnn_conv2d|_slow_conv2d_(forward|backward)|slow_conv3d(_forward|_backward)?|"
                          r"slow_conv_dilated[23]d|slow_conv_transpose[23]d)\Z")

__all__ = ["SLOW_CONV_RE", "slow_conv_rule"]


def _outermost(pid, tid, ts, dur) -> np.ndarray:
    """Indices of the calls no other call of the same thread holds (thnn_conv2d holding
    _slow_conv2d_forward counts once). Vectorized: sorted by thread then start (longest
    first), each thread's times shifted past the previous thread's, a call is nested when
    it starts before the running latest end of the calls before it."""
    order = np.lexsort((-dur, ts, tid, pid))
    t0 = int(ts.min())
    span = int((ts + dur).max()) - t0 + 1
    thread = np.r_[0, np.cumsum((pid[order][1:] != pid[order][:-1]) | (tid[order][1:] != tid[order][:-1]))]
    start = ts[order] - t0 + thread * span
    reach = np.maximum.accumulate(start + dur[order])
    nested = np.r_[False, start[1:] < reach[:-1]]
    return order[~nested]


def slow_conv_rule(trace):
    """Slow-fallback convolutions inside the steps of a trace with device work: how many,
    which, their host time per step (outermost calls only: thnn_conv2d holding
    _slow_conv2d_forward counts once), and the settings to check."""
    if not trace.has_device_work:
        return None
    n_steps = len(steps_frame(trace))
    ev = trace.events
    ops = ev["kind"] == Kind.CPU_OP
    hit = ops & name_map(trace, lambda s: bool(SLOW_CONV_RE.match(s)), among=ops)
    rows = np.flatnonzero(hit)
    if n_steps and len(rows):
        rows = rows[step_of(trace, rows) >= 0]
    if not len(rows):
        return None
    outer = rows[_outermost(ev["pid"][rows], ev["tid"][rows], ev["ts"][rows], np.maximum(ev["dur"][rows], 0))]
    per_step = max(n_steps, 1)
    host = int(np.maximum(ev["dur"][outer], 0).sum())
    names, counts = np.unique(trace.str(ev["name"][rows]).astype(str), return_counts=True)
    listed = ", ".join(f"{n} x{c}" for n, c in sorted(zip(names, counts), key=lambda x: -x[1])[:4])
    lib = "MIOpen" if "ROCm" in trace.device_kinds else "cuDNN"
    word = trace.device_word or "device"
    return rec("slow_conv", "warning", f"Convolutions run PyTorch's slow fallback, not {lib}",
               f"{len(outer)} convolution calls in the steps ({listed}) run ATen's own im2col + GEMM kernels "
               f"instead of {lib}: {fmt_ns(host / per_step)} of host time per step. On a {word} this happens when "
               f"{lib} is turned off (check torch.backends.cudnn.enabled, and torch.backends.cudnn.flags(...) "
               "around the model) or cannot take the inputs (float64 tensors, some dtypes and layouts).",
               {"calls": int(len(outer)), "names": {str(n): int(c) for n, c in zip(names, counts)},
                "host_ns_per_step": host / per_step})
