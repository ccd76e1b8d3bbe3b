"""The streaming native snapshot reader (``tb_profiler._native.read_snapshot``), wrapped.

Why: the reference reader builds every dict of a snapshot (GBs of Python objects for a
1 GB file); the native one walks the pickle's opcodes once and writes the columns
(native/snapshot.c says how). It follows the layout Python's pickler writes (torch's
``_dump_snapshot`` is ``pickle.dump``); a pickle laid out otherwise (shared segments or
entries, a dict put in two places, ...) is handed to the reference reader when it is at
most ``FALLBACK_MAX`` bytes, so every file the reference reads gives the same result.
"""
from __future__ import annotations

import numpy as np

from tb_profiler.decode import snapshot_schema as S
from tb_profiler.decode.snapshot_columns import SnapshotColumns
from tb_profiler.errors import TraceFormatError

__all__ = ["FALLBACK_MAX", "UNSUPPORTED", "NativeUnsupported", "available", "read_snapshot_native"]

# a pickle the streaming reader does not follow is read by the reference reader up to this size
FALLBACK_MAX = 256 << 20
UNSUPPORTED = 3  # the native error kind for "a layout the streaming reader does not follow"
_FORMATS = {"q": np.int64, "i": np.int32, "b": np.int8}


class NativeUnsupported(TraceFormatError):
    """The pickle is laid out in a way the streaming reader does not follow."""


def _module():
    try:
        from tb_profiler import _native
    except ImportError:
        return None
    return _native if hasattr(_native, "read_snapshot") else None


def available() -> bool:
    """Whether the extension with the snapshot reader is built."""
    return _module() is not None


def _columns(raw: dict) -> SnapshotColumns:
    tables = {}
    for t, cols in S.TABLES.items():
        got = raw["tables"][t]
        tables[t] = {}
        for name, dtype in cols.items():
            buf, fmt = got[name]
            arr = np.frombuffer(buf, dtype=_FORMATS[fmt])
            assert arr.dtype == np.dtype(dtype), (t, name, fmt)
            tables[t][name] = arr
    from tb_profiler.decode.snapshot_reference import bounded_extra

    extras = {k: bounded_extra(v) for k, v in raw["extras"].items()}
    return SnapshotColumns(tables=tables, stack_offsets=np.frombuffer(raw["stack_offsets"], dtype=np.int64),
                           stack_frames=np.frombuffer(raw["stack_frames"], dtype=np.int32),
                           strings=raw["strings"], extras={k: extras[k] for k in S.EXTRAS if k in extras},
                           n_devices=int(raw["n_devices"]))


def read_snapshot_native(buffer, path: str, *, fallback: bool = True) -> SnapshotColumns:
    """The columns of a snapshot pickle held in ``buffer`` (bytes-like). With ``fallback``
    a layout the streaming reader does not follow is read by the reference reader (files
    up to FALLBACK_MAX bytes); without it that raises NativeUnsupported."""
    mod = _module()
    if mod is None:
        raise RuntimeError("tb_profiler._native is not built with read_snapshot")
    try:
        raw = mod.read_snapshot(buffer)
    except ValueError as e:
        if len(e.args) != 3:
            raise
        kind, message, offset = e.args
        if kind == UNSUPPORTED:
            if fallback and len(buffer) <= FALLBACK_MAX:
                from tb_profiler.decode.snapshot_reference import (
                    read_snapshot_reference,
                )

                return read_snapshot_reference(bytes(buffer), path)
            raise NativeUnsupported(path, f"not a memory snapshot the streaming reader can follow: {message}",
                                    offset) from None
        raise TraceFormatError(path, f"not a readable memory snapshot: {message}", offset) from None
    return _columns(raw)
