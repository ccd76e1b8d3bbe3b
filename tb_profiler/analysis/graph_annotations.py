"""torch's CUDA graph annotations: what each captured graph node ran, read safely.

Why: a graph replay runs every node under one ``cudaGraphLaunch``; the kernels carry
``graph id`` / ``graph node id`` (Kineto) but nothing of the operator or module that
captured them. torch 2.13 can record that (``torch/cuda/_graph_annotations.py``:
``mark_kernels(annotation)`` during capture, ``get_kernel_annotations()`` -> ``{toolsId:
[annotation, ...]}``, an annotation a dict such as ``{"str": "phase_A"}`` or any object;
a toolsId is the exec graph id << 32 | node id, the value Kineto writes as ``graph node
id``), in two forms this module reads:

- a per-rank pickle beside the trace: ``kernel_annotations_rank{R}_*.pkl``, R the
  leading digits of the trace file's name, first in sorted order
  (``torch/cuda/_annotate_cuda_graph_trace.py``, ``_find_annotations_pkl``). torch looks one
  folder up; we look only in the trace's own folder (a symlink leading out is skipped) or
  at a file the user names explicitly;
- fields already merged into each graph event's args by ``annotate_trace``: each
  annotation's items as ``args[key] = str(value)`` (a non-dict one as ``args["annotation"]``).

Trust: the pickle is untrusted. It is read up to MAX_BYTES and unpickled by an
Unpickler whose ``find_class`` allows no global but the builtin container types (a
``defaultdict(list)``, as ``get_kernel_annotations`` returns, needs them): nothing in it
can run code. A file refused or malformed gives a note naming it and the problem.
"""
from __future__ import annotations

import io
import os
import pickle
import re

import numpy as np

from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.io.read import is_url, local_path

__all__ = [
    "MAX_BYTES",
    "MAX_NODES",
    "annotations_file",
    "fields_of",
    "load_annotations",
    "merged_fields",
    "node_label",
]

MAX_BYTES = 64 << 20        # one annotations pickle, at most
MAX_NODES = 1_000_000       # toolsIds kept from one pickle
MAX_PARSED = 50_000         # distinct graph nodes whose args are read for merged annotations
MAX_TEXT = 512              # one annotation value's text
# The only globals a pickle may name: container types (defaultdict's factory, dict/set rebuilt).
_ALLOWED = frozenset({("collections", "defaultdict"), ("collections", "OrderedDict"), ("builtins", "list"),
                      ("builtins", "dict"), ("builtins", "tuple"), ("builtins", "set"), ("builtins", "frozenset")})
_SCALARS = (str, int, float, bool, type(None))
# args keys Kineto itself writes on kernels, copies and fills: never an annotation.
KINETO_KEYS = frozenset({
    "External id", "external id", "queued", "device", "context", "stream", "correlation", "registers per thread",
    "shared memory", "blocks per SM", "warps per SM", "grid", "block", "est. achieved occupancy %", "graph id",
    "graph node id", "bytes", "memory bandwidth (GB/s)", "kind", "limitingFactors", "priority", "channel",
    "cluster", "cluster scheduling policy", "launch type", "Ev Idx", "device_type", "device_id"})


class _Refused(pickle.UnpicklingError):
    pass


