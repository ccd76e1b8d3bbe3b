"""The bad-fields corpus of issue 18: every field of every event kind (and the top-level
keys) set to a wrong type or an impossible value, served by the plugin, every route hit.

Used by tests/test_bad_fields.py, and runnable as a probe that counts the 500s (and the
`tb-profiler info --json` tracebacks) over any trace files, one mutation per file::

    python tests/bad_fields_corpus.py TRACE [TRACE ...]

``base_doc`` is a small trace written the way Kineto writes a CUDA training step (the
layout of tests/kineto_fixtures.py: ProfilerStep#N ranges, cpu_op -> cudaLaunchKernel ->
kernel joined by correlation, memcpy/memset rows with the device id as pid and the stream
as tid, ac2g flows), with the records torch 2.13 adds on the host (the ``[memory]``
instants, python_function frames and fwdbwd flows of the samples/ traces, the
record_param_comms op and distributedInfo of a NCCL job as tests/test_collectives.py writes
them) and the deviceProperties of the tiny H100 trace (tests/data/traces/tiny-h100).

A mutation puts a marker where the field's value goes; rendering replaces the quoted
marker by the bad value's JSON text, so values json.dumps cannot write (1e400, NaN,
integers past int64 read back as text) reach the decoder exactly as a file would hold them.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

# id -> the JSON text written in place of a field's value.  "far" is 4e15 µs (4e18 ns: past
# any clock, yet below the 2**62 ns the tables keep); NaN and Infinity are not JSON: the
# decoder refuses the whole file, which must then be listed with its reason, never a 500.
BAD_VALUES: dict[str, str] = {
    "null": "null", "text": '"text"', "list": "[1]", "object": '{"a": 1}', "true": "true",
    "1e400": "1e400", "-1e400": "-1e400", "2^63": "9223372036854775808", "-2^63": "-9223372036854775808",
    "-2^63-1": "-9223372036854775809", "1e30": "1" + "0" * 30, "1.5": "1.5", "-1": "-1", "0": "0",
    "far": "4000000000000000", "NaN": "NaN", "Infinity": "Infinity",
}
REFUSED = ("NaN", "Infinity")  # not JSON: the file is refused (a 4xx naming it)

HOST_PID = HOST_TID = 4242
DEVICE_PID, STREAM, COMM_STREAM = 0, 7, 13
T0_US = 4_811_417_321_000  # about where torch 2.13 on Linux starts its clock (the samples' traces)
STEP_US = 1000

# The events a field is set on: (ph, predicate on the event).
KINDS: dict[str, Callable[[dict], bool]] = {
    "step": lambda e: e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"),
    "cpu_op": lambda e: e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")
    and e.get("name") != "record_param_comms",
    "annotation": lambda e: e.get("ph") == "X" and e.get("cat") == "user_annotation"
    and not str(e.get("name", "")).startswith("ProfilerStep#"),
    "python": lambda e: e.get("ph") == "X" and e.get("cat") == "python_function",
    "runtime": lambda e: e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "Runtime"),
    "kernel": lambda e: e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"),
    "memcpy": lambda e: e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "Memcpy"),
    "memset": lambda e: e.get("ph") == "X" and e.get("cat") in ("gpu_memset", "Memset"),
    "collective": lambda e: e.get("ph") == "X" and e.get("name") == "record_param_comms",
    "span": lambda e: e.get("ph") == "X" and e.get("cat") == "Trace",
    "memory": lambda e: e.get("ph") in ("i", "I") and e.get("name") == "[memory]",
    "instant": lambda e: e.get("ph") in ("i", "I") and e.get("name") != "[memory]",
    "counter": lambda e: e.get("ph") == "C",
    "flow_start": lambda e: e.get("ph") == "s",
    "flow_end": lambda e: e.get("ph") == "f",
    "process_name": lambda e: e.get("ph") == "M" and e.get("name") == "process_name",
    "thread_name": lambda e: e.get("ph") == "M" and e.get("name") == "thread_name",
    "sort_index": lambda e: e.get("ph") == "M" and str(e.get("name", "")).endswith("sort_index"),
    "labels": lambda e: e.get("ph") == "M" and e.get("name") == "process_labels",
}
_COMMON = ("ts", "pid", "tid", "name", "cat", "ph", "args", "")  # "": the whole event
_X = ("dur",)
# Per kind, the fields set (a key of the event, or "args.<key>"; "args.*": the first arg).
FIELDS: dict[str, tuple[str, ...]] = {
    "step": _X,
    "cpu_op": _X + tuple("args." + k for k in ("External id", "Sequence number", "Fwd thread id", "Record function id",
                                               "Ev Idx", "Input Dims", "Input type", "Input Strides",
                                               "Concrete Inputs", "flops")),
    "annotation": _X + ("args.External id",),
    "python": _X + tuple("args." + k for k in ("Python id", "Python parent id", "Python module id", "Python thread")),
    "runtime": _X + tuple("args." + k for k in ("correlation", "External id", "cbid")),
    "kernel": _X + tuple("args." + k for k in ("device", "stream", "correlation", "External id", "grid", "block",
                                               "registers per thread", "shared memory", "blocks per SM",
                                               "warps per SM", "est. achieved occupancy %", "queued", "context")),
    "memcpy": _X + tuple("args." + k for k in ("bytes", "memory bandwidth (GB/s)", "device", "stream",
                                               "correlation", "context")),
    "memset": _X + tuple("args." + k for k in ("bytes", "device", "stream", "correlation")),
    "collective": _X + tuple("args." + k for k in ("Collective name", "In msg nelems", "Out msg nelems", "Group size",
                                                   "dtype", "Process Group Name", "Process Group Description",
                                                   "Process Group Ranks", "Rank", "Seq")),
    "span": _X,
    "memory": tuple("args." + k for k in ("Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type",
                                          "Device Id")),
    "instant": ("s",),
    "counter": ("args.*",),
    "flow_start": ("id",),
    "flow_end": ("id", "bp"),
    "process_name": ("args.name",),
    "thread_name": ("args.name",),
    "sort_index": ("args.sort_index",),
    "labels": ("args.labels",),
}
FIELDS = {kind: _COMMON + extra for kind, extra in FIELDS.items()}

_DEVICE_PROPS = ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "maxThreadsPerBlock",
                 "maxThreadsPerMultiprocessor", "regsPerBlock", "warpSize", "sharedMemPerBlock", "numSms",
                 "regsPerMultiprocessor", "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor")
# Top-level fields, as paths into the document (ints index lists).
TOP_FIELDS: tuple[tuple, ...] = (
    ("schemaVersion",), ("baseTimeNanoseconds",), ("displayTimeUnit",), ("traceName",), ("trace_id",),
    ("deviceProperties",), ("deviceProperties", 0), *(("deviceProperties", 0, k) for k in _DEVICE_PROPS),
    ("distributedInfo",), *(("distributedInfo", k) for k in ("backend", "rank", "world_size", "pg_count",
                                                               "pg_config")),
    ("distributedInfo", "pg_config", 0), *(("distributedInfo", "pg_config", 0, k)
                                           for k in ("pg_name", "pg_desc", "backend_config", "pg_size", "ranks")),
    ("traceEvents",),
)


# -- the base trace -------------------------------------------------------------------------
def _x(cat: str, name: str, pid: int, tid: int, ts_us: float, dur_us: float, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts_us, 3),
            "dur": round(dur_us, 3), "args": args}


def _step(k: int, rank: int) -> list[dict]:
    """One training step of ``STEP_US`` on the host (Kineto's layout, see module doc)."""
    t = T0_US + k * STEP_US
    corr, ext = 100 + 10 * k, 1000 + 10 * k
    host = dict(pid=HOST_PID, tid=HOST_TID)
    kernel_args = {"queued": 0, "device": DEVICE_PID, "context": 1, "stream": STREAM, "correlation": corr,
                   "registers per thread": 168, "shared memory": 65536, "blocks per SM": 1.0, "warps per SM": 4.0,
                   "grid": [132, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 50, "External id": ext}
    ev = [
        _x("user_annotation", f"ProfilerStep#{k}", ts_us=t, dur_us=STEP_US, **host, **{"External id": ext - 1}),
        _x("python_function", "nn.Module: Net_0", ts_us=t + 50, dur_us=700, **host,
           **{"Python id": 2 * k + 2, "Python parent id": 1, "Python module id": 0, "Python thread": 0}),
        _x("user_annotation", "## forward ##", ts_us=t + 60, dur_us=30, **host, **{"External id": ext - 2}),
        _x("cpu_op", "aten::mm", ts_us=t + 100, dur_us=300, **host,
           **{"External id": ext, "Sequence number": k, "Fwd thread id": 0, "Record function id": 0, "Ev Idx": 3 * k,
              "Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"],
              "Input Strides": [[128, 1], [256, 1]], "Concrete Inputs": ["", ""], "flops": 4194304}),
        _x("cuda_runtime", "cudaLaunchKernel", ts_us=t + 150, dur_us=20, **host,
           **{"cbid": 211, "correlation": corr, "External id": ext}),
        _x("kernel", "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8", DEVICE_PID, STREAM, t + 200, 250,
           **kernel_args),
        _x("cpu_op", "aten::copy_", ts_us=t + 500, dur_us=100, **host,
           **{"External id": ext + 1, "Input Dims": [[64, 256], [64, 256]], "Input type": ["float", "float"]}),
        _x("cuda_runtime", "cudaMemcpyAsync", ts_us=t + 510, dur_us=10, **host,
           **{"cbid": 41, "correlation": corr + 1, "External id": ext + 1}),
        _x("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", DEVICE_PID, STREAM, t + 520, 50,
           **{"device": DEVICE_PID, "context": 1, "stream": STREAM, "correlation": corr + 1, "External id": ext + 1,
              "bytes": 65536, "memory bandwidth (GB/s)": 1.31072}),
        _x("cuda_runtime", "cudaMemsetAsync", ts_us=t + 530, dur_us=5, **host,
           **{"cbid": 51, "correlation": corr + 2, "External id": ext + 1}),
        _x("gpu_memset", "Memset (Device)", DEVICE_PID, STREAM, t + 580, 4,
           **{"device": DEVICE_PID, "context": 1, "stream": STREAM, "correlation": corr + 2, "External id": ext + 1,
              "bytes": 4096, "memory bandwidth (GB/s)": 1.024}),
        _x("cpu_op", "record_param_comms", ts_us=t + 620, dur_us=20, **host,
           **{"External id": ext + 3, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
              "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "0",
              "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Rank": rank, "Seq": k + 1}),
        _x("cuda_runtime", "cudaLaunchKernel", ts_us=t + 625, dur_us=10, **host,
           **{"cbid": 211, "correlation": corr + 3, "External id": ext + 3}),
        _x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", DEVICE_PID,
           COMM_STREAM, t + 640, 120 + 40 * rank,
           **{**kernel_args, "stream": COMM_STREAM, "correlation": corr + 3, "External id": ext + 3}),
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", **host, "ts": t + 110,
         "args": {"Total Reserved": 2 << 20, "Total Allocated": 65536 * (k + 1), "Bytes": 65536, "Device Id": 0,
                  "Device Type": 1, "Addr": 0x7f0000000000 + 65536 * k, "Ev Idx": 3 * k + 1}},
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", **host, "ts": t + 900,
         "args": {"Total Reserved": 2 << 20, "Total Allocated": 65536 * k, "Bytes": -65536, "Device Id": 0,
                  "Device Type": 1, "Addr": 0x7f0000000000 + 65536 * k, "Ev Idx": 3 * k + 2}},
        {"ph": "C", "name": "GPU Memory", "pid": DEVICE_PID, "tid": 0, "ts": t + 900, "args": {"Allocated": k}},
        {"ph": "s", "id": corr, "pid": HOST_PID, "tid": HOST_TID, "ts": t + 150, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": corr, "pid": DEVICE_PID, "tid": STREAM, "ts": t + 200, "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
        {"ph": "s", "id": k + 1, "pid": HOST_PID, "tid": HOST_TID, "ts": t + 100, "cat": "fwdbwd", "name": "fwdbwd"},
        {"ph": "f", "id": k + 1, "pid": HOST_PID, "tid": HOST_TID, "ts": t + 500, "cat": "fwdbwd", "name": "fwdbwd",
         "bp": "e"},
    ]
    meta = [{"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "ts": t, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": HOST_TID, "ts": t,
             "args": {"name": "thread 4242 (python)"}},
            {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": 0, "ts": t,
             "args": {"sort_index": HOST_PID}},
            {"ph": "M", "name": "process_labels", "pid": DEVICE_PID, "tid": 0, "ts": t, "args": {"labels": "GPU 0"}},
            {"ph": "X", "cat": "Trace", "name": f"PyTorch Profiler ({k})", "pid": "Spans", "tid": "PyTorch Profiler",
             "ts": t, "dur": STEP_US, "args": {"Op count": 0}},
            {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": t}]
    # Kineto writes these once per trace; repeated per step here so each field has a record of its own
    return ev + meta


def base_doc(steps: int = 4, rank: int = 0) -> dict:
    """The base trace (see module doc): ``steps`` steps of rank ``rank`` of a 2-rank job."""
    props = {"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 102085492736, "computeMajor": 9, "computeMinor": 0,
             "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
             "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
             "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
    events = []
    for k in range(steps):
        events += _step(k, rank)
    return {"schemaVersion": 1,
            "deviceProperties": [props, {**props, "id": 1}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2, "pg_count": 1,
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                               "pg_size": 2, "ranks": [0, 1]}]},
            "trace_id": "AB251DC8E52B485BBF0E1ED86975E20F", "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1790857026000000000, "traceName": "/tmp/w.pt.trace.json",
            "traceEvents": events}


# -- mutations -------------------------------------------------------------------------------
def _marker(i: int) -> str:
    return f"@@BAD{i}@@"


def _set_event_field(ev: dict, field: str, marker: str) -> dict | str:
    """The event with ``field`` set to marker (the marker itself for the whole event)."""
    if field == "":
        return marker
    if field.startswith("args."):
        key = field[5:]
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if key == "*":
            key = next(iter(args), "value")
        ev["args"] = {**args, key: marker}
    else:
        ev[field] = marker
    return ev


def _set_path(doc: dict, path: tuple, marker: str) -> bool:
    """doc at path := marker; False when the path is not in doc."""
    node = doc
    for key in path[:-1]:
        ok = (isinstance(node, dict) and key in node) or (isinstance(node, list) and isinstance(key, int)
                                                          and key < len(node))
        if not ok:
            return False
        node = node[key]
    last = path[-1]
    if isinstance(node, dict) and last in node:
        node[last] = marker
        return True
    if isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = marker
        return True
    return False


def render(doc: dict | list, values: dict[str, str]) -> bytes:
    """The document's JSON with each quoted marker replaced by its value's JSON text."""
    text = json.dumps(doc)
    for marker, literal in values.items():
        text = text.replace(f'"{marker}"', literal)
    return text.encode()


def event_targets(doc: dict | list) -> dict[str, list[int]]:
    """Per kind, the indexes in traceEvents of its events."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out: dict[str, list[int]] = {}
    for i, ev in enumerate(events):
        for kind, match in KINDS.items():
            if isinstance(ev, dict) and match(ev):
                out.setdefault(kind, []).append(i)
                break
    return out


def isolated_cases(doc: dict | list, values: dict[str, str] = BAD_VALUES) -> Iterator[tuple[str, bytes]]:
    """One file per (kind, field, value) and per (top-level field, value): the field of the
    kind's first event (or the top-level path) set to the value; the kinds doc holds."""
    targets = event_targets(doc)
    for kind, fields in FIELDS.items():
        if kind not in targets:
            continue
        for field in fields:
            for vid, literal in values.items():
                d = copy.deepcopy(doc)
                events = d["traceEvents"] if isinstance(d, dict) else d
                i = targets[kind][0]
                events[i] = _set_event_field(events[i], field, _marker(0))
                yield f"{kind}.{field or 'event'}={vid}", render(d, {_marker(0): literal})
    if isinstance(doc, dict):
        for path in TOP_FIELDS:
            for vid, literal in values.items():
                d = copy.deepcopy(doc)
                if _set_path(d, path, _marker(0)):
                    yield f"top.{'.'.join(map(str, path))}={vid}", render(d, {_marker(0): literal})


def combined_case(doc: dict, literal: str) -> tuple[bytes, list[str]]:
    """One file holding ``literal`` in every field of every event kind, each field in an
    event of its own (so an event dropped for one field hides no other), and in every
    top-level field that is not a container of another one set; and the fields placed.
    The whole event ("" in FIELDS) is left out: an event that is not an object makes the
    decoder refuse the file, which would hide every other field.
    Needs a doc with as many events of each kind as the kind has fields (base_doc's
    steps >= 24)."""
    d = copy.deepcopy(doc)
    events = d["traceEvents"]
    targets = event_targets(d)
    placed = []
    for kind, fields in FIELDS.items():
        rows = targets.get(kind, [])
        if len(rows) < len(fields):
            raise ValueError(f"{len(rows)} {kind} events for {len(fields)} fields: more steps needed")
        for row, field in zip(rows, fields):
            if field == "":  # the whole event: a file of its own (not an object, the file is refused)
                continue
            events[row] = _set_event_field(events[row], field, _marker(0))
            placed.append(f"{kind}.{field or 'event'}")
    for path in TOP_FIELDS:
        if any(other[:len(path)] == path and other != path for other in TOP_FIELDS) or path == ("traceEvents",):
            continue  # a container of fields set here, or the events themselves: combined_top_case
        if _set_path(d, path, _marker(0)):
            placed.append("top." + ".".join(map(str, path)))
    return render(d, {_marker(0): literal}), placed


def combined_top_case(doc: dict, literal: str) -> bytes:
    """The containers of top-level fields (deviceProperties, its first entry,
    distributedInfo, its pg_config...) set to ``literal`` whole, the events kept."""
    d = copy.deepcopy(doc)
    for path in TOP_FIELDS:
        if path != ("traceEvents",) and any(o[:len(path)] == path and o != path for o in TOP_FIELDS):
            _set_path(d, path, _marker(0))
    return render(d, {_marker(0): literal})


# -- hitting every route ---------------------------------------------------------------------
def route_urls(run: str, worker: str, exp_run: str, step: int = 1) -> dict[str, str]:
    """A URL (path and query) for every route of the plugin, on ``run``'s ``worker``."""
    from tb_profiler.plugin import ROUTE_PREFIX
    from tb_profiler.plugin.app import ROUTE_PARAMS

    sel = f"run={run}&worker={worker}"
    queries = {
        "runs": "", "status": "", "skipped": "", "views": f"run={run}", "workers": f"run={run}",
        "spans": f"run={run}&worker={worker}", "operation/stack": f"{sel}&op_name=aten::mm",
        "trace/event": f"{sel}&i=0", "trace/search": f"{sel}&q=aten", "trace/ranks": f"run={run}",
        "diff": f"{sel}&exp_run={exp_run}&exp_worker={worker}",
        "diffnode": f"{sel}&exp_run={exp_run}&exp_worker={worker}&path=",
        "tree": f"{sel}&step={step}", "critical_path": f"{sel}&step={step}",
        "trace/range_stats": f"{sel}&start_ns=0&end_ns=1000000000",
        **{r: f"run={run}" for r in ROUTE_PARAMS if r.startswith("distributed/")},
    }
    return {r: f"{ROUTE_PREFIX}{r}?{queries.get(r, sel)}" for r in ROUTE_PARAMS}


def get_settled(client, url: str, limit_s: float = 60.0):
    """GET until the answer is not a 202 (loading or computing), at most limit_s."""
    deadline = time.monotonic() + limit_s
    while True:
        r = client.get(url, environ_overrides={"HTTP_HOST": "localhost"})
        if r.status_code != 202 or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def hit_every_route(client, run: str, worker: str, exp_run: str) -> dict[str, tuple[int, bytes]]:
    """route -> (status, body) for every route, on run's worker."""
    out = {}
    for route, url in route_urls(run, worker, exp_run).items():
        r = get_settled(client, url)
        out[route] = (r.status_code, r.get_data())
    return out


def info_json(path: Path) -> tuple[int, str, str | None]:
    """`tb-profiler info --json --no-cache path` in this process: (exit code, stdout,
    the traceback's last line when it raised)."""
    from tb_profiler import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["info", "--json", "--no-cache", str(path)])
        except BaseException as exc:  # noqa: BLE001 - a traceback is what is counted
            return -1, out.getvalue(), f"{type(exc).__name__}: {exc}"
    return code, out.getvalue(), ("Traceback" in err.getvalue() and err.getvalue().splitlines()[-1]) or None


