"""Run: one run folder (workers × spans of trace files), loaded lazily, trace by trace.

A run is what the plugin's run selector shows and what `tb-profiler summary DIR` reads:
per-worker views pick one trace (a worker's span); run-level analyses (distributed) read
every worker's summary of one span (tb_profiler.summary), never every trace at once.

Why in api/, above summary/: a Run reads its workers' summaries (built and kept by the
summary stage) and hands out its traces with their analyses (api.trace), so it sits above
both; nothing below it knows a run.
"""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from tb_profiler.api.trace import Trace, load
from tb_profiler.io.discovery import RunInfo, SkippedFile, SpanFile, discover

if TYPE_CHECKING:
    from tb_profiler.analysis.trace_summary import TraceSummary

# The analyses and the summary stage are imported on use, as api.trace's: opening a run
# (discovery) never pays for importing them.


class Run:
    """The trace files of one run folder; traces load on first use and are kept."""

    def __init__(self, info: RunInfo, skipped: list[SkippedFile] | None = None, *, cache: bool = True,
                 cache_dir: str | os.PathLike | None = None, summaries: str | os.PathLike | None = None):
        self.info = info
        self.skipped = list(skipped or [])
        self._cache = cache
        self._cache_dir = cache_dir
        self._summaries_dir = summaries
        self._traces: dict[str, Trace] = {}
        self._summaries: dict[int | None, list] = {}
        self._results: dict[int | None, dict] = {}  # distributed() per span

    name = property(lambda self: self.info.name)
    path = property(lambda self: self.info.path)

    @property
    def workers(self) -> list[str]:
        return list(self.info.workers)

    def spans(self, worker: str | None = None) -> list[SpanFile]:
        """The spans of a worker (default: the first), in time order."""
        return self.info.workers[self._worker(worker)]

    def span_file(self, worker: str, span: int | None) -> SpanFile:
        """One worker's file of one span (1-based index; None: the latest); KeyError if none."""
        spans = self.info.workers[worker]
        if span is None:
            return spans[-1]
        for s in spans:
            if s.index == span:
                return s
        raise KeyError(f"worker {worker!r} of run {self.name!r} has no span {span}; spans: "
                       f"{', '.join(str(s.index) for s in spans)}")

    def trace(self, worker: str | None = None, span: int | None = None) -> Trace:
        """One worker's trace for one span (1-based index; default: the latest span)."""
        return self._load(self.span_file(self._worker(worker), span))

    def traces(self, span: int | None = None) -> list[Trace]:
        """Every worker's trace of one span (1-based index; default: each worker's latest)."""
        return [self._load(self.span_file(w, span)) for w in self.info.workers]

    # -- analyses over the run (per-worker ones take worker= and span=) ----------------
    def overview(self, worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).overview(**kw)

    def operators(self, group_by: str = "name", worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).operators(group_by=group_by, **kw)

    def kernels(self, group_by: str = "name", worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).kernels(group_by=group_by, **kw)

    def memory(self, worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).memory(**kw)

    def modules(self, worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).modules(**kw)

    def table(self, worker: str | None = None, span: int | None = None, **kw: Any) -> str:
        return self.trace(worker, span).table(**kw)

    def idle(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).idle(**kw)

    def launches(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).launches(**kw)

    def memcpy(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).memcpy(**kw)

    def queue(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).queue(**kw)

    def roofline(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).roofline(**kw)

    def compiled_kernels(self, worker: str | None = None, span: int | None = None):
        return self.trace(worker, span).compiled_kernels()

    def graphs(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).graphs(**kw)

    def integrity(self, worker: str | None = None, span: int | None = None, *, jobs: int | None = None,
                  dask=None) -> dict:
        """The trust report of one worker's trace (Trace.integrity()); with several workers,
        its clock_corrections rule counts the ranks the run's clock alignment shifted."""
        from tb_profiler.analysis.integrity import with_clock_corrections

        report = self.trace(worker, span).integrity()
        if len(self.workers) < 2:
            return report
        return with_clock_corrections(report, self.distributed(span, jobs=jobs, dask=dask)["clock"])

    def critical_path(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).critical_path(**kw)

    def annotations(self, worker: str | None = None, span: int | None = None) -> dict:
        return self.trace(worker, span).annotations()

    def step_outliers(self, worker: str | None = None, span: int | None = None, **kw: Any) -> dict:
        return self.trace(worker, span).step_outliers(**kw)

    def range_stats(self, start_ns: int, end_ns: int, worker: str | None = None, span: int | None = None) -> dict:
        return self.trace(worker, span).range_stats(start_ns, end_ns)

    def key_averages(self, worker: str | None = None, span: int | None = None, **kw: Any):
        return self.trace(worker, span).key_averages(**kw)

    def summaries(self, span: int | None = None, *, jobs: int | None = None, dask=None, progress=None) -> list:
        """Every worker's TraceSummary of one span (1-based; default: each worker's latest),
        stored ones read, the others built by ``jobs`` processes or on Dask (see
        ``tb_profiler.summary.summarize_files``); no trace is kept in memory.  A file that
        cannot be summarized is left out, with a SummaryWarning naming it and why.
        progress(done_files, total_files, path) is called as each file finishes."""
        from tb_profiler.analysis.trace_summary import SummaryWarning

        out = []
        for outcome in self._summary_outcomes(span, jobs, dask, progress):
            if isinstance(outcome, Exception):
                warnings.warn(f"tb_profiler: not summarized: {outcome}", SummaryWarning, stacklevel=2)
            else:
                out.append(outcome)
        return out

    def distributed(self, span: int | None = None, *, jobs: int | None = None, dask=None) -> dict:
        """Computation/communication per rank across every worker of one span, from the
        workers' summaries (a file that cannot be summarized is named in the notes): what
        the routes distributed/overlap, waittime, commops and instances show.  Kept per
        span, as the summaries are."""
        if span not in self._results:
            from tb_profiler.analysis.distributed import distributed_from_summaries

            self._results[span] = distributed_from_summaries(self._summary_outcomes(span, jobs, dask))
        return self._results[span]

    def ranks(self, span: int | None = None, *, jobs: int | None = None, dask=None,
              max_cells: int = 1_000_000) -> dict:
        """Per rank its per-step means, clock correction and whether it is an outlier, slowest
        first; and the step time of every rank and step (route distributed/ranks):
        {"ranks": DataFrame, "notes", "step_matrix"} (analysis.stragglers)."""
        from tb_profiler.analysis.stragglers import step_matrix, stragglers

        result = self.distributed(span, jobs=jobs, dask=dask)
        table, notes = stragglers(result)
        return {"ranks": table, "notes": list(result["notes"]) + notes, "step_matrix": step_matrix(result, max_cells)}

    def stragglers(self, span: int | None = None, *, jobs: int | None = None, dask=None, **kw: Any) -> dict:
        """Who the other ranks waited for, and the operators that kept the latest ones
        (route distributed/stragglers): ``analysis.stragglers.late_ranks`` of
        ``distributed()`` and ``summaries()`` of the span; kw: top_ranks, top_operators."""
        from tb_profiler.analysis.stragglers import late_ranks

        result = self.distributed(span, jobs=jobs, dask=dask)
        return late_ranks(result, self._ok_summaries(span), **kw)

    def matrix(self, span: int | None = None, *, jobs: int | None = None, dask=None) -> dict:
        """Point-to-point bytes from each rank to each other rank (route distributed/matrix;
        analysis.p2p): {"ranks", "bytes", "notes"}."""
        from tb_profiler.analysis.p2p import p2p_matrix, process_groups

        result = self.distributed(span, jobs=jobs, dask=dask)
        groups = {s.worker: process_groups(s.distributed_info) for s in self._ok_summaries(span)}
        return p2p_matrix(result["collectives"], groups)

    def gpuinfo(self, span: int | None = None, *, jobs: int | None = None, dask=None) -> list[dict]:
        """The devices of each worker ({"worker", "rank", "devices"}; route
        distributed/gpuinfo), from the summaries."""
        return [{"worker": s.worker, "rank": s.rank, "devices": s.devices}
                for s in self._ok_summaries(span, jobs, dask)]

    def diff(self, other: "Run | Trace", span: int | None = None):
        """This run (every worker of a span) against another run or a trace, from summaries."""
        from tb_profiler.analysis.diff import diff

        theirs = other.summaries(span) if isinstance(other, Run) else other
        return diff(self.summaries(span), theirs)

    # -- internals ----------------------------------------------------------------------
    def _worker(self, worker: str | None) -> str:
        if worker is None:
            return next(iter(self.info.workers))
        if worker not in self.info.workers:
            raise KeyError(f"run {self.name!r} has no worker {worker!r}; workers: {', '.join(self.workers)}")
        return worker

    def _ok_summaries(self, span: int | None, jobs: int | None = None, dask=None) -> list:
        """The span's summaries that were built (the failed ones are the analysis' notes)."""
        return [o for o in self._summary_outcomes(span, jobs, dask) if not isinstance(o, Exception)]

    def _summary_outcomes(self, span: int | None, jobs: int | None, dask, progress=None) -> list:
        """Each worker's summary of the span, or its exception (a worker without that span:
        its KeyError); kept per span."""
        if span not in self._summaries:
            files, outcomes = {}, {}
            for w in self.info.workers:  # one entry per worker: names, not events
                try:
                    files[w] = self.span_file(w, span)
                except KeyError as exc:
                    outcomes[w] = exc
            outcomes.update(zip(files, self._summarize(files, jobs, dask, progress)))
            self._summaries[span] = [outcomes[w] for w in self.info.workers]
        return self._summaries[span]

    def _summarize(self, files: dict[str, SpanFile], jobs: int | None, dask, progress) -> list:
        from tb_profiler.analysis.summarize import summarize_trace
        from tb_profiler.summary.pool import summarize_files

        if self._cache:
            outcomes = summarize_files([f.path for f in files.values()], jobs=jobs, dask=dask,
                                       cache_dir=self._cache_dir, workers=list(files), progress=progress,
                                       summaries=self._summaries_dir)
        else:  # nothing on disk: summarize the loaded traces
            outcomes = [summarize_trace(self._load(f), worker=w) for w, f in files.items()]
        return [o if isinstance(o, Exception) else o.relabel(span=f.index) for o, f in zip(outcomes, files.values())]

    def _load(self, span: SpanFile) -> Trace:
        if span.path not in self._traces:
            self._traces[span.path] = load(span.path, cache=self._cache, cache_dir=self._cache_dir)
        return self._traces[span.path]

    def __repr__(self) -> str:
        spans = sum(len(s) for s in self.info.workers.values())
        return f"<Run {self.name}: {len(self.info.workers)} worker(s), {spans} trace file(s)>"


