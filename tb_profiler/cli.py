"""tb-profiler: the command line face of the same code the plugin and notebooks use.

Every subcommand prints text for people or, with --json, one JSON document for
machines. Problems go to stderr, naming the file; the exit code says whether all went
well (0), some input was bad (1) or the command line was wrong (2).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Sequence

from tb_profiler.errors import TraceFormatError

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    out, err = sys.stdout, sys.stderr
    # Everything printed goes through _Escaped: names and paths come from traces and file
    # names, and must never move the cursor, recolor, retitle or reorder the terminal.
    sys.stdout, sys.stderr = _Escaped(out), _Escaped(err)
    try:
        return args.func(args)
    except BrokenPipeError:  # `tb-profiler info x | head`
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except MemoryError:  # an analysis over a huge trace: say so, no traceback
        _error("out of memory")
        return EXIT_BAD_INPUT
    finally:
        sys.stdout, sys.stderr = out, err


class _Escaped:
    """A text stream that writes control, format and separator characters (but newlines
    and tabs) as escapes (_printable): for output that holds untrusted text."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write("\n".join("\t".join(_printable(p) for p in line.split("\t"))
                                     for line in text.split("\n")))
        return len(text)

    def __getattr__(self, name: str):  # flush, fileno, encoding, isatty, buffer ...
        return getattr(self._stream, name)



