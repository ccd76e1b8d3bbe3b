"""Per-trace summaries of files: the stage between trace/ and the run (tb_profiler.api).

    trace files -> Trace (trace/) -> TraceSummary (analysis.summarize) -> kept (summary/)
                -> Run.distributed(), diff, run views (api/, plugin/)

A run of many ranks is never held in memory as events: each trace file is reduced once
to a summary of kilobytes (analysis.trace_summary: what it holds; analysis.summarize:
how; both in analysis/ because the run-level analyses read them), kept on disk beside
its cached columns (store.py), built for many files by a process pool or a Dask cluster
(pool.py), and the run-level analyses read summaries only.

    summaries = tb_profiler.summarize("log/ddp_run", jobs=8)
    tb_profiler.analysis.distributed.distributed_from_summaries(summaries)

The summary's type and builder are importable from here too, as this package's names.
"""
from __future__ import annotations

from tb_profiler.analysis.summarize import summarize_trace
from tb_profiler.analysis.trace_summary import SUMMARY_VERSION, SummaryWarning, TraceSummary
from tb_profiler.summary.ingest import summary_for
from tb_profiler.summary.pool import summarize_files

__all__ = ["SUMMARY_VERSION", "SummaryWarning", "TraceSummary", "summarize_files", "summarize_trace", "summary_for"]
