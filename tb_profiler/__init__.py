"""tb_profiler: read PyTorch profiler traces fast, analyse them, view them in TensorBoard.

Public API:
    tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False)  # the writer
    load(path) -> Trace                                                      # one trace file
    load_run(dir_or_url) -> Run                                              # one run folder
    summarize(run_path, span=None, jobs=None, dask=None, summaries=None) -> [TraceSummary]  # a run's summaries
    load_snapshot(path) -> Snapshot                                          # a memory snapshot pickle
    TraceFormatError                                                         # bad input
"""
from __future__ import annotations

from tb_profiler.errors import TraceFormatError

__all__ = ["TraceFormatError", "load", "load_run", "load_snapshot", "summarize", "tensorboard_trace_handler", "Trace", "Run"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy: importing tb_profiler must not import torch (the writer needs it) nor pandas.
    if name == "tensorboard_trace_handler":
        from tb_profiler.writer import tensorboard_trace_handler

        return tensorboard_trace_handler
    if name in ("load", "load_run", "summarize", "Trace", "Run"):
        from tb_profiler import api

        return getattr(api, name)
    if name in ("load_snapshot", "Snapshot"):
        from tb_profiler import snapshot

        return getattr(snapshot, name)
    raise AttributeError(f"module 'tb_profiler' has no attribute {name!r}")
