"""The streaming native snapshot reader (``tb_profiler._native.read_snapshot``), wrapped.

Why: the reference reader builds every dict of a snapshot (GBs of Python objects for a
1 GB file); the native one walks the pickle's opcodes once and writes the columns
(native/snapshot.c says how). It follows the layout Python's pickler writes (torch's
``_dump_snapshot`` is ``pickle.dump``); a pickle laid out otherwise (shared segments or
entries, a dict put in two places, ...) is handed to the reference reader when it is at
most ``FALLBACK_MAX`` bytes, so every file the reference reads gives the same result.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from tb_profiler.decode import snapshot_schema as S
from tb_profiler.decode.extension import extension
from tb_profiler.decode.snapshot_columns import SnapshotColumns
from tb_profiler.errors import TraceFormatError

__all__ = ["FALLBACK_MAX", "UNSUPPORTED", "NativeUnsupported", "available", "can_map", "read_snapshot_native",
           "read_snapshot_native_file"]

# a pickle the streaming reader does not follow is read by the reference reader up to this size
FALLBACK_MAX = 256 << 20
UNSUPPORTED = 3  # the native error kind for "a layout the streaming reader does not follow"
_FORMATS = {"q": np.int64, "i": np.int32, "b": np.int8}


class NativeUnsupported(TraceFormatError):
    """The pickle is laid out in a way the streaming reader does not follow."""


def _module():
    try:
        _native = extension()
    except ImportError:
        return None
    return _native if hasattr(_native, "read_snapshot") else None


def available() -> bool:
    """Whether the extension with the snapshot reader is built."""
    return _module() is not None


def can_map() -> bool:
    """Whether read_snapshot_native_file maps files (POSIX builds); else read the bytes."""
    return available() and os.name == "posix" and sys.platform != "cygwin"


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
    return _read((buffer,), path, lambda: bytes(buffer), len(buffer), fallback)


def read_snapshot_native_file(path: str, *, fallback: bool = True, release_step: int | None = None
                              ) -> SnapshotColumns:
    """The columns of the uncompressed snapshot file at ``path``, mapped rather than copied
    into memory (why: the copy was the file's size again on top of the parse's own memory;
    the reader hands the mapped pages back behind its read position, every ``release_step``
    bytes: 64 MB unless a test makes it small)."""
    def data() -> bytes:
        with open(path, "rb") as f:
            return f.read()

    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise TraceFormatError(path, f"cannot read the snapshot file ({e})") from None
    args = (path,) if release_step is None else (path, release_step)
    return _read(args, path, data, size, fallback)


def _read(args: tuple, path: str, data, size: int, fallback: bool) -> SnapshotColumns:
    mod = _module()
    if mod is None:
        raise RuntimeError("tb_profiler._native is not built with read_snapshot")
    try:
        raw = mod.read_snapshot(*args)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise TraceFormatError(path, f"cannot read the snapshot file ({e})") from None
    except ValueError as e:
        if len(e.args) != 3:
            raise
        kind, message, offset = e.args
        if kind == UNSUPPORTED:
            if fallback and size <= FALLBACK_MAX:
                from tb_profiler.decode.snapshot_reference import (
                    read_snapshot_reference,
                )

                return read_snapshot_reference(data(), path)
            raise NativeUnsupported(path, f"not a memory snapshot the streaming reader can follow: {message}",
                                    offset) from None
        raise TraceFormatError(path, f"not a readable memory snapshot: {message}", offset) from None
    return _columns(raw)
