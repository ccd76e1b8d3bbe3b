"""Python call stacks of operators, as interned frame chains with file and line parsed.

Why interned: a trace repeats the same few hundred stacks across thousands of ops, so a
stack is a node id in a prefix tree (parent node, frame); two ops with the same frames
share one id, grouping by stack is grouping by an int, and the frames are rebuilt only
for the stacks a view shows.

Two sources, one shape:
- modern traces (``with_stack=True``): ``python_function`` events nested around the op on
  its thread, each named ``"path/to/file.py(123): func"``; ``<built-in ...>`` calls and
  ``nn.Module: X`` markers have no source line and are skipped.
- PyTorch 1.8-1.10 traces: the op's ``Call stack`` arg, ``"file(line): func;..."``,
  innermost frame first.
Frames are always listed innermost first, as both torch and the old plugin show them.

A trace's frames also carry ``path``, the absolute path of the recorded file on this
machine, when one is found (analysis/sources.py: torch 2.x records names relative to
sys.path entries); ``file`` stays as recorded.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_profiler.analysis.links import device_mask, forward_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.nesting import depth
from tb_profiler.analysis.sources import SourceResolver, source_resolver
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.strings import safe_ids

NO_STACK = -1
_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<func>.*)$", re.DOTALL)


def parse_frame(text: str) -> dict:
    """``"path/file.py(123): func"`` -> {file, line, func}; other text -> file/line None."""
    m = _FRAME.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        return {"file": None, "line": None, "func": text}
    return {"file": m["file"], "line": int(m["line"]), "func": m["func"]}


def is_source_frame(text: str) -> bool:
    """Whether a frame names a source line (a Python call), not a C call or a marker."""
    return isinstance(text, str) and _FRAME.match(text.strip()) is not None


def frames_of(stack) -> list[dict]:
    """Frames of one stack, innermost first: a ``Call stack`` string ("a(1): f;b(2): g")
    or a sequence of frame strings. Empty input gives []."""
    if stack is None:
        return []
    parts = stack.split(";") if isinstance(stack, str) else list(stack)
    return [parse_frame(p) for p in (s.strip() for s in parts) if p]


@dataclass(frozen=True)
class StackTable:
    """The interned stacks of one trace: node i is a stack whose innermost frame is
    ``frames[frame[i]]`` and whose callers are the stack ``parent[i]`` (-1: none)."""

    parent: np.ndarray
    frame: np.ndarray
    frames: np.ndarray  # object array of frame texts
    resolver: SourceResolver | None = None  # adds each frame's ``path`` where found

    def __len__(self) -> int:
        return len(self.parent)

    def texts(self, sid: int) -> list[str]:
        """Frame texts of stack ``sid``, innermost first (one walk up the tree)."""
        out = []
        while 0 <= sid < len(self.parent):
            out.append(self.frames[self.frame[sid]])
            sid = int(self.parent[sid])
        return out

    def frames_of(self, sid: int) -> list[dict]:
        """Frames {file, line, func[, path]} of stack ``sid``, innermost first."""
        return [with_path(parse_frame(t), self.resolver) for t in self.texts(sid)]


def with_path(frame: dict, resolver: SourceResolver | None) -> dict:
    """The frame with ``path`` (absolute, existing) added when its file resolves; a frame
    that does not resolve is returned as parsed, without the key."""
    path = resolver.resolve(frame["file"]) if resolver is not None and frame["file"] else None
    if path is not None:
        frame["path"] = path
    return frame


class _Interner:
    """Prefix-tree node ids for (parent node, frame) pairs, vectorized per batch."""

    def __init__(self, n_frames: int):
        self.base = n_frames + 1
        self.keys = np.zeros(0, np.int64)   # sorted
        self.ids = np.zeros(0, np.int64)
        self.parent: list[np.ndarray] = []
        self.frame: list[np.ndarray] = []
        self.n = 0

    def intern(self, parent: np.ndarray, frame: np.ndarray) -> np.ndarray:
        """Node id of each (parent, frame) pair, creating the missing nodes."""
        key = (parent + 1) * self.base + frame
        uniq, inv = np.unique(key, return_inverse=True)
        pos = np.minimum(np.searchsorted(self.keys, uniq), max(len(self.keys) - 1, 0))
        found = (self.keys[pos] == uniq) if len(self.keys) else np.zeros(len(uniq), bool)
        out = np.empty(len(uniq), np.int64)
        out[found] = self.ids[pos[found]]
        new = np.flatnonzero(~found)
        out[new] = self._add(uniq[new])
        return out[inv]

    def intern_chains(self, chains: list[list[int]]) -> np.ndarray:
        """Node id of each chain of frame indexes (outermost first); a dict walk, for the
        few hundred distinct ``Call stack`` strings of a trace."""
        known = dict(zip(self.keys.tolist(), self.ids.tolist()))
        new_keys: list[int] = []
        out = np.full(len(chains), NO_STACK, np.int64)
        for k, chain in enumerate(chains):
            sid = NO_STACK
            for f in chain:
                key = (sid + 1) * self.base + f
                if key not in known:
                    known[key] = self.n + len(new_keys)
                    new_keys.append(key)
                sid = known[key]
            out[k] = sid
        self._add(np.array(new_keys, np.int64))
        return out

    def _add(self, keys: np.ndarray) -> np.ndarray:
        ids = self.n + np.arange(len(keys), dtype=np.int64)
        self.n += len(keys)
        self.parent.append(keys // self.base - 1)
        self.frame.append(keys % self.base)
        all_keys = np.concatenate([self.keys, keys])
        order = np.argsort(all_keys, kind="stable")
        self.keys, self.ids = all_keys[order], np.concatenate([self.ids, ids])[order]
        return ids

    def table(self, frames: np.ndarray, resolver: SourceResolver | None = None) -> StackTable:
        cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
        return StackTable(cat(self.parent), cat(self.frame), frames, resolver)


def _python_frames(trace):
    """python_function rows, each one's nearest python_function ancestor (as an index
    into those rows, -1 for the outermost) and its name id."""
    ev = trace.events
    is_pf = ev["kind"] == Kind.PYTHON_FUNCTION
    rows = np.flatnonzero(is_pf)
    anc = nearest_ancestor(trace, rows, is_pf, include_self=False)
    local = np.full(len(ev), -1, np.int64)
    local[rows] = np.arange(len(rows))
    parent = np.where(anc >= 0, local[np.maximum(anc, 0)], -1)
    return rows, parent, ev["name"][rows]


def _frame_lut(name_ids: np.ndarray, strings: np.ndarray, frames: list[str], index: dict) -> np.ndarray:
    """Frame index for each name id (-1: not a source frame), adding new texts to frames."""
    lut = np.full(len(strings) + 1, -1, np.int64)
    valid = name_ids[(name_ids >= 0) & (name_ids < len(strings))]
    for i in np.unique(valid).tolist():
        text = strings[i]
        if is_source_frame(text):
            lut[i] = _frame_index(text, frames, index)
    return lut.take(safe_ids(name_ids, len(strings)))


def _intern_python(trace, interner: _Interner, frame_idx: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Stack id of every python_function event, level by level from the outermost:
    a source frame extends its caller's stack, any other frame inherits it."""
    sid = np.full(len(parent), NO_STACK, np.int64)
    level = depth(parent)
    order = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[order], np.arange(level.max() + 2 if len(level) else 1))
    for d in range(len(bounds) - 1):
        at = order[bounds[d]:bounds[d + 1]]
        if not len(at):
            continue
        up = np.where(parent[at] >= 0, sid[np.maximum(parent[at], 0)], NO_STACK)
        src = frame_idx[at] >= 0
        sid[at] = up
        if src.any():
            sid[at[src]] = interner.intern(up[src], frame_idx[at[src]])
    return sid


