"""Inductor's provenance artifacts: which graph nodes a generated kernel fused, and the
user's source lines they came from.

Why: a compiled kernel's name (``triton_poi_fused_add_relu_0``) hints at what it fused;
Inductor can say exactly, when provenance tracking is on
(``torch._inductor.config.trace.provenance_tracking_level``), in files of three shapes
(torch 2.13, ``torch/_inductor/debug.py`` and ``compile_fx.py``):

- ``inductor_provenance_tracking_node_mappings*.json`` (tlparse's artifact, and
  ``dump_inductor_provenance_info``'s file in the debug trace folder):
  ``{"cppCodeToPost": {kernel: [post-grad node]}, "postToPre": {post-grad node:
  [pre-grad node]}, "preToPost": ..., "postToCppCode": ..., "version": 2.0}``;
- ``inductor_provenance_tracking_kernel_stack_traces*.json`` (tlparse):
  ``{kernel: [stack trace text]}`` (``_inductor_kernel_stack_trace``);
- AOTInductor's ``kernel_information.json`` (``create_kernel_information_json``):
  ``{kernel: {"stack_traces": [...], "post_grad_nodes": [...], "pre_grad_nodes": [...]}}``.

A kernel key is ``name:N`` (``set_kernel_post_grad_provenance_tracing`` appends a debug
handle); it is matched to the trace's kernels by the name before the last ``:``.

Trust: the files are untrusted.  They are looked for only in the trace file's own folder
(a symlink that leads out of it is skipped) and in the files or folders the user names in
``$TB_PROFILER_PROVENANCE`` (``os.pathsep``-separated: the user's explicit choice); each is
read up to MAX_BYTES, parsed as JSON and validated (lists and strings bounded); a file
that fails gives a note naming it and the problem.
"""
from __future__ import annotations

import json
import os
import re

from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.sources import source_resolver
from tb_profiler.io.discovery import COMPANION_PATTERNS, is_companion

__all__ = ["ENV_VAR", "MAX_BYTES", "artifact_files", "kernel_provenance", "parse_artifacts"]

ENV_VAR = "TB_PROFILER_PROVENANCE"
MAX_BYTES = 32 << 20     # one artifact file, at most
MAX_FILES = 16           # artifact files read per trace
MAX_KERNELS = 100_000    # kernel keys kept per file
MAX_ITEMS = 256          # nodes or stack traces kept per kernel
MAX_TEXT = 16_384        # one stack trace's text
PATTERNS = COMPANION_PATTERNS
_FRAME = re.compile(r'File "([^"\n]{1,4096})", line (\d{1,9}), in ([^\n]{1,512})')
_HANDLE = re.compile(r":\d+$")


def _matches(name: str) -> bool:
    return is_companion(name)


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def _listed(folder: str, confine: bool) -> list[str]:
    """Artifact files in one folder (sorted); with ``confine`` only those whose real path
    stays inside the folder's."""
    try:
        names = sorted(n for n in os.listdir(folder) if _matches(n))
    except OSError:
        return []
    real = os.path.realpath(folder)
    out = []
    for n in names[:MAX_FILES]:
        p = os.path.join(folder, n)
        if os.path.isfile(p) and (not confine or _inside(os.path.realpath(p), real)):
            out.append(p)
    return out


def artifact_files(trace_path: str | None, extra: str | None = None) -> list[str]:
    """The artifact files for a trace: those beside it (a local, absolute path), then those
    ``extra`` (default: ``$TB_PROFILER_PROVENANCE``) names: files as named, folders listed."""
    out: list[str] = []
    if isinstance(trace_path, str) and os.path.isabs(trace_path) and "\0" not in trace_path:
        out += _listed(os.path.dirname(trace_path), confine=True)
    named = os.environ.get(ENV_VAR, "") if extra is None else extra
    for entry in (e for e in named.split(os.pathsep) if e and "\0" not in e):
        p = os.path.abspath(os.path.expanduser(entry))
        out += _listed(p, confine=False) if os.path.isdir(p) else [p] if os.path.isfile(p) else []
    return list(dict.fromkeys(out))[:MAX_FILES]


