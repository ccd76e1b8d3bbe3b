"""trace.arg_values: one args key for many events, read from the raw args text in bulk.

It serves the MTIA DMA requests' ``size`` / ``direction`` (tests/test_mtia_dma.py, whose
fixture follows HTA's MTIA traces); here the reader itself: every kind of args store
(in-memory text, the plain file read on demand, the cache's compressed blocks), rows in
any order, several read windows, values written as strings, escapes, absent keys.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from kineto_fixtures import write_trace
from test_mtia_dma import mtia_trace

import tb_profiler
from tb_profiler.analysis.memcpy import memcpy_bandwidth
from tb_profiler.trace import arg_values
from tb_profiler.trace.arg_values import arg_numbers, arg_strings


def _events():
    out = []
    for i in range(40):
        args = {"size": i * 1000, "direction": "HOST_TO_DEVICE" if i % 2 else "DEVICE_TO_HOST", "pad": "x" * (i * 7)}
        if i % 5 == 0:
            args = {"size": str(i * 1000), "note": 'a "size": 5 inside a string', "direction": 'say \\"hi\\"'}
        if i % 7 == 3:
            args = {}
        out.append({"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 17, "tid": 1, "ts": 10 * i,
                    "dur": 5, **({"args": args} if args else {})})
    return out


def _expected(ev):
    size = [float(e["args"]["size"]) if "args" in e else np.nan for e in ev]
    direction = [e["args"]["direction"] if "args" in e else None for e in ev]
    return np.array(size), direction


@pytest.fixture(params=["memory", "file", "cache"])
def trace(request, tmp_path):
    gz = request.param == "memory"
    path = write_trace(tmp_path / ("a.pt.trace.json" + (".gz" if gz else "")), {"traceEvents": _events()})
    if request.param == "cache":
        tb_profiler.load(path, cache_dir=tmp_path / "cache", background=False)
        t = tb_profiler.load(path, cache_dir=tmp_path / "cache")
        assert t.from_cache
        return t
    return tb_profiler.load(path, cache=False)


def test_values_of_every_row_in_any_order(trace):
    ev = _events()
    size, direction = _expected(ev)
    rows = np.arange(len(ev))[::-1].copy()  # reversed: results follow the rows asked
    np.testing.assert_array_equal(arg_numbers(trace, rows, "size"), size[::-1])
    # strings unescaped; the key inside another value is not the key
    assert arg_strings(trace, rows, "direction").tolist() == direction[::-1]
    assert arg_strings(trace, rows[:3], "absent").tolist() == [None] * 3
    assert arg_numbers(trace, np.zeros(0, np.int64), "size").shape == (0,)


def test_small_windows_read_the_same(trace, monkeypatch):
    ev = _events()
    size, _ = _expected(ev)
    monkeypatch.setattr(arg_values, "WINDOW", 64)  # a window per row or two
    np.testing.assert_array_equal(arg_numbers(trace, np.arange(len(ev)), "size"), size)


def test_mtia_copies_from_the_cache_match(tmp_path):
    path = write_trace(tmp_path / "mtia.pt.trace.json", mtia_trace())
    fresh = memcpy_bandwidth(tb_profiler.load(path, cache=False))["copies"]
    tb_profiler.load(path, cache_dir=tmp_path / "c", background=False)
    cached = tb_profiler.load(path, cache_dir=tmp_path / "c")
    assert cached.from_cache
    again = memcpy_bandwidth(cached)["copies"]
    assert again["bytes"].tolist() == fresh["bytes"].tolist() and (fresh["bytes"] > 0).all()
    assert again["direction"].tolist() == fresh["direction"].tolist()
    assert json.dumps(sorted(set(fresh["direction"]))) == '["D2H", "H2D"]'
