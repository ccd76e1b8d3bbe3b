"""The sample logdir: real torch 2.13 CPU traces with everything the analyses need."""
from __future__ import annotations

import json
import re

import pytest

from tb_profiler.io.discovery import discover

EXPECTED = {
    "cnn_dataloader_0workers": ["cnn_dataloader_0workers"],
    "cnn_dataloader_2workers": ["cnn_dataloader_2workers"],
    "transformer_memory_snapshot": ["transformer"],
    "ddp_gloo_2ranks": ["rank0", "rank1"],
}


@pytest.fixture(scope="module")
def docs(sample_traces):
    return {p: json.loads(p.read_bytes()) for p in sample_traces}


def test_runs_workers_spans(sample_logdir):
    d = discover(sample_logdir)
    assert d.skipped == []
    assert {r.name: list(r.workers) for r in d.runs} == EXPECTED
    for run in d.runs:
        for worker, spans in run.workers.items():
            assert [s.index for s in spans] == [1, 2], (run.name, worker)
            assert all(re.fullmatch(r"\d{19}", s.span) for s in spans)


def test_traces_are_small(sample_traces):
    assert len(sample_traces) == 10
    assert all(p.stat().st_size < 4_000_000 for p in sample_traces)


def test_every_trace_has_what_the_options_promise(docs):
    for path, doc in docs.items():
        events = doc["traceEvents"]
        cats = {e.get("cat") for e in events}
        steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
        assert len(steps) == 2, (path, steps)                                          # active=2
        assert any("Input Dims" in e.get("args", {}) for e in events), path              # record_shapes
        assert any(e.get("name") == "[memory]" and "Bytes" in e.get("args", {}) for e in events), path
        assert "python_function" in cats, path                                          # with_stack
        assert "cpu_op" in cats and doc.get("schemaVersion") and "baseTimeNanoseconds" in doc, path
        assert doc.get("record_shapes") and doc.get("profile_memory") and doc.get("with_stack"), path


def test_spans_are_consecutive_cycles(docs):
    """Span 1 holds steps 2-3, span 2 steps 6-7: schedule(wait=1, warmup=1, active=2, repeat=2)."""
    by_worker: dict[str, list[list[str]]] = {}
    for path in sorted(docs):
        worker = path.name.split(".")[0]
        by_worker.setdefault(worker, []).append(
            sorted(e["name"] for e in docs[path]["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")))
    for worker, spans in by_worker.items():
        assert spans == [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]], worker


def test_dataloader_variants(docs):
    for path, doc in docs.items():
        names = {e.get("name") for e in doc["traceEvents"]}
        if path.parent.name == "cnn_dataloader_0workers":
            assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in names
        elif path.parent.name == "cnn_dataloader_2workers":
            assert "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__" in names


def test_transformer_has_attention(docs):
    for path, doc in docs.items():
        if path.parent.name == "transformer_memory_snapshot":
            names = {e.get("name") for e in doc["traceEvents"]}
            assert "aten::scaled_dot_product_attention" in names and "aten::layer_norm" in names


def test_ddp_two_gloo_ranks(docs):
    ranks = {}
    for path, doc in docs.items():
        if path.parent.name != "ddp_gloo_2ranks":
            continue
        info = doc["distributedInfo"]
        assert info["backend"] == "gloo" and info["world_size"] == 2
        assert path.name.startswith(f"rank{info['rank']}.")
        ranks.setdefault(info["rank"], 0)
        ranks[info["rank"]] += 1
        names = [e.get("name") for e in doc["traceEvents"]]
        assert names.count("gloo:all_reduce") >= 2, path      # DDP's bucket + the logged loss
        assert "c10d::allreduce_" in names, path
    assert ranks == {0: 2, 1: 2}