def _trace_or_run_args(p) -> None:
    """path / --worker / --span of a verb that takes a trace file or a run folder."""
    p.add_argument("path", help="a trace file, or a run folder (its workers; --worker for one)")
    p.add_argument("--worker", help="one worker of a run")
    p.add_argument("--span", type=int, help="for runs: the span, 1-based (default: each worker's latest)")

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-profiler", description="Inspect PyTorch profiler traces.")
    sub = parser.add_subparsers(dest="command", required=True)

    runs = sub.add_parser("runs", help="list runs, workers and spans under a logdir, and the files skipped")
    runs.add_argument("logdir", help="a folder or fsspec URL holding trace files (*.json[.gz])")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.set_defaults(func=cmd_runs)

    info = sub.add_parser("info", help="what a trace holds: events by category, steps, devices, time span")
    info.add_argument("paths", nargs="+", help="trace files, or folders/URLs searched for traces")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--no-cache", action="store_true", help="decode again, ignoring the on-disk cache")
    info.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    info.set_defaults(func=cmd_info)

    summary = sub.add_parser("summary", help="overview, top operators and kernels of a trace or a run")
    summary.add_argument("path", help="a trace file, or a run folder/URL")
    summary.add_argument("--worker", help="the run's worker (default: every worker)")
    summary.add_argument("--span", type=int, help="the run's span, 1-based (default: the latest)")
    summary.add_argument("--top", type=int, default=10, help="rows of the operator and kernel tables")
    summary.add_argument("--json", action="store_true", help="print JSON")
    summary.set_defaults(func=cmd_summary)

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

    why = sub.add_parser("why", help="why a step is slow: device idle time, kernel launches, outlier steps, "
                                     "a time range's events")
    _trace_or_run_args(why)
    why.add_argument("--only", default=",".join(WHY_PARTS),
                     help=f"which analyses, comma-separated: {', '.join(WHY_PARTS)} (default: all)")
    why.add_argument("--kernel-wait-us", type=float, default=30.0,
                     help="an idle gap shorter than this between kernels is 'kernel wait' (default 30)")
    why.add_argument("--factor", type=float, default=1.5, help="a step longer than FACTOR x the median is an outlier")
    why.add_argument("--range", metavar="START:END",
                     help="also the events of this time range, in ns from the trace's first event")
    why.add_argument("--top", type=int, default=10, help="rows of each table")
    why.add_argument("--json", action="store_true", help="print JSON")
    why.set_defaults(func=cmd_why)

    compiled = sub.add_parser("compiled", help="torch.compile's generated kernels: backend, launch config, calls, "
                                               "device time, FLOPs and bytes (from Inductor's launch ranges)")
    _trace_or_run_args(compiled)
    compiled.add_argument("--top", type=int, default=20, help="rows of the table")
    compiled.add_argument("--json", action="store_true", help="print JSON")
    compiled.set_defaults(func=cmd_compiled)

    cache = sub.add_parser("cache", help="what the cache folder holds (decoded columns, summaries), its size cap, "
                                         "and clearing or trimming it")
    cache.add_argument("action", choices=("info", "clear", "trim"),
                       help="info: entries, sizes, cap, orphans, stale temp files; clear: remove entries and stale "
                            "temp files; trim: evict (orphans, then least recently used) down to the cap")
    cache.add_argument("--orphans", action="store_true", help="clear: only entries whose trace file is gone "
                                                              "(and stale temp files)")
    cache.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    cache.add_argument("--json", action="store_true", help="print JSON")
    cache.set_defaults(func=cmd_cache)

    diff = sub.add_parser("diff", help="compare two traces or runs: step time, operators, kernels")
    diff.add_argument("baseline", help="trace file or run folder (A)")
    diff.add_argument("candidate", help="trace file or run folder (B)")
    diff.add_argument("--span", type=int, help="for runs: the span to compare (default: the latest)")
    diff.add_argument("--top", type=int, default=10, help="rows of the delta tables")
    diff.add_argument("--fail-if-slower", type=float, metavar="PCT",
                      help="exit with code 3 when B's average step is more than PCT%% slower than A's")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.set_defaults(func=cmd_diff)

    mcp = sub.add_parser("mcp", help="serve the profiler's answers to agents over MCP (stdio): runs, overview, why, "
                         "diff, range_stats, event")
    mcp.add_argument("logdir", help="a folder holding runs of trace files")
    mcp.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    mcp.set_defaults(func=cmd_mcp)

    serve = sub.add_parser("serve", help="serve the profiler UI and its JSON API for a logdir, without TensorBoard")
    serve.add_argument("logdir", help="a folder or fsspec URL holding runs of trace files (*.json[.gz])")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=6006, help="port (default 6006; 0 picks a free one)")
    serve.add_argument("--memory-mb", type=int, help="memory for parsed traces, LRU (default $TB_PROFILER_MEMORY_MB or 2048)")
    serve.add_argument("--reload-interval", type=float, help="seconds between logdir scans (default $TB_PROFILER_RELOAD_S or 5)")
    serve.add_argument("--threads", type=int, help="loader and analysis threads (default $TB_PROFILER_THREADS or 2)")
    serve.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    serve.add_argument("--jobs", type=int, help="processes building the summaries of runs of several workers "
                                                "(default $TB_PROFILER_JOBS or the CPUs available)")
    serve.add_argument("--dask", metavar="ADDR", help="build those summaries on this Dask scheduler "
                                                      "(tcp://host:8786; default $TB_PROFILER_DASK)")
    serve.add_argument("--summaries", metavar="DIR_OR_URL", help="read and keep those summaries in this folder or "
                                                                 "fsspec URL (default $TB_PROFILER_SUMMARIES, else "
                                                                 "the cache folder)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="also answer requests whose Host header names NAME (a proxy's or tunnel's name; "
                            "repeatable; also $TB_PROFILER_ALLOW_HOSTS, comma-separated): others get 403, "
                            "so a web page that rebinds its own name to this address cannot read the traces")
    serve.add_argument("--source-root", action="append", default=[], metavar="DIR",
                       help="a folder to find the Python files of stack frames under, for jump to source "
                            "(repeatable; also $TB_PROFILER_SOURCE_ROOTS, os.pathsep-separated)")
    serve.set_defaults(func=cmd_serve)

    # memory snapshots (issue 20): the verb's body is tb_profiler/snapshot/cli.py
    from tb_profiler.snapshot.cli import add_parser as add_snapshot

    add_snapshot(sub)
    return parser


# -- runs -----------------------------------------------------------------------------
def cmd_runs(args: argparse.Namespace) -> int:
    from tb_profiler.io.discovery import discover

    try:
        found = discover(args.logdir)
    except (OSError, ValueError) as exc:
        _error(f"{args.logdir}: {exc}")
        return EXIT_BAD_INPUT
    doc = {
        "logdir": found.logdir,
        "runs": [{"name": r.name, "path": r.path,
                  "workers": {w: [{"span": s.span, "index": s.index, "path": s.path, "size": s.size}
                                  for s in spans] for w, spans in r.workers.items()}}
                 for r in found.runs],
        "skipped": [{"path": s.path, "reason": s.reason} for s in found.skipped],
    }
    if args.json:
        _print_json(doc)
    else:
        _print_runs(doc)
    for s in found.skipped:
        _error(f"skipped {s.path}: {s.reason}")
    if not found.runs:
        _error(f"{args.logdir}: no runs found (no trace files)")
        return EXIT_BAD_INPUT
    return EXIT_OK


def _print_runs(doc: dict) -> None:
    print(f"{doc['logdir']}: {len(doc['runs'])} run(s)")
    for run in doc["runs"]:
        print(f"  {run['name']}  ({run['path']})")
        for worker, spans in run["workers"].items():
            sizes = ", ".join(f"#{s['index']} {_size(s['size'])}" for s in spans)
            print(f"    {worker}: {len(spans)} span(s): {sizes}")


# -- info -----------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from tb_profiler.trace import load

    files, failed = _expand_paths(args.paths)
    docs = []
    for path in files:
        try:
            start = time.perf_counter()
            trace = load(path, cache=not args.no_cache, cache_dir=args.cache_dir)
            docs.append(trace_info(trace, time.perf_counter() - start))
        except (TraceFormatError, OSError) as exc:
            _error(str(exc))
            failed = True
    if args.json:
        one_file = len(args.paths) == 1 and files == list(args.paths)
        _print_json(docs[0] if one_file and docs else docs)
    else:
        for doc in docs:
            _print_info(doc)
    return EXIT_BAD_INPUT if failed or not docs else EXIT_OK


def _path_kind(path: str) -> str:
    """'missing', 'file' or 'folder' for a local path or fsspec URL.  Raises OSError with
    the store's own reason (unreachable endpoint, no credentials, s3fs not installed)
    instead of its traceback."""
    import fsspec

    try:
        fs, _, (target,) = fsspec.get_fs_token_paths(path)
        if not fs.exists(target):
            return "missing"
        return "folder" if fs.isdir(target) else "file"
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a remote filesystem's own errors (botocore's, ImportError)
        raise OSError(f"cannot reach it: {type(exc).__name__}: {exc}") from exc


