"""Per-trace summaries (tb_profiler.summary): what they hold, the store (round trip, keys,
corruption), and the one definition of the distributed numbers: ``distributed(traces)``
equals ``distributed_from_summaries`` over the summaries read back from disk."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from datafiles import V100_TRACE
from test_collectives import _nccl_rank

import tb_profiler
from tb_profiler import cache as cache_mod
from tb_profiler import cache_folder
from tb_profiler.analysis.breakdown import breakdown
from tb_profiler.analysis.distributed import distributed, distributed_from_summaries
from tb_profiler.analysis.gpu import device_summary
from tb_profiler.analysis.steps import steps
from tb_profiler.analysis.trace_summary import FRAMES, stack
from tb_profiler.io.read import stat_key
from tb_profiler.summary import SUMMARY_VERSION, TraceSummary, ingest, summarize_trace, summary_for
from tb_profiler.summary.store import summary_path

FACTS = ("source", "worker", "size", "mtime", "distributed_info", "base_time_ns", "device_word", "device_kinds",
         "matrix_unit", "has_device_work", "devices", "has_memory", "has_modules", "measured_on", "backend_guess",
         "notes", "step_notes", "collective_notes")


def assert_same_summary(a: TraceSummary, b: TraceSummary) -> None:
    for f in FRAMES:
        pd.testing.assert_frame_equal(getattr(a, f), getattr(b, f), check_exact=True, obj=f)
    assert {f: getattr(a, f) for f in FACTS} == {f: getattr(b, f) for f in FACTS}


def assert_same_result(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key, value in a.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value, b[key], check_exact=True, obj=key)
        else:
            assert value == b[key], key


@pytest.fixture
def builds(monkeypatch):
    """Counts the summaries summary_for builds (a stored one is read, not built)."""
    count = []
    real = ingest.summarize_trace

    def counting(trace, **kw):
        count.append(trace.source)
        return real(trace, **kw)

    monkeypatch.setattr(ingest, "summarize_trace", counting)
    return count


def test_v100_summary_holds_the_run_level_facts_and_round_trips(tmp_path, builds):
    s = summary_for(V100_TRACE, cache_dir=tmp_path)
    assert builds == [s.source]
    assert (s.worker, s.size, s.device_word, s.device_kinds, s.measured_on) == \
        ("worker0", os.path.getsize(V100_TRACE), "GPU", ("CUDA",), "device")
    assert s.mtime == stat_key(V100_TRACE)[1] and str(s.mtime).startswith(f"{os.stat(V100_TRACE).st_mtime_ns}:")
    assert {d["name"] for d in s.devices} == {"Tesla V100-DGXS-32GB"} and s.has_memory
    trace = tb_profiler.load(V100_TRACE, cache_dir=tmp_path)
    pd.testing.assert_frame_equal(s.steps, steps(trace))
    pd.testing.assert_frame_equal(s.breakdown, breakdown(trace))
    pd.testing.assert_frame_equal(s.device_summary, device_summary(trace))
    assert len(s.kernels) and len(s.operators) and s.collectives.empty
    # per step: computation (compute kernels) and no communication
    assert (s.step_busy["communication_ns"] == 0).all() and (s.step_busy["computation_ns"] > 0).all()
    again = summary_for(V100_TRACE, cache_dir=tmp_path)
    assert len(builds) == 1  # read from the store
    assert_same_summary(s, again)
    size = os.path.getsize(summary_path(s.source, tmp_path))
    assert size < 100_000, size  # kilobytes, for a 6-step ResNet50 trace of 130k events


def test_gloo_rank_summary_round_trips(sample_logdir, tmp_path, builds):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache_dir=tmp_path)
    path = run.span_file("rank1", 1).path
    s = summary_for(path, cache_dir=tmp_path, worker="rank1")
    assert s.rank == 1 and s.distributed_info["world_size"] == 2 and s.measured_on == "host"
    assert set(s.collectives["family"]) == {"all_reduce"} and len(s.communication)
    again = summary_for(path, cache_dir=tmp_path)
    assert len(builds) == 1
    assert_same_summary(s, again)
    assert os.path.getsize(summary_path(s.source, tmp_path)) < 50_000


def _small_trace(path, ts=0):
    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": ts, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 10, "dur": 30}]}
    path.write_text(json.dumps(doc))
    return path


def test_a_changed_file_rebuilds(tmp_path, builds):
    path = _small_trace(tmp_path / "w.pt.trace.json")
    cache = tmp_path / "cache"
    summary_for(path, cache_dir=cache)
    summary_for(path, cache_dir=cache)
    assert len(builds) == 1
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # same size, newer
    assert summary_for(path, cache_dir=cache).mtime == stat_key(path)[1]  # the version stamp: mtime:inode:ctime
    assert str(stat_key(path)[1]).startswith(f"{st.st_mtime_ns + 1_000_000_000}:")
    assert len(builds) == 2
    _small_trace(path, ts=1000)  # new content, another size
    s = summary_for(path, cache_dir=cache)
    assert len(builds) == 3 and s.steps["start_ns"].tolist() == [1_000_000]


def test_a_corrupt_or_stale_entry_rebuilds(tmp_path, builds, monkeypatch):
    path = _small_trace(tmp_path / "w.pt.trace.json")
    cache = tmp_path / "cache"
    first = summary_for(path, cache_dir=cache)
    entry = summary_path(first.source, cache)
    data = bytearray(Path(entry).read_bytes())
    _, _, _, header_len = cache_folder.PREFIX.unpack_from(data)
    header = json.loads(data[cache_folder.PREFIX.size:cache_folder.PREFIX.size + header_len])
    spec = header["arrays"]["steps.2"]  # the steps' start_ns
    data[cache_mod._pad(cache_folder.PREFIX.size + header_len) + spec["offset"]] ^= 0xFF  # the CRC says no
    Path(entry).write_bytes(bytes(data))
    assert_same_summary(summary_for(path, cache_dir=cache), first)
    assert len(builds) == 2
    summary_for(path, cache_dir=cache)
    assert len(builds) == 2  # the rebuilt entry is good
    monkeypatch.setattr("tb_profiler.summary.store.SUMMARY_VERSION", SUMMARY_VERSION + 1)
    summary_for(path, cache_dir=cache)
    assert len(builds) == 3  # a new summary version is a miss


def test_cache_false_touches_no_disk(tmp_path, builds):
    path = _small_trace(tmp_path / "w.pt.trace.json")
    summary_for(path, cache=False, cache_dir=tmp_path / "cache")
    summary_for(path, cache=False, cache_dir=tmp_path / "cache")
    assert len(builds) == 2 and not (tmp_path / "cache").exists()


def test_bad_trace_raises_like_load(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    with pytest.raises(tb_profiler.TraceFormatError, match="bad.pt.trace.json"):
        summary_for(bad, cache_dir=tmp_path / "cache")


def _stored(traces, cache):
    """Each trace's summary, stored and read back from disk."""
    out = []
    for t in traces:
        summary_for(t.source, cache_dir=cache)
        out.append(summary_for(t.source, cache_dir=cache))
    return out


