"""Quick smoke tests of the native decoder (tb_profiler.decode): real traces, one
hand-made trace with exact expected values, and the error path. The exhaustive
differential, fuzz and malformed-input suites live in test_decode_differential.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
from datafiles import read_bytes, real_traces, rel

from tb_profiler.decode import DECODER_VERSION, decode, decode_bytes, schema
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.errors import TraceFormatError

# one of each family keeps this file fast; the differential suite reads them all
QUICK = [p for p in real_traces() if "legacy-formats" not in str(p) or "autograd_api_num_workers_0" in str(p)]
QUICK = [p for p in QUICK if "resnet50_num_workers_4" not in str(p) and "1623143566756" not in str(p)]


def check_shape(d) -> None:
    n = len(d)
    for col, dtype in schema.dense_dtypes().items():
        assert d.dense[col].dtype == dtype and d.dense[col].shape == (n,), col
    for col, dtype in schema.sparse_dtypes().items():
        rows, values = d.sparse[col]
        assert rows.dtype == np.int32 and values.dtype == dtype and len(rows) == len(values), col
        assert np.all(np.diff(rows) > 0) and (len(rows) == 0 or 0 <= rows[0] and rows[-1] < n), col
    for col in schema.STRING_COLUMNS:
        ids = d.dense[col] if col in d.dense else d.sparse[col][1]
        assert np.all((ids >= -1) & (ids < len(d.strings))), col
    assert len(set(d.strings)) == len(d.strings), "a string was interned twice"
    end = d.dense["args_off"] + d.dense["args_len"]
    assert np.all(end <= len(d.args_blob))


def test_quick_set_is_one_of_each_family():
    assert len(QUICK) == 6


@pytest.mark.parametrize("path", QUICK, ids=rel)
def test_real_trace_matches_json_loads(path):
    text = read_bytes(path)
    doc = json.loads(text)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    d = decode(bytearray(text), str(path))
    check_shape(d)
    assert len(d) == len(events)
    names = [d.strings[i] if i >= 0 else None for i in d.dense["name"]]
    assert names == [e.get("name") if isinstance(e.get("name"), str) else names[i] for i, e in enumerate(events)]
    ts = [e.get("ts") for e in events]
    for i in range(0, len(events), max(1, len(events) // 500)):  # a sample: json floats are inexact
        if isinstance(ts[i], (int, float)):
            assert abs(d.dense["ts"][i] - ts[i] * 1000) <= 1 + abs(ts[i]) * 1e-12
        blob = bytes(d.args_blob[d.dense["args_off"][i]:d.dense["args_off"][i] + d.dense["args_len"][i]])
        assert (json.loads(blob) if blob else None) == (events[i].get("args") if blob else None)
    if isinstance(doc, dict):
        assert {k: json.loads(v) for k, v in d.toplevel.items()} == {k: v for k, v in doc.items() if k != "traceEvents"}
    else:
        assert d.toplevel == {}


TINY = rb"""
{"schemaVersion": 1,
 "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k\u00e9rnel \ud83d\ude00", "pid": 0, "tid": "stream 7",
   "ts": 1623142623460111.1235, "dur": 1.5e3,
   "args": {"External id": 42, "correlation": "7", "grid": [80, 1, 1], "block": [256, 1, 1.5],
            "est. achieved occupancy %": 12.5, "Input Dims": [[2, 3], []], "Call stack": 5}},
  {"name": "GPU Utilization", "ph": "C", "ts": "0.0005", "pid": "25738", "tid": -3,
   "args": {"label": "x", "GPU Utilization": 0.25}},
  {"ph": "s", "id": "0x1f", "bp": "e", "ts": -0.0015, "cat": "ac2g", "name": 1, "args": [1, 2]},
  {"ph": "f", "id": 31, "ts": 1e400, "dur": "bad", "pid": 1.5}
 ],
 "traceName": "t.json", "deviceProperties": [ {"id": 0} ]}