def load_run(dir_or_url: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
             summaries: str | os.PathLike | None = None) -> Run:
    """The run in a folder (local or fsspec URL) holding trace files (see io.discovery:
    ``*.pt.trace.json[.gz]``, and any ``*.json[.gz]`` whose head is a Kineto trace).
    summaries: a folder or URL keeping its summaries (default: the cache folder's).

    Raises FileNotFoundError when it holds no trace files, and ValueError when it holds
    several runs (subfolders), naming them so the caller can pick one.
    """
    found = discover(os.fspath(dir_or_url))
    if not found.runs:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in found.skipped[:5])
        raise FileNotFoundError(f"{dir_or_url}: no trace files found" +
                                (f" (skipped: {reasons})" if reasons else ""))
    if len(found.runs) > 1:
        names = ", ".join(r.name for r in found.runs)
        raise ValueError(f"{dir_or_url} holds {len(found.runs)} runs ({names}); load one of those folders")
    return Run(found.runs[0], found.skipped, cache=cache, cache_dir=cache_dir, summaries=summaries)


def summarize(run_path: str | os.PathLike, *, span: int | None = None, jobs: int | None = None, dask=None,
              cache_dir: str | os.PathLike | None = None,
              summaries: str | os.PathLike | None = None) -> list[TraceSummary]:
    """The summaries of every worker's trace of one span of a run folder (local or URL).

    span: 1-based span index (default: each worker's latest).  jobs, dask, cache_dir,
    summaries: as ``summarize_files``.  A file that cannot be summarized is left out with a
    SummaryWarning naming it and why.  Raises FileNotFoundError / ValueError as
    ``load_run`` does for a folder without traces or with several runs.
    """
    return load_run(run_path, cache_dir=cache_dir, summaries=summaries).summaries(span, jobs=jobs, dask=dask)
