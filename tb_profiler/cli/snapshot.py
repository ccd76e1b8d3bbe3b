"""``tb-profiler snapshot PATH [--json]``: a memory snapshot's summary, OOMs and what was
live at the peak, for people (text) or machines (one JSON document).

Why here, in the CLI's package: it prints and exits as the other verbs do (cli.output),
and tb_profiler.snapshot, the model it prints, never imports the CLI (the plugin reads it
too).  tb_profiler/cli/ registers the verb (``add_parser``), which calls ``cmd_snapshot``.
"""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "cmd_snapshot", "snapshot_doc"]


def add_parser(sub: Any) -> None:
    """The ``snapshot`` verb on the CLI's subparsers."""
    p = sub.add_parser("snapshot", help="a memory snapshot (torch.cuda.memory._dump_snapshot's pickle): totals, "
                                        "peak, OOM reports with advice, what was live at the peak by stack")
    p.add_argument("path", help="a snapshot file (.pickle / .pkl, or gzipped)")
    p.add_argument("--top", type=int, default=10, help="stacks live at the peak to show (default 10)")
    p.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    p.add_argument("--no-cache", action="store_true", help="read the file, neither reading nor writing the cache")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_snapshot)


def snapshot_doc(snap: Any, top: int = 10) -> dict:
    """The document ``--json`` prints: summary, ooms, live_at_peak per device."""
    from tb_profiler.analysis.jsonable import to_jsonable

    summary = snap.summary()
    peaks = []
    for d in snap.devices():  # a loop over devices (a handful)
        h = snap.device_history(d)
        if h.n == 0:
            continue
        pos, peak = h.peak()
        peaks.append({"device": d, "peak_allocated_bytes": peak, "time_us": h.time_of(pos), "entry": pos,
                      "live": to_jsonable(snap.live_at_entry(d, pos, top))})
    ooms = [{k: to_jsonable(v) for k, v in r.items()} for r in snap.ooms()]
    for r in ooms:
        r["live"] = r["live"][:top]
    return {"path": snap.source, "summary": to_jsonable(summary), "ooms": ooms, "live_at_peak": peaks}


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / (1 << 20):,.1f} MiB"


def _print(doc: dict) -> None:
    s = doc["summary"]
    print(doc["path"])
    print(f"  segments     {s['segments']}  (devices {', '.join(str(d) for d in s['devices']) or '-'})")
    print(f"  reserved     {_mib(s['reserved_bytes'])}")
    print(f"  allocated    {_mib(s['allocated_bytes'])}  (active {_mib(s['active_bytes'])})")
    ext, inn = s["free_external_bytes"], s["free_internal_bytes"]
    share = f" ({inn / (ext + inn):.1%} internal)" if ext + inn else ""
    print(f"  free         {_mib(ext + inn)}{share}")
    print(f"  peak         {_mib(s['peak_allocated_bytes'])}  (history replayed, {s['history_entries']} entries)")
    if s["time_range_us"]:
        a, b = s["time_range_us"]
        print(f"  time         {a} .. {b} us ({(b - a) / 1e6:.3f} s)")
    print(f"  ooms         {s['oom_count']}")
    for r in doc["ooms"]:
        print(f"  OOM on device {r['device']} at {r['time_us'] if r['time_us'] is not None else 'entry ' + str(r['entry'])}: "
              f"{_mib(r['requested_bytes'])} requested, {_mib(r['device_free_bytes'])} free on the device, "
              f"{_mib(r['reserved_bytes'])} reserved, {_mib(r['allocated_bytes'])} allocated, "
              f"{_mib(r['free_in_segments_bytes'])} free in segments (largest block {_mib(r['largest_free_block_bytes'])})")
        for a in r["advice"]:
            print(f"    advice: {a}")
    for p in doc["live_at_peak"]:
        print(f"  live at the peak of device {p['device']} ({_mib(p['peak_allocated_bytes'])}), by stack:")
        for row in p["live"]:
            frames = [f for f in str(row["frames"]).split("\n") if f][:3]
            print(f"    {_mib(row['bytes']):>14}  {row['count']:>6}x  {' <- '.join(frames)}")


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Load (through the cache) and print; exit 1 naming the file when it is not a snapshot."""
    from tb_profiler.cli.output import EXIT_BAD_INPUT, EXIT_OK, _error, _print_json
    from tb_profiler.snapshot.cache import load_snapshot

    try:
        snap = load_snapshot(args.path, cache=not args.no_cache, cache_dir=args.cache_dir)
        doc = snapshot_doc(snap, max(int(args.top), 0))
    except (OSError, ValueError) as exc:  # TraceFormatError is a ValueError naming the file
        text = str(exc)
        _error(text if args.path in text else f"{args.path}: {text}")
        return EXIT_BAD_INPUT
    if args.json:
        _print_json(doc)
    else:
        _print(doc)
    return EXIT_OK
