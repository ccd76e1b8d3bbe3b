"""How events relate: host call nesting, and which host call launched each device event.

Kineto links a kernel (memcpy, memset) to the runtime call that launched it by a shared
``correlation`` id, and that call sits inside the operator that issued it. Every analysis
that attributes device time to steps, operators or modules goes through these arrays,
all indexed by row of ``trace.events``.

A graph launch (``cudaGraphLaunch``, ``hipGraphLaunch``) is one call that launches every
kernel of the graph under its one correlation id: ``launches`` counts it once, with the
device time of all its kernels together, so launch statistics never count a graph's call
once per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.keys import factorize, match
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import climb, parents
from tb_profiler.analysis.shared import compute, name_map, threads
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_SIDE, Role, role_mask

NO_ROW = -1
# Runtime/driver calls that launch a whole captured graph (CUDA, its per-thread-stream
# spellings, the driver API, HIP).
GRAPH_LAUNCH_NAMES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "cudaGraphLaunch_ptsz",
                                "cuGraphLaunch", "cuGraphLaunch_ptsz", "hipGraphLaunch", "hipGraphLaunch_spt"})


@per_trace
def device_mask(trace) -> np.ndarray:
    """Events on a device's timeline (compute, copies, fills, GPU annotations, syncs)."""
    return role_mask(trace.roles, DEVICE_SIDE)


@per_trace
def host_parent(trace) -> np.ndarray:
    """Each host event's innermost enclosing host event on the same (pid, tid); -1 for roots
    and for device events. Trace-level spans ("PyTorch Profiler (0)") take no part."""
    ev = trace.events
    host = np.flatnonzero(~device_mask(trace) & (ev["kind"] != Kind.TRACE))
    out = np.full(len(ev), NO_ROW, dtype=np.int64)
    if len(host):
        ts = ev["ts"][host]
        group = threads(trace)[0][host]  # (pid, tid, pid_str, tid_str), coded once per trace
        p = parents(group, ts, ts + ev["dur"][host])
        out[host] = np.where(p >= 0, host[np.maximum(p, 0)], NO_ROW)
    return out


@per_trace
def launch(trace) -> np.ndarray:
    """For each device event, the runtime/driver call with the same correlation id (-1 if
    the trace lacks it, e.g. cut off by the profiling window); -1 for other events."""
    ev = trace.events
    corr = ev["correlation"]
    out = np.full(len(ev), NO_ROW, dtype=np.int64)
    has = corr != MISSING_INT
    calls = np.flatnonzero((trace.roles == Role.RUNTIME) & has)
    dev = np.flatnonzero(device_mask(trace) & has)
    out[dev] = match(corr[calls], calls, corr[dev])
    return out


def nearest_ancestor(trace, rows: np.ndarray, wanted: np.ndarray, include_self: bool = True) -> np.ndarray:
    """For each row, the nearest host ancestor (or itself) for which ``wanted`` (a boolean
    mask over events) holds; -1 where none. One vectorized hop per nesting level."""
    parent = host_parent(trace)
    cur = np.asarray(rows, dtype=np.int64)
    if not include_self:
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], NO_ROW)
    return climb(parent, cur, wanted)


@per_trace
def launching_op(trace) -> np.ndarray:
    """For each device event, the innermost CPU operator that issued it: the cpu_op around
    its runtime call, else (no runtime call in the trace) the cpu_op with the same
    External id. -1 for host events and for device events with neither."""
    ev = trace.events
    is_op = ev["kind"] == Kind.CPU_OP
    rt = launch(trace)
    out = np.full(len(ev), NO_ROW, dtype=np.int64)
    dev = np.flatnonzero(rt >= 0)
    out[dev] = nearest_ancestor(trace, rt[dev], is_op, include_self=False)
    orphan = np.flatnonzero(device_mask(trace) & (out < 0) & (ev["external_id"] != MISSING_INT))
    ops = np.flatnonzero(is_op & (ev["external_id"] != MISSING_INT))
    out[orphan] = match(ev["external_id"][ops], ops, ev["external_id"][orphan])
    return out


@per_trace
def graph_launch_calls(trace) -> np.ndarray:
    """Per event: a runtime call that launches a captured graph (cudaGraphLaunch, ...)."""
    names = name_map(trace, GRAPH_LAUNCH_NAMES.__contains__)
    return names & (trace.roles == Role.RUNTIME)


@per_trace
def launched_by_graph(trace) -> np.ndarray:
    """Per event: device work launched by a graph launch (one of many kernels sharing the
    graph launch's correlation id)."""
    rt = launch(trace)
    return (rt >= 0) & graph_launch_calls(trace)[np.maximum(rt, 0)]


@dataclass(frozen=True)
class Launches:
    """Every runtime call that launched device compute, once per call (a graph launch once,
    not once per kernel of the graph), in call-row order."""

    call: np.ndarray      # the runtime call's event row
    work_ns: np.ndarray   # device compute time it launched: its kernels' durations summed
    kernels: np.ndarray   # how many compute events it launched
    graph: np.ndarray     # a graph launch


@per_trace
def launches(trace) -> Launches:
    """The compute launches of a trace (see ``Launches``)."""
    rt = launch(trace)
    k = np.flatnonzero(compute(trace) & (rt >= 0))
    call, inv = np.unique(rt[k], return_inverse=True)
    work = np.bincount(inv, weights=trace.events["dur"][k], minlength=len(call)).astype(np.int64)
    count = np.bincount(inv, minlength=len(call)).astype(np.int64)
    return Launches(call, work, count, graph_launch_calls(trace)[call])


