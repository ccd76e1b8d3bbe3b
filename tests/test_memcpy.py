"""Memory-copy bandwidth (issue 9, part 4): per copy, per direction and host memory kind,
and over time, exact; handmade Kineto-format traces and the real V100 trace."""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.memcpy import copy_direction, memcpy_bandwidth
from tb_profiler.trace.roles import Role

T0 = 1_000_000


def _copy(name, ts, dur, nbytes, corr, stream=7):
    args = {"device": 0, "stream": stream, "correlation": corr}
    if nbytes is not None:
        args["bytes"] = nbytes
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": 0, "tid": stream, "ts": T0 + ts, "dur": dur,
            "args": args}


def _call(name, ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": T0 + ts, "dur": 2,
            "args": {"correlation": corr}}


@pytest.fixture
def trace(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": T0, "dur": 10, "args": {}},
          _call("cudaMemcpyAsync", 1, 1), _copy("Memcpy HtoD (Pageable -> Device)", 10, 100, 1_000_000, 1),
          _call("cudaMemcpyAsync", 20, 2), _copy("Memcpy HtoD (Pinned -> Device)", 200, 50, 1_000_000, 2),
          _call("cudaMemcpyAsync", 30, 3), _copy("Memcpy DtoH (Device -> Pinned)", 300, 20, 400_000, 3, stream=9),
          _call("cudaMemcpyAsync", 40, 4), _copy("Memcpy PtoP (Device -> Device)", 400, 10, 300_000, 4),
          _call("cudaMemcpyAsync", 50, 5), _copy("Memcpy DtoD (Device -> Device)", 500, 10, None, 5)]
    return tb_profiler.load(write_trace(tmp_path / "c.pt.trace.json", {"traceEvents": ev}), cache=False)


def test_every_copy_with_its_bandwidth(trace):
    out = memcpy_bandwidth(trace, bins=6)
    c = out["copies"]
    assert c["direction"].tolist() == ["H2D", "H2D", "D2H", "P2P", "D2D"]
    assert c["src"].tolist() == ["Pageable", "Pinned", "Device", "Device", "Device"]
    assert c["bytes"].tolist() == [1_000_000, 1_000_000, 400_000, 300_000, -1]
    np.testing.assert_allclose(c["gbps"].to_numpy()[:4], [10.0, 20.0, 20.0, 30.0])  # bytes per ns
    assert np.isnan(c["gbps"].iloc[4]) and "no size" in out["notes"][0]
    assert c["stream"].tolist() == [7, 7, 9, 7, 7] and c["operator"].iloc[0] == "aten::copy_"
    d = {(r["direction"], r["src"]): r for r in out["directions"].to_dict("records")}
    assert list(out["directions"]["direction"]) == ["H2D", "H2D", "D2H", "P2P"]
    assert d[("H2D", "Pinned")]["gbps"] == 20.0 and d[("H2D", "Pageable")]["gbps"] == 10.0
    assert d[("H2D", "Pageable")]["copies"] == 1 and d[("P2P", "Device")]["bytes"] == 300_000


def test_over_time_spreads_each_copy_over_its_duration(trace):
    out = memcpy_bandwidth(trace, bins=5)
    edges = np.array(out["over_time"]["edges"])
    assert edges[0] == (T0 + 10) * 1000 and edges[-1] == (T0 + 510) * 1000  # first start to last end
    width = np.diff(edges)
    # every byte of a direction is in some bin, once
    for direction, total in (("H2D", 2_000_000), ("D2H", 400_000), ("P2P", 300_000)):
        assert float(np.sum(np.array(out["over_time"][direction]) * width)) == pytest.approx(total)
    # the first bin [10, 110) us holds the whole pageable copy [10, 110): 1 MB over 100 us
    assert out["over_time"]["H2D"][0] == pytest.approx(1_000_000 / 100_000)
    assert "D2D" not in out["over_time"]  # no size: no bandwidth


@pytest.mark.parametrize("name, want", [
    ("Memcpy HtoD (Pageable -> Device)", ("H2D", "Pageable", "Device")),
    ("Memcpy DtoH (Device -> Pinned)", ("D2H", "Device", "Pinned")),
    ("Memcpy DtoD (Device -> Device)", ("D2D", "Device", "Device")),
    ("Memcpy PtoP (Device -> Device)", ("P2P", "Device", "Device")),
    ("Memcpy HtoD", ("H2D", None, None)),
    ("CopyHostToDevice", ("H2D", None, None)),
    ("CopyDeviceToHost", ("D2H", None, None)),
    ("CopyDeviceToDevice", ("D2D", None, None)),
    ("zeCommandListAppendMemoryCopy", ("other", None, None)),
])
def test_directions_from_names(name, want):
    assert copy_direction(name) == want


def test_no_copies(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "cpu.pt.trace.json", {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 5, "args": {}}]}),
        cache=False)
    out = memcpy_bandwidth(t)
    assert out["copies"].empty and out["directions"].empty and out["notes"]


def test_v100_copies_agree_with_their_own_bandwidth_arg():
    t = tb_profiler.load(V100_TRACE)
    c = memcpy_bandwidth(t)["copies"]
    assert len(c) == 12 and set(c["direction"]) == {"H2D"} and set(c["src"]) == {"Pageable"}
    # Kineto's own "memory bandwidth (GB/s)" arg is bytes over the duration it measured in
    # exact ns, before writing dur in whole us: each copy's figure is that arg (issue 17). From
    # the rounded dur the big copies (~2 ms) would agree to 0.1 %, but the 256 B ones lasted
    # 1.248 us, written as 1 us: bytes / dur would read them 24.8 % fast.
    rows = np.flatnonzero(t.roles == Role.MEMCPY)
    np.testing.assert_array_equal(c["gbps"].to_numpy(), t.events["bandwidth"][rows])
    nbytes, dur, gbps = c["bytes"].to_numpy(), c["dur_ns"].to_numpy(), c["gbps"].to_numpy()
    big, small = nbytes > 1_000_000, nbytes == 256
    assert small.sum() == 6 and (dur[small] == 1000).all()
    np.testing.assert_allclose(gbps[big], nbytes[big] / dur[big], rtol=1e-3)
    np.testing.assert_allclose(nbytes[small] / dur[small], gbps[small] * 1.248)
    assert any("memory bandwidth (GB/s)" in n for n in memcpy_bandwidth(t)["notes"])
    assert (c["step"] >= 0).all()
