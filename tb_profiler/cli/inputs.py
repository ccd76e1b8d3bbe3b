"""What the commands read: the paths on their command line as trace files, run folders
or fsspec URLs, and the traces those name.

Why a module of its own: info, summary, why, compiled and diff all take "a trace file or
a run folder" the same way (and say the same thing of a missing one).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tb_profiler.cli.output import _error

def _trace_or_run_args(p) -> None:
    """path / --worker / --span of a verb that takes a trace file or a run folder."""
    p.add_argument("path", help="a trace file, or a run folder (its workers; --worker for one)")
    p.add_argument("--worker", help="one worker of a run")
    p.add_argument("--span", type=int, help="for runs: the span, 1-based (default: each worker's latest)")


def _path_kind(path: str) -> str:
    """'missing', 'file' or 'folder' for a local path or fsspec URL.  Raises OSError with
    the store's own reason (unreachable endpoint, no credentials, s3fs not installed)
    instead of its traceback."""
    import fsspec

    try:
        fs, _, (target,) = fsspec.get_fs_token_paths(path)
        if not fs.exists(target):
            return "missing"
        return "folder" if fs.isdir(target) else "file"
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a remote filesystem's own errors (botocore's, ImportError)
        raise OSError(f"cannot reach it: {type(exc).__name__}: {exc}") from exc


def _expand_paths(paths: Sequence[str]) -> tuple[list[str], bool]:
    """Trace files named directly, plus every trace discovery finds under a folder/URL."""
    from tb_profiler.io.discovery import discover
    from tb_profiler.io.read import LINK_LOOP, is_link_loop

    files: list[str] = []
    failed = False
    for path in paths:
        try:
            kind = _path_kind(path)
            found = discover(path) if kind == "folder" else None
        except OSError as exc:
            _error(f"{path}: {exc}")
            failed = True
            continue
        if kind == "missing":
            _error(f"{path}: {LINK_LOOP if is_link_loop(path) else 'no such file or folder'}")
            failed = True
        elif found is None:
            files.append(path)
        else:
            for s in found.skipped:
                _error(f"skipped {s.path}: {s.reason}")
            listed = [span.path for run in found.runs for span in run.files]
            if not listed:
                _error(f"{path}: no trace files found")
                failed = True
            files.extend(listed)
    return files, failed


def _traces_of(path: str, worker: str | None = None, span: int | None = None) -> list:
    """The traces a path names: a trace file, or a run folder's workers (one span)."""
    return _run_and_traces(path, worker, span)[1]


def _run_and_traces(path: str, worker: str | None = None, span: int | None = None) -> tuple[Any, list]:
    """(the run a folder holds, else None; the traces the path names: the file, or the
    run's workers of one span)."""
    from tb_profiler.api import load, load_run

    try:
        kind = _path_kind(path)
    except OSError as exc:
        raise OSError(f"{path}: {exc}") from exc
    if kind == "missing":
        raise FileNotFoundError(f"{path}: no such file or folder")
    if kind == "file":
        return None, [load(path)]
    run = load_run(path)
    return run, [run.trace(worker, span)] if worker else run.traces(span)


__all__ = ["_expand_paths", "_path_kind", "_run_and_traces", "_trace_or_run_args", "_traces_of"]
