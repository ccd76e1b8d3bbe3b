"""Operator, kernel, stack, tensor-core and key_averages analyses.

Handmade traces carry numbers worked out by hand in the comments (times in the JSON
are microseconds, results are ns); the V100 numbers were produced by the old
torch-tb-profiler 0.4.3 (benchmarks/compare_old_plugin_tables.py prints them); the
key_averages table is checked against torch's own for a profile run in the test.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from datafiles import V100_W4_TRACE

from tb_profiler.analysis.kernels import kernels
from tb_profiler.analysis.keyavg import key_averages, sort_key, table
from tb_profiler.analysis.operators import call_tree, operator_stacks, operators
from tb_profiler.analysis.stacks import frames_of, op_stacks, parse_frame, stack_frames
from tb_profiler.analysis.tensor_cores import tc_eligible, uses_tensor_cores
from tb_profiler.trace import load

ROOT = Path(__file__).resolve().parent.parent


def _op(name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _rt(ts, dur, corr, name="cudaLaunchKernel"):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def _kernel(name, ts, dur, corr, cat="kernel", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "device": 0, "stream": 7, **args}}


def _pyf(name, ts, dur, pid_=1, tid=1):
    return {"ph": "X", "cat": "python_function", "name": name, "pid": pid_, "tid": tid, "ts": ts, "dur": dur,
            "args": {}}


def _load(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return load(str(path), cache=False)


GEMM = "volta_h884gemm_64x64_ldg8_nn"
ELEM = "elementwise_kernel"


@pytest.fixture
def gpu_trace(tmp_path):
    """aten::linear [0,100) holds aten::addmm [10,70) (two launches: a tensor-core gemm of
    50 us and an elementwise kernel of 20 us) and a cudaMemcpyAsync [80,85) (8 us memcpy);
    a second aten::addmm [200,230), other shapes, launches one 60 us elementwise kernel;
    an orphan kernel (no runtime call) runs 10 us."""
    return _load(tmp_path, [
        _op("aten::linear", 0, 100, **{"Input Dims": [[4, 8], [16, 8], [16]]}),
        _op("aten::addmm", 10, 60, **{"Input Dims": [[16], [4, 8], [8, 16], [], []]}),
        _rt(20, 10, 100), _rt(40, 10, 101), _rt(80, 5, 102, "cudaMemcpyAsync"),
        _op("aten::addmm", 200, 30, **{"Input Dims": [[8], [2, 4], [4, 8], [], []]}),
        _rt(210, 5, 103),
        _kernel(GEMM, 30, 50, 100, grid=[1, 1, 1], block=[128, 1, 1], **{"blocks per SM": 1.0,
                "est. achieved occupancy %": 25, "registers per thread": 32, "shared memory": 0}),
        _kernel(ELEM, 90, 20, 101, grid=[1, 1, 1], block=[128, 1, 1], **{"blocks per SM": 2.0,
                "est. achieved occupancy %": 50, "registers per thread": 16}),
        _kernel("Memcpy HtoD (Pageable -> Device)", 100, 8, 102, cat="gpu_memcpy"),
        _kernel(ELEM, 220, 60, 103, grid=[2, 1, 1], block=[128, 1, 1], **{"blocks per SM": 4.0,
                "registers per thread": 16}),
        _kernel("orphan_kernel", 300, 10, 999),
    ])


def test_host_and_device_self_total_of_an_op_with_a_child_op_and_kernels(gpu_trace):
    df = operators(gpu_trace).set_index("name")
    # addmm #1: 60 - 10 - 10 (its two launches) = 40 self; #2: 30 - 5 = 25 -> 65 self, 90 total.
    # Device: #1 launched 50 + 20, #2 launched 60 -> 130 self = total (no child ops).
    # Tensor cores: 50 of 130 ns -> 38.46 %.
    a = df.loc["aten::addmm"]
    assert (a.calls, a.host_self_ns, a.host_total_ns) == (2, 65_000, 90_000)
    assert (a.device_self_ns, a.device_total_ns) == (130_000, 130_000)
    assert a.tc_eligible and a.tc_self_pct == pytest.approx(100 * 50 / 130)
    # linear: 100 - 60 (addmm #1) - 5 (memcpy call) = 35 self; it launched the 8 us memcpy
    # itself (device self 8) and addmm #1's 70 below it (device total 78, 50 on tensor cores).
    lin = df.loc["aten::linear"]
    assert (lin.calls, lin.host_self_ns, lin.host_total_ns) == (1, 35_000, 100_000)
    assert (lin.device_self_ns, lin.device_total_ns) == (8_000, 78_000)
    assert lin.tc_self_pct == 0 and lin.tc_total_pct == pytest.approx(100 * 50 / 78)
    assert list(df.index) == ["aten::addmm", "aten::linear"]  # by device self time


def test_input_shape_grouping(gpu_trace):
    df = operators(gpu_trace, "input_shape")
    rows = {(r.name, r.input_shape): r for r in df.itertuples()}
    first = rows[("aten::addmm", "[[16], [4, 8], [8, 16], [], []]")]
    second = rows[("aten::addmm", "[[8], [2, 4], [4, 8], [], []]")]
    assert (first.calls, first.host_self_ns, first.device_self_ns) == (1, 40_000, 70_000)
    assert (second.calls, second.host_self_ns, second.device_self_ns) == (1, 25_000, 60_000)
    assert rows[("aten::linear", "[[4, 8], [16, 8], [16]]")].calls == 1


def test_kernels_by_name_and_by_op(gpu_trace):
    k = kernels(gpu_trace).set_index("name")
    e = k.loc[ELEM]
    # 20 + 60 us; blocks per SM weighted by duration (2*20 + 4*60) / 80 = 3.5; occupancy
    # (50*20 + 0*60) / 80 = 12.5 (a missing value counts as 0, as the old plugin).
    assert (e.calls, e.total_ns, e.mean_ns, e.max_ns, e.min_ns) == (2, 80_000, 40_000, 60_000, 20_000)
    assert e.blocks_per_sm == pytest.approx(3.5) and e.occupancy == pytest.approx(12.5)
    assert k.loc[GEMM].tensor_cores and not e.tensor_cores
    assert set(k.index) == {ELEM, GEMM, "orphan_kernel"}  # memcpy is not a kernel
    by_op = kernels(gpu_trace, "op")
    rows = {(r.name, r.op, r.grid): r for r in by_op.itertuples()}
    one = rows[(ELEM, "aten::addmm", "[1, 1, 1]")]
    assert (one.calls, one.total_ns, one.registers, one.shared_memory, one.block) == (1, 20_000, 16, 0, "[128, 1, 1]")
    assert rows[(ELEM, "aten::addmm", "[2, 1, 1]")].total_ns == 60_000
    assert rows[(GEMM, "aten::addmm", "[1, 1, 1]")].op_tc_eligible
    orphan = rows[("orphan_kernel", None, None)]  # launched outside the trace: no op, no grid
    assert orphan.calls == 1 and orphan.registers == 0


def test_same_name_only_child_is_folded_into_its_parent(tmp_path):
    # aten::add_ [0,50) holds only aten::add_ [10,40), which holds aten::empty [12,17):
    # torch and the old plugin count one add_ call of 50, self 50 - 5 = 45.
    # aten::div [100,130) holds aten::div [105,115) and aten::empty [120,122): two children,
    # no folding: div calls 2, self (30 - 10 - 2) + 10 = 28.
    t = _load(tmp_path, [_op("aten::add_", 0, 50), _op("aten::add_", 10, 30), _op("aten::empty", 12, 5),
                         _op("aten::div", 100, 30), _op("aten::div", 105, 10), _op("aten::empty", 120, 2)])
    df = operators(t).set_index("name")
    assert (df.loc["aten::add_"].calls, df.loc["aten::add_"].host_self_ns, df.loc["aten::add_"].host_total_ns) \
        == (1, 45_000, 50_000)
    assert (df.loc["aten::div"].calls, df.loc["aten::div"].host_self_ns) == (2, 28_000)
    assert df.loc["aten::empty"].calls == 2


def test_partly_overlapping_ops_are_kept(tmp_path):
    # aten::a [0,50) and aten::b [40,80) overlap only partly on one thread (clock skew,
    # a lost end): neither is the other's child. The old plugin drops aten::b; both are
    # calls here, each with its full duration as self time.
    t = _load(tmp_path, [_op("aten::a", 0, 50), _op("aten::b", 40, 40), _op("aten::c", 60, 10)])
    df = operators(t).set_index("name")
    assert df.calls.to_dict() == {"aten::a": 1, "aten::b": 1, "aten::c": 1}
    # aten::c [60,70) lies inside aten::b only: b's self is 40 - 10
    assert (df.loc["aten::a"].host_self_ns, df.loc["aten::b"].host_self_ns) == (50_000, 30_000)


def test_python_function_stack_chain(tmp_path):
    # train.py main > model.py forward > <built-in addmm> > aten::addmm (twice, same stack);
    # train.py main > model.py(30) other > aten::addmm (another stack).
    t = _load(tmp_path, [
        _pyf("train.py(10): main", 0, 200), _pyf("model.py(20): forward", 5, 90),
        _pyf("<built-in method addmm of type object at 0x7f>", 10, 50),
        _op("aten::addmm", 12, 20), _op("aten::addmm", 35, 20),
        _pyf("model.py(30): other", 100, 50), _op("aten::addmm", 110, 10), _op("aten::mm", 150, 5),
    ])
    st = operator_stacks(t, "aten::addmm")
    frames = {tuple((f["file"], f["line"], f["func"]) for f in r.frames): r.calls for r in st.itertuples()}
    assert frames == {(("model.py", 20, "forward"), ("train.py", 10, "main")): 2,
                      (("model.py", 30, "other"), ("train.py", 10, "main")): 1}
    by_stack = operators(t, "stack")
    assert sorted(by_stack[by_stack.name == "aten::addmm"].calls) == [1, 2]
    mm = by_stack[by_stack.name == "aten::mm"].iloc[0]
    assert stack_frames(t, mm.stack_id) == [{"file": "train.py", "line": 10, "func": "main"}]


def test_old_style_call_stack_args(tmp_path):
    stack = "model.py(20): forward;/usr/lib/site-packages/torch/module.py(1051): _call_impl;train.py(10): <module>"
    t = _load(tmp_path, [_op("aten::conv2d", 0, 10, **{"Call stack": stack}),
                         _op("aten::conv2d", 20, 10, **{"Call stack": stack}), _op("aten::conv2d", 40, 10)])
    st = operator_stacks(t, "aten::conv2d")
    assert len(st) == 1 and st.calls[0] == 2  # the call without a stack is left out
    assert st.frames[0] == [{"file": "model.py", "line": 20, "func": "forward"},
                            {"file": "/usr/lib/site-packages/torch/module.py", "line": 1051, "func": "_call_impl"},
                            {"file": "train.py", "line": 10, "func": "<module>"}]
    assert frames_of(stack) == st.frames[0]
    assert parse_frame("<built-in method conv2d>") == {"file": None, "line": None, "func": "<built-in method conv2d>"}
    assert parse_frame("<frozen os>(674): __getitem__") == {"file": "<frozen os>", "line": 674, "func": "__getitem__"}
    assert frames_of(None) == [] and frames_of("") == []


def test_tensor_core_names():
    assert tc_eligible(["aten::mm", "aten::addmm", "MmBackward0", "aten::_scaled_dot_product_flash_attention",
                        "aten::cudnn_convolution", "aten::add_", "aten::relu", ""]).tolist() == \
        [True, True, True, True, True, False, False, False]
    names = ["volta_h884gemm_64x64", "ampere_fp16_s16816gemm_fp16_128x128", "sm80_xmma_gemm_bf16bf16_bf16f32",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_wgmma",
             "cutlass_80_tensorop_bf16_s16816gemm_relu", "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT",
             "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_ffma_aligna4",
             "void at::native::vectorized_elementwise_kernel<4>", "cutlass_80_simt_sgemm_128x128_8x4_nn_align1", None]
    assert uses_tensor_cores(names).tolist() == [True] * 6 + [False] * 4
    assert uses_tensor_cores([]).tolist() == []


def test_missing_pieces_give_empty_or_partial_results(tmp_path):
    cpu = _load(tmp_path, [_op("aten::mm", 0, 10)], "cpu.json")
    assert kernels(cpu).empty and kernels(cpu, "op").empty and list(kernels(cpu).columns)[:2] == ["name", "calls"]
    df = operators(cpu)
    assert (df.calls.tolist(), df.device_total_ns.tolist(), df.tc_self_pct.tolist()) == ([1], [0], [0.0])
    assert operator_stacks(cpu, "aten::mm").empty and operator_stacks(cpu, "nope").empty
    empty = _load(tmp_path, [], "empty.json")
    for group_by in ("name", "input_shape", "stack"):
        assert operators(empty, group_by).empty
    assert kernels(empty).empty and table(empty) == "" and key_averages(empty).empty
    # a kernel whose launch fell outside the window: in the kernel table, in no op's time
    lost = _load(tmp_path, [_op("aten::mm", 0, 10), _kernel("k", 20, 5, 42)], "lost.json")
    assert kernels(lost).calls.tolist() == [1] and operators(lost).device_total_ns.tolist() == [0]
    with pytest.raises(ValueError, match="group_by"):
        operators(cpu, "module")
    with pytest.raises(ValueError, match="group_by"):
        kernels(cpu, "stream")


def test_sort_by_is_validated():
    assert sort_key("self_cuda_time_total") == "self_device_time_total"
    assert sort_key("self_cuda_memory_usage") == "self_device_memory_usage"
    assert sort_key("xpu_time") == "device_time" and sort_key("count") == "count" and sort_key(None) is None
    with pytest.raises(ValueError, match="self_cpu_time_total") as err:
        sort_key("flops")
    assert "cuda_time_total" in str(err.value)


def test_key_averages_table_has_device_columns(gpu_trace):
    text = table(gpu_trace, sort_by="self_cuda_time_total", row_limit=20)
    lines = text.splitlines()
    headers = re.split(r"\s{2,}", lines[1].strip())
    assert headers == ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA",
                       "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls"]
    # device rows: 50 + 20 + 8 + 60 + 10 = 148 us in all
    assert lines[-1] == "Self CUDA time total: 148.000us"
    ka = key_averages(gpu_trace).set_index(["name", "device"])
    assert ka.loc[("aten::addmm", False)].self_device_time_total == pytest.approx(130.0)
    assert ka.loc[("aten::linear", False)].device_time_total == pytest.approx(78.0)
    assert ka.loc[(ELEM, True)]["count"] == 2


def _parse_table(text: str) -> list[list[str]]:
    """Rows of a key_averages text table, cells split on runs of 2+ spaces."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("-")]
    return [re.split(r"\s{2,}", ln.strip()) for ln in lines[1:-1]]