"""


def test_tiny_trace_exact_values():
    d = decode(bytearray(TINY))
    check_shape(d)
    s = d.strings
    assert len(d) == 4
    assert bytes(d.dense["ph"]) == b"XCsf"
    assert [s[i] if i >= 0 else None for i in d.dense["name"]] == ["k\u00e9rnel \U0001F600", "GPU Utilization", "1", None]
    assert [s[i] if i >= 0 else None for i in d.dense["cat"]] == ["kernel", None, "ac2g", None]
    assert d.dense["pid"].tolist() == [0, 25738, MISSING_INT, MISSING_INT]
    assert [s[i] if i >= 0 else None for i in d.dense["pid_str"]] == [None, "25738", None, None]
    assert d.dense["tid"].tolist() == [0, -3, MISSING_INT, MISSING_INT]
    assert s[d.dense["tid_str"][0]] == "stream 7"
    # exact ns: .1235 us -> 123.5 ns, rounds half to even -> 124 (not via float64)
    assert d.dense["ts"].tolist() == [1623142623460111124, 0, -2, MISSING_INT]
    assert d.dense["dur"].tolist() == [1500000, MISSING_INT, MISSING_INT, MISSING_INT]
    assert d.dense["args_len"][2] == 0 and d.dense["args_len"][3] == 0
    a0 = bytes(d.args_blob[d.dense["args_off"][0]:d.dense["args_off"][0] + d.dense["args_len"][0]])
    assert json.loads(a0)["External id"] == 42 and a0.startswith(b"{") and a0.endswith(b"}")
    sp = d.sparse
    assert sp["external_id"][0].tolist() == [0] and sp["external_id"][1].tolist() == [42]
    assert sp["correlation"][1].tolist() == [7]
    assert (sp["grid_x"][1].tolist(), sp["grid_y"][1].tolist(), sp["grid_z"][1].tolist()) == ([80], [1], [1])
    assert len(sp["block_x"][0]) == 0  # 1.5 is not an integer: the whole dim3 is absent
    assert sp["occupancy"][1].tolist() == [12.5]
    assert s[sp["input_dims"][1][0]] == "[[2, 3], []]"
    assert s[sp["call_stack"][1][0]] == "5"
    assert sp["counter_key"][0].tolist() == [1] and s[sp["counter_key"][1][0]] == "GPU Utilization"
    assert sp["counter_value"][1].tolist() == [0.25]
    assert sp["flow_id"][0].tolist() == [2, 3] and sp["flow_id"][1].tolist() == [31, 31]
    assert sp["flow_bp"][0].tolist() == [2] and sp["flow_bp"][1].tolist() == [ord("e")]
    assert d.toplevel == {"schemaVersion": "1", "traceName": '"t.json"', "deviceProperties": '[ {"id": 0} ]'}
    # column() expands a sparse column with its missing value
    assert d.column("external_id").tolist() == [42, MISSING_INT, MISSING_INT, MISSING_INT]


def test_bare_array_bom_and_bytes():
    d = decode_bytes(b'\xef\xbb\xbf [ {"ph": "X", "name": "a", "ts": 1, "args": {}} ]\n')
    assert len(d) == 1 and d.toplevel == {} and d.dense["ts"].tolist() == [1000]
    assert bytes(d.args_blob) == b"{}"
    assert len(decode_bytes(b'{"traceEvents": []}')) == 0


@pytest.mark.parametrize("text, offset", [
    (b"", 0),
    (b'{"traceEvents": [{"ph": "X", "name": "ab', 40),   # truncated inside a string
    (b'{"traceEvents": [{"ph": "X"} 5]}', 29),           # missing comma
    (b'{"traceEvents": [1]}', 17),                       # event not an object
    (b'{"other": []}', 0),                               # no traceEvents
    (b'[{"name": "\xff"}]', 11),                         # invalid UTF-8
    (b'[] []', 3),                                       # trailing data
])
def test_malformed_raises_with_offset(text, offset):
    with pytest.raises(TraceFormatError) as err:
        decode(bytearray(text), "bad.json")
    assert err.value.offset == offset and err.value.source == "bad.json"
    assert "bad.json" in str(err.value)


def test_error_excerpt_and_read_only_input():
    with pytest.raises(TraceFormatError) as err:
        decode_bytes(b'{"traceEvents": [{"ts": 12, "dur": tru}]}')
    assert err.value.excerpt.startswith("tru}")
    with pytest.raises(TypeError):
        decode(b'{"traceEvents": []}')
    assert isinstance(DECODER_VERSION, (int, str))
