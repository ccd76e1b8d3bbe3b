"""torch.compile's kernels (issue 19): Inductor's launch ranges decoded (analysis.compiled),
joined to their device kernels, their FLOPs and bytes in the roofline (source "trace"), the
provenance artifacts (analysis.provenance), the compiled_kernels route and the CLI.

Two traces: tests/data/compiled/ (a GPU trace in Kineto's format following
triton_heuristics' get_profiler_kwargs/_pre_launch, every figure computed by hand in
tests/compiled_fixture.py's docstring) and a real torch.compile CPU trace recorded here
(Inductor emits C++ kernels: no launch ranges, but its compiled regions)."""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from werkzeug.test import Client

import compiled_fixture as fx
import tb_profiler
from datafiles import DATA
from tb_profiler import cli
from tb_profiler.analysis import provenance as prov
from tb_profiler.analysis.compiled import COMPILED_COLUMNS
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from app_client import get

FIXTURE_DIR = DATA / "compiled" / "run"
FIXTURE = FIXTURE_DIR / "worker0.1.pt.trace.json.gz"
P = "/data/plugin/pytorch_profiler/"
NAN = float("nan")

# name -> (calls, device_ns, flops, bytes, warps, stages, kwargs, hash); see compiled_fixture
WANT = {
    "triton_tem_fused_mm_1": (3, 64_000, 3 * 4_194_304, 3 * 229_376, 8, 3,
                              "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8", "7qgd3uv5xqn6"),
    "triton_poi_fused_add_relu_0": (2, 24_000, NAN, 2 * 12_300_000, 4, 1, "XBLOCK=1024", "abqz3kzbwqrk"),
    "triton kernel": (1, 5_000, NAN, NAN, 2, 1, "XBLOCK=1,R0_BLOCK=2048", "rdw6k2i4rs2w"),
    "triton_per_fused_softmax_2": (1, NAN, 1000, 4000, 4, 1, "XBLOCK=1", "sm3tmfz4hd5w"),
}


def same(a, b) -> bool:
    return (isinstance(a, float) and math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12)


@pytest.fixture(scope="module")
def trace():
    return tb_profiler.load(FIXTURE, cache=False)


@pytest.fixture(scope="module")
def cpu_compiled(tmp_path_factory):
    """A real torch.compile (inductor, mode default) CPU trace: a Linear+ReLU module run
    twice under the profiler after its compile."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    fn = torch.compile(model)
    x = torch.randn(4, 8)
    fn(x)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        for _ in range(2):
            fn(x)
    out = tmp_path_factory.mktemp("cpu_compiled") / "cpu" / "worker0.pt.trace.json"
    out.parent.mkdir()
    p.export_chrome_trace(str(out))
    torch._dynamo.reset()
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory, cpu_compiled):
    tmp = tmp_path_factory.mktemp("compiled_app")
    shutil.copytree(FIXTURE_DIR, tmp / "log" / "triton")
    shutil.copytree(cpu_compiled.parent, tmp / "log" / "cpu")
    state = ProfilerState(str(tmp / "log"), cache_dir=str(tmp / "cache"), reload_s=60, jobs=1)
    state.start()
    yield Client(ProfilerApp(state, standalone=True))
    state.stop()




def test_the_committed_fixture_is_the_generators_output():
    assert json.loads(gzip.decompress(FIXTURE.read_bytes())) == fx.compiled_trace()


def test_every_column_against_hand_computed_figures(trace):
    df = trace.compiled_kernels()
    assert list(df.columns) == COMPILED_COLUMNS
    assert df["name"].tolist() == list(WANT)  # most device time first, no device time last
    for _, r in df.iterrows():
        calls, ns, flops, nbytes, warps, stages, kwargs, khash = WANT[r["name"]]
        assert r["kernel_backend"] == "triton" and r["kernel_hash"] == khash, r["name"]
        assert r["calls"] == calls and r["num_warps"] == warps and r["num_stages"] == stages
        assert r["kernel_kwargs"] == kwargs
        assert same(r["device_ns"], ns) and same(r["flops"], flops) and same(r["bytes"], nbytes), r.to_dict()
        assert same(r["tflops"], flops / ns / 1e3) and same(r["tbps"], nbytes / ns / 1e3), r.to_dict()
    mm = df.set_index("name").loc["triton_tem_fused_mm_1"]
    assert mm["kernel_file"] == fx.MM_FILE and mm["tflops"] == pytest.approx(0.196608)
    assert mm["tbps"] == pytest.approx(0.010752) and mm["device_kernels"] == 3
    add = df.set_index("name").loc["triton_poi_fused_add_relu_0"]
    assert add["tbps"] == pytest.approx(1.025) and math.isnan(add["flops"]) and math.isnan(add["tflops"])
    # a range without kernel_name is named "triton kernel" and keeps no kernel_name
    assert pd.isna(df.set_index("name").loc["triton kernel", "kernel_name"])


def test_roofline_takes_inductors_flops_and_bytes_with_source_trace(trace):
    roof = trace.roofline()
    ops = roof["operators"].set_index("name")
    assert set(ops.index) == {"triton_tem_fused_mm_1", "triton_per_fused_softmax_2"}  # the two with kernel_flop
    mm = ops.loc["triton_tem_fused_mm_1"]
    assert mm["source"] == "trace" and mm["flops"] == 3 * 4_194_304 and mm["bytes"] == 3 * 229_376
    assert mm["device_ns"] == 64_000 and mm["dtype"] == "fp32"
    # not from shapes: the launch's Input Dims would say 2 * (64*128 + 128*256 + 64*256) * 4 bytes
    k = roof["kernels"].set_index("name").loc["triton_tem_fused_mm_1"]
    assert k["source"] == "trace" and k["flops"] == 3 * 4_194_304 and k["tflops"] == pytest.approx(0.196608)


def _record_fast(path, record_shapes: bool, kernels: dict) -> "tb_profiler.Trace":
    """torch 2.13's own export of _RecordFunctionFast ranges with get_profiler_kwargs'
    kwargs ({name: kwargs}, each opened 3 times), loaded."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as p:
        for _ in range(3):
            for name, kw in kernels.items():
                with torch._C._profiler._RecordFunctionFast(name, (x, 3), kw):
                    x + 1
    p.export_chrome_trace(str(path))
    return tb_profiler.load(path, cache=False)