def _us(cell: str) -> float:
    value, unit = re.fullmatch(r"(-?[\d.]+)(us|ms|s)", cell).groups()
    return float(value) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]


def test_key_averages_table_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(4, 8)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            with torch.profiler.record_function("my_block"):
                y = m(x).sum()
            y.backward()
            opt.step()
            opt.zero_grad()
    path = tmp_path / "prof.json"
    prof.export_chrome_trace(str(path))
    trace = load(str(path), cache=False)
    for by_shape in (False, True):
        theirs = {(e.key, str(e.input_shapes) if by_shape else ""): e for e in prof.key_averages(by_shape)}
        ours = key_averages(trace, by_shape)
        assert len(ours) == len(theirs)
        for r in ours.itertuples():
            e = theirs[(r.name, r.input_shapes if by_shape else "")]
            assert r.count == e.count, r.name
            for col in ("self_cpu_time_total", "cpu_time_total"):
                assert getattr(r, col) == pytest.approx(getattr(e, col), rel=0.01, abs=0.05), (r.name, col)
        for sort_by, key_col in (("self_cpu_time_total", 2), ("cpu_time_total", 4), ("count", 6)):
            mine = table(trace, sort_by=sort_by, row_limit=1000, group_by_input_shape=by_shape)
            torch_text = prof.key_averages(group_by_input_shape=by_shape).table(sort_by=sort_by, row_limit=1000)
            assert mine.splitlines()[:3] == torch_text.splitlines()[:3]  # same headers, widths
            a, b = _parse_table(mine), _parse_table(torch_text)
            # the same rows: names, calls (and shapes) exact; times within 1%
            assert sorted((r[0], r[6:]) for r in a) == sorted((r[0], r[6:]) for r in b)
            theirs_by_key = {(r[0], tuple(r[6:])): r for r in b}
            for ra in a:
                rb = theirs_by_key[(ra[0], tuple(ra[6:]))]
                for i in (2, 4, 5):  # Self CPU, CPU total, CPU time avg
                    assert _us(ra[i]) == pytest.approx(_us(rb[i]), rel=0.01, abs=0.01), (ra[0], i)
            # the same order: at every position the sort keys agree (rows whose keys differ by
            # less than the 1% tolerance are ties and may come in either order)
            key = (lambda r: float(r[key_col])) if sort_by == "count" else (lambda r: _us(r[key_col]))
            for ra, rb in zip(a, b):
                assert key(ra) == pytest.approx(key(rb), rel=0.01, abs=0.01), (sort_by, ra[0], rb[0])
            assert mine.splitlines()[-1] == torch_text.splitlines()[-1]  # Self CPU time total


