"""Reading a memory snapshot file (``torch.cuda.memory._dump_snapshot``'s pickle) into columns.

    read_snapshot(path)      -> SnapshotColumns (plain or .gz; the native streaming reader
                                when the extension is built, else the reference one)
    is_snapshot_head(head)   cheap sniff of a file's first bytes, for discovery

Errors are ``tb_profiler.errors.TraceFormatError`` naming the file (and the byte offset
where the native reader knows it).
"""
from __future__ import annotations

import gzip
import os
import zlib

from tb_profiler.decode.snapshot_columns import SnapshotColumns
from tb_profiler.errors import TraceFormatError

__all__ = ["HEAD_BYTES", "is_snapshot_head", "read_bytes", "read_snapshot"]

# how much of a file is_snapshot_head needs (the top dict's first key is within it)
HEAD_BYTES = 4096
_KEYS = (b"segments", b"device_traces")


def _key_forms(key: bytes) -> tuple[bytes, ...]:
    # SHORT_BINUNICODE (protocol 4+) and BINUNICODE (protocols 2-3) encodings of a key
    return (b"\x8c" + bytes([len(key)]) + key, b"X" + len(key).to_bytes(4, "little") + key)


_KEY_FORMS = tuple(f for k in _KEYS for f in _key_forms(k))


def is_snapshot_head(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes, HEAD_BYTES or fewer) starts a pickle
    (protocol 2-5) whose top-level dict has "segments" or "device_traces" near its start."""
    if len(head) < 4 or head[0] != 0x80 or not 2 <= head[1] <= 5:
        return False
    i = 2
    if head[i:i + 1] == b"\x95":  # FRAME + 8-byte length
        i += 9
    if head[i:i + 1] != b"}":
        return False
    window = head[i:HEAD_BYTES]
    return any(f in window for f in _KEY_FORMS)


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