def _read(path: str) -> tuple[object, str | None]:
    """(parsed JSON, None) or (None, what is wrong), reading at most MAX_BYTES."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        return None, f"{name}: cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_BYTES:
        return None, f"{name}: larger than {MAX_BYTES} bytes, not read"
    try:
        return json.loads(data), None
    except (ValueError, RecursionError) as exc:
        return None, f"{name}: not valid JSON ({str(exc)[:200]})"


def _texts(value, limit: int = MAX_TEXT) -> list[str]:
    """A list of strings, bounded; anything else empty."""
    if not isinstance(value, list):
        return []
    return [v[:limit] for v in value[:MAX_ITEMS] if isinstance(v, str)]


def _merge(out: dict, kernel, field: str, values: list[str]) -> None:
    if not isinstance(kernel, str) or not values:
        return
    entry = out.setdefault(_HANDLE.sub("", kernel[:1024]), {"post_grad_nodes": [], "pre_grad_nodes": [],
                                                             "stack_traces": []})
    have = entry[field]
    for v in values:
        if v not in have and len(have) < MAX_ITEMS:
            have.append(v)


def _from_doc(doc: dict, out: dict) -> bool:
    """Folds one parsed artifact into ``out``; False when its shape is none of the three."""
    if "cppCodeToPost" in doc or "postToPre" in doc:
        post_to_pre = doc.get("postToPre") if isinstance(doc.get("postToPre"), dict) else {}
        kernels = doc.get("cppCodeToPost") if isinstance(doc.get("cppCodeToPost"), dict) else {}
        for kernel, nodes in list(kernels.items())[:MAX_KERNELS]:
            post = _texts(nodes, 512)
            _merge(out, kernel, "post_grad_nodes", post)
            _merge(out, kernel, "pre_grad_nodes", [p for n in post for p in _texts(post_to_pre.get(n), 512)])
        return True
    items = list(doc.items())[:MAX_KERNELS]
    if items and all(isinstance(v, dict) for _, v in items):  # kernel_information.json
        for kernel, info in items:
            _merge(out, kernel, "post_grad_nodes", _texts(info.get("post_grad_nodes"), 512))
            _merge(out, kernel, "pre_grad_nodes", _texts(info.get("pre_grad_nodes"), 512))
            _merge(out, kernel, "stack_traces", _texts(info.get("stack_traces")))
        return True
    if all(isinstance(v, list) for _, v in items):  # kernel -> stack traces
        for kernel, traces in items:
            _merge(out, kernel, "stack_traces", _texts(traces))
        return True
    return False


def parse_artifacts(files: list[str]) -> tuple[dict, list[str], list[str]]:
    """({kernel name: {"post_grad_nodes", "pre_grad_nodes", "stack_traces"}}, the files
    used (base names), notes naming each file that could not be used and why)."""
    out: dict = {}
    used, notes = [], []
    for path in files:
        doc, problem = _read(path)
        if problem is None and not isinstance(doc, dict):
            problem = f"{os.path.basename(path)}: not a JSON object"
        if problem is None and not _from_doc(doc, out):
            problem = f"{os.path.basename(path)}: not an Inductor provenance artifact (unknown shape)"
        if problem:
            notes.append(problem)
        else:
            used.append(os.path.basename(path))
    return out, used, notes


def frames(trace, stack_traces: list[str]) -> list[dict]:
    """The user's source lines of a kernel's stack traces (innermost last, as Python prints
    them): {file, line, func, path}, ``path`` the existing file it resolves to (or None)."""
    resolve = source_resolver(trace).resolve
    seen, out = set(), []
    for text in stack_traces:
        for m in _FRAME.finditer(text):
            key = (m.group(1), int(m.group(2)))
            if key in seen or len(out) >= MAX_ITEMS:
                continue
            seen.add(key)
            out.append({"file": key[0], "line": key[1], "func": m.group(3).strip(), "path": resolve(key[0])})
    return out


@per_trace
def kernel_provenance(trace) -> dict:
    """{"kernels": {name: {"post_grad_nodes", "pre_grad_nodes", "stack_traces", "frames"}},
    "files": [...], "notes": [...]} for the trace's artifacts (empty when there are none)."""
    found, used, notes = parse_artifacts(artifact_files(trace.source))
    for info in found.values():
        info["frames"] = frames(trace, info["stack_traces"])
    return {"kernels": found, "files": used, "notes": notes}