def test_sample_traces_stacks_point_at_sample_sources(sample_traces):
    cnn = next(p for p in sample_traces if "cnn_dataloader_0workers" in p.name)
    t = load(str(cnn), cache=False)
    st = operator_stacks(t, "aten::conv2d")
    assert len(st) >= 1
    frames = [f for fr in st.frames for f in fr if f["file"] and f["file"].endswith("cnn.py")]
    assert frames, st.frames[0]
    src = (ROOT / "samples" / "cnn.py").read_text().splitlines()
    for f in frames:
        # the frame's line lies inside the function it names
        defs = [i + 1 for i, line in enumerate(src[:f["line"]]) if re.match(rf"\s*def {re.escape(f['func'])}\(", line)]
        assert defs and 0 < f["line"] <= len(src), f
    for path in sample_traces:
        t = load(str(path), cache=False)
        df = operators(t)
        assert len(df) and (df.host_self_ns <= df.host_total_ns).all() and (df.device_total_ns == 0).all()
        assert (df.host_self_ns >= 0).all()
        sid, _ = op_stacks(t)
        assert (sid[call_tree(t).operator] >= 0).mean() > 0.9  # with_stack=True: nearly every op has one


@pytest.fixture(scope="module")
def v100():
    return load(str(V100_W4_TRACE), cache=False)


