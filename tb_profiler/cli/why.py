"""``tb-profiler why``: why a step is slow (the diagnosis's verdict, device idle time,
kernel launches, launch queues, outlier steps, the critical path, memory copies,
annotations, the roofline, a time range's events).

Why a module of its own: ``why_doc`` is the document the MCP server sends agents too
(tb_profiler.cli.mcp), with times from the trace's start as the plugin's routes give them.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tb_profiler.cli.inputs import _run_and_traces, _trace_or_run_args
from tb_profiler.cli.output import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, _duration, _error, _print_json, _print_table
from tb_profiler.errors import TraceFormatError


def add_parser(sub) -> None:
    """The verb why."""
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


def _parse_range(text: str) -> tuple[int, int]:
    try:
        start, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"--range {text!r}: give START:END in ns from the trace's first event") from None
    if end <= start or start < 0:
        raise ValueError(f"--range {text!r}: END must be above START, both >= 0")
    return start, end


def _where(trace: Any, event_ids: Sequence[int], origin: int) -> dict:
    """The evidence as a person opens it: the run (the trace's folder), worker and span the
    viewer lists it under, and "link", the viewer's address fragment (after the server's
    URL) that opens the Trace view on the verdict's longest event, selected. Each None when
    the trace's folder cannot be listed (a URL that lists nothing)."""
    import os
    from urllib.parse import urlencode

    from tb_profiler.io.discovery import discover

    unknown = {"run": None, "worker": None, "span": None, "link": None}
    folder = os.path.dirname(trace.source)
    try:
        runs = discover(os.path.dirname(folder) or ".").runs
    except OSError:
        return unknown
    found = [(r.name, w, s.index) for r in runs for w, spans in r.workers.items() for s in spans
             if s.path == trace.source]
    if not found:
        return unknown
    run, worker, span = found[0]
    state = {"view": "Trace", "run": run, "worker": worker, "span": str(span)}
    if event_ids:
        ev = trace.events
        i = int(event_ids[0])
        ts, dur = int(ev["ts"][i]) - origin, max(int(ev["dur"][i]), 0)
        pad = max(2 * dur, 20_000)  # as the viewer's "Show in the trace" frames an event
        state.update(t0=str(max(0, ts - pad)), t1=str(ts + dur + pad), ev=str(i))
    return {"run": run, "worker": worker, "span": span, "link": "#" + urlencode(state)}


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
                     "time_range_ns": [rng[0] - origin, rng[1] - origin] if rng else None,
                     **_where(trace, d["evidence"].get("event_ids") or [], origin)}})}
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


__all__ = ["WHY_PARTS", "add_parser", "cmd_why", "why_doc"]
