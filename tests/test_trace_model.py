"""The Trace model on small handmade traces: exact values for every part of the model."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tb_profiler.decode.args_text import FileArgs, resident_nbytes
from tb_profiler.errors import TraceFormatError
from tb_profiler.io.read import read_trace_bytes, stat_key
from tb_profiler.trace import KIND_NAMES, Kind, Trace, load


def write(tmp_path, events, name="t.pt.trace.json", gz=False, **top):
    doc = events if top.get("_bare") else {"schemaVersion": 1, **top, "traceEvents": events}
    data = json.dumps(doc).encode()
    path = tmp_path / (name + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def mk(tmp_path, events, **top) -> Trace:
    return load(write(tmp_path, events, **top), cache=False)


# A CUDA-like trace written as raw text, so the decimal timestamps are exactly as Kineto writes them.
MIXED = """{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000,
  "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
 "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
 "baseTimeNanoseconds": 1700000000000000000, "displayTimeUnit": "ms", "trace_id": "ABC", "traceName": "x.json",
 "traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "ts": 1, "args": {"name": "python"}},
  {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "ts": 1, "args": {"labels": "GPU 0"}},
  {"ph": "M", "name": "process_sort_index", "pid": 100, "tid": 0, "ts": 1, "args": {"sort_index": 5}},
  {"ph": "M", "name": "thread_name", "pid": 100, "tid": "100", "ts": 1, "args": {"name": "main thread"}},
  {"ph": "M", "name": "thread_name", "pid": 0, "tid": "stream 7", "ts": 1, "args": {"name": "stream 7"}},
  {"ph": "M", "name": "thread_sort_index", "pid": 100, "tid": 100, "ts": 1, "args": {"sort_index": -3}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 100, "ts": 4432774345250.361, "dur": 65.741,
   "args": {"External id": 7, "Input Dims": [[2, 3], []], "Sequence number": 3}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 100, "tid": 100, "ts": 4432774345250.000,
   "dur": 1000},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 100, "tid": 100, "ts": 4432774345250.361, "dur": 100.5},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 4432774345260.5,
   "dur": 5, "args": {"correlation": 42, "External id": 7}},
  {"ph": "X", "cat": "kernel", "name": "vec_add", "pid": 0, "tid": "stream 7", "ts": 4432774345270.001, "dur": 2.25,
   "args": {"device": 0, "stream": 7, "correlation": 42, "grid": [4, 2, 1], "block": [128, 1, 1],
            "registers per thread": 32, "est. achieved occupancy %": 87.5}},
  {"ph": "X", "cat": "kernel", "name": "other", "pid": 3, "tid": 9, "ts": 4432774345280, "dur": 1,
   "args": {"device": 3}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#4", "pid": 0, "tid": "stream 7",
   "ts": 4432774345270, "dur": 10},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 100, "tid": 100, "ts": 4432774346250.000,
   "dur": 500},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": 4432774345251,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 140000000000, "Bytes": 512, "Total Allocated": 1024,
            "Total Reserved": 2097152}},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": 4432774345252,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 140000000000, "Bytes": -512, "Total Allocated": 512,
            "Total Reserved": 2097152}},
  {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "Trace PyTorch Profiler",
   "ts": 4432774345200},
  {"ph": "C", "name": "GPU 0 Utilization", "pid": 0, "tid": 0, "ts": 4432774345300, "args": {"GPU Utilization": 0.75}},
  {"ph": "s", "id": 42, "pid": 100, "tid": 100, "ts": 4432774345260.5, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 42, "pid": 0, "tid": "stream 7", "ts": 4432774345270.001, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "s", "id": 3, "pid": 100, "tid": 100, "ts": 4432774345250.361, "cat": "fwdbwd", "name": "fwdbwd"}
 ]}"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "w.pt.trace.json"
    path.write_text(MIXED)
    return load(path, cache=False)


def test_phase_split_and_counts(mixed):
    assert mixed.counts == {"events": 8, "instants": 3, "counters": 1, "flows": 3, "meta": 6}
    assert mixed.phase_counts == {"X": 8, "i": 3, "C": 1, "s": 2, "f": 1, "M": 6}
    assert mixed.n_rows == 21


