"""``tb-profiler serve`` (the UI and its JSON API without TensorBoard) and
``tb-profiler mcp`` (the profiler's answers to agents over MCP, stdio).

Why together: the two long-running servers; each checks its arguments and hands over
to its server (tb_profiler.plugin.serve, tb_profiler.cli.mcp).
"""
from __future__ import annotations

import argparse
import os

from tb_profiler.cli.output import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, _error


def add_parser(sub) -> None:
    """The verbs mcp and serve."""
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


def cmd_mcp(args: argparse.Namespace) -> int:
    """tb-profiler mcp LOGDIR: the MCP server over stdio (tb_profiler.cli.mcp)."""
    if not os.path.isdir(args.logdir):
        _error(f"{args.logdir}: not a folder")
        return EXIT_BAD_INPUT
    try:
        from tb_profiler.cli.mcp import serve
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


__all__ = ["add_parser", "cmd_mcp", "cmd_serve"]
