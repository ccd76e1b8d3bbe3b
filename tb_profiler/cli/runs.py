"""``tb-profiler runs``, ``info`` and ``summary``: what a logdir holds, what a trace holds,
and a trace's (or a run's) overview with its heaviest operators and kernels.

Why together: the three look at traces as they are (no diagnosis): discovery's listing,
the loaded trace's facts (``trace_info``, also the MCP server's) and the Overview view's
numbers (``trace_summary``).
"""
from __future__ import annotations

import argparse
import time
from typing import Any

from tb_profiler.cli.inputs import _expand_paths, _run_and_traces
from tb_profiler.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    _duration,
    _error,
    _pct,
    _print_json,
    _print_table,
    _size,
)
from tb_profiler.errors import TraceFormatError


def add_parser(sub) -> None:
    """The verbs runs, info and summary."""
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


__all__ = ["add_parser", "cmd_info", "cmd_runs", "cmd_summary", "trace_info", "trace_summary"]