def _expand_paths(paths: Sequence[str]) -> tuple[list[str], bool]:
    """Trace files named directly, plus every trace discovery finds under a folder/URL."""
    from tb_profiler.io.discovery import discover
    from tb_profiler.io.read import LINK_LOOP, is_link_loop

    files: list[str] = []
    failed = False
    for path in paths:
        try:
            kind = _path_kind(path)
            found = discover(path) if kind == "folder" else None
        except OSError as exc:
            _error(f"{path}: {exc}")
            failed = True
            continue
        if kind == "missing":
            _error(f"{path}: {LINK_LOOP if is_link_loop(path) else 'no such file or folder'}")
            failed = True
        elif found is None:
            files.append(path)
        else:
            for s in found.skipped:
                _error(f"skipped {s.path}: {s.reason}")
            listed = [span.path for run in found.runs for span in run.files]
            if not listed:
                _error(f"{path}: no trace files found")
                failed = True
            files.extend(listed)
    return files, failed


def trace_info(trace: Any, load_seconds: float) -> dict:
    """The facts `tb-profiler info` shows about one loaded trace, as plain JSON data."""
    steps = trace.steps
    first, last = trace.span
    return {
        "path": trace.source,
        "events": len(trace.events),
        "tables": trace.counts,
        "categories": trace.category_counts(),
        "categories_as_written": trace.category_counts(raw=True),
        "steps": [int(n) for n in steps["number"]],
        "step_time_ns": [int(d) for d in steps["dur"]],
        "devices": [_device_info(d) for d in trace.devices],
        "device_kinds": list(trace.device_kinds),
        "device_word": trace.device_word,
        "device_work": _device_work(trace),
        "span_ns": {"start": first, "end": last, "duration": last - first},
        "schema_version": trace.schema_version,
        "distributed": trace.distributed_info,
        "decode_seconds": round(trace.decode_seconds, 6),
        "load_seconds": round(load_seconds, 6),
        "from_cache": bool(trace.from_cache),
        "notes": list(trace.notes),
        "integrity": _integrity(trace),
    }


def _integrity(trace: Any) -> dict:
    """The trust report (analysis.integrity): torch's validator rules and ours, counted."""
    from tb_profiler.analysis.integrity import integrity_json

    return integrity_json(trace)


def _device_work(trace: Any) -> dict:
    """Device events by what they are (trace.roles): the same count every view uses."""
    from tb_profiler.trace.roles import Role

    counts = trace.role_counts
    return {"compute": int(counts[Role.COMPUTE]), "memcpy": int(counts[Role.MEMCPY]),
            "memset": int(counts[Role.MEMSET])}


def _device_info(device: Any) -> dict:
    return {"id": device.id, "name": device.name, "kind": device.kind, "total_memory": device.total_memory,
            "compute_capability": device.compute_capability, "num_sms": device.num_sms}


def _print_info(doc: dict) -> None:
    span = doc["span_ns"]
    print(doc["path"])
    print(f"  time span    {_duration(span['duration'])} (from ts {span['start']} ns)")
    loaded = "from cache" if doc["from_cache"] else f"decoded in {_duration(doc['decode_seconds'] * 1e9)}"
    print(f"  loaded in    {_duration(doc['load_seconds'] * 1e9)} ({loaded})")
    steps = doc["steps"]
    if steps:
        mean = _duration(sum(doc["step_time_ns"]) / len(steps))
        print(f"  steps        {len(steps)}: ProfilerStep#{steps[0]}..#{steps[-1]} (mean {mean})")
    else:
        print("  steps        none (no ProfilerStep#N events: profiled without a schedule?)")
    work = doc["device_work"]
    if any(work.values()):
        word = doc["device_word"] or "device"
        print(f"  {word} work{' ' * max(1, 8 - len(word))}{work['compute']} compute (kernels), {work['memcpy']} copies, "
              f"{work['memset']} fills ({', '.join(doc['device_kinds'])})")
    if doc["devices"]:
        for d in doc["devices"]:
            extra = [x for x in (_size(d["total_memory"]) if d["total_memory"] else None,
                                 f"compute {d['compute_capability']}" if d["compute_capability"] else None,
                                 f"{d['num_sms']} SMs" if d["num_sms"] else None) if x]
            print(f"  device {d['id']:<5} {d['kind'] or ''} {d['name'] or '(unnamed)'}"
                  + (f" ({', '.join(extra)})" if extra else ""))
    else:
        print("  devices      none (CPU only)")
    if doc["distributed"]:
        dist = doc["distributed"]
        print(f"  distributed  backend {dist.get('backend')}, rank {dist.get('rank')} of {dist.get('world_size')}")
    print(f"  events       {doc['events']} complete; " + ", ".join(f"{n} {t}" for t, n in doc["tables"].items()
                                                             if t != "events"))
    width = max((len(k) for k in doc["categories"]), default=0)
    for cat, n in sorted(doc["categories"].items(), key=lambda kv: -kv[1]):
        print(f"    {cat:<{width}}  {n:>9}")
    for note in doc["notes"]:
        print(f"  note         {note}")
    rep = doc.get("integrity") or {}
    flagged = ", ".join(f"{r} {n}" for r, n in rep.get("rules", {}).items() if n)
    print(f"  integrity    {rep.get('total', 0)} findings" + (f" ({flagged})" if flagged else ": no problems found"))