KW = {"kernel_file": "/tmp/torchinductor_me/x/cx.py", "kernel_hash": "h1", "kernel_backend": "triton",
      "stream": 0, "num_warps": 4, "num_stages": 2, "kernel_kwargs": "XBLOCK=128",
      "kernel_name": "triton_poi_fused_add_0", "kernel_flop": 1024, "kernel_num_gb": 5e-05}


def test_real_record_function_fast_ranges_decode(tmp_path):
    quoted = {**KW, "kernel_file": '/tmp/a "q".py', "kernel_hash": "h2", "kernel_name": "triton_red_fused_1"}
    t = _record_fast(tmp_path / "rff.pt.trace.json", True, {"triton_poi_fused_add_0": KW,
                                                            "triton_red_fused_1": quoted})
    df = t.compiled_kernels().set_index("name")
    assert sorted(df.index) == ["triton_poi_fused_add_0", "triton_red_fused_1"]
    r = df.loc["triton_poi_fused_add_0"]
    assert (r["kernel_file"], r["kernel_hash"], r["calls"], r["kernel_kwargs"]) == (KW["kernel_file"], "h1", 3,
                                                                                    "XBLOCK=128")
    assert (r["num_warps"], r["num_stages"], r["flops"], r["bytes"]) == (4, 2, 3072, pytest.approx(150_000))
    assert math.isnan(r["device_ns"]) and math.isnan(r["tflops"])  # CPU only: no device kernel, no rate
    # torch writes a string holding a double quote as "None": missing, not a file named None
    assert df.loc["triton_red_fused_1", "kernel_file"] == "" and df.loc["triton_red_fused_1", "kernel_hash"] == "h2"


def test_without_record_shapes_torch_drops_the_args_and_the_range_still_counts(tmp_path):
    from tb_profiler.analysis.compiled import compiled_notes, compiled_regions

    t = _record_fast(tmp_path / "bare.pt.trace.json", False, {"triton_poi_fused_add_0": KW})
    df = t.compiled_kernels()
    assert df["name"].tolist() == ["triton_poi_fused_add_0"] and df["calls"].tolist() == [3]
    assert df[["kernel_backend", "num_warps", "flops", "bytes"]].isna().all(axis=None)
    notes = compiled_notes(t, df, compiled_regions(t))
    assert any("record_shapes=True" in n for n in notes)


def test_cpu_compiled_trace_has_regions_and_no_triton_kernels(cpu_compiled):
    from tb_profiler.analysis.compiled import compiled_regions

    t = tb_profiler.load(cpu_compiled, cache=False)
    df = t.compiled_kernels()
    assert df.empty and list(df.columns) == COMPILED_COLUMNS
    assert df["flops"].dtype == np.float64 and df["calls"].dtype == np.int64
    reg = compiled_regions(t)
    assert reg["regions"] == 2 and reg["compiled_functions"] == 2
    ops = reg["ops"].set_index("name")
    assert ops.loc["aten::addmm", "calls"] == 2 and ops.loc["CompiledFunction", "calls"] == 2


def test_route_on_the_cpu_trace_says_there_are_no_triton_kernels(client):
    doc = get(client, "compiled_kernels?run=cpu")
    assert doc["rows"] == [] and doc["total"] == 0
    assert doc["regions"]["regions"] == 2 and doc["regions"]["compiled_functions"] == 2
    assert "aten::addmm" in [o["name"] for o in doc["regions"]["ops"]]
    assert any(n.startswith("no Triton kernels in this trace: 2 Torch-Compiled Region ranges") for n in doc["notes"])


