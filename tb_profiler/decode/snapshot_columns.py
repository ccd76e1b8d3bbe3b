"""The memory-snapshot readers' output: flat numpy columns, a string table and CSR stacks.

Both readers (``snapshot_reference``: the oracle, ``snapshot_native``: the streaming one)
return a ``SnapshotColumns`` laid out as ``snapshot_schema`` says. ``equal`` is what the
differential test holds them to: it compares what the ids *mean* (string text, a stack's
frames), not the ids themselves, because the two readers may intern strings and number
stacks in a different order (the native one follows the pickle's byte order, the reference
one the dicts' order), and a string or stack only a discarded duplicate key used may be
interned by one reader and not the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tb_profiler.decode import snapshot_schema as S

# columns holding a string id (-1: none)
STRING_COLUMNS = {("history", "action_text"), ("history", "compile_context"), ("history", "user_metadata"),
                  ("segments", "segment_type"), ("blocks", "state_text"), ("frames", "filename"),
                  ("frames", "name")}
# columns holding a stack id (-1: none)
STACK_COLUMNS = {("history", "stack"), ("segments", "stack"), ("blocks", "stack")}


@dataclass
class SnapshotColumns:
    """One snapshot as columns (see snapshot_schema for every column's meaning)."""

    tables: dict[str, dict[str, np.ndarray]]
    stack_offsets: np.ndarray
    stack_frames: np.ndarray
    strings: list[str]
    extras: dict[str, Any] = field(default_factory=dict)
    n_devices: int = 0

    def n_rows(self, table: str) -> int:
        """Rows of one table."""
        cols = self.tables[table]
        return len(next(iter(cols.values()))) if cols else 0

    @property
    def n_stacks(self) -> int:
        return len(self.stack_offsets) - 1

    def stack_frame_rows(self, stack_id: int) -> np.ndarray:
        """The FRAMES rows of one stack, innermost first."""
        return self.stack_frames[self.stack_offsets[stack_id]:self.stack_offsets[stack_id + 1]]


def empty_tables() -> dict[str, dict[str, np.ndarray]]:
    """Every table of the schema with no rows."""
    return {t: {c: np.zeros(0, dtype=d) for c, d in cols.items()} for t, cols in S.TABLES.items()}


def check_layout(c: SnapshotColumns) -> None:
    """Raises AssertionError when ``c`` does not follow the schema (names, dtypes, lengths)."""
    assert set(c.tables) == set(S.TABLES), sorted(c.tables)
    for t, cols in S.TABLES.items():
        assert list(c.tables[t]) == list(cols), (t, list(c.tables[t]))
        lens = {len(a) for a in c.tables[t].values()}
        assert len(lens) <= 1, (t, lens)
        for name, dtype in cols.items():
            assert c.tables[t][name].dtype == np.dtype(dtype), (t, name, c.tables[t][name].dtype)
    assert c.stack_offsets.dtype == np.int64 and c.stack_frames.dtype == np.int32
    assert len(c.stack_offsets) >= 1 and c.stack_offsets[0] == 0 and c.stack_offsets[-1] == len(c.stack_frames)


def _strings_of(c: SnapshotColumns, ids: np.ndarray) -> list:
    return [c.strings[i] if i >= 0 else None for i in ids.tolist()]


def _frames_of(c: SnapshotColumns) -> list[tuple]:
    f = c.tables["frames"]
    return list(zip(_strings_of(c, f["filename"]), f["line"].tolist(), _strings_of(c, f["name"])))


def _stacks_of(c: SnapshotColumns, ids: np.ndarray) -> list:
    frames = _frames_of(c)
    offs = c.stack_offsets.tolist()
    fr = c.stack_frames.tolist()
    by_id = [tuple(frames[j] for j in fr[offs[s]:offs[s + 1]]) for s in range(len(offs) - 1)]
    return [by_id[i] if i >= 0 else None for i in ids.tolist()]


def resolved(c: SnapshotColumns) -> dict:
    """Every column with string ids replaced by their text and stack ids by their frames
    (tuples of (filename, line, name)); for tests and ``equal``, small snapshots only."""
    out: dict = {"n_devices": c.n_devices, "extras": repr(c.extras)}  # repr: NaN == NaN
    for t, cols in c.tables.items():
        if t == "frames":
            continue
        for name, arr in cols.items():
            if (t, name) in STRING_COLUMNS:
                out[f"{t}.{name}"] = _strings_of(c, arr)
            elif (t, name) in STACK_COLUMNS:
                out[f"{t}.{name}"] = _stacks_of(c, arr)
            else:
                out[f"{t}.{name}"] = arr.tolist()
    return out


def equal(a: SnapshotColumns, b: SnapshotColumns) -> bool:
    """Whether two readers' results mean the same snapshot (same rows, same text, same
    stacks, same extras), whatever their string and stack numbering."""
    return resolved(a) == resolved(b)


def diff(a: SnapshotColumns, b: SnapshotColumns) -> list[str]:
    """The keys of ``resolved`` on which a and b differ (for test messages)."""
    ra, rb = resolved(a), resolved(b)
    return [k for k in ra if ra[k] != rb.get(k)]