# -- summary --------------------------------------------------------------------------
def cmd_summary(args: argparse.Namespace) -> int:
    try:
        run, traces = _run_and_traces(args.path, args.worker, args.span)
    except (TraceFormatError, OSError, KeyError, ValueError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    docs = [trace_summary(t, args.top) for t in traces]
    doc: dict = {"traces": docs}
    if run is not None and len(traces) > 1:
        from tb_profiler.analysis.jsonable import to_jsonable

        # from the workers' summaries, built here (the traces are loaded already)
        doc["distributed"] = to_jsonable(run.distributed(args.span, jobs=1))
    if args.json:
        _print_json(doc)
    else:
        for d in docs:
            _print_summary(d)
        if "distributed" in doc:
            _print_distributed(doc["distributed"])
    return EXIT_OK


def _traces_of(path: str, worker: str | None = None, span: int | None = None) -> list:
    """The traces a path names: a trace file, or a run folder's workers (one span)."""
    return _run_and_traces(path, worker, span)[1]


def _run_and_traces(path: str, worker: str | None = None, span: int | None = None) -> tuple[Any, list]:
    """(the run a folder holds, else None; the traces the path names: the file, or the
    run's workers of one span)."""
    from tb_profiler.trace import load, load_run

    try:
        kind = _path_kind(path)
    except OSError as exc:
        raise OSError(f"{path}: {exc}") from exc
    if kind == "missing":
        raise FileNotFoundError(f"{path}: no such file or folder")
    if kind == "file":
        return None, [load(path)]
    run = load_run(path)
    return run, [run.trace(worker, span)] if worker else run.traces(span)


def trace_summary(trace: Any, top: int) -> dict:
    """Overview plus the heaviest operators and kernels of one trace, as JSON data."""
    from tb_profiler.analysis.jsonable import to_jsonable
    from tb_profiler.analysis.overview import overview

    ops = trace.operators("name")
    kernels = trace.kernels("name")
    return {
        "path": trace.source,
        "overview": overview(trace, records=True),
        "operators": to_jsonable(ops.head(top)),
        "kernels": to_jsonable(kernels.head(top)),
    }


def cmd_cache(args: argparse.Namespace) -> int:
    from tb_profiler import cache as _cache
    from tb_profiler import cache_limit as _limit

    folder = _cache.cache_dir(args.cache_dir)
    if args.action in ("clear", "trim"):
        gone = _limit.clear(folder, orphans_only=args.orphans) if args.action == "clear" else _limit.evict(folder)
        entries = [r for r in gone if r.reason != "stale temp"]
        temps = [r for r in gone if r.reason == "stale temp"]
        doc = {"folder": folder, "removed": len(entries), "freed_bytes": sum(r.nbytes for r in gone),
               "stale_temp_removed": len(temps),
               "files": [{"path": r.path, "bytes": r.nbytes, "reason": r.reason} for r in gone]}
        if args.action == "trim":
            cap, origin = _limit.cache_max(folder)
            doc["cap"] = {"bytes": cap, "origin": origin}
            doc["bytes_after"] = sum(i.nbytes for i in _limit.inventory(folder) if not i.temp)
        if args.json:
            _print_json(doc)
            return EXIT_OK
        what = "orphaned " if args.orphans and args.action == "clear" else ""
        temp = (f" and {len(temps)} stale temp file{'' if len(temps) == 1 else 's'}") if temps else ""
        print(f"{_printable(folder)}: removed {len(entries)} {what}entr{'y' if len(entries) == 1 else 'ies'}{temp}, "
              f"freed {_size(doc['freed_bytes'])}")
        if args.action == "trim":
            print(f"  now {_size(doc['bytes_after'])} of a {_size(doc['cap']['bytes'])} cap "
                  f"({_printable(doc['cap']['origin'])})")
            for r in gone:
                print(f"  {_size(r.nbytes):>10}  {r.reason:<20} {_printable(r.path)}")
        return EXIT_OK
    found = _cache.entries(folder)
    items = _limit.inventory(folder)
    now = time.time()
    stale = [i for i in items if i.temp and now - i.used > _limit.STALE_TEMP_SECONDS]
    counted = sum(i.nbytes for i in items if not i.temp)
    cap, origin = _limit.cache_max(folder)
    kinds = {k: [e for e in found if e.kind == k] for k in ("columns", "summary")}
    orphans = [e for e in found if e.orphan and not _limit.is_temp(e.path)]  # a temp file has no source yet
    doc = {"folder": folder, "entries": len(found), "bytes": sum(e.nbytes for e in found),
           "columns": {"entries": len(kinds["columns"]), "bytes": sum(e.nbytes for e in kinds["columns"])},
           "summaries": {"entries": len(kinds["summary"]), "bytes": sum(e.nbytes for e in kinds["summary"])},
           "orphans": {"entries": len(orphans), "bytes": sum(e.nbytes for e in orphans)},
           "cap": {"bytes": cap, "origin": origin, "counted_bytes": counted, "over": counted > cap},
           "stale_temp": {"files": len(stale), "bytes": sum(i.nbytes for i in stale)},
           "largest": [{"source": e.source, "kind": e.kind, "bytes": e.nbytes, "orphan": e.orphan}
                       for e in sorted(found, key=lambda e: -e.nbytes)[:10]]}
    if args.json:
        _print_json(doc)
        return EXIT_OK
    print(f"{_printable(folder)}: {doc['entries']} entries, {_size(doc['bytes'])}")
    share = f"{counted / cap:.0%} of" if cap else "over" if counted else "at"
    print(f"  cap              {_size(cap)}  ({_printable(origin)}); "
          f"entries use {_size(counted)}, {share} the cap{' (`tb-profiler cache trim`)' if counted > cap else ''}")
    print(f"  decoded columns  {doc['columns']['entries']:>6}  {_size(doc['columns']['bytes'])}")
    print(f"  summaries        {doc['summaries']['entries']:>6}  {_size(doc['summaries']['bytes'])}")
    print(f"  orphaned         {doc['orphans']['entries']:>6}  {_size(doc['orphans']['bytes'])}"
          "  (trace gone: `tb-profiler cache clear --orphans`)")
    print(f"  stale temp files {doc['stale_temp']['files']:>6}  {_size(doc['stale_temp']['bytes'])}"
          "  (a writer that died: removed by clear and trim)")
    for e in doc["largest"]:
        source = _printable(e["source"]) if e["source"] is not None else "(not an entry)"
        print(f"  {_size(e['bytes']):>10}  {e['kind']:<8} {source}{'  [orphan]' if e['orphan'] else ''}")
    return EXIT_OK


def _printable(text: str) -> str:
    """text with control, format and separator characters and undecodable bytes (lone
    surrogates) written as escapes (\\x1b, \\u202e, \\udcff): a file name must not move the
    cursor, recolor or reorder the terminal, or break print()."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "".join(out)


WHY_PARTS = ("idle", "launches", "queue", "steps", "critical", "memcpy", "annotations", "roofline")


def cmd_why(args: argparse.Namespace) -> int:
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    bad = [p for p in only if p not in WHY_PARTS]
    if bad or not args.factor > 1 or args.kernel_wait_us < 0:
        _error(f"--only {','.join(bad)}: not one of {', '.join(WHY_PARTS)}" if bad else
               f"--factor {args.factor}: must be above 1" if not args.factor > 1 else
               f"--kernel-wait-us {args.kernel_wait_us}: must be >= 0")
        return EXIT_USAGE
    try:
        window = _parse_range(args.range) if args.range else None
        _, traces = _run_and_traces(args.path, args.worker, args.span)
        docs = [why_doc(t, only, round(args.kernel_wait_us * 1000), args.factor, window, args.top) for t in traces]
    except (TraceFormatError, OSError, KeyError, ValueError) as exc:
        _error(str(exc).strip("'\""))
        return EXIT_BAD_INPUT
    if args.json:
        _print_json({"traces": docs})
    else:
        for d in docs:
            _print_why(d)
    return EXIT_OK


def cmd_compiled(args: argparse.Namespace) -> int:
    """The compiled_kernels route's document per trace (plugin/views_compiled), as a table."""
    from tb_profiler.plugin.views_compiled import compiled_kernels

    try:
        _, traces = _run_and_traces(args.path, args.worker, args.span)
        docs = [{"path": t.source, **compiled_kernels(t)} for t in traces]
    except (TraceFormatError, OSError, KeyError, ValueError) as exc:
        _error(str(exc).strip("'\""))
        return EXIT_BAD_INPUT
    if args.json:
        _print_json({"traces": docs})
        return EXIT_OK
    for d in docs:
        print(d["path"])
        _print_table(f"compiled kernels ({d['total']}, most device time first)", d["rows"][:max(args.top, 0)],
                     ("name", "kernel_backend", "num_warps", "num_stages", "kernel_kwargs", "calls", "device_ns",
                      "flops", "bytes", "tflops", "tbps"))
        for note in d["notes"]:
            print(f"  note         {note}")
    return EXIT_OK


def _parse_range(text: str) -> tuple[int, int]:
    try:
        start, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"--range {text!r}: give START:END in ns from the trace's first event") from None
    if end <= start or start < 0:
        raise ValueError(f"--range {text!r}: END must be above START, both >= 0")
    return start, end