@per_trace
def recorded_flows(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, is fwdbwd) event rows of the trace's recorded flows other than ac2g
    (whose links the correlation ids already give): forward op -> backward op, and any
    other ``s``/``f`` pairs.

    Each flow event binds to the event on its thread starting at its exact ts (Kineto
    writes them so), a cpu_op first; the two ends of one (kind, id) are its earliest and
    latest flow event, the "bp": "e" one last on a tie."""
    fl = trace.flows
    empty = np.zeros(0, np.int64)
    keep = np.flatnonzero((fl["kind"] != Kind.AC2G) & (fl["id"] != MISSING_INT)) if len(fl) else empty
    if not len(keep):
        return empty, empty, np.zeros(0, bool)
    bound = _bind_flows(trace, keep)
    group, _ = factorize(fl["kind"][keep], fl["id"][keep])
    is_end = fl["bp"][keep] == ord("e")
    order = np.lexsort((is_end, fl["ts"][keep], group))
    g = group[order]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    last = np.r_[first[1:] - 1, len(g) - 1]
    src, dst = bound[order[first]], bound[order[last]]
    ok = (first != last) & (src >= 0) & (dst >= 0) & (src != dst)
    fwdbwd = fl["kind"][keep][order[first]] == Kind.FWDBWD
    return src[ok].astype(np.int64), dst[ok].astype(np.int64), fwdbwd[ok]


def _bind_flows(trace, rows: np.ndarray) -> np.ndarray:
    """The event row each flow row binds to (-1 when none starts there on its thread).
    Only events starting at some flow's ts take part in the join (a few per flow, not
    the whole trace)."""
    ev, fl = trace.events, trace.flows
    cand = np.flatnonzero(np.isin(ev["ts"], fl["ts"][rows]))
    n = len(cand)
    cols = ("pid", "tid", "pid_str", "tid_str", "ts")
    code, _ = factorize(*(np.concatenate([ev[c][cand], fl[c][rows]]) for c in cols))
    ev_code, fl_code = code[:n], code[n:]
    ops = np.flatnonzero(ev["kind"][cand] == Kind.CPU_OP)
    out = match(ev_code[ops], cand[ops], fl_code)
    miss = np.flatnonzero(out < 0)
    if len(miss):
        out[miss] = match(ev_code, cand, fl_code[miss])
    return out


# The autograd engine's span around one backward node ("autograd::engine::evaluate_function:
# ConvolutionBackward0" holds "ConvolutionBackward0", where the fwdbwd flow ends).
EVALUATE_FUNCTION = "autograd::engine::evaluate_function: "


def _by_sequence_number(trace) -> tuple[np.ndarray, np.ndarray]:
    """(backward node rows, their forward op rows) joined by "Sequence number", for traces
    without fwdbwd flows. A backward node carries its forward thread ("Fwd thread id" > 0)
    and the sequence number of the autograd node it runs. Every forward op reads the
    counter at entry and only the op that creates a node advances it, so many ops share a
    number (a DataLoader's aten::view included); the one that created the node is the last
    of them to start, outermost (aten::conv2d, not the aten::cudnn_convolution inside it)."""
    ev = trace.events
    seq, ftid = ev["seq_num"], ev["fwd_tid"]
    host = ~device_mask(trace)
    valid = host & (seq != MISSING_INT) & (seq >= 0)
    bwd = valid & (ftid != MISSING_INT) & (ftid > 0)
    if not bwd.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cand = np.flatnonzero(valid & ~bwd)
    cand = cand[nearest_ancestor(trace, cand, bwd, include_self=True) < 0]  # not work inside a backward node
    up = host_parent(trace)[cand]
    cand = cand[(up < 0) | (seq[np.maximum(up, 0)] != seq[cand])]  # outermost of its number
    if not len(cand):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = cand[np.lexsort((ev["ts"][cand], seq[cand]))]
    s = seq[order]
    last = order[np.r_[s[1:] != s[:-1], True]]  # per number, the last to start
    bw = np.flatnonzero(bwd)
    at = np.minimum(np.searchsorted(seq[last], seq[bw]), len(last) - 1)
    hit = seq[last][at] == seq[bw]
    return bw[hit].astype(np.int64), last[at[hit]].astype(np.int64)


@per_trace
def forward_op(trace) -> np.ndarray:
    """For each host event inside a backward op (the op a fwdbwd flow ends at, itself
    included, and the engine's evaluate_function span right around it), the forward op the
    flow starts at; -1 elsewhere. torch joins them by sequence number
    (``_set_backward_stacktraces``); the flows are that join, written."""
    ev = trace.events
    src, dst, fwdbwd = recorded_flows(trace)
    out = np.full(len(ev), NO_ROW, np.int64)
    if fwdbwd.any():
        bw, fw = dst[fwdbwd], src[fwdbwd]
    else:  # traces before torch wrote fwdbwd flows (1.8-1.10): the sequence numbers themselves
        bw, fw = _by_sequence_number(trace)
    if not len(bw):
        return out
    fwd_of = np.full(len(ev), NO_ROW, np.int64)
    fwd_of[bw] = fw
    up = host_parent(trace)[bw]
    around = np.zeros(len(ev), bool)
    around[up[up >= 0]] = True
    around &= name_map(trace, lambda s: s.startswith(EVALUATE_FUNCTION), among=around) & (fwd_of < 0)
    wrapped = (up >= 0) & around[np.maximum(up, 0)]
    fwd_of[up[wrapped]] = fw[wrapped]
    host = np.flatnonzero(~device_mask(trace))
    anc = nearest_ancestor(trace, host, fwd_of >= 0, include_self=True)
    inside = anc >= 0
    out[host[inside]] = fwd_of[anc[inside]]
    return out
