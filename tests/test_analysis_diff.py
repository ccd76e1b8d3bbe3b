"""Diff of two traces or runs: a handmade pair worked out by hand, a trace against itself,
the two CPU sample runs (DataLoader workers 0 vs 2), and the two V100 spans."""
from __future__ import annotations

import json

import numpy as np
import pytest
from datafiles import V100_TRACE, V100_TRACE_B

import tb_profiler
from tb_profiler.analysis.diff import diff
from tb_profiler.trace import Kind

US = 1000


def _ev(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mm_with_kernel(ts, dur, corr, kts, kdur):
    """aten::mm on the host launching kernel "k1" [kts, kts + kdur]."""
    return [_ev("cpu_op", "aten::mm", ts, dur), _ev("cuda_runtime", "cudaLaunchKernel", ts + 1, 2, correlation=corr),
            _ev("kernel", "k1", kts, kdur, pid=0, tid=7, device=0, stream=7, correlation=corr)]


def _load(tmp_path, name, events):
    path = tmp_path / f"{name}.1.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return tb_profiler.load(path, cache=False)


@pytest.fixture
def pair(tmp_path):
    # A: two steps of 100 µs; aten::mm [10,40] and [110,150], each launching a 5 µs k1;
    #    aten::relu [50,60] once.
    a = _load(tmp_path, "a", [_ev("user_annotation", "ProfilerStep#1", 0, 100),
                              _ev("user_annotation", "ProfilerStep#2", 100, 100),
                              *_mm_with_kernel(10, 30, 1, 20, 5), _ev("cpu_op", "aten::relu", 50, 10),
                              *_mm_with_kernel(110, 40, 2, 120, 5)])
    # B: one step of 120 µs; aten::mm [10,30] launching an 8 µs k1; aten::add [40,50].
    b = _load(tmp_path, "b", [_ev("user_annotation", "ProfilerStep#1", 0, 120),
                              *_mm_with_kernel(10, 20, 1, 20, 8), _ev("cpu_op", "aten::add", 40, 10)])
    return a, b


def test_handmade_per_step(pair):
    r = diff(*pair)
    assert r["summary"] == {"traces_a": 1, "traces_b": 1, "num_steps_a": 2, "num_steps_b": 1,
                            "step_time_avg_ns_a": 100 * US, "step_time_avg_ns_b": 120 * US,
                            "step_time_avg_ns_delta": 20 * US}
    ops = r["operators"]
    # sorted by |host total delta| + |device total delta| per step:
    #   mm: host 70/2 = 35 -> 20 (-15), device 10/2 = 5 -> 8 (+3): weight 18
    #   add (B only): host 0 -> 10: weight 10;  relu (A only): host 10/2 = 5 -> 0: weight 5
    assert ops["name"].tolist() == ["aten::mm", "aten::add", "aten::relu"]
    mm, add, relu = (ops.iloc[i] for i in range(3))
    assert (mm.side, mm.calls_a, mm.calls_b, mm.calls_delta) == ("both", 1.0, 1.0, 0.0)
    assert (mm.host_total_ns_a, mm.host_total_ns_b, mm.host_total_ns_delta) == (35 * US, 20 * US, -15 * US)
    assert (mm.device_total_ns_a, mm.device_total_ns_b, mm.device_total_ns_delta) == (5 * US, 8 * US, 3 * US)
    assert (add.side, add.calls_a, add.calls_b, add.host_total_ns_delta) == ("b", 0.0, 1.0, 10 * US)
    assert (relu.side, relu.calls_a, relu.calls_delta, relu.host_total_ns_delta) == ("a", 0.5, -0.5, -5 * US)
    k = r["kernels"]
    # k1: A 2 calls, 10 µs over 2 steps -> 1 call, 5 µs per step; B 1 call, 8 µs
    assert k[["name", "side", "calls_a", "calls_b", "total_ns_a", "total_ns_b", "total_ns_delta"]].values.tolist() \
        == [["k1", "both", 1.0, 1.0, 5 * US, 8 * US, 3 * US]]
    assert r["modules"].empty
    assert any("neither side has nn.Module" in n for n in r["notes"])


def test_lists_aggregate(pair):
    a, b = pair
    # A twice: every count and time doubles, and so does the number of steps
    r = diff([a, a], b)
    assert r["summary"]["num_steps_a"] == 4 and r["summary"]["traces_a"] == 2
    mm = r["operators"].set_index("name").loc["aten::mm"]
    assert (mm.calls_a, mm.host_total_ns_a) == (1.0, 35 * US)


def test_trace_against_itself(sample_logdir):
    run = tb_profiler.load_run(sample_logdir / "transformer_memory_snapshot", cache=False)
    t = run.trace()
    r = diff(t, t)
    for key in ("operators", "kernels", "modules"):
        deltas = r[key].filter(like="_delta")
        assert (deltas.to_numpy() == 0).all(), key
        assert (r[key]["side"] == "both").all()
    assert len(r["operators"]) > 10 and len(r["modules"]) > 0
    assert r["summary"]["step_time_avg_ns_delta"] == 0
    # a run's traces give the same (both of its spans on each side)
    both = diff(run.traces(span=1) + run.traces(span=2), [run.trace(span=2), run.trace(span=1)])
    assert (both["operators"].filter(like="_delta").to_numpy() == 0).all()


def test_dataloader_workers(sample_logdir):
    """workers=0 builds batches in the training process (the dataset's randn per image,
    collate's stack); with workers=2 the batch arrives from another process (set_ on
    shared memory)."""
    a = tb_profiler.load_run(sample_logdir / "cnn_dataloader_0workers", cache=False)
    b = tb_profiler.load_run(sample_logdir / "cnn_dataloader_2workers", cache=False)
    r = diff(a, b)
    ops = r["operators"].set_index("name")
    assert ops.loc["aten::randn", "side"] == "a"
    assert ops.loc["aten::randn", "calls_a"] == 8  # one image per sample, batch 8, per step
    assert ops.loc["aten::randn", "calls_delta"] == -8
    assert ops.loc["aten::stack", "side"] == "a"
    assert ops.loc["aten::set_", "side"] == "b"
    # the model itself is the same on both sides
    assert ops.loc["aten::convolution", "side"] == "both"
    assert ops.loc["aten::convolution", "calls_delta"] == 0
    assert (r["modules"]["side"] == "both").all()
    assert r["summary"]["num_steps_a"] == r["summary"]["num_steps_b"] == 2


def test_v100_spans():
    a, b = (tb_profiler.load(p, cache=False) for p in (V100_TRACE, V100_TRACE_B))
    r = diff(a, b)
    s = r["summary"]
    # steps 5-10 (span 1) and 16-21 (span 2): 1,065,553,000 and 929,468,000 ns over 6 steps each
    assert (s["num_steps_a"], s["num_steps_b"]) == (6, 6)
    assert s["step_time_avg_ns_a"] == pytest.approx(1_065_553_000 / 6)
    assert s["step_time_avg_ns_b"] == pytest.approx(929_468_000 / 6)
    assert s["step_time_avg_ns_delta"] == pytest.approx((929_468_000 - 1_065_553_000) / 6)
    ops = r["operators"].set_index("name")
    # the same model: every operator on both sides, same calls per step
    assert (ops["side"] == "both").all() and (ops["calls_delta"] == 0).all()
    assert ops.loc["aten::add_", "calls_a"] == 2994 / 6
    # aten::div: host total 35,158,000 ns -> 23,691,000 ns over 6 steps; same 144 µs of kernels
    div = ops.loc["aten::div"]
    assert div.host_total_ns_a == pytest.approx(35_158_000 / 6)
    assert div.host_total_ns_delta == pytest.approx((23_691_000 - 35_158_000) / 6)
    assert (div.device_total_ns_a, div.device_total_ns_delta) == (144_000 / 6, 0)
    conv = ops.loc["aten::cudnn_convolution"]
    assert conv.device_total_ns_delta == pytest.approx((126_500_000 - 126_619_000) / 6)
    # kernels: every kernel of each trace, per step (8772 kernels in each span)
    k = r["kernels"]
    for side, t in (("a", a), ("b", b)):
        ev = t.events
        is_k = ev["kind"] == Kind.KERNEL
        assert k[f"total_ns_{side}"].sum() == pytest.approx(ev["dur"][is_k].sum() / 6)
        assert k[f"calls_{side}"].sum() == pytest.approx(8772 / 6)
    assert (k["side"] == "both").all()
    assert r["modules"].empty


def test_empty_sides(pair):
    a, _ = pair
    r = diff([], a)
    assert r["summary"]["step_time_avg_ns_a"] is None and r["summary"]["step_time_avg_ns_delta"] is None
    assert "side A has no traces" in r["notes"]
    assert (r["operators"]["side"] == "b").all()
    r = diff([], [])
    assert r["operators"].empty and r["kernels"].empty
    assert list(r["kernels"].columns)[:2] == ["name", "side"]
    assert np.isnan(r["operators"].filter(like="_delta").to_numpy()).sum() == 0


# -- per step means inside the steps --------------------------------------------------------
def _py(name, ts, dur, pyid, parent, module=None):
    args = {"Python id": pyid, "Python parent id": parent}
    if module is not None:
        args["Python module id"] = module
    return _ev("python_function", name, ts, dur, **args)


def _net_call(ts, pyid, corr, kernel_durs):
    """nn.Module: Net_0 [ts, ts + 90) calling aten::mm [ts + 5 + 25 i, +20) per kernel, each
    launching (1 µs in) one "k1" that runs 4 µs after the launch for its duration."""
    out = [_py("nn.Module: Net_0", ts, 90, pyid, 1, module=0)]
    for i, kdur in enumerate(kernel_durs):
        t = ts + 5 + 25 * i
        out += [_ev("cpu_op", "aten::mm", t, 20),
                _ev("cuda_runtime", "cudaLaunchKernel", t + 1, 2, correlation=corr + i),
                _ev("kernel", "k1", t + 5, kdur, pid=0, tid=7, device=0, stream=7, correlation=corr + i)]
    return out


# Two steps of 100 µs, each one Net_0 call with three aten::mm, each launching a k1 of about
# 10 µs (ns apart: 10.001 .. 10.006 µs, 60,021 ns in all); after the last step, a Net_0 call
# with one aten::mm launching a 4.502 µs k1, outside every step.
# Per step: 3 calls of k1 (not 7 / 2 = 3.5), 30,010.5 ns of k1 (not 64,523 / 2 = 32,261.5:
# +7.5 %), 3 aten::mm with 60 µs host total, 1 Net_0 call of 90 µs host time.
OUTSIDE = [_py("train.py(1): <module>", 900, 600, 1, 0),
           _ev("user_annotation", "ProfilerStep#1", 1000, 100), _ev("user_annotation", "ProfilerStep#2", 1100, 100),
           *_net_call(1005, 2, 10, (10.001, 10.002, 10.003)), *_net_call(1105, 3, 20, (10.004, 10.005, 10.006)),
           *_net_call(1300, 4, 30, (4.502,))]


def test_per_step_counts_only_what_lies_inside_the_steps(tmp_path):
    t = _load(tmp_path, "outside", OUTSIDE)
    r = diff(t, t)
    assert r["summary"]["num_steps_a"] == 2
    k1 = r["kernels"].set_index("name").loc["k1"]
    assert k1.calls_a == 3                       # 3.5 when the kernel after the steps counts
    assert k1.total_ns_a == 60_021 / 2           # exact to the ns: 30,010.5, not 32,261.5
    mm = r["operators"].set_index("name").loc["aten::mm"]
    assert (mm.calls_a, mm.host_total_ns_a, mm.device_total_ns_a) == (3, 60 * US, 60_021 / 2)
    net = r["modules"].set_index("path").loc["Net_0"]
    assert (net.calls_a, net.host_total_ns_a, net.device_total_ns_a) == (1, 90 * US, 60_021 / 2)
    # the analyses themselves: everything by default, the steps only on request
    from tb_profiler.analysis.kernels import kernels
    from tb_profiler.analysis.modules import modules
    from tb_profiler.analysis.operators import operators
    assert kernels(t)["calls"].tolist() == [7] and kernels(t, steps_only=True)["calls"].tolist() == [6]
    assert operators(t)["calls"].tolist() == [7] and operators(t, steps_only=True)["calls"].tolist() == [6]
    assert modules(t)["calls"].tolist() == [3] and modules(t, steps_only=True)["calls"].tolist() == [2]


def test_a_trace_without_steps_counts_everything(tmp_path):
    """No ProfilerStep#N: the whole trace is one step, every call in it (the module call
    that starts before the first operator included)."""
    t = _load(tmp_path, "nosteps", [e for e in OUTSIDE if not e["name"].startswith("ProfilerStep")])
    r = diff(t, t)
    assert r["summary"]["num_steps_a"] == 1
    assert r["kernels"]["calls_a"].tolist() == [7]
    assert r["kernels"]["total_ns_a"].tolist() == [64_523]
    assert r["modules"].set_index("path").loc["Net_0", "calls_a"] == 3