def why_doc(trace: Any, only: Sequence[str], kernel_wait_ns: int, factor: float,
            window: tuple[int, int] | None, top: int) -> dict:
    """The "why is it slow" analyses of one trace as JSON data (tables cut to ``top`` rows
    where they are lists of items; totals whole)."""
    from tb_profiler.analysis.jsonable import to_jsonable

    from tb_profiler.analysis.diagnosis import diagnosis

    d = diagnosis(trace)
    origin = int(trace.span[0]) if len(trace.events) else 0
    rng = d["evidence"].get("time_range_ns")
    doc: dict = {"path": trace.source, "verdict": to_jsonable({
        "finding": d["sentence"], "bound_by": d["bound_by"], "label": d["label"], "figures": d["figures"],
        "evidence": {**d["evidence"], "path": trace.source,
                     "time_range_ns": [rng[0] - origin, rng[1] - origin] if rng else None}})}
    if "idle" in only:
        idle = trace.idle(kernel_wait_ns=kernel_wait_ns)
        doc["idle"] = to_jsonable({k: v for k, v in idle.items() if k != "gaps"})
        device_gaps = idle["gaps"][idle["gaps"]["stream"] == -1]  # every stream idle: counted once
        doc["idle"]["gaps"] = _from_start(to_jsonable(device_gaps.nlargest(top, "dur_ns")), ("start_ns", "end_ns"), origin)
    if "launches" in only:
        la = trace.launches()
        doc["launches"] = to_jsonable({k: v for k, v in la.items() if k != "launches"})
        doc["launches"]["operators"] = doc["launches"]["operators"][:top]
    if "queue" in only:
        doc["queue"] = to_jsonable(trace.queue())
    if "steps" in only:
        doc["steps"] = to_jsonable(trace.step_outliers(factor=factor))
    if "memcpy" in only:
        copies = trace.memcpy()
        doc["memcpy"] = to_jsonable({"directions": copies["directions"], "notes": copies["notes"],
                                     "copies": copies["copies"].nlargest(top, "bytes")})
        _from_start(doc["memcpy"]["copies"], ("start_ns",), origin)
    if "annotations" in only:
        ann = trace.annotations()
        doc["annotations"] = to_jsonable({"host": ann["host"].head(top), "device": ann["device"].head(top),
                                          "notes": ann["notes"]})
    if "critical" in only:
        path = trace.critical_path()
        doc["critical"] = to_jsonable({"steps": path["steps"], "top": path["top"].head(top), "notes": path["notes"]})
    if "roofline" in only:
        roof = trace.roofline()
        doc["roofline"] = to_jsonable({"operators": roof["operators"].head(top), "kernels": roof["kernels"].head(top),
                                       "device": roof["device"], "notes": roof["notes"]})
    if window is not None:
        stats = trace.range_stats(origin + window[0], origin + window[1])
        stats["rows"] = stats["rows"].groupby("kind", sort=False).head(top)  # the heaviest names of each kind
        doc["range"] = to_jsonable(stats)
    return doc


