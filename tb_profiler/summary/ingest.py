"""One file -> its summary: the stored one when its key matches, else load, build, store.

Why a function of its own: the local process pool, a Dask worker and an in-process call
all do exactly this per file, so they share it (summary.pool sends it to the workers).
"""
from __future__ import annotations

import dataclasses
import os
import time

from tb_profiler.analysis.summarize import default_worker, summarize_trace
from tb_profiler.analysis.trace_summary import TraceSummary
from tb_profiler.io.read import source_id, stat_key
from tb_profiler.summary.store import read_summary, summary_key, write_summary

__all__ = ["stored_summary", "summary_for"]


def stored_summary(path_or_url: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
                   worker: str | None = None, summaries: str | os.PathLike | None = None) -> TraceSummary | None:
    """The stored summary of a file when its key (file version, code versions) matches, else
    None; never builds.  Raises OSError when the file cannot be stat'ed."""
    source = source_id(path_or_url)
    size, mtime = stat_key(path_or_url)
    hit = read_summary(summary_key(source, size, mtime), cache_dir, summaries)
    return None if hit is None else hit.relabel(worker=worker or default_worker(source))


def summary_for(path_or_url: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
                worker: str | None = None, columns: bool = True,
                summaries: str | os.PathLike | None = None) -> TraceSummary:
    """The summary of one trace file (local path or fsspec URL).

    cache: read the stored summary when its key matches, else load the trace (through the
        columns cache), build its summary and store it; False: neither read nor write
        anything on disk (the trace is decoded again).
    cache_dir: cache folder (summaries go to its ``summaries`` folder).
    summaries: a folder (path or fsspec URL) to keep summaries in instead.
    worker: the worker's name (default: from the file name, as discovery names it).
    columns: with cache, also read or write the trace's decoded columns in the cache; False:
        decode the file without them (a server summarizing a run of many ranks in the
        background: writing every rank's columns costs more than decoding again the few
        ranks anybody opens).
    Raises TraceFormatError for a bad trace, as ``tb_profiler.load`` does.
    """
    from tb_profiler.trace.load import load

    t0 = time.perf_counter()
    source = source_id(path_or_url)
    try:
        size, mtime = stat_key(path_or_url)
    except (OSError, ValueError):  # load reports the real problem
        size, mtime = -1, None
    key = summary_key(source, size, mtime) if cache and size >= 0 else None
    if key is not None:
        hit = read_summary(key, cache_dir, summaries)
        if hit is not None:
            return hit.relabel(worker=worker or default_worker(source))
    trace = load(path_or_url, cache=cache and columns, cache_dir=cache_dir)
    summary = summarize_trace(trace, worker=worker)
    summary = dataclasses.replace(summary, source=source, size=size, mtime=mtime, seconds=time.perf_counter() - t0)
    if key is not None:
        write_summary(summary, key, cache_dir, summaries)
    return summary
