"""Module analysis (tb_profiler.analysis.modules): nn.Module hierarchy, host and device time.

A hand-made trace with every number worked out in the comments, Lightning names, traces
without module information, and the real torch 2.13 samples.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from datafiles import LEGACY_PROFILER_API

from tb_profiler.analysis import modules as MM
from tb_profiler.trace import load

US = 1000


def write_trace(tmp_path, events, name="t.pt.trace.json", **top):
    path = tmp_path / name
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return load(path, cache=False)


def py(name, ts, dur, pyid, parent=None, module=None):
    args = {"Python id": pyid}
    if parent is not None:
        args["Python parent id"] = parent
    if module is not None:
        args["Python module id"] = module
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def host(name, ts, dur, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def launch(ts, corr):
    return host("cudaLaunchKernel", ts, 2, cat="cuda_runtime", correlation=corr)


def kernel(ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


# Times in us.  Thread 1:
#   train.py <module> [0,1000)                        python id 1
#   ProfilerStep#1 [50,650)  ProfilerStep#2 [650,950)  (user annotations)
#   call 1: nn.Module: Net_0 [100,600)                 id 2 <- 1
#             forward [110,590)                        id 3 <- 2
#               nn.Module: Linear_0 [120,320)          id 4 <- 3
#                 aten::linear [130,280): launch -> kernel 100, 30 us
#               nn.Module: ReLU_0 [350,450)            id 5 <- 3
#                 aten::relu [360,410): launch -> kernel 101, 20 us
#               aten::add [460,510): launch -> kernel 102, 10 us   (Net's own)
#   call 2: nn.Module: Net_0 [700,900)                 id 6 <- 1
#             forward [705,895)                        id 7 <- 6
#               nn.Module: Linear_0 [710,810)          id 8 <- 7
#                 aten::linear [720,770): launch -> kernel 103, 40 us
#   kernel 999 (no launch in the trace) 7 us: nobody's.
# Net_0:    calls 2, host 500+200 = 700; self (500-200-100) + (200-100) = 300;
#           device self 10 (k102); total 30+20+10+40 = 100; operators: aten::add = 1.
# Linear_0: calls 2, host 200+100 = 300 = self; device 30+40 = 70; operators 2.
# ReLU_0:   calls 1, host 100 = self; device 20; operators 1.
HAND = [
    py("train.py(1): <module>", 0, 1000, 1),
    host("ProfilerStep#1", 50, 600, cat="user_annotation"), host("ProfilerStep#2", 650, 300, cat="user_annotation"),
    py("nn.Module: Net_0", 100, 500, 2, 1, 0), py("net.py(9): forward", 110, 480, 3, 2),
    py("nn.Module: Linear_0", 120, 200, 4, 3, 0), host("aten::linear", 130, 150), launch(140, 100),
    py("nn.Module: ReLU_0", 350, 100, 5, 3, 0), host("aten::relu", 360, 50), launch(370, 101),
    host("aten::add", 460, 50), launch(470, 102),
    py("nn.Module: Net_0", 700, 200, 6, 1, 0), py("net.py(9): forward", 705, 190, 7, 6),
    py("nn.Module: Linear_0", 710, 100, 8, 7, 0), host("aten::linear", 720, 50), launch(730, 103),
    kernel(200, 30, 100), kernel(400, 20, 101), kernel(520, 10, 102), kernel(800, 40, 103), kernel(950, 7, 999),
]


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("mod"), HAND)


def test_modules_by_hand(hand):
    df = MM.modules(hand)
    assert df.attrs["source"] == "nn.Module" and df.attrs["notes"] == []
    rows = {r.path: r for r in df.itertuples()}
    assert list(rows) == ["Net_0", "Net_0/Linear_0", "Net_0/ReLU_0"]
    net, lin, relu = rows["Net_0"], rows["Net_0/Linear_0"], rows["Net_0/ReLU_0"]
    assert (net.parent_id, lin.parent_id, relu.parent_id) == (-1, net.node_id, net.node_id)
    assert (lin.name, lin.module_type, lin.depth) == ("Linear_0", "Linear", 1)
    assert (net.calls, net.host_total_ns, net.host_self_ns, net.device_total_ns, net.device_self_ns, net.operators) == (
        2, 700 * US, 300 * US, 100 * US, 10 * US, 1)
    assert (lin.calls, lin.host_total_ns, lin.host_self_ns, lin.device_total_ns, lin.device_self_ns, lin.operators) == (
        2, 300 * US, 300 * US, 70 * US, 70 * US, 2)
    assert (relu.calls, relu.host_total_ns, relu.device_total_ns, relu.operators) == (1, 100 * US, 20 * US, 1)


def test_module_tree_aggregated_and_per_step(hand):
    tree = MM.module_tree(hand)
    (net,) = tree["nodes"]
    assert [c["name"] for c in net["children"]] == ["Linear_0", "ReLU_0"]
    # Aggregated flame graph: Net 0..700 us; Linear 0..300, ReLU 300..400 from Net's left edge.
    assert (net["start_ns"], net["end_ns"]) == (0, 700 * US)
    assert [(c["start_ns"], c["end_ns"]) for c in net["children"]] == [(0, 300 * US), (300 * US, 400 * US)]
    # Calls: both Net calls, each with its own children, at their real times.
    calls = tree["calls"]
    assert [(c["start_ns"], len(c["children"])) for c in calls] == [(100 * US, 2), (700 * US, 1)]
    assert calls[0]["children"][0]["device_total_ns"] == 30 * US
    step2 = MM.module_tree(hand, step=2)["calls"]
    assert [(c["name"], c["start_ns"], c["end_ns"]) for c in step2] == [("Net_0", 700 * US, 900 * US)]
    assert [c["name"] for c in step2[0]["children"]] == ["Linear_0"]
    missing = MM.module_tree(hand, step=9)
    assert missing["calls"] == [] and "ProfilerStep#9" in missing["notes"][0]
    capped = MM.module_tree(hand, max_calls=2)
    assert "first 2" in capped["notes"][0]


def test_thread_nesting_when_python_ids_repeat(tmp_path):
    # Repeated Python ids: the parent comes from the time nesting on the thread instead.
    ev = [py("nn.Module: A_0", 0, 100, 1, None, 0), py("nn.Module: B_0", 10, 50, 1, 1, 0)]
    df = MM.modules(write_trace(tmp_path, ev))
    assert df["path"].tolist() == ["A_0", "A_0/B_0"] and "repeat" in df.attrs["notes"][0]
    assert df["host_self_ns"].tolist() == [50 * US, 50 * US]


def test_lightning_names(tmp_path):
    ev = [host("[pl][module]__main__.Net: model", 0, 100, cat="user_annotation"),
          host("[pl][module]torch.nn.modules.linear.Linear: model.fc", 10, 40, cat="user_annotation"),
          host("aten::addmm", 15, 20),
          py("nn.Module: Net_0", 0, 100, 1, None, 0)]          # ignored: Lightning names win
    df = MM.modules(write_trace(tmp_path, ev))
    assert df.attrs["source"] == "lightning"
    assert df["name"].tolist() == ["model", "model.fc"]
    assert df["module_type"].tolist() == ["__main__.Net", "torch.nn.modules.linear.Linear"]
    assert df["parent_id"].tolist() == [-1, 0] and df["operators"].tolist() == [0, 1]
    assert df["host_self_ns"].tolist() == [60 * US, 40 * US]


@pytest.mark.parametrize("events, reason", [
    ([host("aten::mm", 0, 10)], "with_stack=True"),
    ([py("foo.py(1): f", 0, 10, 1)], "Python module id"),
])
def test_no_module_information(tmp_path, events, reason):
    tr = write_trace(tmp_path, events)
    df = MM.modules(tr)
    assert df.empty and list(df.columns) == MM.MODULE_COLUMNS and reason in df.attrs["notes"][0]
    tree = MM.module_tree(tr)
    assert tree["nodes"] == [] and tree["calls"] == [] and reason in tree["notes"][0]


def test_legacy_trace_has_no_modules():
    df = MM.modules(load(LEGACY_PROFILER_API, cache=False))
    assert df.empty and df.attrs["notes"]


def test_cnn_sample_hierarchy(sample_traces):
    path = next(p for p in sample_traces if "cnn_dataloader_0workers" in str(p))
    tr = load(path, cache=False)
    df = MM.modules(tr).set_index("path")
    # samples/cnn.py: TinyResNet(stem=Sequential(Conv2d, BatchNorm2d, ReLU), layer1=BasicBlock(16, 16),
    # layer2=BasicBlock(16, 32, stride 2) with a Sequential shortcut, pool, fc); the loss outside.
    expect = ["TinyResNet_0", "TinyResNet_0/Sequential_0", "TinyResNet_0/Sequential_0/Conv2d_0",
              "TinyResNet_0/BasicBlock_0", "TinyResNet_0/BasicBlock_0/Conv2d_1", "TinyResNet_0/BasicBlock_0/ReLU_1",
              "TinyResNet_0/BasicBlock_0/Identity_0", "TinyResNet_0/BasicBlock_1/Sequential_1/Conv2d_5",
              "TinyResNet_0/AdaptiveAvgPool2d_0", "TinyResNet_0/Linear_0", "CrossEntropyLoss_0"]
    assert set(expect) <= set(df.index)
    assert len(df) == 24 and df.loc["TinyResNet_0/BasicBlock_1/Sequential_1/Conv2d_5", "depth"] == 3
    assert df.loc["TinyResNet_0", "calls"] == 2 and df.loc["TinyResNet_0/BasicBlock_0/ReLU_1", "calls"] == 4
    assert df.loc["TinyResNet_0/BasicBlock_0/Conv2d_1", "module_type"] == "Conv2d"
    # Host totals are the events' durations, summed per module (checked against the raw JSON).
    raw = json.loads(Path(path).read_text())["traceEvents"]
    dur = Counter()
    for e in raw:
        if e.get("cat") == "python_function" and e["name"] == "nn.Module: TinyResNet_0":
            dur["TinyResNet_0"] += round(e["dur"] * 1000)
    assert abs(df.loc["TinyResNet_0", "host_total_ns"] - dur["TinyResNet_0"]) <= 2
    # Children fit inside their parent; self times are never negative; no device on CPU.
    kids = df.reset_index().groupby("parent_id")["host_total_ns"].sum()
    by_id = df.reset_index().set_index("node_id")
    assert (kids.drop(-1, errors="ignore") <= by_id.loc[kids.drop(-1, errors="ignore").index, "host_total_ns"]).all()
    assert (df["host_self_ns"] >= 0).all() and (df["device_total_ns"] == 0).all()
    # The Python-id hierarchy and the thread's time nesting agree on this trace.
    from tb_profiler.analysis.links import nearest_ancestor

    _, mask, _ = MM._module_kind(tr)
    rows = np.flatnonzero(mask)
    assert np.array_equal(MM._python_parents(tr, rows, mask), nearest_ancestor(tr, rows, mask, include_self=False))
