"""tb-profiler: the command line face of the same code the plugin and notebooks use.

Every subcommand prints text for people or, with --json, one JSON document for
machines. Problems go to stderr, naming the file; the exit code says whether all went
well (0), some input was bad (1) or the command line was wrong (2).

A module per command group, each registering its verbs (``add_parser``) and holding
their bodies:

    runs.py       runs, info, summary   (what a logdir and its traces hold)
    summarize.py  summarize             (a run's summaries, in parallel or on Dask)
    why.py        why                   (why a step is slow)
    compiled.py   compiled              (torch.compile's kernels)
    cache.py      cache                 (the cache folder)
    diff.py       diff                  (two traces or runs compared)
    serve.py      mcp, serve            (the servers)
    output.py     exit codes, errors, JSON, tables, units, escaping untrusted text
    inputs.py     paths on the command line -> trace files, runs, traces
    snapshot.py   snapshot              (memory snapshots)
    mcp.py        the MCP server        (what ``tb-profiler mcp`` serves)
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tb_profiler.cli import cache, compiled, diff, runs, serve, summarize, why

# Re-exported, importable from tb_profiler.cli as before it became a package (tests use them).
from tb_profiler.cli.inputs import _expand_paths, _path_kind, _run_and_traces, _trace_or_run_args, _traces_of
from tb_profiler.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    _cell,
    _duration,
    _error,
    _Escaped,
    _pct,
    _print_json,
    _print_table,
    _printable,
    _size,
)
from tb_profiler.cli.runs import trace_info, trace_summary
from tb_profiler.cli.why import WHY_PARTS, why_doc


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-profiler", description="Inspect PyTorch profiler traces.")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (runs, summarize, why, compiled, cache, diff, serve):  # the order `tb-profiler --help` lists
        group.add_parser(sub)

    # memory snapshots (issue 20): the verb's body is tb_profiler/cli/snapshot.py
    from tb_profiler.cli.snapshot import add_parser as add_snapshot

    add_snapshot(sub)
    return parser


__all__ = ["EXIT_BAD_INPUT", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "WHY_PARTS", "_cell", "_duration", "_error",
           "_expand_paths", "_parser", "_path_kind", "_pct", "_print_json", "_print_table", "_printable",
           "_run_and_traces", "_size", "_trace_or_run_args", "_traces_of", "main", "trace_info", "trace_summary",
           "why_doc"]
