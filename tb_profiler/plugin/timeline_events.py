"""The trace view's answers about single events: one event's detail (``trace/event``: its
columns, full args, linked events and source frames) and the search by name
(``trace/search``).

Why a module of its own: these read one event, or the string table's distinct names,
never a window; both place what they send by the timeline's index (timeline_tracks).
"""
from __future__ import annotations

import re

import numpy as np

from tb_profiler.analysis.links import NO_ROW, launch, launched_by_graph, launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.stacks import forward_stack, is_source_frame, trace_frame
from tb_profiler.decode import STRING_MAX
from tb_profiler.plugin.timeline_flows import recorded_flow_links
from tb_profiler.plugin.timeline_tracks import origin, timeline_index, wall_origin
from tb_profiler.trace.categories import KIND_NAMES, Kind
from tb_profiler.trace.strings import SHOW_MAX, shown, shown_all, used_ids

# Args holding a ";"-separated stack (as util/frames.ts isStackArg), and the most frames sent.
STACK_ARGS = frozenset({"call stack", "python stack", "stack"})
MAX_STACK_FRAMES = 512


def event_detail(trace, i: int) -> dict:
    """One event's columns, full args and linked events (launches)."""
    idx = timeline_index(trace)
    ev = trace.events
    t0 = origin(trace)
    events = {"i": i, "name": trace.str(ev["name"][i]), "cat": trace.str(ev["cat"][i]) or KIND_NAMES[ev["kind"][i]],
              "ts_ns": int(ev["ts"][i]) - t0, "dur_ns": int(ev["dur"][i]),
              "pid": idx.tracks[idx.track[i]]["pid"], "tid": idx.tracks[idx.track[i]]["tid"],
              "track": int(idx.track[i]), "depth": int(idx.depth[i])}
    links = []

    def link(j: int, relation: str) -> None:
        if j != NO_ROW and j >= 0:
            links.append({"i": int(j), "relation": relation, "name": shown(trace.str(ev["name"][j])),
                          "cat": shown(trace.str(ev["cat"][j])) or KIND_NAMES[ev["kind"][j]],
                          "ts_ns": int(ev["ts"][j]) - t0, "dur_ns": int(ev["dur"][j]),
                          "track": int(idx.track[j]), "depth": int(idx.depth[j])})

    rt, op = launch(trace), launching_op(trace)
    events["launched_by_graph"] = bool(launched_by_graph(trace)[i])
    link(int(rt[i]), "launched_by")
    link(int(op[i]), "operator")
    launched = np.flatnonzero(rt == i)
    if not len(launched):
        launched = np.flatnonzero(op == i)
    for j in launched[:1000].tolist():
        link(j, "launched")
    for j, relation in recorded_flow_links(trace, i):
        link(j, relation)
    args = event_args(trace, i)
    return {"origin_ns": str(t0), "wall_origin_ns": str(wall_origin(trace)), "event": events, "args": args, "links": links,
            "links_truncated": bool(len(launched) > 1000), **_source_frames(trace, i, events["name"], args)}


def event_args(trace, i: int) -> dict:
    """Event i's args object; an args text over STRING_MAX bytes is not parsed (its first
    SHOW_MAX bytes are shown, and its length): what trace/event sends stays bounded."""
    n = int(trace.events["args_len"][i])
    if n > STRING_MAX:
        off = int(trace.events["args_off"][i])
        head = bytes(trace.args_blob[off:off + SHOW_MAX]).decode("utf-8", "ignore")
        return {"<cut>": f"{shown(head)} [args text of {n} bytes, over {STRING_MAX}: not parsed]"}
    try:
        return trace.args(i)
    except Exception as exc:  # args text the decoder kept but json cannot parse
        return {"<error>": f"args could not be parsed: {exc}"}


def _source_frames(trace, i: int, name: str, args: dict) -> dict:
    """The event's frames with their resolved ``path`` (analysis/sources.py), for jump to
    source: ``source``, a python_function event's own frame; ``stacks``, per stack arg
    (PyTorch 1.8-1.10's ``Call stack``) its frames, innermost first; ``forward_stack``, a
    backward op's stack, its forward op's (analysis/stacks.py: forward_stack)."""
    out: dict = {}
    if trace.events["kind"][i] == Kind.PYTHON_FUNCTION and is_source_frame(name):
        out["source"] = trace_frame(trace, name)
    stacks = {k: [trace_frame(trace, f) for f in v.split(";")[:MAX_STACK_FRAMES] if f.strip()]
              for k, v in args.items() if k.lower() in STACK_ARGS and isinstance(v, str) and is_source_frame(v.split(";")[0])}
    if stacks:
        out["stacks"] = stacks
    out.update(forward_stack(trace, i, MAX_STACK_FRAMES))
    return out


# -- search --------------------------------------------------------------------------------
@per_trace
def event_names(trace) -> np.ndarray:
    """The string ids used as event names: a search scans the distinct names (thousands)
    instead of the events (millions)."""
    return used_ids(trace.events["name"], len(trace.strings))


def search(trace, q: str, limit: int, offset: int = 0) -> dict:
    """Events whose name contains q (case-insensitive), in time order: the count, and
    ``limit`` of them from ``offset`` with what the timeline needs to jump to each."""
    ev = trace.events
    ids = event_names(trace)
    # case-insensitive by the pattern, not by a lower-cased copy of every name (kept, that
    # was one more string per distinct name: 600 MB for 10 M names)
    found = re.compile(re.escape(q), re.IGNORECASE).search
    names = trace.strings[ids].tolist() if len(ids) else []
    hit = ids[np.fromiter(map(bool, map(found, names)), dtype=bool, count=len(names))] if len(ids) else ids
    rows = np.flatnonzero(np.isin(ev["name"], hit)) if len(hit) else np.zeros(0, np.int64)
    page = rows[offset:offset + limit]
    idx = timeline_index(trace)
    t0 = origin(trace)
    names = shown_all(trace.str(ev["name"][page])) if len(page) else []
    matches = [{"i": i, "ts_ns": t, "dur_ns": d, "track": tr, "depth": dp, "name": nm}
               for i, t, d, tr, dp, nm in zip(page.tolist(), (ev["ts"][page] - t0).tolist(), ev["dur"][page].tolist(),
                                              idx.track[page].tolist(), idx.depth[page].tolist(), names)]
    return {"q": q, "count": len(rows), "names": len(hit), "offset": offset, "limit": limit,
            "matches": matches, "truncated": offset + len(matches) < len(rows)}


__all__ = ["MAX_STACK_FRAMES", "STACK_ARGS", "event_args", "event_detail", "event_names", "search"]
