"""Trace with its analyses: what ``tb_profiler.load(path)`` gives.

Why a subclass here: a ``trace.model.Trace`` is data (tables, metadata, derived columns)
and every analysis reads it, so the trace layer never imports an analysis; the methods a
notebook and the CLI call (``trace.kernels()``, ``trace.idle()``, ...) live one layer up,
each one call into tb_profiler.analysis, imported on use so that loading a trace never
pays for the analyses.  ``trace.load.load(..., cls=Trace)`` builds this class directly
(from the decoder or the cache), so the object the analyses see is the one loaded.
"""
from __future__ import annotations

import os

from tb_profiler.trace import model
from tb_profiler.trace.load import Progress
from tb_profiler.trace.load import load as load_columns

__all__ = ["Trace", "load"]


class Trace(model.Trace):
    """One trace file (one worker, one span), columnar (see ``trace.model.Trace``), with one
    method per analysis of tb_profiler.analysis."""

    def overview(self) -> dict:
        """Step-time breakdown, device summary, recommendations (see analysis.overview)."""
        from tb_profiler.analysis.overview import overview

        return overview(self)

    def operators(self, group_by: str = "name", **kw):
        """Operator table grouped by "name", "input_shape" or "stack" (a DataFrame)."""
        from tb_profiler.analysis.operators import operators

        return operators(self, group_by=group_by, **kw)

    def kernels(self, group_by: str = "name", **kw):
        """Kernel table grouped by "name" or "op" (a DataFrame)."""
        from tb_profiler.analysis.kernels import kernels

        return kernels(self, group_by=group_by, **kw)

    def memory(self, **kw) -> dict:
        """Memory curves, events and per-op stats per device (see analysis.memory)."""
        from tb_profiler.analysis.memory import memory

        return memory(self, **kw)

    def modules(self, **kw):
        """The nn.Module hierarchy with host and device time (a DataFrame)."""
        from tb_profiler.analysis.modules import modules

        return modules(self, **kw)

    def idle(self, kernel_wait_ns: int = 30_000) -> dict:
        """Idle time per device and stream, per step: host wait, kernel wait, other (see
        analysis.idle)."""
        from tb_profiler.analysis.idle import idle_time

        return idle_time(self, kernel_wait_ns=kernel_wait_ns)

    def launches(self, **kw) -> dict:
        """Kernel launch statistics: call duration, launch delay, kernel duration per launch,
        their distributions, outliers, per operator (see analysis.launch_stats)."""
        from tb_profiler.analysis.launch_stats import launch_stats

        return launch_stats(self, **kw)

    def memcpy(self, bins: int = 200) -> dict:
        """Memory-copy bandwidth per copy, per direction and host memory kind, and over time
        (see analysis.memcpy)."""
        from tb_profiler.analysis.memcpy import memcpy_bandwidth

        return memcpy_bandwidth(self, bins=bins)

    def queue(self, full_at: int = 1024) -> dict:
        """Launch queue length per device stream: longest, mean, time full, host calls
        blocked (see analysis.queue)."""
        from tb_profiler.analysis.queue import queue_length

        return queue_length(self, full_at=full_at)

    def roofline(self, peaks: dict | None = None) -> dict:
        """Per operator and kernel: FLOPs, bytes, achieved TFLOP/s and TB/s, intensity, % of
        the device's peak and the bound (see analysis.roofline and analysis.peaks)."""
        from tb_profiler.analysis.roofline import roofline

        return roofline(self, peaks=peaks)

    def compiled_kernels(self):
        """One row per kernel torch.compile generated (Inductor's launch ranges): backend,
        file, hash, launch config, calls, device time, FLOPs, bytes, TFLOP/s, TB/s; NaN
        where the trace does not say (see analysis.compiled)."""
        from tb_profiler.analysis.compiled import compiled_kernels

        return compiled_kernels(self)

    def graphs(self, annotations: str | None = None) -> dict:
        """CUDA/HIP graph replays: per graph id (replays, kernels, device time, share) and
        their device time attributed to the captured code by torch's graph annotations (a
        pickle beside the trace, or ``annotations``, or fields merged into the args); a
        note where they cannot be attributed (see analysis.graphs)."""
        from tb_profiler.analysis.graphs import graphs

        return graphs(self, annotations)

    def critical_path(self, **kw) -> dict:
        """Per step, the chain of device work, launches, host time and synchronizations that
        set its length, and how much of it the host and the device held (see
        analysis.critical_path)."""
        from tb_profiler.analysis.critical_path import critical_path

        return critical_path(self, **kw)

    def annotations(self) -> dict:
        """record_function ranges on the host and gpu_user_annotation ranges on the devices,
        per name, with the device work each covers (see analysis.annotations)."""
        from tb_profiler.analysis.annotations import annotations

        return annotations(self)

    def step_outliers(self, factor: float = 1.5) -> dict:
        """Per-step time (median, mean, p90) and the steps above factor x the median, each
        with its breakdown against the median step (see analysis.step_outliers)."""
        from tb_profiler.analysis.step_outliers import step_outliers

        return step_outliers(self, factor=factor)

    def range_stats(self, start_ns: int, end_ns: int) -> dict:
        """The events of [start_ns, end_ns) (absolute ns) by kind and name (see
        analysis.range_stats)."""
        from tb_profiler.analysis.range_stats import range_stats

        return range_stats(self, start_ns, end_ns)

    def distributed(self) -> dict:
        """Computation/communication of this trace's rank alone (a Run gives every rank)."""
        from tb_profiler.analysis.distributed import distributed

        return distributed([self])

    def diff(self, other) -> dict:
        """This trace against another (or a list of traces), per step: the step-time breakdown
        first, then operators, kernels and modules (see analysis.diff)."""
        from tb_profiler.analysis.diff import diff

        return diff(self, other)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0):
        """torch's ``prof.key_averages()`` rows for this trace, a DataFrame (times in µs as
        torch's; see analysis.keyavg for the rules)."""
        from tb_profiler.analysis.keyavg import key_averages

        return key_averages(self, group_by_input_shape, group_by_stack_n)

    def table(self, sort_by: str | None = "self_cpu_time_total", row_limit: int = 10, **kw) -> str:
        """The text of torch's ``prof.key_averages(...).table(sort_by, row_limit)`` for this
        trace (group_by_input_shape, group_by_stack_n and torch's width arguments too)."""
        from tb_profiler.analysis.keyavg import table

        return table(self, sort_by=sort_by, row_limit=row_limit, **kw)

    def integrity(self) -> dict:
        """The trust report: torch's trace-validator rules (same names and counts as
        ``torch.profiler._trace_validator.validate_trace``) and ours, as {"rules": {rule:
        count}, "findings": DataFrame, "notes": [...], ...} (see analysis.integrity)."""
        from tb_profiler.analysis.integrity import integrity

        return integrity(self)


def load(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
         max_bytes: int | None = None, progress: Progress | None = None, background: bool = True) -> Trace:
    """Load one trace file (local path or fsspec URL, .json or .json.gz) as a Trace with its
    analyses.  cache, cache_dir, max_bytes, progress, background and the errors raised are
    ``tb_profiler.trace.load.load``'s (the cache first, else read, decode and build)."""
    return load_columns(path, cache=cache, cache_dir=cache_dir, max_bytes=max_bytes, progress=progress,
                        background=background, cls=Trace)
