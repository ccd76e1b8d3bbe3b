"""Reading a memory snapshot file (``torch.cuda.memory._dump_snapshot``'s pickle) into columns.

    read_snapshot(path)      -> SnapshotColumns (plain or .gz; the native streaming reader
                                when the extension is built, else the reference one)

Which pickles are snapshots is io.snapshot_head's sniff (discovery's).  Errors are
``tb_profiler.errors.TraceFormatError`` naming the file (and the byte offset
where the native reader knows it).
"""
from __future__ import annotations

import gzip
import os
import zlib

from tb_profiler.decode.snapshot_columns import SnapshotColumns
from tb_profiler.errors import TraceFormatError

__all__ = ["read_bytes", "read_snapshot"]


def read_bytes(path: str) -> bytes:
    """The (decompressed) bytes of a snapshot file; TraceFormatError on a bad gzip."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise TraceFormatError(path, f"cannot read the snapshot file ({e})") from None
    return data


def _gzipped(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except FileNotFoundError:
        raise
    except OSError as e:
        raise TraceFormatError(path, f"cannot read the snapshot file ({e})") from None


def read_snapshot(path: str | os.PathLike) -> SnapshotColumns:
    """The columns of one snapshot file (native reader when built, else the reference)."""
    from tb_profiler.decode import snapshot_native

    path = os.fspath(path)
    if snapshot_native.can_map() and not _gzipped(path):
        return snapshot_native.read_snapshot_native_file(path)
    data = read_bytes(path)
    if snapshot_native.available():
        return snapshot_native.read_snapshot_native(data, path)
    from tb_profiler.decode.snapshot_reference import read_snapshot_reference

    return read_snapshot_reference(data, path)
