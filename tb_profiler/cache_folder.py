"""The cache folder and what its files are: where it is, an entry's file name, an entry's head.

Why its own module: the entries (tb_profiler.cache: read, write, verify) and the cap
(tb_profiler.cache_limit: what may go) both need the folder and an entry's source, and
the cache calls the cap on every read and write; with these here, the cache depends on
the cap and the cap on this, never the other way round.

An entry file starts with ``PREFIX``: MAGIC, the FORMAT, the CRC32 of the JSON header and
its length; the header's ``key.source`` names the trace (or summary, or snapshot) it
holds.  The rest of the format is tb_profiler.cache's.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct

from tb_profiler.io.read import open_regular

__all__ = ["FORMAT", "MAGIC", "PREFIX", "CacheWarning", "cache_dir", "entry_name", "entry_path", "entry_source"]

MAGIC = b"TBPCACHE"
FORMAT = 2  # 2: args as zstd blocks or in the trace file; CRCs checked on first read
PREFIX = struct.Struct("<8sIIQ")


class CacheWarning(UserWarning):
    """The cache could not be used; the trace was loaded without it."""


def cache_dir(folder: str | os.PathLike | None = None) -> str:
    """The cache folder: argument, else $TB_PROFILER_CACHE_DIR, else the user cache dir."""
    if folder:
        return os.fspath(folder)
    env = os.environ.get("TB_PROFILER_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_profiler")


def entry_name(source: str) -> str:
    """The entry's file name for a source; one per source, so a new version replaces the old."""
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    base = os.path.basename(source.rstrip("/"))[:60]
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)
    return f"{safe}.{digest}.tbpc"


def entry_path(source: str, folder: str | os.PathLike | None = None) -> str:
    """The entry file for a source in the cache folder."""
    return os.path.join(cache_dir(folder), entry_name(source))


def entry_source(path: str) -> str | None:
    """The source an entry's header names (the header only is read), None if not an entry."""
    try:
        with open_regular(path) as f:
            head = f.read(PREFIX.size)
            magic, _fmt, _crc, header_len = PREFIX.unpack(head)
            if magic != MAGIC or header_len > 1 << 28:
                return None
            header = json.loads(f.read(header_len))
        source = header.get("key", {}).get("source")
        return source if isinstance(source, str) else None
    except (OSError, ValueError, struct.error, UnicodeDecodeError, AttributeError):
        return None