def test_events_exact_ns_and_order(mixed):
    ev = mixed.events
    names = list(ev.str("name"))
    # sorted by ts, then longest first: the step contains the ops that start with it
    assert names == ["ProfilerStep#4", "aten::mul", "aten::add", "cudaLaunchKernel", "ProfilerStep#4",
                     "vec_add", "other", "ProfilerStep#5"]
    assert ev["ts"].dtype == np.int64 and ev["dur"].dtype == np.int64
    assert ev["ts"][1] == ev["ts"][2] == 4432774345250361
    assert ev["dur"][1] == 100500 and ev["dur"][2] == 65741
    assert ev["ts"][5] == 4432774345270001 and ev["dur"][5] == 2250
    assert ev["ts"][0] == 4432774345250000 and ev["dur"][0] == 1_000_000
    assert list(ev["row"]) == [7, 8, 6, 9, 12, 10, 11, 13]
    assert mixed.span == (4432774345200000, 4432774346750000)
    assert mixed.duration_ns == 1_550_000


def test_kinds_and_category_counts(mixed):
    ev = mixed.events
    assert [Kind(k) for k in ev["kind"]] == [Kind.USER_ANNOTATION, Kind.CPU_OP, Kind.CPU_OP, Kind.CUDA_RUNTIME,
                                            Kind.GPU_USER_ANNOTATION, Kind.KERNEL, Kind.KERNEL, Kind.USER_ANNOTATION]
    assert mixed.category_counts() == {"cpu_op": 2, "user_annotation": 2, "gpu_user_annotation": 1, "kernel": 2,
                                       "cuda_runtime": 1}
    assert mixed.category_counts(raw=True)["kernel"] == 2
    assert int(mixed.kind_counts[Kind.KERNEL]) == 2
    assert KIND_NAMES[Kind.GPU_MEMCPY] == "gpu_memcpy" and Kind.TRACE.label == "Trace"


def test_args_columns_densified_per_table(mixed):
    ev = mixed.events
    k = list(ev.str("name")).index("vec_add")
    assert (ev["grid_x"][k], ev["grid_y"][k], ev["grid_z"][k]) == (4, 2, 1)
    assert ev["block_x"][k] == 128 and ev["registers"][k] == 32 and ev["occupancy"][k] == 87.5
    assert ev["correlation"][k] == 42 and ev["stream"][k] == 7 and ev["device"][k] == 0
    assert ev["grid_x"][0] == -1 and np.isnan(ev["occupancy"][0])  # missing values
    add = list(ev.str("name")).index("aten::add")
    assert ev["external_id"][add] == 7 and ev["seq_num"][add] == 3
    assert mixed.str(ev["input_dims"][add]) == "[[2, 3], []]"
    assert len(ev["correlation"]) == len(ev)


def test_args_details(mixed):
    ev = mixed.events
    names = list(ev.str("name"))
    assert mixed.args(names.index("aten::add")) == {"External id": 7, "Input Dims": [[2, 3], []], "Sequence number": 3}
    assert mixed.args(names.index("aten::mul")) == {}
    assert mixed.counters.args(0) == {"GPU Utilization": 0.75}


def test_instants_memory_counters_flows(mixed):
    mem = mixed.memory_records
    assert len(mem) == 2 and len(mixed.instants) == 3
    assert list(mem["bytes"]) == [512, -512]
    assert list(mem["addr"]) == [140000000000] * 2
    assert list(mem["total_allocated"]) == [1024, 512]
    assert list(mem["total_reserved"]) == [2097152] * 2
    assert list(mem["device_type"]) == [1, 1] and list(mem["device_id"]) == [0, 0]
    assert list(mem["ts"]) == [4432774345251000, 4432774345252000]
    c = mixed.counters
    assert mixed.str(c["key"][0]) == "GPU Utilization" and c["value"][0] == 0.75
    assert mixed.str(c["name"][0]) == "GPU 0 Utilization"
    fl = mixed.flows
    assert list(fl["id"]) == [3, 42, 42]
    assert [Kind(k) for k in fl["kind"]] == [Kind.FWDBWD, Kind.AC2G, Kind.AC2G]
    assert list(fl["bp"]) == [0, 0, ord("e")]
    assert list(fl["ts"]) == [4432774345250361, 4432774345260500, 4432774345270001]


