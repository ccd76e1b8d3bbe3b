"""Summaries on disk, beside the columns cache (``<cache_dir>/summaries/``), or in a
summaries folder of their own given by path or fsspec URL (s3://, gs://, hdfs://...),
which a Dask cluster's workers and the machines reading the run can share.

Why the columns cache's format (tb_profiler.cache): a summary is a few arrays, a strings
table and a JSON meta, which is what a cache entry holds; so it gets the same key check
(source, size, version stamp — io.read.stat_key: what changes with the content —,
decoder, model and summary versions), CRCs, atomic writes and
"a bad entry is a miss" for free.  One entry per source: a new version replaces the old.
At a URL an entry is fetched whole (it is kilobytes) and written in one put.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from tb_profiler import cache as _cache
from tb_profiler import cache_folder as _folder
from tb_profiler import decode as _decode
from tb_profiler.io.read import is_url, local_path
from tb_profiler.analysis.trace_summary import SUMMARY_VERSION, TraceSummary, from_arrays, to_arrays
from tb_profiler.trace.build import MODEL_VERSION

__all__ = ["SUBDIR", "read_summary", "summaries_dir", "summary_key", "summary_path", "write_summary"]

SUBDIR = "summaries"


def summaries_dir(cache_dir: str | os.PathLike | None = None, summaries: str | os.PathLike | None = None) -> str:
    """Where summaries are kept: ``summaries`` (a folder path or URL) when given, else the
    ``summaries`` folder of the cache folder."""
    if summaries:
        return os.fspath(summaries)
    return os.path.join(_folder.cache_dir(cache_dir), SUBDIR)


def summary_path(source: str, cache_dir: str | os.PathLike | None = None,
                 summaries: str | os.PathLike | None = None) -> str:
    folder = summaries_dir(cache_dir, summaries)
    if is_url(folder):
        return folder.rstrip("/") + "/" + _folder.entry_name(source)
    return os.path.join(local_path(folder), _folder.entry_name(source))


def summary_key(source: str, size: int, mtime: int | str | None) -> _cache.CacheKey:
    """The key a stored summary must match: the file's version (size and stat_key's stamp)
    and every code version its content depends on (decoder, trace model, summary)."""
    return _cache.CacheKey(source, size, mtime, str(_decode.DECODER_VERSION), MODEL_VERSION, SUMMARY_VERSION)


def read_summary(key: _cache.CacheKey, cache_dir: str | os.PathLike | None = None,
                 summaries: str | os.PathLike | None = None) -> TraceSummary | None:
    """The stored summary for key, or None (none, stale, corrupt or unreachable: the caller
    rebuilds)."""
    path = summary_path(key.source, cache_dir, summaries)
    entry = _read_url(path, key) if is_url(path) else _cache.read_entry(path, key)
    if entry is None:
        return None
    try:
        return from_arrays(entry.arrays, entry.strings, entry.meta)
    except (KeyError, ValueError, TypeError, IndexError):
        return None


def write_summary(summary: TraceSummary, key: _cache.CacheKey, cache_dir: str | os.PathLike | None = None,
                  summaries: str | os.PathLike | None = None) -> bool:
    """Store a summary under key (atomically); False, with a CacheWarning, when it cannot."""
    arrays, strings, meta = to_arrays(summary)
    path = summary_path(key.source, cache_dir, summaries)
    if is_url(path):
        return _write_url(path, _cache.entry_chunks(key, arrays, strings, np.zeros(0, np.uint8), meta))
    return _cache.write_entry(path, key, arrays, strings, np.zeros(0, np.uint8), meta)


def _read_url(url: str, key: _cache.CacheKey) -> _cache.Entry | None:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
        data = fs.cat_file(path)
    except Exception:  # noqa: BLE001 - missing, unreachable, no such backend: a miss, rebuilt
        return None
    return _cache.entry_from_buffer(data, key, url)


def _write_url(url: str, chunks: list) -> bool:
    """One put of the whole entry (object stores replace an object at once: no reader sees
    half of it)."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
        fs.makedirs(fs._parent(path), exist_ok=True)
        fs.pipe_file(path, b"".join(bytes(c) for c in chunks))
        return True
    except Exception as exc:  # noqa: BLE001 - the summary is still returned, just not kept
        warnings.warn(f"tb_profiler: summary not stored ({url}: {exc})", _folder.CacheWarning, stacklevel=3)
        return False
