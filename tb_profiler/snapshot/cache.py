"""load_snapshot(path) -> Snapshot: the cache first, else read the pickle (and fill the cache).

Why the traces' cache (tb_profiler.cache) and not files of its own: one entry per
snapshot file in the same folder, under the same size cap, listed and cleared by
``tb-profiler cache`` like the rest. An entry holds the reader's columns (each table's
columns as raw arrays, the string table, the extras as JSON); a reopen maps the entry and
wraps each column with no copy, each checked against its CRC only when first read, so a
warm open costs a file open and the replay reads only the columns it needs. The key is
the file's identity (path, size, version stamp: io.read.stat_key) and the column
contract's digest, so a new schema or reader rebuilds.

The entry also keeps each device's replayed history (replay.DeviceHistory's arrays, made
once at the cold open), so a warm open's summary and first timeline sort nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping

import numpy as np

from tb_profiler import cache as _cache
from tb_profiler import cache_folder as _folder
from tb_profiler.decode import snapshot_schema as S
from tb_profiler.snapshot.model import Snapshot
from tb_profiler.snapshot.replay import DeviceHistory

CACHE_VERSION = 2  # bump when what an entry holds, or the replay stored in it, changes
_REPLAY_ARRAYS = ("rows", "time_us", "addr", "size", "block_size", "stream", "stack", "start", "end", "pending_from",
                  "in_timeline", "allocated", "reserved")
_PART = "snapshot"
_SCHEMA_DIGEST = hashlib.sha256(json.dumps([S.TABLES, S.ACTIONS, S.BLOCK_STATES, S.EXTRAS],
                                           sort_keys=True).encode()).hexdigest()[:16]

__all__ = ["load_snapshot"]


class _Table(Mapping):
    """One table's columns, read from the entry on first use (its CRC checked then)."""

    def __init__(self, arrays: Mapping, table: str):
        self._arrays, self._table = arrays, table

    def __getitem__(self, col: str) -> np.ndarray:
        if col not in S.TABLES[self._table]:
            raise KeyError(col)
        return self._arrays[f"{self._table}/{col}"]

    def __iter__(self):
        return iter(S.TABLES[self._table])

    def __len__(self) -> int:
        return len(S.TABLES[self._table])


class _Columns:
    """SnapshotColumns-shaped view of a cache entry."""

    def __init__(self, arrays: Mapping, strings, meta: dict):
        self.tables = {t: _Table(arrays, t) for t in S.TABLES}
        self._arrays = arrays
        self.strings = strings
        self.extras = meta.get("extras") or {}
        self.n_devices = int(meta.get("n_devices", 0))

    @property
    def stack_offsets(self) -> np.ndarray:
        return self._arrays["stack_offsets"]

    @property
    def stack_frames(self) -> np.ndarray:
        return self._arrays["stack_frames"]


def _arrays_of(cols) -> dict[str, np.ndarray]:
    out = {f"{t}/{c}": np.asarray(cols.tables[t][c], dtype=d) for t, spec in S.TABLES.items() for c, d in spec.items()}
    out["stack_offsets"] = np.asarray(cols.stack_offsets, dtype=np.int64)
    out["stack_frames"] = np.asarray(cols.stack_frames, dtype=np.int32)
    return out


def _plain(extras) -> dict:
    """The extras as JSON (bytes and other non-JSON values as their repr)."""
    try:
        return json.loads(json.dumps(extras or {}, default=repr))
    except (TypeError, ValueError):
        return {}


def _check(arrays: Mapping, n_strings: int) -> bool:
    """An entry's arrays make a snapshot: every column there, one length per table."""
    try:
        for t, spec in S.TABLES.items():
            lens = {arrays.length(f"{t}/{c}") if hasattr(arrays, "length") else len(arrays[f"{t}/{c}"])
                    for c in spec}
            if len(lens) > 1:
                return False
        return "stack_offsets" in arrays and "stack_frames" in arrays
    except (KeyError, ValueError):
        return False


