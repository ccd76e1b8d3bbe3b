"""The public Python API: tb_profiler.load / load_run and the analysis methods on Trace and Run."""
from __future__ import annotations

import pandas as pd
import pytest
from datafiles import V100, V100_RUN, V100_TRACE

import tb_profiler


def test_trace_methods_return_tables_and_dicts():
    trace = tb_profiler.load(V100_TRACE, cache=False)
    assert trace.overview()["summary"]["num_steps"] == 6
    for group_by in ("name", "input_shape", "stack"):
        assert isinstance(trace.operators(group_by=group_by), pd.DataFrame)
    assert trace.kernels("op")["calls"].sum() == 8772
    assert isinstance(trace.memory(), dict) and isinstance(trace.modules(), pd.DataFrame)
    assert "Self CPU" in trace.table(sort_by="self_cpu_time_total", row_limit=5)
    assert trace.diff(trace)["summary"]["step_time_avg_ns_delta"] == 0
    assert trace.distributed()["notes"]  # one trace: says why there is no cross-rank view


def test_load_run_picks_workers_and_spans():
    run = tb_profiler.load_run(V100_RUN)
    assert run.workers == ["worker0"] and [s.index for s in run.spans()] == [1, 2]
    assert run.trace(span=1).source.endswith("1623143089861.pt.trace.json.gz")
    assert run.trace().source.endswith("1623143566756.pt.trace.json.gz")  # default: latest span
    assert run.overview(span=1)["summary"]["step_time_avg_ns"] == 177592167
    assert run.diff(run, span=2)["summary"]["step_time_avg_ns_delta"] == 0
    with pytest.raises(KeyError, match="no span 7"):
        run.trace(span=7)
    with pytest.raises(KeyError, match="no worker"):
        run.trace(worker="nobody")


def test_load_run_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trace files found"):
        tb_profiler.load_run(tmp_path)
    with pytest.raises(ValueError, match="holds 2 runs"):
        tb_profiler.load_run(V100)


def test_run_distributed_over_the_gloo_sample(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks")
    dist = run.distributed()
    assert sorted(dist["ranks"]["rank"]) == [0, 1]
    assert dist["info"]["backend"] == "gloo" and dist["info"]["world_size"] == 2
