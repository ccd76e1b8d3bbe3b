"""Every analysis on every real trace and on degenerate ones: results or stated reasons,
never an exception from deep inside numpy or pandas."""
from __future__ import annotations

import json

import pytest
from datafiles import real_traces, rel

import tb_profiler
from tb_profiler.analysis.diff import diff
from tb_profiler.analysis.distributed import distributed
from tb_profiler.analysis.jsonable import to_jsonable

DEGENERATE = {
    "no events": {"traceEvents": []},
    "only metadata": {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]},
    "kernel without launch": {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"correlation": 99, "device": 0, "stream": 7}}]},
    "step without ops": {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]},
    "unmatched flows and a free without alloc": {"traceEvents": [
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 1},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 6, "bp": "e", "pid": 0, "tid": 7, "ts": 2},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "s": "t",
         "args": {"Addr": 1, "Bytes": -64, "Total Allocated": 0, "Total Reserved": 64, "Device Type": 0,
                  "Device Id": -1}}]},
    "zero-length and negative durations": {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 1, "tid": 1, "ts": 5, "dur": 0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::b", "pid": 1, "tid": 1, "ts": 5, "dur": -3}]},
}


def run_everything(trace) -> None:
    for result in (trace.overview(), trace.operators("name"), trace.operators("input_shape"),
                   trace.operators("stack"), trace.kernels("name"), trace.kernels("op"), trace.memory(),
                   trace.modules(), trace.distributed(), diff(trace, trace)):
        json.dumps(to_jsonable(result), allow_nan=False, default=str)
    assert isinstance(trace.table(row_limit=5), str)


@pytest.mark.parametrize("path", real_traces(), ids=rel)
def test_every_analysis_on_every_real_trace(path):
    run_everything(tb_profiler.load(path, cache=False))


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_traces_give_reasons_not_exceptions(name, tmp_path):
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps(DEGENERATE[name]))
    trace = tb_profiler.load(path, cache=False)
    run_everything(trace)
    if name in ("no events", "only metadata"):
        assert trace.overview()["notes"]


def test_distributed_with_a_missing_rank_names_it(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks")
    result = distributed([run.trace("rank0")])
    assert any("1" in note and "missing" in note for note in result["notes"]), result["notes"]
