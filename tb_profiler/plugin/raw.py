"""A trace file's bytes as of one moment, for ``trace/raw``: never a torn file.

Why: a trace can be rewritten in place while it is downloaded (a job that exports to the
same name again, a copy over it); streaming it as it changes gives a 200 with the front
of one version and the back of another, which no reader can tell from a good file. So a
local file is read only while its identity and times hold still: a file written less
than ``SETTLE_S`` ago (its mtime), or changing between its first block's read and stat, is refused
up front (409, "try again"), and one that changes later aborts the download, so the
client sees an incomplete transfer, never a complete-looking torn one. An object store's
reader (fsspec) fails on its own when the object changes under it (s3fs: FileExpired).
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator

from tb_profiler.io.read import is_url, local_path

BLOCK = 1 << 20
SETTLE_S = 1.0  # a file modified this recently may still be being written


class FileChanging(Exception):
    """The file is being written: no consistent copy can be served now."""


def open_binary(path: str):
    """A binary reader of a local path (or file:// URL) or any fsspec URL."""
    if is_url(path):
        import fsspec

        return fsspec.open(path, "rb").open()
    return open(local_path(path), "rb")


def _stamp(f) -> tuple[int, int, int, int] | None:
    """What changes when a local file is written: inode, size, mtime and ctime (ns)."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):  # not a local file
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def being_written(path: str) -> bool:
    """Whether a local file was modified less than SETTLE_S ago (an object store's: never
    told here; its reader fails on its own when the object changes)."""
    if is_url(path):
        return False
    try:
        mtime = os.stat(local_path(path)).st_mtime_ns
    except OSError:
        return False
    return time.time_ns() - mtime < SETTLE_S * 1e9


def stable_chunks(path: str, block: int = BLOCK) -> Iterator[bytes]:
    """The file's blocks, all of one version of it; FileChanging (before any byte) when it
    is being written, and from the iterator when it changes during the download."""
    f = open_binary(path)
    try:
        before = _stamp(f)
        if before is not None and time.time_ns() - before[2] < SETTLE_S * 1e9:
            raise FileChanging(f"{path}: modified less than {SETTLE_S:g} s ago, it may still be being written")
        first = f.read(block)
        if _stamp(f) != before:
            raise FileChanging(f"{path}: it changed while it was being read")
    except BaseException:
        f.close()
        raise
    return _rest(f, first, before, block, path)


def _rest(f, first: bytes, before, block: int, path: str) -> Iterator[bytes]:
    try:
        if first:
            yield first
        while True:
            data = f.read(block)
            if _stamp(f) != before:
                raise FileChanging(f"{path}: it changed while it was being sent; the download is cut short")
            if not data:
                return
            yield data
    finally:
        f.close()


__all__ = ["FileChanging", "SETTLE_S", "being_written", "open_binary", "stable_chunks"]
