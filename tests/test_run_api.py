"""``Run`` offers every per-run and per-trace analysis docs/api.md lists, under the name it
documents (issue 17): ``Run.stragglers()`` is ``late_ranks(run.distributed(),
run.summaries())``; ``ranks``, ``matrix``, ``gpuinfo`` are the other distributed routes;
the per-trace ones (``range_stats``, ``key_averages`` among them) give what the trace's own
method gives.  Data: the sample runs (samples/make_all.py) and a 4-rank run written here
from the sample gloo ranks (benchmarks/make_many_ranks.py) with rank 2's clock 3 ms late, a
rank every other one waits for."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tb_profiler
from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.api import Run
from datafiles import benchmark_module

ROOT = Path(__file__).resolve().parents[1]
LATE_RANK = 2


def _same(a, b) -> bool:
    """Equal as the JSON the routes would send (DataFrames, dicts, numpy values alike)."""
    def text(x):
        return json.dumps(to_jsonable(x), sort_keys=True, default=str)

    return text(a) == text(b)


def _api_doc() -> str:
    return (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def late_run(sample_logdir, tmp_path_factory) -> Run:
    mmr = benchmark_module("make_many_ranks")
    tmp = tmp_path_factory.mktemp("late_run")
    mmr.generate(tmp / "r4", 4, 0, source=sample_logdir / "ddp_gloo_2ranks", jitter_us=0, seed=0,
                 skew_rank=LATE_RANK, skew_us=3000)
    return tb_profiler.load_run(tmp / "r4", cache_dir=tmp / "cache")


def test_every_run_method_the_api_doc_names_exists():
    doc = _api_doc()
    named = set(re.findall(r"`Run\.([a-z_]+)\(", doc))
    per_trace = set(re.findall(r"`Trace\.([a-z_]+)\(\)`", doc))  # "The same analyses as Trace.idle(), ..."
    assert {"stragglers", "ranks", "matrix", "gpuinfo", "distributed", "range_stats"} <= named
    assert per_trace and per_trace <= named, per_trace - named
    missing = sorted(n for n in named | per_trace if not callable(getattr(Run, n, None)))
    assert not missing, f"documented but not on Run: {missing}"


def test_stragglers_is_late_ranks_of_distributed_and_summaries(late_run):
    from tb_profiler.analysis.stragglers import late_ranks

    got = late_run.stragglers()
    assert _same(got, late_ranks(late_run.distributed(), late_run.summaries()))
    # (which rank comes first is late_ranks' finding on this run's real arrivals, tested in
    # test_late_arrivals; the clock alignment takes most of rank 2's 3 ms shift away, so the
    # order is the samples' noise)
    assert got["ranks"]["late_ns"].is_monotonic_decreasing
    assert set(got["operators"]["rank"]) and not got["notes"]
    first = int(got["ranks"]["rank"].iloc[0])
    assert _same(late_run.stragglers(top_ranks=1)["operators"]["rank"].unique().tolist(), [first])


def test_ranks_matrix_and_gpuinfo_are_the_distributed_routes(late_run):
    from tb_profiler.analysis.p2p import p2p_matrix, process_groups
    from tb_profiler.analysis.stragglers import step_matrix, stragglers

    result = late_run.distributed()
    table, notes = stragglers(result)
    ranks = late_run.ranks()
    assert _same(ranks["ranks"], table) and ranks["notes"] == list(result["notes"]) + notes
    assert ranks["step_matrix"] == step_matrix(result, 1_000_000)
    assert sorted(ranks["step_matrix"]["ranks"]) == [0, 1, 2, 3]
    assert late_run.ranks(max_cells=4)["step_matrix"]["truncated"]
    summaries = late_run.summaries()
    groups = {s.worker: process_groups(s.distributed_info) for s in summaries}
    matrix = late_run.matrix()
    assert _same(matrix, p2p_matrix(result["collectives"], groups))
    assert matrix["ranks"] == [] and matrix["notes"]  # DDP: all_reduce only, no send/recv
    info = late_run.gpuinfo()
    assert [(g["worker"], g["rank"]) for g in info] == [(f"rank{i}", i) for i in range(4)]
    assert all(g["devices"] == s.devices == [] for g, s in zip(info, summaries))  # CPU ranks


def test_distributed_is_kept_per_span(late_run):
    assert late_run.distributed() is late_run.distributed()
    assert late_run.distributed(span=1) is late_run.distributed(span=1)


@pytest.mark.parametrize("name", ["overview", "operators", "kernels", "memory", "modules", "idle", "launches",
                                  "memcpy", "queue", "roofline", "critical_path", "annotations",
                                  "step_outliers", "key_averages", "table"])
def test_per_trace_methods_give_the_traces_answer(sample_logdir, name):
    run = tb_profiler.load_run(sample_logdir / "cnn_dataloader_2workers", cache=False)
    worker = run.workers[-1]
    trace = run.trace(worker, span=1)
    assert _same(getattr(run, name)(worker=worker, span=1), getattr(trace, name)())


def test_range_stats_of_a_worker_and_span(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "cnn_dataloader_2workers", cache=False)
    worker = run.workers[-1]
    trace = run.trace(worker, span=1)
    a, b = trace.span
    mid = a + (b - a) // 2
    got = run.range_stats(a, mid, worker=worker, span=1)
    assert _same(got, trace.range_stats(a, mid))
    assert not _same(got, run.range_stats(a, mid))  # default: the first worker's latest span


def test_a_cpu_only_trace_says_cpu_and_has_no_device_kinds(sample_logdir):
    """device_word is "CPU" on a CPU-only trace; whether there is an accelerator is
    device_kinds, which the overview route carries for the UI."""
    from tb_profiler.plugin.views import overview

    run = tb_profiler.load_run(sample_logdir / "cnn_dataloader_0workers", cache=False)
    trace = run.trace()
    assert trace.device_word == "CPU" and trace.device_kinds == ()
    assert run.overview()["device_word"] == "CPU"
    doc = overview(trace, 1)
    assert doc["device_word"] == "CPU" and doc["device_kinds"] == []
    assert {"title": "Device Type", "value": "CPU"} in doc["environments"]
    assert {s.device_word for s in run.summaries()} == {"CPU"}


def test_run_integrity_counts_the_ranks_the_clock_alignment_shifted(late_run):
    clock = late_run.distributed()["clock"]
    shifted = clock[clock["clock_offset_ns"] != 0]
    report = late_run.integrity()
    one = late_run.trace().integrity()
    assert report["rules"]["clock_corrections"] == len(shifted) > 0
    assert one["rules"]["clock_corrections"] == 0  # a single trace cannot tell
    rows = report["findings"][report["findings"]["rule"] == "clock_corrections"]
    assert sorted(rows["detail"]) == sorted(f"rank {r.rank} ({r.worker}) shifted by {r.clock_offset_ns} ns "
                                            f"({r.clock_method}) to share the run's time axis"
                                            for r in shifted.itertuples())
    assert report["total"] == one["total"] + len(shifted)
    assert {k: v for k, v in report["rules"].items() if k != "clock_corrections"} == \
        {k: v for k, v in one["rules"].items() if k != "clock_corrections"}