def _intern_call_stacks(interner: _Interner, texts: list[str], frames: list[str], index: dict) -> np.ndarray:
    """Stack id of each distinct ``Call stack`` string (innermost frame written first)."""
    chains = []
    for text in texts:
        parts = [p.strip() for p in (text or "").split(";") if p.strip()]
        chains.append([_frame_index(p, frames, index) for p in reversed(parts)])
    return interner.intern_chains(chains)


def _frame_index(text: str, frames: list[str], index: dict) -> int:
    f = index.setdefault(text, len(frames))
    if f == len(frames):
        frames.append(text)
    return f


def op_stacks(trace) -> tuple[np.ndarray, StackTable]:
    """(stack id per event row, the stack table): every host event's Python stack, from
    the python_function events around it, else its ``Call stack`` arg; -1 where none.
    Inside a backward op, the stack of its forward op (``links.forward_op``;
    ``stack_sources`` says which events show such a stack)."""
    sid, table, _ = _stacks(trace)
    return sid, table


def stack_sources(trace) -> np.ndarray:
    """Per event row, the forward op whose stack ``op_stacks`` gives it (a backward op and
    what runs inside it), -1 where the stack is the event's own (or there is none)."""
    return _stacks(trace)[2]


@per_trace
def _stacks(trace) -> tuple[np.ndarray, StackTable, np.ndarray]:
    """op_stacks' (stack ids, table) and stack_sources' forward op rows, built together."""
    ev = trace.events
    strings = trace.strings
    frames: list[str] = []
    index: dict[str, int] = {}
    pf_rows, pf_parent, pf_names = _python_frames(trace)
    frame_idx = _frame_lut(pf_names, strings, frames, index)
    # Frame count is only known once the Call stack strings are split: size keys generously.
    cs = ev["call_stack"]
    cs_ids = np.unique(cs[(cs >= 0) & (cs < len(strings))])
    n_split = sum(strings[i].count(";") + 1 for i in cs_ids.tolist())
    interner = _Interner(len(frames) + n_split)
    pf_sid = _intern_python(trace, interner, frame_idx, pf_parent)
    out = np.full(len(ev), NO_STACK, np.int64)
    host = np.flatnonzero(~device_mask(trace) & (ev["kind"] != Kind.PYTHON_FUNCTION))
    if len(pf_rows) and len(host):
        anc = nearest_ancestor(trace, host, ev["kind"] == Kind.PYTHON_FUNCTION, include_self=False)
        local = np.searchsorted(pf_rows, np.maximum(anc, 0))
        out[host] = np.where(anc >= 0, pf_sid[np.minimum(local, len(pf_rows) - 1)], NO_STACK)
    if len(cs_ids):
        lut = np.full(len(strings) + 1, NO_STACK, np.int64)
        lut[cs_ids] = _intern_call_stacks(interner, [strings[i] for i in cs_ids.tolist()], frames, index)
        from_arg = lut.take(safe_ids(cs, len(strings)))
        out = np.where(out >= 0, out, from_arg)
    sid, source = _backward_from_forward(trace, out)
    return sid, interner.table(np.array(frames, dtype=object), source_resolver(trace)), source


