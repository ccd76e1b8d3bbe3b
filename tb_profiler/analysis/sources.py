"""Where a stack frame's recorded file is on this machine: its absolute path, if any.

Why: torch 2.x writes python_function names relative to the sys.path entry a module was
imported from (``cnn.py(45): forward``, ``torch/nn/modules/module.py(1751): _call_impl``),
so an editor (VS Code's jump to source) cannot open them as written. A relative name is
looked for under, in order, and the first root holding the file wins:

1. the roots recorded in the trace by ``tb_profiler.tensorboard_trace_handler``
   (top-level key ``tbProfilerSourceRoots``: the profiled process's sys.path and cwd);
2. the roots the user names: ``tb-profiler serve --source-root DIR`` (``set_user_roots``)
   and ``TB_PROFILER_SOURCE_ROOTS`` (``os.pathsep``-separated; works under TensorBoard);
3. the folders above the trace file: its run folder, the logdir and the logdir's parents.

Trust: frame names and recorded roots come from the trace file, i.e. are untrusted text.
Nothing here opens or reads a file. A candidate is ``normpath(join(root, name))``, kept
only if it is still inside ``root`` (a ``..`` in a name cannot climb out) and
``os.path.isfile`` says it exists (a dangling symlink does not); the path is shown and
posted to the editor, never served. Each distinct file name is resolved once per trace.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from tb_profiler.analysis.memo import per_trace
from tb_profiler.writer import SOURCE_ROOTS_KEY

ENV_VAR = "TB_PROFILER_SOURCE_ROOTS"
MAX_ROOTS = 256     # recorded roots beyond this are ignored (a trace is untrusted input)
MAX_PATH = 4096     # longer names or roots are not paths any filesystem accepts

_user_roots: tuple[str, ...] = ()


def set_user_roots(roots: Iterable[str]) -> None:
    """Roots named on the command line (``tb-profiler serve --source-root``), made
    absolute against the current folder; they apply to traces resolved from now on."""
    global _user_roots
    _user_roots = tuple(os.path.abspath(os.path.expanduser(r)) for r in roots if r)


def user_roots() -> list[str]:
    """The command line's roots, then ``$TB_PROFILER_SOURCE_ROOTS``'s (read on each call,
    so TensorBoard, which has no flag for it, picks it up from its environment)."""
    env = [os.path.abspath(os.path.expanduser(r)) for r in os.environ.get(ENV_VAR, "").split(os.pathsep) if r]
    return [*_user_roots, *env]


def recorded_roots(metadata: dict) -> list[str]:
    """The roots the writer stored in the trace; anything but a list of text is ignored."""
    value = metadata.get(SOURCE_ROOTS_KEY) if isinstance(metadata, dict) else None
    if not isinstance(value, list):
        return []
    return [r for r in value[:MAX_ROOTS] if isinstance(r, str)]


def folder_roots(trace_path: str) -> list[str]:
    """The folders above a local trace file, nearest first (run folder, logdir, its
    parents); none for a URL or a trace read from bytes."""
    if not isinstance(trace_path, str) or not os.path.isabs(trace_path):
        return []
    out, folder = [], os.path.dirname(trace_path)
    while folder and folder not in out:
        out.append(folder)
        folder = os.path.dirname(folder)
    return out


def _clean(roots: Iterable[str]) -> tuple[str, ...]:
    """Absolute, normalized, distinct roots in their first order; the rest dropped."""
    seen: dict[str, None] = {}
    for r in roots:
        if isinstance(r, str) and _plausible(r) and os.path.isabs(r):
            seen.setdefault(os.path.normpath(r), None)
    return tuple(seen)


def _plausible(text: str) -> bool:
    return 0 < len(text) <= MAX_PATH and "\0" not in text


def _exists(path: str) -> bool:
    """A regular file (symlinks followed; a dangling one is not). The only filesystem
    access of this module: tests count calls through it."""
    return os.path.isfile(path)


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives (Windows), mixed absolute and relative
        return False


def resolve_under(root: str, name: str) -> str | None:
    """``root/name`` normalized, when it stays inside ``root`` and is an existing file."""
    candidate = os.path.normpath(os.path.join(root, name))
    if not _inside(candidate, root):
        return None
    return candidate if _exists(candidate) else None


class SourceResolver:
    """Recorded file name -> absolute path of an existing file, or None; memoized per name.

    Holds only root strings (no reference to the trace), so a per-trace memo of it never
    keeps its trace alive."""

    def __init__(self, roots: Iterable[str]):
        self.roots = _clean(roots)
        self._memo: dict[str, str | None] = {}

    def resolve(self, name: str | None) -> str | None:
        if not isinstance(name, str):
            return None
        if name not in self._memo:
            self._memo[name] = self._find(name)
        return self._memo[name]

    def _find(self, name: str) -> str | None:
        if not _plausible(name) or name.startswith("<"):  # <string>, <frozen os>, <built-in ...>
            return None
        if os.path.isabs(name):
            path = os.path.normpath(name)
            return path if _exists(path) else None
        for root in self.roots:
            hit = resolve_under(root, name)
            if hit is not None:
                return hit
        return None


@per_trace
def source_resolver(trace) -> SourceResolver:
    """The resolver for a trace's frames: recorded roots, user roots, folders above it.

    User roots are read when a trace is first resolved (a server sets them at start)."""
    return SourceResolver([*recorded_roots(trace.metadata), *user_roots(), *folder_roots(trace.source)])


__all__ = ["ENV_VAR", "SOURCE_ROOTS_KEY", "SourceResolver", "folder_roots", "recorded_roots", "resolve_under",
           "set_user_roots", "source_resolver", "user_roots"]
