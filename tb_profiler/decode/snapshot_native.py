"""The streaming native snapshot reader (``tb_profiler._native.read_snapshot``), wrapped.

Why: the reference reader builds every dict of a snapshot (GBs of Python objects for a
1 GB file); the native one walks the pickle's opcodes once and writes the columns.
"""
from __future__ import annotations

from tb_profiler.decode.snapshot_columns import SnapshotColumns

__all__ = ["available", "read_snapshot_native"]


def _module():
    try:
        from tb_profiler import _native
    except ImportError:
        return None
    return _native if hasattr(_native, "read_snapshot") else None


def available() -> bool:
    """Whether the extension with the snapshot reader is built."""
    return _module() is not None


def read_snapshot_native(buffer, path: str) -> SnapshotColumns:
    """The columns of a snapshot pickle held in ``buffer`` (bytes-like)."""
    from tb_profiler.decode.snapshot_reference import read_snapshot_reference

    return read_snapshot_reference(bytes(buffer), path)  # until the C reader lands