def test_metadata(mixed):
    assert mixed.process_names == {100: "python"}
    assert mixed.process_labels == {0: "GPU 0"}
    assert mixed.process_sort_index == {100: 5}
    assert mixed.thread_names == {(100, 100): "main thread", (0, "stream 7"): "stream 7"}
    assert mixed.thread_sort_index == {(100, 100): -3}
    assert mixed.schema_version == 1
    assert mixed.base_time_ns == 1700000000000000000
    assert mixed.distributed_info == {"backend": "nccl", "rank": 1, "world_size": 2}
    assert mixed.display_time_unit == "ms" and mixed.trace_id == "ABC" and mixed.trace_name == "x.json"


def test_steps_host_only(mixed):
    s = mixed.steps
    assert list(s["number"]) == [4, 5]
    assert list(s["start"]) == [4432774345250000, 4432774346250000]
    assert list(s["end"]) == [4432774346250000, 4432774346750000]
    assert list(mixed.events.str("name")[s["event"]]) == ["ProfilerStep#4", "ProfilerStep#5"]


def test_devices_cuda(mixed):
    assert mixed.device_kinds == ("CUDA",) and mixed.device_word == "GPU"
    devs = mixed.devices
    assert [d.id for d in devs] == [0, 3]
    assert devs[0].name == "NVIDIA H100" and devs[0].num_sms == 132 and devs[0].compute_capability == "9.0"
    assert devs[0].total_memory == 85000000000 and devs[0].seen_in_events
    assert devs[1].name is None and devs[1].seen_in_events and devs[1].kind == "CUDA"


def test_df(mixed):
    df = mixed.events.df()
    assert len(df) == 8
    assert str(df["name"].dtype) == "category" and df["name"].iloc[0] == "ProfilerStep#4"
    assert df["kind"].iloc[5] == "kernel" and df["cat"].iloc[5] == "kernel"
    assert df["ts"].dtype == np.int64 and df["grid_x"].iloc[5] == 4
    assert "registers" in df and "addr" not in df  # only args fields these rows carry
    assert set(df["tid_str"].dropna()) == {"stream 7"}  # a textual tid is shown as text
    assert list(mixed.memory_records.df().columns[:3]) == ["ts", "pid", "tid"]
    assert mixed.flows.df(strings="object")["cat"].tolist() == ["fwdbwd", "ac2g", "ac2g"]


def _device_trace(tmp_path, runtime_cat, runtime_name, **top):
    return mk(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": runtime_cat, "name": runtime_name, "pid": 1, "tid": 1, "ts": 11, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 12, "dur": 2,
         "args": {"device": 0, "correlation": 1}},
    ], **top)


@pytest.mark.parametrize("cat,name,kinds,word", [
    ("cuda_runtime", "hipLaunchKernel", ("ROCm",), "GPU"),
    ("cuda_runtime", "cudaLaunchKernel", ("CUDA",), "GPU"),
    ("xpu_runtime", "zeCommandListAppendLaunchKernel", ("XPU",), "XPU"),
    ("mtia_runtime", "launch", ("MTIA",), "MTIA"),
    ("privateuse1_runtime", "aclnnMatmul", ("PrivateUse1",), "NPU"),
    ("hpu_op", "launch", ("HPU",), "HPU"),
])
def test_device_words(tmp_path, cat, name, kinds, word):
    t = _device_trace(tmp_path, cat, name)
    assert t.device_kinds == kinds and t.device_word == word
    assert [d.id for d in t.devices] == [0] and t.devices[0].kind == kinds[0]


def test_rocm_by_device_name(tmp_path):
    t = _device_trace(tmp_path, "cuda_runtime", "launch", deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X"}])
    assert t.device_kinds == ("ROCm",) and t.devices[0].name == "AMD Instinct MI300X"


def test_cpu_only(tmp_path):
    t = mk(tmp_path, [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 1}],
           deviceProperties=[])
    assert t.device_kinds == () and t.device_word == "CPU" and t.devices == []
    assert len(t.steps) == 0 and len(t.memory_records) == 0 and len(t.counters) == 0