def _from_start(rows: list[dict], fields: Sequence[str], origin: int) -> list[dict]:
    """Times as the UI gives them, from the trace's start (its first event), not on the
    profiler's clock: ``why --json`` and the plugin's routes hold the same numbers."""
    for row in rows:
        for f in fields:
            if isinstance(row.get(f), (int, float)):
                row[f] = int(row[f]) - origin
    return rows


def _print_why(doc: dict) -> None:
    print(doc["path"])
    v = doc.get("verdict")
    if v is not None:
        print(f"  verdict      {v['label']}: {v['finding']}")
    idle = doc.get("idle")
    if idle is not None:
        totals = [r for r in idle["devices"] if r["step"] == -1]
        _print_table(f"device idle time inside the steps (kernel wait: gaps under {_duration(idle['threshold_ns'])})",
                     totals, ("device", "window_ns", "busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns",
                              "other_ns", "gaps"))
        _print_table("longest device idle gaps", idle["gaps"], ("kind", "device", "step", "start_ns", "dur_ns"))
        for note in idle.get("notes", []):
            print(f"  note         {note}")
    la = doc.get("launches")
    if la is not None:
        _print_table("kernel launches per runtime call", la["calls"],
                     ("call", "launches", "kernels", "call_dur_median_ns", "delay_median_ns", "delay_p90_ns",
                      "delay_max_ns", "short_kernels"))
        _print_table("operators carrying launch overhead", la["operators"],
                     ("operator", "launches", "call_ns", "kernel_ns", "overhead_share"))
        for note in la.get("notes", []):
            print(f"  note         {note}")
    qu = doc.get("queue")
    if qu is not None:
        _print_table(f"launch queue per stream (full: {qu['full_at']} operations)", qu["streams"],
                     ("stream", "device", "operations", "max_len", "mean_len", "time_full_ns", "blocked_calls",
                      "blocked_ns"))
        for note in qu.get("notes", []):
            print(f"  note         {note}")
    st = doc.get("steps")
    if st is not None and st["stats"]:
        s = st["stats"]
        print(f"  steps        {s['steps']}: median {_duration(s['median_ns'])}, mean {_duration(s['mean_ns'])}, "
              f"p90 {_duration(s['p90_ns'])}, max {_duration(s['max_ns'])}")
        for o in st["outliers"]:
            print(f"  outlier      step {o['step']}: {_duration(o['dur_ns'])} ({o['ratio']:.2f} x the median), "
                  f"{_duration(o['excess_ns'])} more, mostly {o['cause_label']} "
                  f"(+{_duration(o[o['cause'] + '_delta_ns'])})")
        for note in st.get("notes", []):
            print(f"  note         {note}")
    mc = doc.get("memcpy")
    if mc is not None:
        _print_table("memory copies per direction (GB/s: all bytes over all copy time)", mc["directions"],
                     ("direction", "src", "dst", "copies", "bytes", "time_ns", "gbps", "gbps_median"))
        for note in mc.get("notes", []):
            print(f"  note         {note}")
    an = doc.get("annotations")
    if an is not None:
        _print_table("record_function ranges on the host (kernels: launched inside)", an["host"],
                     ("name", "count", "total_ns", "mean_ns", "kernels", "kernel_ns"))
        _print_table("annotation ranges on the device (kernel: device busy inside)", an["device"],
                     ("name", "device", "count", "total_ns", "kernels", "kernel_ns"))
        for note in an.get("notes", []):
            print(f"  note         {note}")
    cp = doc.get("critical")
    if cp is not None:
        _print_table("critical path per step (what held the step: the device, or the host launching it)",
                     cp["steps"], ("step", "length_ns", "device_ns", "host_ns", "sync_ns", "device_share"))
        _print_table("longest on the critical paths", cp["top"], ("name", "kind", "ns", "count"))
        for note in cp.get("notes", []):
            print(f"  note         {note}")
    rf = doc.get("roofline")
    if rf is not None:
        _print_table(f"roofline on {rf['device']['name'] or 'an unnamed device'} (most FLOPs first)", rf["operators"],
                     ("name", "dtype", "calls", "tflops", "tbps", "intensity", "compute_pct", "memory_pct", "bound"))
        for note in rf.get("notes", []):
            print(f"  note         {note}")
    rs = doc.get("range")
    if rs is not None:
        _print_table(f"events of the range ({rs['events']})", rs["rows"],
                     ("name", "kind", "count", "total_ns", "self_ns", "avg_ns", "max_ns"))


