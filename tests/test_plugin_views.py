"""Route bodies of the plugin (tb_profiler.plugin.views) on real traces, without HTTP."""
from __future__ import annotations

from datafiles import V100_TRACE as V100

import tb_profiler
from tb_profiler.plugin.views import operation_table


def test_operation_table_by_call_stack_gives_frames(sample_traces):
    trace = tb_profiler.load(next(p for p in sample_traces if "cnn_workers0" in str(p)), cache=False)
    doc = operation_table(trace, "OperationAndStack")
    table = trace.operators("stack")
    assert len(doc["rows"]) == len(table)
    with_frames = [r for r in doc["rows"] if r["frames"]]
    assert with_frames, "torch 2.13 with_stack=True traces have python_function stacks"
    # torch 2.x writes paths relative to the sys.path entry they were found under.
    assert any(f["file"] == "cnn.py" for r in with_frames for f in r["frames"])
    assert all(isinstance(f["line"], int) and f["line"] > 0 for r in with_frames for f in r["frames"] if f["file"])


def test_operation_table_by_call_stack_on_a_legacy_call_stack_trace():
    trace = tb_profiler.load(V100, cache=False)
    rows = operation_table(trace, "stack")["rows"]
    assert sum(r["calls"] for r in rows) == int(trace.operators("name")["calls"].sum())
    assert any(r["frames"] for r in rows)  # PyTorch 1.9 "Call stack" args