# -- the probe -------------------------------------------------------------------------------
def _load_doc(path: Path):
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        import gzip
        raw = gzip.decompress(raw)
    return json.loads(raw)


def probe(paths: list[Path], workdir: Path) -> int:
    """Every isolated mutation of each trace served by one plugin (one run per mutation,
    the unmutated trace as diff's other side), every route hit, info --json run on each;
    prints each 500 and traceback and their counts; returns the count of failures."""
    from werkzeug.test import Client

    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    logdir = workdir / "log"
    cases = []
    for n, path in enumerate(paths):
        doc = _load_doc(path)
        base = logdir / f"b{n}-base"
        base.mkdir(parents=True)
        (base / "w.pt.trace.json").write_bytes(json.dumps(doc).encode())
        for k, (case, text) in enumerate(isolated_cases(doc)):
            run = f"b{n}-{k:05d}"
            (logdir / run).mkdir()
            (logdir / run / "w.pt.trace.json").write_bytes(text)
            cases.append((run, f"b{n}-base", f"{Path(path).name}: {case}"))
    print(f"{len(cases)} mutated files", flush=True)
    state = ProfilerState(str(logdir), reload_s=3600, cache=False, jobs=1)
    app = ProfilerApp(state, standalone=True)
    state.start()
    state.wait_scanned(600)
    client = Client(app)
    requests = fails = tracebacks = 0
    t0 = time.monotonic()
    try:
        for i, (run, base_run, case) in enumerate(cases):
            for route, (status, body) in hit_every_route(client, run, "w", base_run).items():
                requests += 1
                if status >= 500:
                    fails += 1
                    print(f"500 {route} [{case}]: {body[:300].decode('utf-8', 'replace')}", flush=True)
            code, _, tb = info_json(logdir / run / "w.pt.trace.json")
            if tb is not None:
                tracebacks += 1
                print(f"info traceback [{case}]: {tb}", flush=True)
            if i % 200 == 199:
                print(f"... {i + 1} files, {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        state.stop()
        app.close()
    print(f"{fails} x 5xx in {requests} requests over {len(cases)} files; {tracebacks} info tracebacks")
    return fails + tracebacks


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tbp-bad-fields-") as tmp:
        sys.exit(1 if probe([Path(p) for p in sys.argv[1:]], Path(tmp)) else 0)
