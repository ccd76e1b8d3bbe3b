"""``tb-profiler summarize``: build a run's per-trace summaries (what its run-level views
read), in worker processes or on a Dask cluster, with progress on stderr.

Why a module of its own: the one command that runs the summary pool (tb_profiler.summary)
and handles its signals; its output is one line per file built.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from tb_profiler.cli.output import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, _error, _print_json, _print_table


def add_parser(sub) -> None:
    """The verb summarize."""
    summarize = sub.add_parser("summarize", help="build the per-trace summaries of a run (what its run-level views "
                                                 "read), in parallel or on a Dask cluster")
    summarize.add_argument("path", help="a run folder/URL")
    summarize.add_argument("--span", type=int, help="the span, 1-based (default: each worker's latest)")
    summarize.add_argument("--jobs", type=int, help="processes building summaries (default: the CPUs available)")
    summarize.add_argument("--dask", metavar="ADDR", help="build on this Dask scheduler (tcp://host:8786) instead; "
                                                          "its workers must reach the files (shared folder or URL)")
    summarize.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    summarize.add_argument("--summaries", metavar="DIR_OR_URL",
                           help="keep the summaries in this folder or fsspec URL (s3://, gs://, ...) instead of "
                                "the cache folder; Dask workers write there themselves")
    summarize.add_argument("--json", action="store_true", help="print JSON")
    summarize.set_defaults(func=cmd_summarize)


def cmd_summarize(args: argparse.Namespace) -> int:
    from tb_profiler.summary import summarize_files
    from tb_profiler.summary.procs import restore_signals, stop_on_signals
    from tb_profiler.api import load_run

    if args.jobs is not None and args.jobs < 1:
        _error(f"--jobs {args.jobs}: at least 1")
        return EXIT_USAGE
    try:
        run = load_run(args.path, cache_dir=args.cache_dir)
        files = {w: run.span_file(w, args.span) for w in run.workers}
    except (OSError, KeyError, ValueError) as exc:
        _error(str(exc).strip("'\""))
        return EXIT_BAD_INPUT
    start = time.perf_counter()

    def progress(done: int, total: int, path: str) -> None:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        print(f"[{done}/{total}] {name} {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)

    replaced = stop_on_signals()  # SIGTERM, SIGHUP: the worker processes end with this one
    try:
        outcomes = summarize_files([f.path for f in files.values()], jobs=args.jobs, dask=args.dask,
                                   cache_dir=args.cache_dir, workers=list(files), progress=progress,
                                   summaries=args.summaries)
    except (ImportError, OSError) as exc:  # no dask installed, no scheduler at that address
        _error(f"--dask {args.dask}: {exc}")
        return EXIT_BAD_INPUT
    finally:
        restore_signals(replaced)
    rows = [_summary_row(w, f.path, o, args.cache_dir, args.summaries) for (w, f), o in zip(files.items(), outcomes)]
    doc = {"run": run.name, "path": run.path, "span": args.span, "seconds": round(time.perf_counter() - start, 3),
           "files": rows}
    if args.json:
        _print_json(doc)
    else:
        _print_summarized(doc)
    for row in rows:
        if row["error"]:
            _error(row["error"])
    return EXIT_BAD_INPUT if any(r["error"] for r in rows) else EXIT_OK


def _summary_row(worker: str, path: str, outcome: Any, cache_dir: str | None, summaries: str | None) -> dict:
    """One file's line of `tb-profiler summarize`: what its summary says, or its error."""
    from tb_profiler.summary.store import summary_path

    if isinstance(outcome, Exception):
        return {"worker": worker, "path": path, "error": str(outcome)}
    stored = summary_path(outcome.source, cache_dir, summaries)
    steps = outcome.steps["dur_ns"]
    return {"worker": worker, "path": path, "rank": outcome.rank, "steps": len(steps),
            "step_time_avg_ns": round(float(steps.mean())) if len(steps) else None,
            "collectives": len(outcome.collectives), "measured_on": outcome.measured_on,
            "summary_bytes": _stored_bytes(stored),
            "build_seconds": round(outcome.seconds, 3), "error": None}


def _stored_bytes(path: str) -> int | None:
    """The size of a stored summary (local or at a URL), None when it is not there."""
    from tb_profiler.io.read import is_url

    try:
        if is_url(path):
            import fsspec

            fs, inner = fsspec.core.url_to_fs(path)
            return int(fs.size(inner))
        return os.path.getsize(path)
    except (OSError, ValueError, ImportError):
        return None


def _print_summarized(doc: dict) -> None:
    ok = [r for r in doc["files"] if not r["error"]]
    print(f"{doc['run']} ({doc['path']}): {len(ok)} of {len(doc['files'])} trace(s) summarized in "
          f"{doc['seconds']:.1f} s")
    _print_table("per trace (build: the seconds its summary took to build, once)", ok,
                 ("worker", "rank", "steps", "step_time_avg_ns", "collectives", "measured_on", "summary_bytes",
                  "build_seconds"))


__all__ = ["add_parser", "cmd_summarize"]
