"""Is a pickle a PyTorch memory snapshot?  A look at its first bytes, nothing unpickled.

Why in io/: discovery tells a logdir's snapshots from its other pickles by this, before
anything is decoded, and io never imports the decoders above it; the snapshot reader
(decode.snapshot) reads the files this says yes to.
"""
from __future__ import annotations

__all__ = ["HEAD_BYTES", "is_snapshot_head"]

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
