"""``tb-profiler compiled``: torch.compile's generated kernels per trace, as the Kernel
view's ``compiled_kernels`` route gives them (plugin/views_compiled.py).

Why a module of its own: one verb, one document shared with the route.
"""
from __future__ import annotations

import argparse

from tb_profiler.cli.inputs import _run_and_traces, _trace_or_run_args
from tb_profiler.cli.output import EXIT_BAD_INPUT, EXIT_OK, _error, _print_json, _print_table
from tb_profiler.errors import TraceFormatError


def add_parser(sub) -> None:
    """The verb compiled."""
    compiled = sub.add_parser("compiled", help="torch.compile's generated kernels: backend, launch config, calls, "
                                               "device time, FLOPs and bytes (from Inductor's launch ranges)")
    _trace_or_run_args(compiled)
    compiled.add_argument("--top", type=int, default=20, help="rows of the table")
    compiled.add_argument("--json", action="store_true", help="print JSON")
    compiled.set_defaults(func=cmd_compiled)


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


__all__ = ["add_parser", "cmd_compiled"]
