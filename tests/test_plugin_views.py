"""Route bodies of the plugin (tb_profiler.plugin.views) on real traces, without HTTP."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
from datafiles import V100_TRACE as V100

import tb_profiler
from tb_profiler.plugin.timeline import event_detail
from tb_profiler.plugin.views import operation_stack, operation_table


def test_operation_table_by_call_stack_gives_frames(sample_traces):
    trace = tb_profiler.load(next(p for p in sample_traces if "cnn_dataloader_0workers" in str(p)), cache=False)
    doc = operation_table(trace, "OperationAndStack")
    table = trace.operators("stack")
    assert len(doc["rows"]) == len(table)
    with_frames = [r for r in doc["rows"] if r["frames"]]
    assert with_frames, "torch 2.13 with_stack=True traces have python_function stacks"
    # torch 2.x writes paths relative to the sys.path entry they were found under.
    assert any(f["file"] == "cnn.py" for r in with_frames for f in r["frames"])
    assert all(isinstance(f["line"], int) and f["line"] > 0 for r in with_frames for f in r["frames"] if f["file"])


def test_operation_table_by_call_stack_on_a_legacy_call_stack_trace():
    trace = tb_profiler.load(V100, cache=False)
    rows = operation_table(trace, "stack")["rows"]
    assert sum(r["calls"] for r in rows) == int(trace.operators("name")["calls"].sum())
    assert any(r["frames"] for r in rows)  # PyTorch 1.9 "Call stack" args


_SOURCE_FRAME = re.compile(r"^(.*?)\((\d+)\): (.*)$", re.DOTALL)


def _raw_forward_stacks(path) -> tuple[list[dict], list[tuple]]:
    """From the raw JSON alone: the ConvolutionBackward0 events in time order, and for each
    the Python stack (file, line, func), innermost first, of the forward op its fwdbwd
    flow starts at: the python_function events around that op on its thread that name a
    source line."""
    evs = json.loads(Path(path).read_text())["traceEvents"]
    spans = [e for e in evs if e.get("ph") == "X"]
    at = {}  # (pid, tid, ts) -> the cpu_op starting there (where a flow event binds)
    for e in spans:
        if e.get("cat") == "cpu_op":
            at.setdefault((e["pid"], e["tid"], e["ts"]), e)
    ends = {}
    for f in (e for e in evs if e.get("cat") == "fwdbwd"):
        ends.setdefault(f["id"], {})[f["ph"]] = at[(f["pid"], f["tid"], f["ts"])]
    forward_of = {id(e["f"]): e["s"] for e in ends.values() if "s" in e and "f" in e}
    pyf = [e for e in spans if e.get("cat") == "python_function"]
    backward = sorted((e for e in spans if e["name"] == "ConvolutionBackward0"), key=lambda e: e["ts"])
    stacks = []
    for bw in backward:
        fw = forward_of[id(bw)]
        assert fw["name"] == "aten::convolution"
        around = [p for p in pyf if (p["pid"], p["tid"]) == (fw["pid"], fw["tid"])
                  and p["ts"] <= fw["ts"] and p["ts"] + p["dur"] >= fw["ts"] + fw["dur"]]
        around.sort(key=lambda p: (-p["ts"], p["dur"]))       # innermost first
        frames = [_SOURCE_FRAME.match(p["name"]) for p in around]
        stacks.append(tuple((m[1], int(m[2]), m[3]) for m in frames if m))
    return backward, stacks


def _frames(frames: list[dict]) -> tuple:
    return tuple((f["file"], f["line"], f["func"]) for f in frames)


def test_backward_ops_show_their_forward_ops_stack(sample_traces):
    """A backward op's stack is its forward op's (fwdbwd flow), said so: the stack route
    groups ConvolutionBackward0 by the stacks of the aten::convolution calls that made
    them, and an event's details give its forward op's stack, both marked "forward op
    aten::convolution"; all checked against a walk of the raw JSON."""
    path = min(p for p in sample_traces if "cnn_dataloader_0workers" in str(p))
    trace = tb_profiler.load(path, cache=False)
    backward, stacks = _raw_forward_stacks(path)
    assert len(backward) >= 10 and all(stacks) and len(set(stacks)) >= 2
    # the stack route: one row per distinct forward stack, calls as in the raw JSON
    doc = operation_stack(trace, "Operation", "ConvolutionBackward0", None)
    assert {_frames(r["frames"]): r["calls"] for r in doc["rows"]} == Counter(stacks)
    assert {r["stack_from"] for r in doc["rows"]} == {"forward op aten::convolution"}
    # grouped by stack in the operator table too
    by_stack = [r for r in operation_table(trace, "OperationAndStack")["rows"] if r["name"] == "ConvolutionBackward0"]
    assert {(_frames(r["frames"]), r["stack_from"], r["calls"]) for r in by_stack} == {
        (s, "forward op aten::convolution", n) for s, n in Counter(stacks).items()}
    # the details of each backward event, and of the engine's span around it
    names = trace.str(trace.events["name"])
    ts = trace.events["ts"]

    def rows_of(name):
        rows = np.flatnonzero(names == name)
        return rows[np.argsort(ts[rows], kind="stable")].tolist()

    wrappers = rows_of("autograd::engine::evaluate_function: ConvolutionBackward0")
    assert len(rows_of("ConvolutionBackward0")) == len(wrappers) == len(backward)
    for i, wrapper, want in zip(rows_of("ConvolutionBackward0"), wrappers, stacks):
        for row in (i, wrapper):
            got = event_detail(trace, row)["forward_stack"]
            assert got["stack_from"] == "forward op aten::convolution"
            assert names[got["forward_i"]] == "aten::convolution"
            assert _frames(got["frames"]) == want
    # a forward op shows no borrowed stack
    assert "forward_stack" not in event_detail(trace, rows_of("aten::convolution")[0])
    own = operation_stack(trace, "Operation", "aten::convolution", None)["rows"]
    assert own and all(r["stack_from"] is None for r in own)
