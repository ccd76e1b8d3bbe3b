"""CUDA graph replay traces in Kineto's format, with known answers (tests/data/cuda_graphs).

Written the way Kineto writes a graph replay: one ``cudaGraphLaunch`` runtime call per
replay (category cuda_runtime, its ``correlation``), and every kernel, copy and fill of
the graph on the device row (pid 0, tid = stream 7) under that same correlation id,
each with ``graph id`` (the exec graph) and ``graph node id`` (the node's toolsId:
graph id << 32 | node), plus one ac2g flow per device event. The annotations are those
``torch.cuda._graph_annotations.mark_kernels`` records (``get_kernel_annotations()``:
{toolsId: [annotation]}), merged by torch's own ``annotate_trace``.

    graph 1 (exec id 1), replayed 3 times, per replay (us):
      node 1 kernel gemm_kernel  10   {"str": "phase_A"}
      node 2 kernel relu_kernel   2   {"str": "phase_A"}
      node 3 memcpy DtoD          4   {"str": "phase_B"}
      node 4 memset               1   {"module": "decoder", "op": "fill"}
    graph 2 (exec id 2), replayed once: node 1 kernel g2_kernel 5 us, no annotation
    one eager kernel eager_add_kernel 3 us (aten::add -> cudaLaunchKernel)

Device work: 3 x 17 + 5 + 3 = 59 us; graph work 56 us (94.9 %) in 13 events.

``python tests/graph_fixtures.py`` rewrites the gzipped files.
"""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "cuda_graphs"
HOST, DEV, STREAM = 100, 0, 7
T0 = 1_700_000_000_000.0  # us
G1, G2 = 1, 2


def tools_id(graph: int, node: int) -> int:
    """A graph node's toolsId as CUDA gives it (and Kineto writes as graph node id)."""
    return graph << 32 | node


# toolsId -> [annotation], as get_kernel_annotations() returns after remap_to_exec_graph.
ANNOTATIONS = {tools_id(G1, 1): [{"str": "phase_A"}], tools_id(G1, 2): [{"str": "phase_A"}],
               tools_id(G1, 3): [{"str": "phase_B"}], tools_id(G1, 4): [{"module": "decoder", "op": "fill"}]}
# (node, category, name, dur us)
GRAPH1 = [(1, "kernel", "gemm_kernel", 10.0), (2, "kernel", "relu_kernel", 2.0),
          (3, "gpu_memcpy", "Memcpy DtoD (Device -> Device)", 4.0), (4, "gpu_memset", "Memset (Device)", 1.0)]
GRAPH2 = [(1, "kernel", "g2_kernel", 5.0)]


def _x(cat, name, pid, tid, ts, dur, args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": dur, "args": args}


def _device_args(cat: str, corr: int, ext: int, graph: int | None, node: int | None) -> dict:
    args = {"External id": ext, "device": DEV, "context": 1, "stream": STREAM, "correlation": corr}
    if cat == "kernel":
        args.update({"queued": 0, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5,
                     "warps per SM": 2.0, "grid": [66, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 25})
    else:
        args.update({"bytes": 4096, "memory bandwidth (GB/s)": 1.024})
    if graph is not None:
        args.update({"graph id": graph, "graph node id": tools_id(graph, node)})
    return args


def _launch(events, ts, corr, ext, call, nodes, graph):
    """One launch call at ts and its device work after it (one flow per device event)."""
    events.append(_x("cuda_runtime", call, HOST, HOST, ts, 6.0, {"External id": ext, "cbid": 311,
                                                                  "correlation": corr}))
    events.append({"ph": "s", "id": corr, "pid": HOST, "tid": HOST, "ts": ts, "cat": "ac2g", "name": "ac2g"})
    t = ts + 10.0
    for node, cat, name, dur in nodes:
        events.append(_x(cat, name, DEV, STREAM, t, dur, _device_args(cat, corr, ext, graph, node)))
        events.append({"ph": "f", "id": corr, "pid": DEV, "tid": STREAM, "ts": t, "cat": "ac2g", "name": "ac2g",
                       "bp": "e"})
        t += dur + 0.5


def replay_trace() -> dict:
    """The graph replay trace without annotations (see the module's docstring)."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": DEV, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": DEV, "tid": STREAM, "args": {"name": "stream 7 "}},
    ]
    corr = 1000
    for step in range(3):
        t = T0 + 200.0 * step
        ev.append(_x("user_annotation", f"ProfilerStep#{step + 1}", HOST, HOST, t, 150.0, {"External id": 10 + step}))
        _launch(ev, t + 5.0, corr, 20 + step, "cudaGraphLaunch", GRAPH1, G1)
        corr += 1
    t = T0 + 700.0
    _launch(ev, t, corr, 30, "cudaGraphLaunch", GRAPH2, G2)
    ev.append(_x("cpu_op", "aten::add", HOST, HOST, t + 40.0, 20.0, {"External id": 31}))
    _launch(ev, t + 45.0, corr + 1, 31, "cudaLaunchKernel", [(0, "kernel", "eager_add_kernel", 3.0)], None)
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                      "totalGlobalMem": 85_000_000_000, "computeMajor": 9,
                                                      "computeMinor": 0, "numSms": 132}],
            "traceEvents": ev, "traceName": "replay", "displayTimeUnit": "ms"}


def annotated_trace() -> dict:
    """The replay trace as torch's ``annotate_trace`` rewrites it with ANNOTATIONS."""
    from torch.cuda._annotate_cuda_graph_trace import annotate_trace

    trace = copy.deepcopy(replay_trace())
    annotate_trace(trace, ANNOTATIONS)
    return trace


def write(trace: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(trace).encode())
    return path


if __name__ == "__main__":
    write(replay_trace(), DATA / "replay.pt.trace.json.gz")
    write(annotated_trace(), DATA / "annotated.pt.trace.json.gz")
