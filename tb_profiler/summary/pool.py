"""Summaries of many files at once: stored ones read, the rest built in parallel.

Why processes, not threads: building a summary is decoding and numpy/pandas work that
holds the GIL for long stretches, so only processes use every core.  They are worker
processes of our own (summary/procs.py), never multiprocessing's: those re-import the
caller's ``__main__`` (a script without a ``__main__`` guard ran again in each), and the
forkserver and resource tracker they leave behind outlived a server stopped by SIGTERM.
Beyond one machine, a Dask cluster builds them: each worker reads its file where it lives
(shared filesystem or fsspec URL) without caching its columns (the summary is what is
kept), and the summary comes back to be stored here.

One bad file costs nothing else: its slot holds its exception.  A worker process that
dies (a segfault, the OOM killer) costs only the file it held, which is tried again in a
new process; only a file that loses a second one gets the error (procs.WorkerDied).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence

from tb_profiler.analysis.trace_summary import TraceSummary
from tb_profiler.io.read import source_id
from tb_profiler.summary.ingest import stored_summary, summary_for
from tb_profiler.summary.procs import WorkerDied, run_tasks
from tb_profiler.summary.store import summary_key, write_summary

__all__ = ["Progress", "available_cpus", "summarize_files"]

Progress = Callable[[int, int, str], None]
Outcome = TraceSummary | Exception


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def summarize_files(paths: Iterable[str | os.PathLike], *, jobs: int | None = None, dask=None,
                    cache_dir: str | os.PathLike | None = None, workers: Sequence[str | None] | None = None,
                    progress: Progress | None = None, columns: bool = True,
                    summaries: str | os.PathLike | None = None) -> list[Outcome]:
    """The summary of each file, in the order given (its exception where it failed).

    Stored summaries whose key matches are read, not rebuilt.  The others are built by
    ``jobs`` processes (default: the CPUs available; 1 builds here, in this process), or
    on Dask when ``dask`` is a scheduler address ("tcp://host:8786") or a
    ``distributed.Client``; each built summary is stored under ``cache_dir``.
    workers: the worker name of each file (default: from its file name).
    progress(done_files, total_files, path) is called as each file finishes.
    columns: also keep each built trace's decoded columns in the cache (``summary_for``).
    summaries: a folder (path or fsspec URL: s3://, gs://, ...) to keep the summaries in
    instead of the cache folder; Dask workers read and write it themselves.
    """
    paths = [os.fspath(p) for p in paths]
    names = list(workers) if workers is not None else [None] * len(paths)
    if len(names) != len(paths):
        raise ValueError(f"{len(names)} worker names for {len(paths)} files")
    store = (cache_dir, summaries)
    results: list[Outcome | None] = [_stored(p, w, store) for p, w in zip(paths, names)]
    done = 0
    for i, r in enumerate(results):  # progress for what was already there
        if r is not None:
            done += 1
            _report(progress, done, len(paths), paths[i])
    todo = [i for i, r in enumerate(results) if r is None]
    for i, outcome in _build(paths, names, todo, jobs, dask, store, columns):
        results[i] = outcome
        done += 1
        _report(progress, done, len(paths), paths[i])
    return results  # type: ignore[return-value]


def _stored(path: str, worker: str | None, store: tuple) -> TraceSummary | None:
    try:
        return stored_summary(path, cache_dir=store[0], worker=worker, summaries=store[1])
    except (OSError, ValueError):  # building it names the problem
        return None


def _report(progress: Progress | None, done: int, total: int, path: str) -> None:
    if progress is not None:
        progress(done, total, path)


def _build(paths, names, todo, jobs, dask, store: tuple, columns: bool) -> Iterator[tuple[int, Outcome]]:
    """(index, outcome) of each file of todo, as each finishes; store: (cache_dir, summaries)."""
    if not todo:
        return iter(())
    if dask is not None:
        return _on_dask(dask, paths, names, todo, store)
    jobs = min(jobs or available_cpus(), len(todo))
    if jobs <= 1:
        return ((i, _one(paths[i], names[i], store, columns)) for i in todo)
    return _on_pool(paths, names, todo, jobs, store, columns)


def _one(path: str, worker: str | None, store: tuple, columns: bool = True) -> Outcome:
    """One file's summary, or its exception (what a worker process runs; procs gives it the
    caller's environment of the moment first, say AWS_* set in a notebook for s3://)."""
    try:
        return summary_for(path, cache_dir=store[0], worker=worker, columns=columns, summaries=store[1])
    except Exception as exc:  # noqa: BLE001 - one bad file must not cost the others
        return exc


def _on_pool(paths, names, todo, jobs: int, store: tuple, columns: bool) -> Iterator[tuple[int, Outcome]]:
    """Each file of todo on up to jobs worker processes (summary/procs.py)."""
    tasks = [(i, (paths[i], names[i], store, columns)) for i in todo]
    for i, outcome in run_tasks(_one, tasks, jobs):
        if isinstance(outcome, WorkerDied):  # name the file, as the file's own errors do
            outcome = WorkerDied(f"{paths[i]}: {outcome}")
        yield i, outcome


# -- Dask -------------------------------------------------------------------------------------

def _remote(path: str, worker: str | None, summaries: str | None) -> TraceSummary:
    """What a Dask worker runs: read the file where it lives, build, send the summary back.
    With a summaries folder (a URL every worker reaches) the worker reads a stored summary
    from it and writes the one it builds there; else nothing is kept on the worker (the
    caller stores the summary).  The trace's columns are never cached on a worker."""
    if summaries:
        return summary_for(path, worker=worker, columns=False, summaries=summaries)
    return summary_for(path, cache=False, worker=worker)


def _on_dask(dask, paths, names, todo, store: tuple) -> Iterator[tuple[int, Outcome]]:
    from distributed import Client
    from distributed import as_completed as dask_completed

    client = dask if isinstance(dask, Client) else Client(dask)
    try:
        cache_dir, summaries = store
        shared = os.fspath(summaries) if summaries else None
        futures = [client.submit(_remote, paths[i], names[i], shared, pure=False) for i in todo]
        where = {f.key: i for f, i in zip(futures, todo)}
        for fut in dask_completed(futures):
            i = where[fut.key]
            try:
                summary = fut.result()
            except Exception as exc:  # noqa: BLE001 - the worker's exception, re-raised here
                yield i, exc
                continue
            if summary.size >= 0 and not shared:  # else the worker stored it in the shared folder
                write_summary(summary, summary_key(source_id(paths[i]), summary.size, summary.mtime), cache_dir)
            yield i, summary
    finally:
        if client is not dask:
            client.close()
