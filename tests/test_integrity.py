"""The trust report (Trace.integrity, analysis.integrity): torch 2.13's validator rules give
the same counts as torch's own ``validate_trace`` on every trace of tests/data (real ones
and tests/data/integrity's fixtures, which break each rule), and our rules count what the
fixture ``ours.json.gz`` was written to hold (tests/integrity_fixtures.py)."""
from __future__ import annotations

import json
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

import datafiles
from tb_profiler.analysis.integrity import OUR_RULES, RULES, TORCH_RULES
from tb_profiler.errors import TraceFormatError
from tb_profiler.api import load

torch_validator = pytest.importorskip("torch.profiler._trace_validator")


def _trace_files() -> list[str]:
    found = []
    for root, _, files in os.walk(datafiles.DATA):
        found += [os.path.join(root, f) for f in files if f.endswith((".json", ".json.gz"))]
    return sorted(found)


FILES = _trace_files()


def _torch_counts(path: str) -> dict[str, int]:
    """torch's validate_trace(path), as {rule: violations} (run in a worker process)."""
    from torch.profiler._trace_validator import validate_trace

    counts = Counter(v.rule_name for v in validate_trace(path)[1])
    return {rule: counts.get(rule, 0) for rule in TORCH_RULES}


@pytest.fixture(scope="module")
def torch_answers():
    """torch's answer per file, computed once, in one other process while the tests load
    and check our side (torch's pure-Python rules take ~25 s over tests/data)."""
    pool = ProcessPoolExecutor(max_workers=1)
    futures = {p: pool.submit(_torch_counts, p) for p in FILES}
    yield futures
    pool.shutdown(cancel_futures=True)


def _load(path: str):
    try:
        return load(path, cache=False)
    except TraceFormatError as exc:
        if "no traceEvents" in str(exc):
            pytest.skip(f"{path}: not a trace file")
        raise


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, datafiles.DATA))
def test_torch_rules_count_as_validate_trace(path, torch_answers):
    report = _load(path).integrity()
    ours = {rule: report["rules"][rule] for rule in TORCH_RULES}
    assert ours == torch_answers[path].result(timeout=300), path
    # the finding rows add up to each rule's count (fewer than MAX_ROWS violations here)
    per_rule = report["findings"].groupby("rule")["count"].sum().to_dict()
    assert {r: c for r, c in report["rules"].items() if c} == {r: int(c) for r, c in per_rule.items()}


EXPECTED = {  # what tests/integrity_fixtures.py wrote into each file
    "causality": {"_check_gpu_kernel_causality": 1},
    "stream_wait": {"_check_stream_wait_corr_id_populated": 2, "_check_stream_wait_corr_id_in_past": 2},
    "sync_overlap": {"_check_stream_sync_overlap": 2},
    "nccl": {"_check_nccl_metadata": 2},
    "backward_seq": {"_check_backward_seq_id_uniqueness": 2},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_torch_rule_is_broken_by_its_fixture(name):
    report = _load(str(datafiles.DATA / "integrity" / f"{name}.json.gz")).integrity()
    assert {r: c for r, c in report["rules"].items() if c and r in TORCH_RULES} == EXPECTED[name]


def test_fixtures_are_written_by_the_generator(tmp_path):
    import integrity_fixtures

    for path in integrity_fixtures.write(tmp_path):
        assert path.read_bytes() == (datafiles.DATA / "integrity" / path.name).read_bytes(), path.name


@pytest.fixture(scope="module")
def ours():
    return _load(str(datafiles.DATA / "integrity" / "ours.json.gz"))


def test_our_rules_on_their_fixture(ours):
    rep = ours.integrity()
    assert set(rep["rules"]) == set(RULES)
    assert {r: rep["rules"][r] for r in OUR_RULES} == {
        "unlaunched_device_work": 1, "outside_profiling_window": 1, "stream_overlap": 1, "bad_durations": 2,
        "dropped_events": 1, "steps_left_out": 1, "unfinished_flows": 1, "profiler_overhead": 2,
        "clock_corrections": 0}
    # device time 70 us: 10 without launch, 10 after the steps; overhead 40 us of a 270 us span
    assert rep["shares"]["unlaunched_device_work"] == pytest.approx(10 / 70)
    assert rep["shares"]["outside_profiling_window"] == pytest.approx(10 / 70)
    assert rep["shares"]["profiler_overhead"] == pytest.approx(40 / 270)
    assert rep["total"] == sum(rep["rules"].values()) == 10
    f = rep["findings"]
    assert list(f.columns[:5]) == ["rule", "count", "detail", "event", "ts_ns"]
    left = f[f["rule"] == "steps_left_out"]["detail"].tolist()
    assert len(left) == 1 and "ProfilerStep#2" in left[0]
    # overlapping kernels are kept (the report drops nothing)
    assert len(ours.events) and (ours.events["dur"] == 10_000).sum() >= 4
    assert "step_time" in rep["affects"] and "steps_left_out" in rep["affects"]["step_time"]
    assert any("single trace" in n for n in rep["notes"])


def test_info_json_and_route_carry_the_report(ours, tmp_path):
    from tb_profiler.cli import trace_info
    from tb_profiler.plugin.views_integrity import integrity as route_body

    doc = json.loads(json.dumps(trace_info(ours, 0.0)))
    rep = doc["integrity"]
    assert rep["rules"] == ours.integrity()["rules"]
    assert rep["findings_total"] == len(rep["findings"]) == len(ours.integrity()["findings"])
    body = json.loads(json.dumps(route_body(ours)))
    assert body["rules"] == rep["rules"] and body["total"] == 10
    origin_rows = [r for r in body["findings"] if r["ts_ns"] is not None]
    assert origin_rows and all(0 <= r["ts_ns"] < 10**9 for r in origin_rows)  # relative to the trace's origin


def test_integrity_route_is_registered():
    from tb_profiler.plugin.app import ROUTE_PARAMS

    assert ROUTE_PARAMS["integrity"] == frozenset({"run", "worker", "span"})