def test_v100_operators_match_the_old_plugin(v100):
    # Values (us) from torch-tb-profiler 0.4.3 on the same file.
    df = operators(v100).set_index("name")
    expect = {"aten::cudnn_convolution_backward_weight": (318, 30672, 60712, 141300, 141300),
              "aten::add_": (2994, 62385, 97540, 24052, 24052),
              "aten::div": (6, 343, 469, 145, 145),  # 12 events, 6 folded into a same-name parent
              "aten::empty": (4212, 82024, 82024, 0, 0)}
    for name, (calls, hs, ht, ds, dt) in expect.items():
        r = df.loc[name]
        assert (r.calls, r.host_self_ns, r.host_total_ns, r.device_self_ns, r.device_total_ns) == \
            (calls, hs * 1000, ht * 1000, ds * 1000, dt * 1000), name
    assert df.loc["aten::addmm"].tc_eligible and not df.loc["aten::add_"].tc_eligible
    by_shape = operators(v100, "input_shape").set_index(["name", "input_shape"])
    r = by_shape.loc[("aten::copy_", "[[32, 3, 224, 224], [32, 3, 224, 224], []]")]
    assert (r.calls, r.host_self_ns, r.host_total_ns, r.device_self_ns) == (6, 133_000, 56_644_000, 18_953_000)
    st = operator_stacks(v100, "aten::copy_")
    one = [r for r in st.itertuples() if r.frames == [{"file": "resnet50_profiler_api.py", "line": 44,
                                                        "func": "<module>"}]]
    assert len(one) == 1 and (one[0].calls, one[0].host_self_ns, one[0].device_self_ns) == (12, 230_000, 18_959_000)


