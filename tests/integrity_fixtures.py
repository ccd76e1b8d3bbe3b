"""Writes tests/data/integrity/*.json.gz: small Kineto-format traces that break each rule of
torch 2.13's ``torch.profiler._trace_validator`` (and each of the trust report's own rules).

Run ``python tests/integrity_fixtures.py`` to write them again (gzip -9n-like: no name, no
mtime, so the bytes are the same every time).  Events are written as libkineto's
``ChromeTraceLogger`` (``libkineto/src/output_json.cpp``) writes them: ``ph: "X"``, ``ts``/
``dur`` in µs with 3 decimals, ``cat`` the ActivityType name, kernels with ``device``,
``stream``, ``correlation`` and ``External id``; cuda_sync events with ``cuda_sync_kind``
and ``wait_on_cuda_event_record_corr_id`` (``handleCudaSyncActivity``); ac2g flows.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "integrity"
T0 = 1_700_000_000_000.0  # µs, a recent epoch time (floats near it have sub-ns resolution only to 2^-10 µs)


def _x(name, cat, ts, dur, pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(T0 + ts, 3), "dur": dur}
    if args:
        ev["args"] = args
    return ev


def _kernel(name, ts, dur, corr, ext, stream=7, device=0):
    return _x(name, "kernel", ts, dur, pid=device, tid=stream, device=device, stream=stream, correlation=corr,
              **{"External id": ext})


def _launch(ts, corr, ext, name="cudaLaunchKernel"):
    return _x(name, "cuda_runtime", ts, 4.0, correlation=corr, **{"External id": ext})


def _trace(events) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85e9}],
            "traceEvents": events, "traceName": "integrity fixture", "displayTimeUnit": "ms"}


def causality() -> dict:
    """_check_gpu_kernel_causality: a kernel starting before its cudaLaunchKernel (ext 2),
    one after (ext 1), one at the same ts (ext 3: not a violation)."""
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("aten::mm", "cpu_op", 1, 50, **{"External id": 1}),
        _launch(2, 11, 1), _kernel("gemm", 10, 5, 11, 1),
        _launch(20, 12, 2), _kernel("relu", 15, 3, 12, 2),
        _launch(30, 13, 3), _kernel("add", 30, 2, 13, 3),
        _launch(40, 14, 4, name="cudaLaunchKernelExC"), _kernel("other_launch_api", 35, 2, 14, 4),
    ])


def stream_wait() -> dict:
    """_check_stream_wait_corr_id_populated (a Stream Wait Event with -1, an Event Sync
    without the key) and _check_stream_wait_corr_id_in_past (a wait on a record made later,
    a wait on an id no record has); one good wait through a record's correlation."""
    sync = lambda ts, kind, **a: _x(kind, "cuda_sync", ts, 1.0, pid=0, tid=7, device=0, stream=7,
                                    cuda_sync_kind=kind, **a)
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("cudaEventRecord", "cuda_runtime", 5, 1.0, correlation=21, **{"External id": 50}),
        _x("cudaEventRecordWithFlags", "cuda_driver", 60, 1.0, correlation=22),
        sync(10, "Stream Wait Event", wait_on_cuda_event_record_corr_id=21),
        sync(20, "Stream Wait Event", wait_on_cuda_event_record_corr_id=22),
        sync(30, "Stream Wait Event", wait_on_cuda_event_record_corr_id=99),
        sync(40, "Stream Wait Event", wait_on_cuda_event_record_corr_id=-1),
        sync(50, "Event Sync"),
        sync(70, "Event Sync", wait_on_cuda_event_record_corr_id=50),
    ])


def sync_overlap() -> dict:
    """_check_stream_sync_overlap: a Stream Sync on stream 7 while two kernels of stream 7
    still run; a kernel ending exactly at the sync, one on stream 8, and one on device 1
    stream 7 do not count."""
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 300),
        _launch(1, 31, 1), _kernel("long_a", 10, 100, 31, 1),
        _launch(2, 32, 2), _kernel("long_b", 20, 100, 32, 2),
        _launch(3, 33, 3), _kernel("ends_at_sync", 5, 45, 33, 3),
        _launch(4, 34, 4), _kernel("other_stream", 10, 100, 34, 4, stream=8),
        _launch(5, 35, 5), _kernel("other_device", 10, 100, 35, 5, device=1),
        _x("cudaStreamSynchronize", "cuda_runtime", 49, 80, correlation=36),
        _x("Stream Sync", "cuda_sync", 50, 70, pid=0, tid=7, device=0, stream=7, correlation=36,
           cuda_sync_kind="Stream Sync"),
    ])


