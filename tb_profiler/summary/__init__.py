"""Per-trace summaries: the stage between trace/ and the run-level analyses.

    trace files -> Trace (trace/) -> TraceSummary (summary/) -> distributed, diff, run views

A run of many ranks is never held in memory as events: each trace file is reduced once
to a summary of kilobytes (model.py: what it holds; build.py: how), kept on disk beside
its cached columns (store.py), built for many files by a process pool or a Dask cluster
(pool.py), and the run-level analyses read summaries only.

    summaries = tb_profiler.summarize("log/ddp_run", jobs=8)
    tb_profiler.analysis.distributed.distributed_from_summaries(summaries)
"""
from __future__ import annotations

import os

from tb_profiler.summary.build import summarize_trace
from tb_profiler.summary.ingest import summary_for
from tb_profiler.summary.model import SUMMARY_VERSION, SummaryWarning, TraceSummary
from tb_profiler.summary.pool import summarize_files

__all__ = ["SUMMARY_VERSION", "SummaryWarning", "TraceSummary", "summarize", "summarize_files", "summarize_trace",
           "summary_for"]


def summarize(run_path: str | os.PathLike, *, span: int | None = None, jobs: int | None = None, dask=None,
              cache_dir: str | os.PathLike | None = None,
              summaries: str | os.PathLike | None = None) -> list[TraceSummary]:
    """The summaries of every worker's trace of one span of a run folder (local or URL).

    span: 1-based span index (default: each worker's latest).  jobs, dask, cache_dir,
    summaries: as ``summarize_files``.  A file that cannot be summarized is left out with a
    SummaryWarning naming it and why.  Raises FileNotFoundError / ValueError as
    ``tb_profiler.load_run`` does for a folder without traces or with several runs.
    """
    from tb_profiler.trace.run import load_run

    return load_run(run_path, cache_dir=cache_dir, summaries=summaries).summaries(span, jobs=jobs, dask=dask)