def test_v100_kernels_match_the_old_plugin(v100):
    k = kernels(v100)
    r = k[k.name.str.startswith("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>")].iloc[0]
    assert (r.calls, r.total_ns, r.max_ns, r.min_ns) == (180, 86_855_000, 1_023_000, 323_000)
    assert r.mean_ns == pytest.approx(482_527.78, abs=0.01)
    assert r.blocks_per_sm == pytest.approx(45.3306315122906) and r.occupancy == pytest.approx(30.041149041505957)
    by_op = kernels(v100, "op")
    r = by_op[by_op.name.str.startswith("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>")
              & (by_op.op == "aten::cudnn_batch_norm_backward") & (by_op.grid == "[256, 1, 1]")].iloc[0]
    assert (r.block, r.registers, r.shared_memory) == ("[512, 1, 1]", 32, 400)
    assert (r.calls, r.total_ns, r.max_ns, r.min_ns) == (96, 20_239_000, 681_000, 45_000)
    assert (r.blocks_per_sm, r.occupancy) == (pytest.approx(3.2), pytest.approx(80.0))
    assert not k.tensor_cores.any()  # FP32 ResNet50 on cuDNN: no tensor-core kernels


def test_v100_table_adds_up(v100):
    text = table(v100, sort_by="self_cuda_time_total", row_limit=5)
    assert "Self CUDA %" in text and "Self CUDA time total:" in text
    ka = key_averages(v100)
    dev_ns = np.where(np.isin(v100.events["kind"], [5, 6, 7]), v100.events["dur"], 0).sum()
    assert ka[ka.device].self_device_time_total.sum() == pytest.approx(dev_ns / 1e3)
    # every device event with a launching op is in exactly one host row's self device time
    assert ka[~ka.device].self_device_time_total.sum() <= dev_ns / 1e3 + 1e-6
