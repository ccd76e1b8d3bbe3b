"""The Python API's objects: a Trace with its analyses, a Run folder, its summaries.

    trace = tb_profiler.load("worker0.pt.trace.json.gz")   # api.trace.load -> Trace
    trace.kernels(), trace.idle(), trace.diff(other), ...
    run = tb_profiler.load_run("log/ddp_run")               # api.run.load_run -> Run
    run.distributed(), run.summaries(), tb_profiler.summarize("log/ddp_run", jobs=8)

The stage above the analyses and the summaries, below the views (plugin/, the CLI): it
puts trace/, analysis/ and summary/ together behind one object per thing a user opens.
"""
from tb_profiler.api.run import Run, load_run, summarize
from tb_profiler.api.trace import Trace, load

__all__ = ["Run", "Trace", "load", "load_run", "summarize"]
