"""CUDA/HIP graph replays: per graph, and what the captured code each node ran.

Why: a graph replay is one ``cudaGraphLaunch`` (``hipGraphLaunch``) that runs every node
of the graph under the launch's one correlation id, so the kernels' launching operator is
whatever surrounds the launch, never the operator that captured them. Kineto writes
``graph id`` / ``graph node id`` on each kernel, copy and fill of a replay (decoded as
``graph_id`` / ``graph_node_id``); torch's graph annotations (analysis.graph_annotations)
name what each node ran. With them, graph device time is attributed to the captured
code; without, the views say so plainly rather than charge it all to the launch.

Graph work: device work (kernels, copies, fills) whose graph id or graph node id is set
and non-zero, or which a graph launch launched (an older trace without the ids; graph id
-1 there). "kernels" counts all of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.graph_annotations import (
    annotations_file,
    load_annotations,
    merged_fields,
    node_label,
)
from tb_profiler.analysis.links import graph_launch_calls, launch, launched_by_graph
from tb_profiler.analysis.memo import per_trace, per_trace_args
from tb_profiler.analysis.shared import durations
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

__all__ = [
    "ATTRIBUTION_COLUMNS",
    "GRAPH_COLUMNS",
    "NodeLabels",
    "graph_notes",
    "graph_rows",
    "graphs",
    "node_labels",
]

GRAPH_COLUMNS = ["graph_id", "replays", "kernels", "device_ns", "share"]
ATTRIBUTION_COLUMNS = ["annotation", "graphs", "kernels", "device_ns", "share"]


def _set(col: np.ndarray) -> np.ndarray:
    return (col != MISSING_INT) & (col != 0)


@per_trace
def graph_rows(trace) -> np.ndarray:
    """Event rows of graph work (see the module's docstring), ascending."""
    ev = trace.events
    work = role_mask(trace.roles, DEVICE_WORK)
    return np.flatnonzero(work & (_set(ev["graph_id"]) | _set(ev["graph_node_id"]) | launched_by_graph(trace)))


def _device_total(trace) -> int:
    return int(durations(trace)[role_mask(trace.roles, DEVICE_WORK)].sum())


@dataclass(frozen=True)
class NodeLabels:
    """Per graph-work row (``graph_rows`` order): the code of its annotation in ``labels``,
    -1 where it has none; where the annotations came from; notes (a refused file, ...)."""

    codes: np.ndarray
    labels: np.ndarray        # object array of str
    from_args: int            # graph nodes annotated by fields merged into the args
    file: str | None          # the annotations pickle read, if any
    notes: tuple[str, ...]


@per_trace_args
def node_labels(trace, path: str | None = None) -> NodeLabels:
    """Each graph-work row's annotation: the fields annotate_trace merged into its args,
    else the pickle (``path``, the user's explicit file, or the one beside the trace)
    entry of its graph node id. Python works once per distinct node, not per event."""
    rows = graph_rows(trace)
    if not len(rows):  # no graph work: no annotations looked for (no folder listed)
        return NodeLabels(np.zeros(0, np.int64), np.array([], dtype=object), 0, None, ())
    nodes = trace.events["graph_node_id"][rows]
    fields, notes = merged_fields(trace, rows, nodes)
    from_args = len(fields)
    file = path or annotations_file(trace.source, getattr(trace, "data_root", None))
    if file:
        loaded, more = load_annotations(file)
        notes += more
        for node, f in loaded.items():
            fields.setdefault(node, f)
    uniq, inv = np.unique(nodes, return_inverse=True)
    names = [node_label(fields[n]) if n in fields and n != MISSING_INT else None
             for n in uniq.tolist()]  # per distinct node
    labels = sorted({n for n in names if n})
    index = {name: i for i, name in enumerate(labels)}
    per_node = np.array([index[n] if n else -1 for n in names], dtype=np.int64)
    codes = per_node[inv] if len(rows) else np.zeros(0, np.int64)
    return NodeLabels(codes, np.array(labels, dtype=object), from_args, file, tuple(notes))


@per_trace
def event_labels(trace) -> tuple[np.ndarray, np.ndarray]:
    """(code per event, labels): the annotation of each graph event (the pickle found
    beside the trace), -1 for every other event; for the Kernel view's op column."""
    rows = graph_rows(trace)
    nl = node_labels(trace)
    out = np.full(len(trace.events), -1, dtype=np.int64)
    out[rows] = nl.codes
    return out, nl.labels


def _per_graph(trace, rows: np.ndarray, dur: np.ndarray, total: int):
    import pandas as pd

    ev = trace.events
    gid = np.where(ev["graph_id"][rows] == MISSING_INT, -1, ev["graph_id"][rows])
    rt = launch(trace)[rows]
    by_launch = (rt >= 0) & graph_launch_calls(trace)[np.maximum(rt, 0)]
    uniq, inv = np.unique(gid, return_inverse=True)
    pairs = np.unique(np.stack([inv[by_launch], rt[by_launch]]), axis=1) if by_launch.any() else np.zeros((2, 0))
    replays = np.bincount(pairs[0].astype(np.int64), minlength=len(uniq))
    device_ns = np.bincount(inv, weights=dur, minlength=len(uniq)).astype(np.int64)
    df = pd.DataFrame({"graph_id": uniq.astype(np.int64), "replays": replays.astype(np.int64),
                       "kernels": np.bincount(inv, minlength=len(uniq)).astype(np.int64), "device_ns": device_ns,
                       "share": device_ns / total if total else np.zeros(len(uniq))})
    return df.sort_values(["device_ns", "graph_id"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _attribution(trace, rows: np.ndarray, dur: np.ndarray, nl: NodeLabels, total: int):
    import pandas as pd

    hit = nl.codes >= 0
    code = nl.codes[hit]
    m = len(nl.labels)
    gid = trace.events["graph_id"][rows][hit]
    pairs = np.unique(np.stack([code, gid]), axis=1) if len(code) else np.zeros((2, 0), np.int64)
    device_ns = np.bincount(code, weights=dur[hit], minlength=m).astype(np.int64)
    df = pd.DataFrame({"annotation": pd.Series(list(nl.labels), dtype=object),
                       "graphs": np.bincount(pairs[0].astype(np.int64), minlength=m).astype(np.int64),
                       "kernels": np.bincount(code, minlength=m).astype(np.int64), "device_ns": device_ns,
                       "share": device_ns / total if total else np.zeros(m)})
    df = df[df["kernels"] > 0]
    return df.sort_values(["device_ns", "annotation"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _note(trace, n: int, graph_ns: int, total: int, annotated: int, annotated_ns: int) -> str:
    word = trace.device_word
    pct = 100.0 * graph_ns / total if total else 0.0
    head = f"graph replay: {n} kernels, {pct:.1f} % of {word} time"
    if not annotated:
        return f"{head}, cannot be attributed to operators"
    if annotated == n:
        return f"{head}, attributed to the captured code by torch's graph annotations"
    rest = 100.0 * (graph_ns - annotated_ns) / total if total else 0.0
    left = n - annotated
    what, verb = ("kernel", "has") if left == 1 else ("kernels", "have")
    return (f"{head}: {annotated} attributed by torch's graph annotations; {left} {what} "
            f"({rest:.1f} % of {word} time) {verb} none and cannot be attributed to operators")


def graphs(trace, annotations: str | None = None) -> dict:
    """The graph replays of a trace.

    Returns {"graphs": one row per graph id (GRAPH_COLUMNS: replays = graph launches that
    ran it, kernels = its kernels, copies and fills, device_ns, share of all device work
    time), "attribution": one row per annotation of the captured code (ATTRIBUTION_COLUMNS:
    graphs = graph ids it ran in), "kernels", "device_ns", "share", "annotated" (graph
    events with an annotation), "annotations": {"file", "from_args"}, "notes"}.

    annotations: a torch annotations pickle the user names; default: the one beside the
    trace (graph_annotations.annotations_file).
    """
    rows = graph_rows(trace)
    dur = durations(trace)[rows].astype(np.float64)
    total = _device_total(trace)
    nl = node_labels(trace, annotations)
    graph_ns = int(dur.sum())
    annotated = int((nl.codes >= 0).sum())
    notes = list(nl.notes)
    if len(rows):
        notes.append(_note(trace, len(rows), graph_ns, total, annotated, int(dur[nl.codes >= 0].sum())))
    return {"graphs": _per_graph(trace, rows, dur, total), "attribution": _attribution(trace, rows, dur, nl, total),
            "kernels": len(rows), "device_ns": graph_ns, "share": graph_ns / total if total else 0.0,
            "annotated": annotated, "annotations": {"file": nl.file, "from_args": nl.from_args}, "notes": notes}


@per_trace
def graph_notes(trace) -> list[str]:
    """The graph-replay note (and a refused annotations file's) for views that attribute
    device time to operators; [] for a trace without graph work."""
    if not len(graph_rows(trace)):
        return []
    return list(graphs(trace)["notes"])
