"""Per-trace results kept on disk beside the trace's cache entry, so a reopened trace
does not build them again.

Why: some derived data costs seconds per GB and is needed at once when a view opens (the
Trace view's index: nesting, tracks and level-of-detail busy runs, about 2 s for a 1 GB
trace); computing it again on every open would make a reopen as slow as the first one.
``per_trace_stored`` memoizes like ``memo.per_trace`` and, when the trace came through the
cache (``Trace.cache_ref``), first reads the result from its own entry (a cache entry
keyed like the trace's — its file's size and version stamp, so a rewritten file never
gets the old file's results — plus the part's name and version: same checks, same eviction), else
computes it and queues that entry for the process's one cache writer
(``tb_profiler.cache_writer``).

A stored result is a dict of arrays plus JSON-able meta; the decorated function's
``dump``/``load`` convert.  A part's key holds ``code_version()`` (a digest of the
package's source), so results of an older tb_profiler are never served by a newer one.
``read_bytes``/``write_bytes_later`` keep opaque bytes the same way (the plugin keeps
the JSON of its costly single-trace routes there).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

from tb_profiler import cache as _cache
from tb_profiler import cache_folder as _folder
from tb_profiler import cache_writer as _writer
from tb_profiler.analysis.memo import _CACHE

T = TypeVar("T")
logger = logging.getLogger("tb_profiler")
Dump = Callable[[T], "tuple[dict[str, np.ndarray], dict]"]
Load = Callable[["dict[str, np.ndarray]", dict], "T | None"]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of tb_profiler's Python source: part of every stored part's key."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def part_entry(trace, part: str) -> "tuple[str, _cache.CacheKey] | None":
    """(entry file, key) of a part derived from this trace; None when it has no cache."""
    ref = getattr(trace, "cache_ref", None)
    if ref is None:
        return None
    entry_file, key = ref
    folder = os.path.dirname(entry_file)
    part = f"{part}/{code_version()}"
    return (_folder.entry_path(f"{key.source}#{part}", folder), dataclasses.replace(key, part=part))


def per_trace_stored(name: str, version: int, dump: Dump, load: Load):
    """Like memo.per_trace, and kept in the cache (see the module docstring)."""
    part = f"{name}@{version}"

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        memo_key = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def wrapper(trace) -> T:
            memo = _CACHE.setdefault(trace, {})
            if memo_key in memo:
                return memo[memo_key]
            with _lock(trace, memo_key):  # a second caller waits for the first one's result
                if memo_key not in memo:
                    value = _read(trace, part, load)
                    if value is None:
                        value = fn(trace)
                        _write_later(trace, part, dump, value)
                    memo[memo_key] = value
            return memo[memo_key]

        wrapper.part = part
        return wrapper

    return decorate


_LOCKS: "weakref.WeakKeyDictionary[object, dict[str, threading.Lock]]" = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def _lock(trace, key: str) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(trace, {}).setdefault(key, threading.Lock())


def _read(trace, part: str, load: Load):
    where = part_entry(trace, part)
    if where is None:
        return None
    entry = _cache.read_entry(*where)
    if entry is None:
        return None
    try:
        return load(entry.arrays, entry.meta)
    except (KeyError, ValueError, TypeError, _cache.DamagedEntry):
        return None  # a part that does not fit this trace: compute it again


def read_bytes(trace, part: str) -> bytes | None:
    """Bytes kept for this trace under part (write_bytes_later), or None."""
    where = part_entry(trace, part)
    entry = _cache.read_entry(*where) if where is not None else None
    if entry is None:
        return None
    try:
        return entry.arrays["bytes"].tobytes()
    except (KeyError, _cache.DamagedEntry):
        return None


def write_bytes_later(trace, part: str, data: bytes) -> None:
    """Keep data for this trace under part (written by the cache writer; nothing without a cache)."""
    _write_later(trace, part, lambda d: ({"bytes": np.frombuffer(d, np.uint8)}, {}), data)


def _write_later(trace, part: str, dump: Dump, value) -> None:
    where = part_entry(trace, part)
    if where is None:
        return
    try:
        arrays, meta = dump(value)
    except (TypeError, ValueError):  # nothing storable: it stays in memory only
        logger.debug("tb_profiler: %s not stored", part, exc_info=True)
        return
    _writer.later(lambda: _cache.write_entry(where[0], where[1], arrays, [], b"", meta))