def test_distributed_equals_from_stored_summaries_on_the_gloo_run(sample_logdir, tmp_path):
    run = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache=False)
    traces = run.traces(span=1)
    expected = distributed(traces)
    assert_same_result(expected, distributed_from_summaries(_stored(traces, tmp_path)))
    # and the Run itself reads summaries only
    assert_same_result(expected, tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache_dir=tmp_path).distributed(1))


def test_distributed_equals_from_stored_summaries_on_nccl_fixtures(tmp_path):
    traces = [_nccl_rank(tmp_path, 0, 60, 50, 110), _nccl_rank(tmp_path, 1, 45, 40, 105)]
    expected = distributed(traces)
    got = distributed_from_summaries(_stored(traces, tmp_path / "cache"))
    assert_same_result(expected, got)
    assert got["ranks"]["wait_ns"].tolist() == [0, 15_000]  # test_collectives' numbers, from disk


def test_summarize_trace_is_computed_once_per_trace(tmp_path):
    trace = tb_profiler.load(_small_trace(tmp_path / "w.pt.trace.json"), cache=False)
    assert summarize_trace(trace) is summarize_trace(trace)
    assert summarize_trace(trace, worker="other").worker == "other" and summarize_trace(trace).worker == "w"


def test_stack_equals_concatenated_frames_whether_stored_decoded_or_plain(sample_logdir, tmp_path):
    """stack joins a frame's columns across summaries without a DataFrame per summary: the
    table must be the frames concatenated, dtypes included, for stored summaries whose
    frames are not decoded yet, decoded ones and plain ones (built in memory) mixed."""
    traces = tb_profiler.load_run(sample_logdir / "ddp_gloo_2ranks", cache=False).traces(span=1)
    traces.append(tb_profiler.load(V100_TRACE, cache=False))
    plain = [summarize_trace(t) for t in traces]
    stored = _stored(traces, tmp_path)
    stored[1].collectives, stored[2].steps  # decoded already: read from the frame
    mixed = [stored[0], plain[1], stored[1], stored[2], plain[0]]
    same = [plain[0], plain[1], plain[1], plain[2], plain[0]]  # what each one of mixed must equal
    for frame in FRAMES:
        expected = pd.concat([getattr(s, frame) for s in same if len(getattr(s, frame))], ignore_index=True)
        table, counts = stack(mixed, frame)
        assert counts.tolist() == [len(getattr(s, frame)) for s in mixed]
        if len(expected.columns):
            pd.testing.assert_frame_equal(table, expected, check_exact=True, obj=frame)
        first = list(getattr(mixed[0], frame).columns[:2])
        if first:
            part, _ = stack(mixed, frame, first)
            assert list(part.columns) == first
            pd.testing.assert_frame_equal(part, expected[first], check_exact=True, obj=frame)
    # the frames hold nullable, text and object columns: every kind of column is joined
    kinds = {str(d) for s in plain for f in FRAMES for d in getattr(s, f).dtypes}
    assert {"Int64", "object"} <= kinds and kinds & {"str", "string"}, kinds


def test_a_summarized_trace_is_freed_at_once_not_by_the_cyclic_gc(sample_logdir):
    """A process summarizing file after file must give each trace back when it is done: a
    reference cycle through the trace (a table pointing back at it) kept every trace's
    arrays until the cyclic GC ran, and a pool process grew by ~100 MB per 64 MB rank."""
    import gc
    import weakref

    path = next((sample_logdir / "ddp_gloo_2ranks").glob("*.pt.trace.json"))
    gc.collect()
    gc.disable()
    try:
        trace = tb_profiler.load(path, cache=False)
        trace.events.args(0), trace.memory_records.args(0) if len(trace.memory_records) else None
        summarize_trace(trace)
        alive = weakref.ref(trace)
        del trace
        assert alive() is None, gc.get_referrers(alive())
    finally:
        gc.enable()