def _replay_arrays(snap: Snapshot) -> tuple[dict[str, np.ndarray], dict]:
    """Every device's replayed history as entry arrays, and its scalars as JSON."""
    arrays, meta = {}, {}
    for d in snap.entries_by_device():  # a loop over devices
        h = snap.device_history(int(d))
        arrays.update({f"replay/{d}/{f}": getattr(h, f) for f in _REPLAY_ARRAYS})
        meta[str(d)] = {"has_time": h.has_time, "base_allocated": h.base_allocated, "base_reserved": h.base_reserved}
    return arrays, meta


def _replays_from(arrays: Mapping, meta: dict) -> dict[int, DeviceHistory] | None:
    """The stored replays (views of the entry), None when the entry lacks one."""
    out = {}
    try:
        for d, m in meta.items():
            fields = {f: arrays[f"replay/{d}/{f}"] for f in _REPLAY_ARRAYS}
            out[int(d)] = DeviceHistory(device=int(d), has_time=bool(m["has_time"]),
                                        base_allocated=int(m["base_allocated"]),
                                        base_reserved=int(m["base_reserved"]), **fields)
    except (KeyError, TypeError, ValueError):
        return None
    return out


def _fresh_arrays(path: str) -> dict[str, np.ndarray]:
    """An entry's arrays made again from the file (a damaged entry's array is read from these)."""
    from tb_profiler.decode.snapshot import read_snapshot

    cols = read_snapshot(path)
    return {**_arrays_of(cols), **_replay_arrays(Snapshot(cols, source=path))[0]}


def load_snapshot(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None) -> Snapshot:
    """Load one allocator snapshot (``torch.cuda.memory._dump_snapshot``'s pickle, plain or
    .gz) as a Snapshot, from the on-disk cache when it holds this version of the file.

    cache: use the cache (a hit costs a file open; a miss reads the pickle and writes
        the entry; a cache that cannot be written only warns).
    cache_dir: cache folder (default $TB_PROFILER_CACHE_DIR or the user cache dir).
    Raises TraceFormatError naming the file for anything that is not a snapshot (the
    reader never runs code from the pickle), OSError when it cannot be read."""
    from tb_profiler.decode.snapshot import read_snapshot
    from tb_profiler.io.read import source_id, stat_key

    t0 = time.perf_counter()
    path = os.fspath(path)
    source = source_id(path)
    key = entry_file = None
    if cache:
        try:
            size, mtime = stat_key(path)
            key = _cache.CacheKey(source, size, mtime, f"snapshot:{_SCHEMA_DIGEST}", CACHE_VERSION, part=_PART)
            entry_file = _folder.entry_path(f"{source}#{_PART}", cache_dir)
            hit = _cache.read_entry(entry_file, key, on_damage=lambda: _fresh_arrays(path))
        except (OSError, ValueError):
            key = hit = None
        replays = _replays_from(hit.arrays, hit.meta.get("replay") or {}) if hit is not None else None
        if hit is not None and replays is not None and _check(hit.arrays, len(hit.strings)):
            snap = Snapshot(_Columns(hit.arrays, hit.strings, hit.meta), source=path)
            snap._hist.update(replays)
            snap.hist_in_columns = set(replays)
            snap.cache_path = entry_file
            snap.load_seconds = time.perf_counter() - t0
            return snap
    cols = read_snapshot(path)
    snap = Snapshot(cols, source=path)
    snap.cache_path = None
    if key is not None:
        replay, replay_meta = _replay_arrays(snap)
        meta = {"extras": _plain(cols.extras), "n_devices": int(cols.n_devices), "replay": replay_meta}
        if _cache.write_entry(entry_file, key, {**_arrays_of(cols), **replay}, list(cols.strings), None, meta):
            snap.cache_path = entry_file
    snap.load_seconds = time.perf_counter() - t0
    return snap
