"""CUDA (and HIP) graphs: one graph launch is one launch of many kernels.

Kineto gives every kernel a graph launch issues the correlation id of that one
``cudaGraphLaunch`` / ``hipGraphLaunch`` call. The trace below is built to Kineto's format
by hand (as a torch.cuda.graphs replay records it: the call on the host thread, its
kernels on one stream, all sharing the call's correlation id, kernels carrying
``graph id``): per 1000 us step, a 300 us graph launch issues 50 kernels of 1 us each.

Before the fix, the launch-bound advice charged the 300 us call to each of the 50 kernels
(14.95 ms of "unhidden launch" per 1 ms step, 1495 %) and told a trace that already runs
on graphs to use CUDA graphs.
"""
from __future__ import annotations

import json

import pytest

from tb_profiler.analysis.links import launched_by_graph, launches
from tb_profiler.analysis.recommendations import recommendations
from tb_profiler.plugin.timeline import event_detail
from tb_profiler.api import load

US = 1000
KERNELS, CALL_US, STEPS = 50, 300, 3


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def graph_trace(call: str = "cudaGraphLaunch", eager: int = 0) -> dict:
    """STEPS steps; in each a graph launch of KERNELS kernels, plus ``eager`` ordinary
    kernels each launched by its own 10 us call (2 us kernels)."""
    ev = []
    corr = 1
    for s in range(STEPS):
        t = 10_000 + s * 1000
        ev.append(_x("user_annotation", f"ProfilerStep#{s}", 1, 1, t, 1000))
        ev.append(_x("cpu_op", "CUDAGraph::replay", 1, 1, t + 50, 400, **{"External id": corr}))
        ev.append(_x("cuda_runtime", call, 1, 1, t + 100, CALL_US, correlation=corr, **{"External id": corr}))
        for k in range(KERNELS):
            ev.append(_x("kernel", f"graph_kernel_{k % 5}", 0, 7, t + 420 + 2 * k, 1,
                         device=0, stream=7, correlation=corr, **{"graph id": 3, "graph node id": k + 1}))
        corr += 1
        for e in range(eager):
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1, 1, t + 600 + 12 * e, 10, correlation=corr))
            ev.append(_x("kernel", "eager_kernel", 0, 7, t + 605 + 12 * e, 2, device=0, stream=7, correlation=corr))
            corr += 1
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9}],
            "traceEvents": ev}


def _load(tmp_path, doc, name="g.pt.trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load(path, cache=False)


@pytest.mark.parametrize("call", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_a_graph_launch_counts_once(tmp_path, call):
    t = _load(tmp_path, graph_trace(call))
    lau = launches(t)
    assert len(lau.call) == STEPS and lau.graph.all()
    assert lau.kernels.tolist() == [KERNELS] * STEPS and lau.work_ns.tolist() == [KERNELS * US] * STEPS
    rec = {r["id"]: r for r in recommendations(t)}["launch_bound"]
    ev = rec["evidence"]
    assert (ev["launches"], ev["short_launches"], ev["graph_launches"]) == (STEPS, STEPS, STEPS)
    # Each launch outlasts its 50 us of kernels by 250 us: 25 % of each 1000 us step.
    assert ev["unhidden_launch_ns"] == STEPS * (CALL_US - KERNELS) * US
    assert ev["unhidden_share_pct"] == pytest.approx(25.0)
    assert ev["graph_kernel_share_pct"] == pytest.approx(100.0)
    # Never "use CUDA graphs" to a trace whose steps run on graphs.
    assert "CUDA graphs or torch.compile" not in rec["text"] and rec["url"] is None
    assert "already launch 100% of their kernels through graph launches" in rec["text"]


def test_kernels_launched_by_a_graph_are_known(tmp_path):
    t = _load(tmp_path, graph_trace(eager=4))
    k = t.kernels("name").set_index("name")
    assert int(k.loc["graph_kernel_0", "graph_calls"]) == int(k.loc["graph_kernel_0", "calls"]) == STEPS * 10
    assert int(k.loc["eager_kernel", "graph_calls"]) == 0 and int(k.loc["eager_kernel", "calls"]) == STEPS * 4
    rows = t.events.df()
    first_graph_kernel = int(rows.index[rows["name"] == "graph_kernel_0"][0])
    eager = int(rows.index[rows["name"] == "eager_kernel"][0])
    assert launched_by_graph(t)[first_graph_kernel] and not launched_by_graph(t)[eager]
    detail = event_detail(t, first_graph_kernel)
    assert detail["event"]["launched_by_graph"] is True
    assert [l["name"] for l in detail["links"] if l["relation"] == "launched_by"] == ["cudaGraphLaunch"]
    assert event_detail(t, eager)["event"]["launched_by_graph"] is False


def test_eager_launches_still_get_the_graphs_advice(tmp_path):
    """Mostly eager launches (4 per step, 10 us calls for 2 us kernels) beside one graph:
    the advice may suggest graphs; its shares stay within the step."""
    doc = graph_trace(eager=30)
    t = _load(tmp_path, doc)
    rec = {r["id"]: r for r in recommendations(t)}["launch_bound"]["evidence"]
    assert rec["launches"] == STEPS * 31 and rec["graph_launches"] == STEPS
    assert rec["graph_kernel_share_pct"] == pytest.approx(100 * 50 / 80)


def test_no_advice_claims_more_than_the_whole(tmp_path):
    """Every share an advice states is <= 100 %, on graph and eager traces alike."""
    for i, doc in enumerate([graph_trace(), graph_trace(eager=30), graph_trace("hipGraphLaunch", eager=5)]):
        t = _load(tmp_path, doc, f"t{i}.pt.trace.json")
        for r in recommendations(t):
            for key, value in r["evidence"].items():
                if key.endswith("_pct") and isinstance(value, (int, float)):
                    assert 0 <= value <= 100, (r["id"], key, value)
            assert "%" not in r["text"] or all(float(p) <= 100 for p in _percents(r["text"])), r["text"]


def _percents(text: str) -> list[str]:
    import re

    return re.findall(r"(\d+(?:\.\d+)?)%", text)
