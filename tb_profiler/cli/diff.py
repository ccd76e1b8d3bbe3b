"""``tb-profiler diff``: two traces or runs compared (step time, breakdown, operators,
kernels), with ``--fail-if-slower`` for CI (exit code 3).

Why a module of its own: the Diff view's analysis (analysis.diff) on the command line,
and the only command with a regression exit code.
"""
from __future__ import annotations

import argparse

from tb_profiler.cli.inputs import _traces_of
from tb_profiler.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    _duration,
    _error,
    _print_json,
    _print_table,
)
from tb_profiler.errors import TraceFormatError


def add_parser(sub) -> None:
    """The verb diff."""
    diff = sub.add_parser("diff", help="compare two traces or runs: step time, operators, kernels")
    diff.add_argument("baseline", help="trace file or run folder (A)")
    diff.add_argument("candidate", help="trace file or run folder (B)")
    diff.add_argument("--span", type=int, help="for runs: the span to compare (default: the latest)")
    diff.add_argument("--top", type=int, default=10, help="rows of the delta tables")
    diff.add_argument("--fail-if-slower", type=float, metavar="PCT",
                      help="exit with code 3 when B's average step is more than PCT%% slower than A's")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.set_defaults(func=cmd_diff)


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


__all__ = ["add_parser", "cmd_diff"]
