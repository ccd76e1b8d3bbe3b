"""Backward ops show their forward op's stack in traces older than torch's fwdbwd flows
(issue 21): the V100 ResNet50 trace (PyTorch 1.9) joins a backward node to its forward op
only by "Sequence number". The oracle walks the raw JSON: per number, the last outermost
forward op to start (the op that created the autograd node), on the threads that run no
backward node."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np

import tb_profiler
from datafiles import V100_TRACE
from tb_profiler.analysis.links import forward_op
from tb_profiler.plugin import timeline


def _oracle(path) -> dict[tuple[int, str], tuple[int, str]]:
    """{(backward node ts µs, name): (forward op ts µs, name)} from the raw events."""
    events = [e for e in json.load(gzip.open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "Operator" and "Sequence number" in e.get("args", {})]
    backward = [e for e in events if e["args"].get("Fwd thread id", 0) > 0]
    bw_tids = {e["tid"] for e in backward}
    by_tid = defaultdict(list)
    for e in events:
        if e["tid"] not in bw_tids:
            by_tid[e["tid"]].append(e)
    last: dict[int, dict] = {}
    for evs in by_tid.values():
        for e in evs:
            seq = e["args"]["Sequence number"]
            inner = any(o is not e and o["args"]["Sequence number"] == seq and o["ts"] <= e["ts"]
                        and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and (o["ts"], -o["dur"]) < (e["ts"], -e["dur"])
                        for o in evs if abs(o["ts"] - e["ts"]) < 100_000)
            if not inner and (seq not in last or e["ts"] > last[seq]["ts"]):
                last[seq] = e
    return {(b["ts"], b["name"]): (last[b["args"]["Sequence number"]]["ts"], last[b["args"]["Sequence number"]]["name"])
            for b in backward if b["args"]["Sequence number"] in last}


def test_backward_nodes_find_their_forward_op_by_sequence_number():
    trace = tb_profiler.load(str(V100_TRACE))
    want = _oracle(V100_TRACE)
    assert len(want) > 100
    ev = trace.events
    fwd = forward_op(trace)
    t0 = 0  # raw ts are µs on the profiler's clock, ours ns on the same clock
    names = trace.strings
    got = {}
    rows = np.flatnonzero(fwd >= 0)
    for r in rows[np.isin(ev["ts"][rows] // 1000, [k[0] for k in want])].tolist():
        key = (int(ev["ts"][r] // 1000) + t0, str(names[ev["name"][r]]))
        if key in want:
            f = int(fwd[r])
            got[key] = (int(ev["ts"][f] // 1000), str(names[ev["name"][f]]))
    assert got.keys() == want.keys()
    assert got == want
    assert {v[1] for v in want.values()} >= {"aten::conv2d"}


def test_a_backward_kernels_operator_shows_the_forward_convolutions_stack():
    trace = tb_profiler.load(str(V100_TRACE))
    ev = trace.events
    bwd = [i for i in np.flatnonzero(forward_op(trace) >= 0).tolist()
           if str(trace.strings[ev["name"][i]]) == "aten::cudnn_convolution_backward_input"][:3]
    assert bwd
    for i in bwd:
        d = timeline.event_detail(trace, i)["forward_stack"]
        f = int(forward_op(trace)[i])
        own = timeline.event_detail(trace, f)
        assert d["stack_from"] == "forward op aten::conv2d" and d["forward_i"] == f
        assert [(x["file"], x["line"]) for x in d["frames"]] == [(x["file"], x["line"]) for x in own["stacks"]["Call stack"]]