def _print_summary(doc: dict) -> None:
    ov = doc["overview"]
    summary = ov["summary"]
    print(doc["path"])
    if summary["step_time_avg_ns"] is not None:
        print(f"  steps        {summary['num_steps']}, average {_duration(summary['step_time_avg_ns'])}")
        parts = [f"{ov['breakdown']['labels'][c]} {pct:.1f}%" for c, pct in summary["average_pct"].items() if pct]
        print("  breakdown    " + ", ".join(parts))
    for d in ov["devices"]:
        cells = [f"{label} {_pct(d.get(key))}" for label, key in (
            ("utilization", "utilization_pct"), ("est. SM efficiency", "sm_efficiency_pct"),
            ("est. occupancy", "occupancy_pct"), ("tensor cores", "tensor_core_pct"))]
        print(f"  {ov['device_word'] or 'device'} {d['device']:<3}       {d.get('name') or ''}: " + ", ".join(cells))
    for rec in ov["recommendations"]:
        print(f"  advice       [{rec['severity']}] {rec['text']}")
    for note in ov["notes"]:
        print(f"  note         {note}")
    _print_table("operators (by device self, then host self time)", doc["operators"],
                 ("name", "calls", "host_self_ns", "host_total_ns", "device_self_ns", "device_total_ns"))
    _print_table("kernels (by total time)", doc["kernels"], ("name", "calls", "total_ns", "mean_ns", "max_ns"))


def _print_distributed(doc: dict) -> None:
    print("distributed")
    _print_table("per rank, totals over its steps", doc.get("ranks", []),
                 ("rank", "steps", "computation_ns", "communication_ns", "overlap_ns", "other_ns", "wait_ns",
                  "transfer_ns"))
    for r in doc.get("ranks", []):
        print(f"  rank {r['rank']:<7} {r.get('communication_note', '')}")
    _print_table("collectives per rank, totals over its steps (bytes: this rank's input messages; algbw and "
                 "busbw: nccl-tests' bandwidths in GB/s)", doc.get("collectives", []),
                 ("name", "rank", "pg_name", "group_size", "calls", "bytes", "out_bytes", "total_ns", "algbw_gbps",
                  "busbw_gbps", "time_on", "wait_ns"))
    for note in doc.get("notes", []):
        print(f"  note         {note}")


def _print_table(title: str, rows: list[dict], columns: Sequence[str]) -> None:
    if not rows:
        return
    print(f"  {title}:")
    cells = [[_cell(c, r.get(c)) for c in columns] for r in rows]
    headers = [c.removesuffix("_ns").replace("_ns_", "_").replace("_", " ") for c in columns]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    widths[0] = min(widths[0], 60)
    print("    " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths))))
    for row in cells:
        print("    " + "  ".join(v[:w].ljust(w) if i == 0 else v.rjust(w)
                                  for i, (v, w) in enumerate(zip(row, widths))))