class _SafeUnpickler(pickle.Unpickler):
    """Builds only plain data: any global but a builtin container type is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise _Refused(f"it names {module}.{name}, which could run code: only plain data is read")

    def persistent_load(self, pid):
        raise _Refused("it holds a persistent id: only plain data is read")


def annotations_file(trace_path: str | None, root: str | None = None) -> str | None:
    """The annotations pickle of a trace, found by name as torch's ``_find_annotations_pkl``
    does (rank = the name's leading digits): in the trace's own folder, else one level up
    (torch's layout: ``traces/step_N/<rank>.*.json.gz`` beside ``traces/kernel_annotations_rank<rank>_*.pkl``).

    root: the folder nothing may be read outside of (the server's logdir); the folder one
    level up is looked in only when it lies inside root, or when no root is given (a file
    the user opened from Python). A link that leads outside the folder it is found in is
    skipped. None when the trace is not a local file or no pickle is found."""
    if not trace_path or is_url(trace_path):
        return None
    path = local_path(trace_path)
    if not os.path.isabs(path):
        return None
    m = re.match(r"^(\d+)", os.path.basename(path))
    if not m:
        return None
    pattern = re.compile(rf"^kernel_annotations_rank{int(m.group(1))}_.*\.pkl$")
    folder = os.path.dirname(path)
    up = os.path.dirname(folder)
    folders = [folder]
    if up != folder and (root is None or _inside(up, root)):
        folders.append(up)
    for f in folders:
        found = _named_in(f, pattern)
        if found:
            return found
    return None


def _inside(path: str, root: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, top]) == top


def _named_in(folder: str, pattern: re.Pattern) -> str | None:
    """The first file of folder (by name) whose name matches pattern and that stays inside it."""
    try:
        names = sorted(n for n in os.listdir(folder) if pattern.match(n))
    except OSError:
        return None
    for n in names:
        p = os.path.join(folder, n)
        if os.path.isfile(p) and _inside(p, folder):
            return p
    return None


def _text(value) -> str:
    """An annotation value as annotate_trace writes it (``str(value)``), bounded; a nested
    container is named by its type (its text could be huge)."""
    text = str(value) if isinstance(value, _SCALARS) else f"<{type(value).__name__}>"
    return text[:MAX_TEXT]


def fields_of(annotations) -> dict[str, str]:
    """One node's annotation list merged as annotate_trace merges it into args: a dict's
    items (later win), a non-dict as "annotation"."""
    out: dict[str, str] = {}
    for ann in annotations if isinstance(annotations, (list, tuple)) else [annotations]:
        if isinstance(ann, dict):
            for k, v in ann.items():
                out[_text(k)] = _text(v)
        else:
            out["annotation"] = _text(ann)
    return out


def node_label(fields: dict[str, str]) -> str | None:
    """What a node ran, in words: the annotation's "str" (``mark_kernels("phase")``), else
    its "annotation" or "name", else its fields as k=v (the stream lane left out)."""
    for key in ("str", "annotation", "name"):
        if fields.get(key):
            return fields[key]
    rest = [f"{k}={v}" for k, v in sorted(fields.items()) if k != "stream"]
    return ", ".join(rest)[:MAX_TEXT] or None


def load_annotations(path: str) -> tuple[dict[int, dict[str, str]], list[str]]:
    """{toolsId: merged fields} from a torch annotations pickle, and notes (a refused or
    malformed file: one note naming it, and no annotations)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return {}, [f"graph annotations {path}: {size} bytes, over the {MAX_BYTES} byte limit: not read"]
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        obj = _SafeUnpickler(io.BytesIO(data)).load()
    except _Refused as e:
        return {}, [f"graph annotations {path}: refused, {e}"]
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, RecursionError, UnicodeDecodeError, OverflowError) as e:
        return {}, [f"graph annotations {path}: not a readable pickle ({type(e).__name__}: {str(e)[:200]})"]
    if not isinstance(obj, dict):
        return {}, [(f"graph annotations {path}: malformed, a {type(obj).__name__} where torch writes a dict "
                     "{toolsId: [annotation, ...]}")]
    out: dict[int, dict[str, str]] = {}
    bad = 0
    try:
        for key, anns in obj.items():
            if len(out) >= MAX_NODES:
                break
            if type(key) is not int or not isinstance(anns, (list, tuple, dict, str)):
                bad += 1
                continue
            out[key] = fields_of(anns)
    except (ValueError, TypeError, RecursionError, MemoryError) as e:
        return {}, [f"graph annotations {path}: malformed ({type(e).__name__}: {str(e)[:200]})"]
    notes = []
    if bad:
        notes.append(f"graph annotations {path}: {bad} entries are not {{int toolsId: [annotation, ...]}}: skipped")
    if len(obj) > MAX_NODES:
        notes.append(f"graph annotations {path}: {len(obj)} nodes, the first {MAX_NODES} read")
    return out, notes


def merged_fields(trace, rows: np.ndarray, node_ids: np.ndarray) -> tuple[dict[int, dict[str, str]], list[str]]:
    """{graph node id: annotation fields} that annotate_trace merged into the args of the
    given graph events: read from one event per distinct node (a node's fields are the
    same on every replay), at most MAX_PARSED nodes."""
    ok = node_ids != MISSING_INT
    uniq, first = np.unique(node_ids[ok], return_index=True)
    reps = rows[ok][first]
    notes = []
    if len(uniq) > MAX_PARSED:
        notes.append(f"graph replay: {len(uniq)} distinct graph nodes, the args of the first {MAX_PARSED} read "
                     "for merged annotations")
    out: dict[int, dict[str, str]] = {}
    for node, row in zip(uniq[:MAX_PARSED].tolist(), reps[:MAX_PARSED].tolist()):  # one per distinct node
        args = trace.args(row)
        fields = {k: v[:MAX_TEXT] for k, v in args.items() if isinstance(v, str) and k not in KINETO_KEYS}
        if fields:
            out[node] = fields
    return out, notes