def nccl() -> dict:
    """_check_nccl_metadata: record_param_comms without dtype, one without any field; one
    with every field (Group size null still counts as present, as in torch)."""
    full = {"Collective name": "all_reduce", "dtype": "Float", "In msg nelems": 1024, "Out msg nelems": 1024,
            "Group size": None}
    part = {k: v for k, v in full.items() if k != "dtype"}
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("record_param_comms", "cpu_op", 10, 5, **full),
        _x("record_param_comms", "cpu_op", 20, 5, **part),
        _x("record_param_comms", "cpu_op", 30, 5),
    ])


def backward_seq() -> dict:
    """_check_backward_seq_id_uniqueness: Sequence number 5 shared by two backward ops;
    9 shared through ``seq_num`` (read when Sequence number is 0); 7 twice with one op;
    0 with two ops and no seq_num (skipped, as torch skips it)."""
    bwd = lambda ts, op, **a: _x(f"autograd::engine::evaluate_function: {op}", "cpu_op", ts, 3, tid=2, **a)
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        bwd(10, "AddBackward0", **{"Sequence number": 5}), bwd(20, "MulBackward0", **{"Sequence number": 5}),
        bwd(30, "MmBackward0", **{"Sequence number": 7}), bwd(40, "MmBackward0", **{"Sequence number": 7}),
        bwd(50, "ReluBackward0", **{"Sequence number": 0}), bwd(60, "SumBackward0", **{"Sequence number": 0}),
        bwd(70, "AddBackward0", **{"Sequence number": 0, "seq_num": 9}), bwd(80, "ViewBackward0", seq_num=9),
    ])


def ours() -> dict:
    """The trust report's own rules: a kernel without its launch, a kernel launched after
    the last step, two overlapping kernels on one stream, a negative and a missing dur, an event
    without ts, a flow start without its finish, two overhead events, a trailing step whose
    launch has no kernel."""
    missing_dur = _x("aten::empty", "cpu_op", 12, 1)
    del missing_dur["dur"]
    no_ts = _x("aten::zeros", "cpu_op", 13, 1)
    del no_ts["ts"]
    return _trace([
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("ProfilerStep#2", "user_annotation", 100, 100),
        _launch(1, 41, 1), _kernel("gemm", 10, 30, 41, 1),
        _launch(2, 42, 2), _kernel("overlaps_gemm", 20, 10, 42, 2),
        _kernel("no_launch", 50, 10, 43, 3),
        _launch(90, 44, 4), _kernel("after_steps", 250, 10, 44, 4),
        _launch(150, 45, 5),  # step 2's launch: its kernel is not in the trace
        _launch(205, 46, 6), _kernel("after_last_step", 260, 10, 46, 6),  # launched after the last step
        _x("aten::neg", "cpu_op", 11, -5),
        missing_dur, no_ts,
        {"ph": "s", "id": 41, "pid": 1, "tid": 1, "ts": round(T0 + 1, 3), "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 41, "pid": 0, "tid": 7, "ts": round(T0 + 10, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "s", "id": 42, "pid": 1, "tid": 1, "ts": round(T0 + 2, 3), "cat": "ac2g", "name": "ac2g"},
        _x("Activity Buffer Request", "overhead", 60, 20, pid=-1, tid=0),
        _x("Activity Buffer Request", "overhead", 120, 20, pid=-1, tid=0),
    ])


FIXTURES = {"causality": causality, "stream_wait": stream_wait, "sync_overlap": sync_overlap, "nccl": nccl,
            "backward_seq": backward_seq, "ours": ours}


def write(out: Path = OUT) -> list[Path]:
    """Write every fixture as <name>.json.gz (reproducible bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fn in FIXTURES.items():
        path = out / f"{name}.json.gz"
        text = json.dumps(fn(), indent=1).encode()
        with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
            gz.write(text)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write():
        print(p)
