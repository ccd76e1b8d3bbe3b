"""Device work on every backend: one definition (trace.roles) read by every analysis and view.

Each backend's trace is handmade to Kineto's format (tests/kineto_fixtures.py says how and
why), with per-step figures computable by hand: the same numbers must come out of the
breakdown, the device summary, the Kernel view, the operators' device time, the timeline,
``has_device``, the plugin's Overview and ``tb-profiler info`` — on MTIA, XPU, PrivateUse1,
HPU, ROCm and the CUPTI range profiler as on CUDA.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import tb_profiler
from kineto_fixtures import BACKENDS, COMPUTE_US, EXPECTED_STEP_NS, STEP_US, STEPS, device_trace, write_trace
from tb_profiler.analysis.breakdown import average
from tb_profiler.analysis.gpu import device_summary
from tb_profiler.plugin import timeline
from tb_profiler.plugin.views import has_device, kernel_tc, overview, views
from tb_profiler.trace.roles import Role

ALL = list(BACKENDS)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("backends")
    return {name: tb_profiler.load(write_trace(folder / f"{name.replace(' ', '_')}.pt.trace.json.gz",
                                               device_trace(name)), cache=False)
            for name in ALL}


def _expected(name: str) -> dict:
    if BACKENDS[name].runtime_cat is not None:
        return EXPECTED_STEP_NS
    # No launches and no copies recorded: aten::mm's CPU time is no longer hidden by a launch.
    return {**EXPECTED_STEP_NS, "memcpy": 0, "runtime": 0, "cpu_exec": 100_000, "other": 350_000}


@pytest.mark.parametrize("name", ALL)
def test_roles_find_the_device_work(traces, name):
    t = traces[name]
    counts = t.role_counts
    assert counts[Role.COMPUTE] == STEPS
    assert counts[Role.MEMCPY] == (STEPS if BACKENDS[name].copy_cat else 0)
    assert counts[Role.RUNTIME] == (2 * STEPS if BACKENDS[name].runtime_cat else 0)
    assert t.has_device_work and has_device(t)
    assert t.device_kinds[:1] == (BACKENDS[name].name,)
    assert t.device_word == BACKENDS[name].word


@pytest.mark.parametrize("name", ALL)
def test_breakdown_counts_the_backends_device_work(traces, name):
    avg = average(traces[name])
    assert {k: avg[k] for k in EXPECTED_STEP_NS} == _expected(name)
    assert avg["total"] == STEP_US * 1000


@pytest.mark.parametrize("name", ALL)
def test_device_summary_and_utilization(traces, name):
    t = traces[name]
    dev = device_summary(t)
    assert len(dev) == 1
    row = dev.iloc[0]
    assert row["device"] == 0 and row["kernels"] == STEPS
    assert row["kernel_ns"] == STEPS * COMPUTE_US * 1000
    assert row["utilization_pct"] == pytest.approx(100.0 * COMPUTE_US / STEP_US)
    assert row["word"] == BACKENDS[name].word
    assert row["name"] == BACKENDS[name].device_name


@pytest.mark.parametrize("name", ALL)
def test_kernel_view_and_operators_device_time(traces, name):
    t = traces[name]
    k = t.kernels("name")
    assert list(k["name"]) == [BACKENDS[name].kernel]
    assert int(k["calls"].iloc[0]) == STEPS and int(k["total_ns"].iloc[0]) == STEPS * COMPUTE_US * 1000
    ops = t.operators("name").set_index("name")
    if BACKENDS[name].runtime_cat is not None:  # device time reaches the op through its launch
        assert int(ops.loc["aten::mm", "device_total_ns"]) == STEPS * COMPUTE_US * 1000
        assert int(ops.loc["aten::copy_", "device_total_ns"]) == STEPS * 50_000
    assert "Kernel" in views([t], 1)


@pytest.mark.parametrize("name", ALL)
def test_overview_says_the_device_type(traces, name):
    doc = overview(traces[name], 1)
    env = {e["title"]: e["value"] for e in doc["environments"]}
    assert env["Device Type"] == BACKENDS[name].word
    assert doc["device_word"] == BACKENDS[name].word
    assert not any("CPU-only" in n for n in doc["notes"])
    assert doc["summary"]["utilization_pct"] == {"0": pytest.approx(55.0)}


@pytest.mark.parametrize("name", ALL)
def test_timeline_tracks_and_utilization_counter(traces, name):
    t = traces[name]
    tracks = timeline.timeline_index(t).tracks
    device = [tr for tr in tracks if tr["kind"] == "device"]
    assert len(device) == 1 and device[0]["pid"] == "0"
    assert device[0]["process"] == f"{BACKENDS[name].word} 0"  # never "python3 (0)"
    a, b = t.span
    util = timeline.utilization(t, a, b, 10)
    assert len(util) == 1 and util[0]["name"] == f"{BACKENDS[name].word} 0 utilization"
    busy = np.asarray(util[0]["values"]) * (b - a) / 10
    assert busy.sum() == pytest.approx(STEPS * COMPUTE_US * 1000, rel=1e-9)


def test_rocm_matrix_cores(traces):
    """hipBLASLt/Tensile GEMMs on MFMA (``_MI16x16x16``) count, and AMD says "Matrix cores"."""
    t = traces["ROCm"]
    assert bool(t.kernels("name")["tensor_cores"].iloc[0])
    assert device_summary(t)["tensor_core_pct"].iloc[0] == pytest.approx(100.0)
    assert t.matrix_unit == "Matrix cores"
    assert traces["CUDA"].matrix_unit == "Tensor cores"
    tc = kernel_tc(t)
    assert tc["unit"] == "Matrix cores" and tc["rows"][0]["name"] == "Using Matrix cores"
    assert overview(t, 1)["matrix_unit"] == "Matrix cores"


@pytest.mark.parametrize("name", ["MTIA", "XPU", "PrivateUse1", "HPU"])
def test_no_tensor_core_figure_where_kernel_names_do_not_tell(traces, name):
    """The tensor-core name lists are NVIDIA's and AMD's: on other backends the figure is
    unknown (null, no column, no pie), never a false 0 %."""
    t = traces[name]
    assert t.matrix_unit is None
    assert np.isnan(device_summary(t)["tensor_core_pct"].iloc[0])
    tc = kernel_tc(t)
    assert tc["unit"] is None and tc["using_tc_pct"] is None and tc["rows"] == []
    assert overview(t, 1)["matrix_unit"] is None
    recs = [r["text"] for r in overview(t, 1)["recommendations"]]
    assert not any("CUDA graphs" in r for r in recs), recs


@pytest.mark.parametrize("name", ["MTIA", "CUPTI range", "XPU"])
def test_cli_info_says_what_the_device_did(traces, name, capsys):
    from tb_profiler.cli import main

    path = traces[name].source
    assert main(["info", path, "--json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device_work"] == {"compute": STEPS, "memcpy": STEPS if BACKENDS[name].copy_cat else 0, "memset": 0}
    assert doc["device_kinds"][0] == BACKENDS[name].name
    assert main(["info", path, "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "CPU only" not in text
    assert f"{STEPS} compute" in text


def test_cpu_only_trace_says_cpu(tmp_path):
    doc = device_trace("CUDA")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation", None)]
    doc.pop("deviceProperties")
    t = tb_profiler.load(write_trace(tmp_path / "cpu.pt.trace.json", doc), cache=False)
    assert not t.has_device_work and t.device_kinds == ()
    env = {e["title"]: e["value"] for e in overview(t, 1)["environments"]}
    assert env["Device Type"] == "CPU"
    assert "Kernel" not in views([t], 1)