def _cell(column: str, value: Any) -> str:
    """A table cell in the UI's units: times from the trace's start in µs, durations in
    the unit that reads best, shares and percentages as %, sizes in KiB/MiB/GiB."""
    if value is None:
        return "-"
    if column.endswith("_pct"):
        return _pct(value)
    if column.endswith("_share"):
        return _pct(100 * value)
    if column == "start_ns" or column.endswith("_start_ns"):
        return f"{value / 1e3:,.3f} µs"
    if column == "ns" or column.endswith("_ns") or "_ns_" in column:
        return _duration(value)
    if column.endswith("bytes") and isinstance(value, (int, float)):
        return _size(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}%"


# -- summarize ------------------------------------------------------------------------
def cmd_summarize(args: argparse.Namespace) -> int:
    from tb_profiler.summary import summarize_files
    from tb_profiler.summary.procs import restore_signals, stop_on_signals
    from tb_profiler.trace import load_run

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


# -- diff -----------------------------------------------------------------------------
def cmd_diff(args: argparse.Namespace) -> int:
    from tb_profiler.analysis.diff import diff
    from tb_profiler.analysis.jsonable import to_jsonable

    try:
        a = _traces_of(args.baseline, span=args.span)
        b = _traces_of(args.candidate, span=args.span)
    except (TraceFormatError, OSError, KeyError, ValueError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    result = to_jsonable(diff(a, b))
    summary = result.get("summary", {})
    slower = _slower_pct(summary)
    doc = {"baseline": args.baseline, "candidate": args.candidate, "slower_pct": slower, **result}
    if args.json:
        _print_json(doc)
    else:
        _print_diff(doc, args.top)
    if args.fail_if_slower is not None and slower is not None and slower > args.fail_if_slower:
        _error(f"{args.candidate} is {slower:.1f}% slower per step than {args.baseline} "
               f"(threshold {args.fail_if_slower:g}%)")
        return EXIT_REGRESSION
    return EXIT_OK


def _slower_pct(summary: dict) -> float | None:
    a, b = summary.get("step_time_avg_ns_a"), summary.get("step_time_avg_ns_b")
    if not a or b is None:
        return None
    return (b - a) / a * 100.0


def _print_diff(doc: dict, top: int) -> None:
    s = doc.get("summary", {})
    print(f"A {doc['baseline']}\nB {doc['candidate']}")
    if doc["slower_pct"] is not None:
        print(f"  average step  A {_duration(s['step_time_avg_ns_a'])}, B {_duration(s['step_time_avg_ns_b'])} "
              f"({doc['slower_pct']:+.1f}%)")
    for note in doc.get("notes", []):
        print(f"  note          {note}")
    # the diff's own order (analysis.diff.by_change): the largest change first, whatever its sign
    _print_table("Step time breakdown (per step)", doc.get("breakdown", []),
                 ("label", "time_ns_a", "time_ns_b", "time_ns_delta", "delta_pct"))
    for key, cols, by in (
            ("operators", ("name", "calls_a", "calls_b", "host_total_ns_delta", "device_total_ns_delta"),
             "|host total delta| + |device total delta|"),
            ("kernels", ("name", "calls_a", "calls_b", "total_ns_delta"), "|total delta|")):
        _print_table(f"{key} with the largest change per step ({by})", doc.get(key, [])[:top], cols)


# -- serve ----------------------------------------------------------------------------
def cmd_mcp(args: argparse.Namespace) -> int:
    """tb-profiler mcp LOGDIR: the MCP server over stdio (tb_profiler.mcp_server)."""
    if not os.path.isdir(args.logdir):
        _error(f"{args.logdir}: not a folder")
        return EXIT_BAD_INPUT
    try:
        from tb_profiler.mcp_server import serve
    except ImportError as exc:  # the SDK is an extra: say how to get it
        _error(f"tb-profiler mcp needs the MCP Python SDK ({exc}): pip install 'mcp>=2'")
        return EXIT_USAGE
    serve(args.logdir, cache_dir=args.cache_dir)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from tb_profiler.io.read import is_url
    from tb_profiler.plugin.serve import serve

    if not is_url(args.logdir) and not os.path.isdir(args.logdir):
        _error(f"{args.logdir}: no such folder")
        return EXIT_BAD_INPUT
    if not 0 <= args.port <= 65535:
        _error(f"--port {args.port}: not a port number")
        return EXIT_USAGE
    for root in args.source_root:
        if not os.path.isdir(os.path.expanduser(root)):
            _error(f"--source-root {root}: no such folder")
            return EXIT_BAD_INPUT
    if args.jobs is not None and args.jobs < 1:
        _error(f"--jobs {args.jobs}: at least 1")
        return EXIT_USAGE
    try:
        serve(args.logdir, host=args.host, port=args.port, allow_hosts=args.allow_host, memory_mb=args.memory_mb,
              reload_s=args.reload_interval, threads=args.threads, cache_dir=args.cache_dir,
              source_roots=args.source_root, jobs=args.jobs, dask=args.dask, summaries=args.summaries)
    except OSError as exc:  # port in use, address not available
        _error(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}")
        return EXIT_BAD_INPUT
    return EXIT_OK


# -- output helpers -------------------------------------------------------------------
def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _duration(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def _print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _error(message: str) -> None:
    print(f"tb-profiler: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