def _backward_from_forward(trace, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Events inside a backward op take the stack of its forward op (the fwdbwd flow's
    start), as torch does with ``verbose=True``: their own Python stack is at best
    ``loss.backward()`` (none at all on the autograd engine's device threads), which
    tells no one which model line the work comes from.  Returns (stacks, the forward op
    row each event's stack came from, -1 for its own)."""
    fwd = forward_op(trace)
    source = np.full(len(out), -1, np.int64)
    bw = np.flatnonzero(fwd >= 0)
    if not len(bw):
        return out, source
    theirs = out[fwd[bw]]
    known = theirs >= 0
    out = out.copy()
    out[bw[known]] = theirs[known]
    source[bw[known]] = fwd[bw[known]]
    return out, source


def stack_from_texts(trace, name_ids: np.ndarray) -> list[str | None]:
    """What a row's stack is, in words, per forward op name id (-1: the row's own stack,
    None): "forward op aten::convolution".  Why a text: a backward op's stack is not where
    it ran but where its forward op did, and whoever reads the stack must be told."""
    return [None if n is None else f"forward op {n}" for n in trace.str(np.asarray(name_ids)).tolist()]


def forward_names(trace, rows: np.ndarray) -> np.ndarray:
    """Per row, the name id of the forward op whose stack it shows; -1 for its own stack."""
    src = stack_sources(trace)[rows]
    return np.where(src >= 0, trace.events["name"][np.maximum(src, 0)], -1).astype(np.int64)


def forward_stack(trace, i: int, max_frames: int = 200) -> dict:
    """For the event details of event ``i``: {"forward_stack": {stack_from, forward_i,
    frames (the first max_frames, innermost first)}} when its stack is its forward op's
    (see stack_sources), else {}.  Outside backward ops the stacks are not built (a click
    on a timeline event must not wait for every stack of a big trace)."""
    if forward_op(trace)[i] < 0:
        return {}
    src = int(stack_sources(trace)[i])
    if src < 0:
        return {}
    sid = int(op_stacks(trace)[0][i])
    return {"forward_stack": {"stack_from": stack_from_texts(trace, forward_names(trace, np.array([i])))[0],
                              "forward_i": src, "frames": stack_frames(trace, sid)[:max_frames]}}


def stack_frames(trace, sid: int) -> list[dict]:
    """Frames [{file, line, func[, path]}] of stack ``sid`` of this trace, innermost first."""
    return op_stacks(trace)[1].frames_of(int(sid))


def trace_frame(trace, text: str) -> dict:
    """One frame text of this trace (a python_function name, a ``Call stack`` entry) as
    {file, line, func[, path]}: for views that show single frames (event details)."""
    return with_path(parse_frame(text), source_resolver(trace))


__all__ = ["NO_STACK", "StackTable", "forward_names", "forward_stack", "frames_of", "is_source_frame", "op_stacks",
           "parse_frame", "stack_frames", "stack_from_texts", "stack_sources", "trace_frame", "with_path"]