def test_route_on_the_triton_trace_with_provenance_beside_it(client, trace):
    doc = get(client, "compiled_kernels?run=triton")
    assert doc["total"] == 4 and [r["name"] for r in doc["rows"]] == list(WANT)
    assert set(COMPILED_COLUMNS) <= set(doc["rows"][0])
    by = {r["name"]: r for r in doc["rows"]}
    assert by["triton_poi_fused_add_relu_0"]["flops"] is None  # NaN is null, never 0
    assert by["triton_tem_fused_mm_1"]["bytes"] == 3 * 229_376
    add = by["triton_poi_fused_add_relu_0"]["provenance"]
    assert add["post_grad_nodes"] == ["add", "relu"] and add["pre_grad_nodes"] == ["add", "relu"]
    assert add["frames"] == [{"file": "/home/user/project/model.py", "line": 14, "func": "forward", "path": None}]
    assert by["triton_tem_fused_mm_1"]["provenance"]["pre_grad_nodes"] == ["matmul"]
    assert by["triton kernel"]["provenance"] is None
    assert sorted(doc["provenance_files"]) == ["inductor_provenance_tracking_kernel_stack_traces_0.json",
                                               "inductor_provenance_tracking_node_mappings_0.json"]
    assert get(client, "compiled_kernels?run=triton&x=1", expect=400)


def test_aoti_kernel_information_given_by_path_and_bad_files(tmp_path, monkeypatch):
    info = {"triton_poi_fused_add_relu_0:3": {"stack_traces": ['File "m.py", line 7, in f\n    y = x + 1'],
                                              "post_grad_nodes": ["add"], "pre_grad_nodes": ["add_1"]},
            "bad": "not a dict"}
    aoti = tmp_path / "aoti"
    aoti.mkdir()
    (aoti / "kernel_information.json").write_text(json.dumps({k: v for k, v in info.items() if k != "bad"}))
    files = prov.artifact_files(None, extra=str(aoti))
    found, used, notes = prov.parse_artifacts(files)
    assert used == ["kernel_information.json"] and notes == []
    assert found["triton_poi_fused_add_relu_0"] == {"post_grad_nodes": ["add"], "pre_grad_nodes": ["add_1"],
                                                    "stack_traces": [info["triton_poi_fused_add_relu_0:3"]
                                                                     ["stack_traces"][0]]}
    broken = tmp_path / "inductor_provenance_tracking_node_mappings_9.json"
    broken.write_text("{not json")
    shape = tmp_path / "kernel_information.json"
    shape.write_text(json.dumps({"k": "not a dict"}))  # a value that is neither a dict nor a list
    big = tmp_path / "inductor_provenance_tracking_kernel_stack_traces_1.json"
    big.write_text(json.dumps({"k": ["x" * 100]}))
    monkeypatch.setattr(prov, "MAX_BYTES", 64)
    _, used, notes = prov.parse_artifacts([str(broken), str(shape), str(big)])
    assert used == []
    assert notes[0].startswith("inductor_provenance_tracking_node_mappings_9.json: not valid JSON")
    assert notes[1] == "kernel_information.json: not an Inductor provenance artifact (unknown shape)"
    assert notes[2].startswith("inductor_provenance_tracking_kernel_stack_traces_1.json: larger than")


def test_artifacts_beside_the_trace_never_lead_out_of_its_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(prov.ENV_VAR, raising=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kernel_information.json").write_text("{}")
    run = tmp_path / "log" / "run"
    run.mkdir(parents=True)
    os.symlink(outside / "kernel_information.json", run / "kernel_information.json")
    (run / "inductor_provenance_tracking_node_mappings.json").write_text("{}")
    trace_path = str(run / "w.pt.trace.json")
    assert prov.artifact_files(trace_path) == [str(run / "inductor_provenance_tracking_node_mappings.json")]
    assert prov.artifact_files("s3://bucket/run/w.pt.trace.json") == []
    monkeypatch.setenv(prov.ENV_VAR, str(outside / "kernel_information.json"))  # named by the user: read
    assert prov.artifact_files(trace_path)[-1] == str(outside / "kernel_information.json")


def test_cli_compiled(capsys):
    assert cli.main(["compiled", str(FIXTURE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["traces"][0]
    assert [r["name"] for r in doc["rows"]] == list(WANT) and doc["rows"][0]["calls"] == 3
    assert cli.main(["compiled", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "compiled kernels (4, most device time first)" in out and "BLOCK_M=64,BLOCK_N=64" in out


def test_provenance_artifacts_are_not_listed_as_skipped_files(tmp_path):
    """They are read with the trace beside them: discovery lists neither them nor a run of them."""
    from tb_profiler.io.discovery import discover

    shutil.copytree(FIXTURE_DIR, tmp_path / "run")
    (tmp_path / "run" / "notes.json").write_text('{"a": 1}')  # any other JSON is still reported
    found = discover(str(tmp_path))
    assert [r.name for r in found.runs] == ["run"]
    assert [os.path.basename(s.path) for s in found.skipped] == ["notes.json"]
