"""tb-profiler: the command line face of the same code the plugin and notebooks use.

Every subcommand prints text for people or, with --json, one JSON document for
machines. Problems go to stderr, naming the file; the exit code says whether all went
well (0), some input was bad (1) or the command line was wrong (2).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Sequence

from tb_profiler.errors import TraceFormatError

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `tb-profiler info x | head`
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-profiler", description="Inspect PyTorch profiler traces.")
    sub = parser.add_subparsers(dest="command", required=True)

    runs = sub.add_parser("runs", help="list runs, workers and spans under a logdir, and the files skipped")
    runs.add_argument("logdir", help="a folder or fsspec URL holding *.pt.trace.json[.gz] files")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.set_defaults(func=cmd_runs)

    info = sub.add_parser("info", help="what a trace holds: events by category, steps, devices, time span")
    info.add_argument("paths", nargs="+", help="trace files, or folders/URLs searched for traces")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--no-cache", action="store_true", help="decode again, ignoring the on-disk cache")
    info.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    info.set_defaults(func=cmd_info)
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
        _error(f"{args.logdir}: no runs found (no *.pt.trace.json[.gz] files)")
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


def _expand_paths(paths: Sequence[str]) -> tuple[list[str], bool]:
    """Trace files named directly, plus every trace discovery finds under a folder/URL."""
    import fsspec

    from tb_profiler.io.discovery import discover

    files: list[str] = []
    failed = False
    for path in paths:
        fs, _, (target,) = fsspec.get_fs_token_paths(path)
        if not fs.exists(target):
            _error(f"{path}: no such file or folder")
            failed = True
        elif not fs.isdir(target):
            files.append(path)
        else:
            found = discover(path)
            for s in found.skipped:
                _error(f"skipped {s.path}: {s.reason}")
            listed = [span.path for run in found.runs for span in run.files]
            if not listed:
                _error(f"{path}: no *.pt.trace.json[.gz] files found")
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
        "span_ns": {"start": first, "end": last, "duration": last - first},
        "schema_version": trace.schema_version,
        "distributed": trace.distributed_info,
        "decode_seconds": round(trace.decode_seconds, 6),
        "load_seconds": round(load_seconds, 6),
        "from_cache": bool(trace.from_cache),
    }


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


# -- output helpers -------------------------------------------------------------------
def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
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
