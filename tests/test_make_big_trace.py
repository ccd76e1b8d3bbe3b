"""benchmarks/make_big_trace.py, the benchmarks' input: copies of a real trace stay a valid trace
whose analyses see K times the seed (same per-step numbers, fresh ids, consecutive steps), and
--synth-gpu gives a CPU trace launches, kernels and flows that link up. Small seeds only."""
from __future__ import annotations

import gzip
import json

import pytest
from datafiles import TENSORLIST_OPS, V100X4, benchmark_module

import tb_profiler

mbt = benchmark_module("make_big_trace")


def test_copies_multiply_the_seed_and_keep_its_step_numbers(tmp_path):
    out = tmp_path / "big.pt.trace.json"
    info = mbt.build(V100X4, 0, out, copies=4, quiet=True)
    assert info["copies"] == 4 and info["steps_per_copy"] == 1
    mbt.validate(out, V100X4, info)  # counts, links, unpaired flows: 4x the seed's
    seed, big = tb_profiler.load(V100X4, cache=False), tb_profiler.load(out, cache=False)
    assert list(big.steps["number"]) == [2, 3, 4, 5]
    assert big.category_counts(raw=True) == {k: (v if k == "Trace" else 4 * v)
                                             for k, v in seed.category_counts(raw=True).items()}
    one, four = seed.overview()["summary"], big.overview()["summary"]
    assert four["num_steps"] == 4 and four["average_ns"] == one["average_ns"]
    k1, k4 = seed.kernels("op"), big.kernels("op")
    assert k4["calls"].sum() == 4 * k1["calls"].sum() and len(k4) == len(k1)  # every kernel finds its op
    # the trace-level span covers every copy; the copies follow each other in time
    assert big.span[0] == seed.span[0] and big.span[1] >= seed.span[0] + 3 * info["period_us"] * 1000
    text = out.read_text()
    assert json.loads(text)["traceEvents"]  # plain JSON, nothing appended after it


def test_target_size_is_reached_with_at_most_one_copy_more_and_gzip_output(tmp_path):
    out = tmp_path / "big.json.gz"
    info = mbt.build(V100X4, mbt.parse_size("1M"), out, quiet=True)
    raw = gzip.decompress(out.read_bytes())
    assert len(raw) == info["json_bytes"] >= 1 << 20
    per_copy = len(mbt.read_text(V100X4))
    assert info["json_bytes"] < (1 << 20) + 2 * per_copy
    assert len(json.loads(raw)["traceEvents"]) == info["events"]


def test_synth_gpu_gives_a_cpu_trace_linked_kernels(tmp_path):
    out = tmp_path / "gpu.pt.trace.json"
    info = mbt.build(TENSORLIST_OPS, 0, out, synth=True, copies=2, quiet=True)
    assert info["synthetic_kernels_per_copy"] > 0
    mbt.validate(out, TENSORLIST_OPS, info)
    t = tb_profiler.load(out, cache=False)
    cats = t.category_counts()
    n = 2 * info["synthetic_kernels_per_copy"]
    assert cats["kernel"] == cats["cuda_runtime"] == n
    assert [d.name for d in t.devices] == ["NVIDIA H100 80GB HBM3"]
    kernels = t.kernels("op")
    assert kernels["calls"].sum() == n and kernels["op"].str.startswith("aten::").all()
    ops = t.operators("name")
    assert ops["device_self_ns"].sum() == kernels["total_ns"].sum() > 0


def test_sizes_and_bad_seeds(tmp_path):
    assert [mbt.parse_size(s) for s in ("123", "1K", "100M", "1.5G", "250MB", "1GiB")] == \
        [123, 1024, 100 << 20, 3 << 29, 250 << 20, 1 << 30]
    with pytest.raises(Exception):
        mbt.parse_size("lots")
    bad = tmp_path / "meta_only.json"
    bad.write_text('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}')
    with pytest.raises(ValueError, match="no events to copy"):
        mbt.build(bad, 1000, tmp_path / "out.json", quiet=True)
    assert not (tmp_path / "out.json").exists()
