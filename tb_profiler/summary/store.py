"""Summaries on disk, beside the columns cache: ``<cache_dir>/summaries/``.

Why the columns cache's format (tb_profiler.cache): a summary is a few arrays, a strings
table and a JSON meta, which is what a cache entry holds; so it gets the same key check
(source, size, mtime, decoder, model and summary versions), CRCs, atomic writes and
"a bad entry is a miss" for free.  One entry per source: a new version replaces the old.
"""
from __future__ import annotations

import os

import numpy as np

from tb_profiler import cache as _cache
from tb_profiler import decode as _decode
from tb_profiler.summary.model import SUMMARY_VERSION, TraceSummary, from_arrays, to_arrays
from tb_profiler.trace.build import MODEL_VERSION

__all__ = ["SUBDIR", "read_summary", "summaries_dir", "summary_key", "summary_path", "write_summary"]

SUBDIR = "summaries"


def summaries_dir(cache_dir: str | os.PathLike | None = None) -> str:
    """Where summaries are kept: the ``summaries`` folder of the cache folder."""
    return os.path.join(_cache.cache_dir(cache_dir), SUBDIR)


def summary_path(source: str, cache_dir: str | os.PathLike | None = None) -> str:
    return _cache.entry_path(source, summaries_dir(cache_dir))


def summary_key(source: str, size: int, mtime: int | str | None) -> _cache.CacheKey:
    """The key a stored summary must match: the file's version and every code version
    its content depends on (decoder, trace model, summary)."""
    return _cache.CacheKey(source, size, mtime, str(_decode.DECODER_VERSION), MODEL_VERSION, SUMMARY_VERSION)


def read_summary(key: _cache.CacheKey, cache_dir: str | os.PathLike | None = None) -> TraceSummary | None:
    """The stored summary for key, or None (none, stale, or corrupt: the caller rebuilds)."""
    entry = _cache.read_entry(summary_path(key.source, cache_dir), key)
    if entry is None:
        return None
    try:
        return from_arrays(entry.arrays, entry.strings, entry.meta)
    except (KeyError, ValueError, TypeError, IndexError):
        return None


def write_summary(summary: TraceSummary, key: _cache.CacheKey,
                  cache_dir: str | os.PathLike | None = None) -> bool:
    """Store a summary under key (atomically); False, with a CacheWarning, when it cannot."""
    arrays, strings, meta = to_arrays(summary)
    return _cache.write_entry(summary_path(key.source, cache_dir), key, arrays, strings, np.zeros(0, np.uint8),
                              meta)