def test_old_spellings(tmp_path):
    cats = ["Operator", "Kernel", "Memcpy", "Memset", "Runtime", "Python", "Trace", "mystery"]
    t = mk(tmp_path, [{"ph": "X", "cat": c, "name": c, "pid": 1, "tid": 1, "ts": i, "dur": 1}
                      for i, c in enumerate(cats)]
           + [{"ph": "s", "cat": "async", "name": "launch", "id": 1, "pid": 1, "tid": 1, "ts": 1}])
    assert [KIND_NAMES[k] for k in t.events["kind"]] == ["cpu_op", "kernel", "gpu_memcpy", "gpu_memset",
                                                         "cuda_runtime", "python_function", "Trace", "other"]
    assert list(t.events.str("cat")) == cats  # the original category is kept
    assert t.flows["kind"][0] == Kind.AC2G
    assert t.device_kinds == ("CUDA",)


def test_bare_array_layout_and_missing_fields(tmp_path):
    t = mk(tmp_path, [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5},            # no dur, no cat
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
        {"ph": "B", "name": "begin", "pid": 1, "tid": 1, "ts": 1},          # other phases are counted only
    ], _bare=True)
    assert t.metadata == {} and t.schema_version is None
    assert list(t.events.str("name")) == ["b", "a"]
    assert list(t.events["dur"]) == [2000, 0]
    assert t.events["cat"][1] == -1 and t.events["kind"][1] == Kind.OTHER
    assert t.phase_counts["B"] == 1 and len(t.events) == 2


def test_gzip_and_url(tmp_path):
    import fsspec

    events = [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2}]
    p = write(tmp_path, events, gz=True)
    t = load(p, cache=False)
    assert t.events["ts"][0] == 1500
    fs = fsspec.filesystem("memory")
    fs.pipe("/tbp-test/w.pt.trace.json.gz", p.read_bytes())
    u = load("memory://tbp-test/w.pt.trace.json.gz", cache=False)
    assert u.events["ts"][0] == 1500 and u.source == "memory://tbp-test/w.pt.trace.json.gz"
    assert stat_key("memory://tbp-test/w.pt.trace.json.gz")[0] == len(p.read_bytes())


def test_trace_does_not_keep_the_input(tmp_path):
    pad = "x" * 200
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1,
               "args": {"External id": i}, "unused": pad} for i in range(500)]
    p = write(tmp_path, events)
    size = p.stat().st_size
    # Plain JSON on disk: the args are read from the file when asked for; none is in memory.
    t = load(p, cache=False)
    assert isinstance(t.args_blob, FileArgs) and resident_nbytes(t.args_blob) == 0
    assert t.args(499) == {"External id": 499}
    # Gzip: only the args text is kept (compacted), not the rest of the inflated text.
    gz = tmp_path / "t2.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    t = load(gz, cache=False)
    assert len(t.args_blob) == sum(len(json.dumps({"External id": i})) for i in range(500))
    assert resident_nbytes(t.args_blob) < size / 5
    assert t.args(499) == {"External id": 499}


def test_read_errors(tmp_path):
    with pytest.raises(TraceFormatError, match="not found"):
        read_trace_bytes(tmp_path / "missing.json")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty"):
        read_trace_bytes(empty)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": []}' * 100)[:-20])
    with pytest.raises(TraceFormatError, match="truncated|corrupt") as e:
        read_trace_bytes(bad)
    assert str(bad) in str(e.value)
    garbage = tmp_path / "garbage.json.gz"
    garbage.write_bytes(b"\x1f\x8b" + b"\xff" * 64)
    with pytest.raises(TraceFormatError, match="corrupt"):
        load(garbage, cache=False)
    with pytest.raises(TraceFormatError):
        read_trace_bytes(tmp_path)  # a directory


def test_read_gzip_multimember_and_plain(tmp_path):
    p = tmp_path / "m.json.gz"
    p.write_bytes(gzip.compress(b"abc" * 1000) + gzip.compress(b"def"))
    assert bytes(read_trace_bytes(p)) == b"abc" * 1000 + b"def"
    q = tmp_path / "plain.json"
    q.write_bytes(b"[1, 2]")
    out = read_trace_bytes(q)
    assert out.dtype == np.uint8 and out.flags.writeable and bytes(out) == b"[1, 2]"
    assert stat_key(q)[0] == 6
