"""Snapshot: an allocator snapshot's columns and the questions asked of them.

Why a class over the reader's columns (decode.snapshot_columns.SnapshotColumns, or the
same arrays memory-mapped from the cache): every answer is numpy over those columns,
each device's history replayed once (replay.device_history) and kept. The figures are
``torch.cuda._memory_viz``'s: ``segsum``'s accounting of the segments, the history
replayed as memory_viz's Active Memory Timeline draws it (``trace``'s running count of
alloc / free_completed sizes, plus what was already live when the history starts).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tb_profiler.decode.snapshot_schema import ACTIONS, BLOCK_STATES, MISSING
from tb_profiler.snapshot.replay import (
    A_OOM,
    DeviceHistory,
    device_history,
    position_at,
)
from tb_profiler.snapshot.state import account, end_state, state_at

if TYPE_CHECKING:  # annotations only: pandas is imported where a DataFrame is built
    import pandas as pd

TOP_ALLOCATIONS = 5000
_TOTAL_KEYS = ("reserved_bytes", "allocated_bytes", "active_bytes", "free_external_bytes", "free_internal_bytes")
# memory_viz's frame filter (_memory_viz._frame_filter, MemoryViz.js frameFilter): frames that say nothing
_OMIT_NAMES = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
               "PyEval_", "PyObject_", "PyFunction_")
_OMIT_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
               "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h")

__all__ = ["Snapshot"]


class Snapshot:
    """An allocator snapshot (``torch.cuda.memory._snapshot()``), read into columns.

    source: the file it came from (for messages); columns: SnapshotColumns-shaped
    (tables, stack_offsets, stack_frames, strings, extras, n_devices)."""

    def __init__(self, columns: Any, source: str = "") -> None:
        self.columns = columns
        self.source = source
        self.strings = columns.strings
        self._hist: dict[int, DeviceHistory] = {}
        self._entries_by_device: dict[int, int] | None = None
        self.hist_in_columns: set[int] = set()  # devices whose replay is part of the columns (a cache entry's)
        self.load_seconds = 0.0

    # -- basics ------------------------------------------------------------------------------
    @property
    def history(self) -> dict[str, np.ndarray]:
        return self.columns.tables["history"]

    @property
    def segments(self) -> dict[str, np.ndarray]:
        return self.columns.tables["segments"]

    @property
    def extras(self) -> dict:
        return self.columns.extras

    def entries_by_device(self) -> dict[int, int]:
        """History entries per device id, devices ascending (counted once: the history of a
        2 GB snapshot is ~10M entries, and every summary and timeline asks)."""
        if self._entries_by_device is None:
            dev = self.history["device"]
            if len(dev):
                lo = int(dev.min())
                counts = np.bincount(dev.astype(np.int64) - lo)
                self._entries_by_device = {int(i) + lo: int(counts[i]) for i in np.flatnonzero(counts)}
            else:
                self._entries_by_device = {}
        return self._entries_by_device

    def devices(self) -> list[int]:
        """Device ids with history entries or segments."""
        return sorted(set(self.entries_by_device()) | {int(x) for x in np.unique(self.segments["device"])})

    def default_device(self) -> int | None:
        """The device with the most history entries (else the first with segments)."""
        counts = self.entries_by_device()
        if counts:
            return max(counts, key=lambda d: (counts[d], -d))
        devs = self.devices()
        return devs[0] if devs else None

    def device_history(self, device: int) -> DeviceHistory:
        """The device's replayed history (computed once)."""
        h = self._hist.get(device)
        if h is None:
            h = self._hist[device] = device_history(self.columns, device)
        return h

    def _device(self, device: int | None) -> int:
        d = self.default_device() if device is None else int(device)
        if d is None:
            raise ValueError(f"{self.source or 'snapshot'}: no device has history or segments")
        return d

    def nbytes(self) -> int:
        """Bytes this snapshot holds: its columns (a cache entry's arrays, replays included,
        or the reader's), the histories replayed since, the strings. The server counts it
        against --memory-mb as it counts traces."""
        cols = self.columns
        own = getattr(getattr(cols, "_arrays", None), "nbytes", None)
        if callable(own):
            total = own()
        else:
            total = sum(a.nbytes for t in cols.tables.values() for a in t.values())
            total += cols.stack_offsets.nbytes + cols.stack_frames.nbytes
        fresh = [h for d, h in self._hist.items() if d not in self.hist_in_columns]
        total += sum(getattr(h, f).nbytes for h in fresh for f in vars(h) if isinstance(getattr(h, f), np.ndarray))
        return int(total + sum(len(str(x)) + 56 for x in self.strings))

    def _text(self, sid: int) -> str | None:
        return None if sid < 0 or sid >= len(self.strings) else str(self.strings[sid])

    # -- summary -----------------------------------------------------------------------------
    def summary(self) -> dict:
        """Totals (``segsum``'s accounting over all segments), the peak of the history
        replay (the highest device's), entries, devices, OOMs and the time range."""
        segs, blocks = end_state(self.columns, None)
        acc = account(segs, blocks)
        t = self.history["time_us"]
        t = t[t != MISSING]
        peaks = {d: self.device_history(d).peak()[1] for d in self.entries_by_device()}
        return {"segments": len(segs["address"]), **_totals(segs, acc),
                "peak_allocated_bytes": max(peaks.values()) if peaks else None,
                "peak_allocated_by_device": {str(d): int(v) for d, v in peaks.items()},
                "history_entries": len(self.history["action"]), "devices": self.devices(),
                "oom_count": int((self.history["action"] == A_OOM).sum()),
                "time_range_us": [int(t.min()), int(t.max())] if len(t) else None,
                "allocator_settings": self.extras.get("allocator_settings") if isinstance(self.extras, dict) else None}

    # -- timeline ----------------------------------------------------------------------------
    def timeline(self, device: int | None = None, start_us: int | None = None, end_us: int | None = None,
                 max_points: int = 2000) -> dict:
        """Allocated and reserved bytes after each entry of one device's history, in
        [start_us, end_us], cut to at most max_points (the highest of each bucket kept),
        its peak, and the allocations overlapping the window (largest first, at most 5000).
        Without times in the history (a profile turned snapshot), ``time_us`` is the
        entry's index and ``time_axis`` says "entry"."""
        d = self._device(device)
        h = self.device_history(d)
        if h.has_time:
            lo = 0 if start_us is None else max(position_at(h, start_us), 0)  # the state at start_us
            hi = h.n - 1 if end_us is None else position_at(h, end_us)
        else:
            lo = 0 if start_us is None else max(int(start_us), 0)
            hi = h.n - 1 if end_us is None else min(int(end_us), h.n - 1)
        pos = np.arange(lo, hi + 1) if hi >= lo else np.zeros(0, np.int64)
        points = _bucketed(h, pos, max(int(max_points), 2))
        if len(pos):
            p = int(pos[np.argmax(h.allocated[pos])])
            peak = {"time_us": h.time_of(p) if h.has_time else p, "allocated_bytes": int(h.allocated[p]), "entry": p}
        else:
            peak = {"time_us": None, "allocated_bytes": h.allocated_at(lo - 1), "entry": None}
        over = np.flatnonzero(h.in_timeline & (h.start <= hi) & (h.end > lo)) if len(pos) else np.zeros(0, np.int64)
        order = largest_first(over, h.size[over], TOP_ALLOCATIONS)
        import pandas as pd  # on use: importing tb_profiler.snapshot does not import pandas

        allocs = pd.DataFrame({
            "addr": h.addr[order], "size": h.size[order], "stream": h.stream[order],
            "start_us": self._times(h, h.start[order]), "end_us": self._times(h, h.end[order]),
            "stack": h.stack[order], "start_entry": h.start[order], "end_entry": h.end[order]})
        return {"device": d, "time_axis": "time_us" if h.has_time else "entry", "points": points, "peak": peak,
                "allocations": allocs, "allocations_total": len(over)}

    def _times(self, h: DeviceHistory, pos: np.ndarray) -> np.ndarray:
        """Times of positions; MISSING for -1 (before the history) and n (still live)."""
        ok = (pos >= 0) & (pos < h.n)
        out = np.full(len(pos), MISSING, dtype=np.int64)
        out[ok] = h.time_us[pos[ok]]
        return out

    # -- allocator state ---------------------------------------------------------------------
    def at(self, time_us: int | None = None, device: int | None = None) -> dict:
        """Segments and blocks at time_us (None: the snapshot's end, every device unless
        one is named); earlier, the history replayed backwards (state.state_at)."""
        if time_us is None and device is None:
            segs, blocks = end_state(self.columns, None)
        else:
            d = self._device(device)
            h = self.device_history(d)
            pos = h.n - 1 if time_us is None else self._position(h, time_us)
            segs, blocks = state_at(self.columns, h, pos)
        return self._state_frames(segs, blocks)

    def _position(self, h: DeviceHistory, time_us: int) -> int:
        return position_at(h, time_us) if h.has_time else min(int(time_us), h.n - 1)

    def state_at_entry(self, device: int, pos: int) -> dict:
        """at() at an entry of a device's history (after it)."""
        segs, blocks = state_at(self.columns, self.device_history(device), pos)
        return self._state_frames(segs, blocks)

    def _state_frames(self, segs: dict, blocks: dict) -> dict:
        import pandas as pd

        acc = account(segs, blocks)
        pool = np.where(segs["pool_a"] == MISSING, None,
                        pd.Series(segs["pool_a"]).astype(str) + "," + pd.Series(segs["pool_b"]).astype(str))
        frame = pd.DataFrame({
            "address": segs["address"], "total_size": segs["total_size"],
            "allocated_bytes": acc["allocated_bytes"], "active_bytes": acc["active_bytes"],
            "free_external_bytes": acc["free_external_bytes"], "free_internal_bytes": acc["free_internal_bytes"],
            "stream": segs["stream"], "segment_type": self._texts(segs["segment_type"]), "pool": pool,
            "is_expandable": segs["is_expandable"] == 1, "fragmentation": acc["fragmentation"],
            "largest_free_block": acc["largest_free_block"], "device": segs["device"], "stack": segs["stack"]})
        states = np.array([*BLOCK_STATES, "unknown"], dtype=object)
        st = blocks["state"].astype(np.int64)
        bl = pd.DataFrame({"segment": blocks["segment"], "address": blocks["addr"], "size": blocks["size"],
                           "requested_size": blocks["requested"], "state": states[np.where(st < 0, 3, st)],
                           "stack": blocks["stack"]})
        return {"segments": frame, "blocks": bl, "totals": _totals(segs, acc)}

    def _texts(self, ids: np.ndarray) -> np.ndarray:
        table = np.array([None, *[str(s) for s in self.strings]], dtype=object) if len(ids) else np.zeros(0, object)
        return table[np.where((ids >= 0) & (ids < len(table) - 1), ids + 1, 0)] if len(ids) else table

    # -- what is live ------------------------------------------------------------------------
    def live_at(self, time_us: int, device: int | None = None, top: int = 50) -> pd.DataFrame:
        """Allocations live at time_us grouped by stack, largest first: stack, frames
        (text, innermost first, memory_viz's noise frames left out), bytes, count."""
        d = self._device(device)
        h = self.device_history(d)
        return self.live_at_entry(d, self._position(h, time_us), top)

    def live_at_peak(self, device: int | None = None, top: int = 50) -> pd.DataFrame:
        """live_at at the device's peak (timeline's peak)."""
        d = self._device(device)
        return self.live_at_entry(d, self.device_history(d).peak()[0], top)

    def live_at_entry(self, device: int, pos: int, top: int = 50) -> pd.DataFrame:
        h = self.device_history(device)
        live = h.in_timeline & (h.start <= pos) & (h.end > pos)
        stacks, size = h.stack[live].astype(np.int64), np.where(h.size[live] == MISSING, 0, h.size[live])
        uniq, inv = np.unique(stacks, return_inverse=True)
        total = np.bincount(inv, weights=size.astype(np.float64), minlength=len(uniq)).astype(np.int64)
        count = np.bincount(inv, minlength=len(uniq))
        order = np.lexsort((uniq, -total))[:max(int(top), 0)]
        ids = uniq[order]
        import pandas as pd

        return pd.DataFrame({"stack": ids.astype(np.int64), "frames": [self.frames_text(int(s)) for s in ids],
                             "bytes": total[order], "count": count[order].astype(np.int64)})

    # -- stacks ------------------------------------------------------------------------------
    def stack(self, stack_id: int) -> list[dict]:
        """The frames of a stack id, innermost first: [{filename, line, name}]."""
        offs = self.columns.stack_offsets
        if stack_id < 0 or stack_id + 1 >= len(offs):
            return []
        fr = self.columns.stack_frames[int(offs[stack_id]):int(offs[stack_id + 1])].astype(np.int64)
        t = self.columns.tables["frames"]
        return [{"filename": self._text(int(f)), "line": None if ln == MISSING else int(ln), "name": self._text(int(n))}
                for f, ln, n in zip(t["filename"][fr].tolist(), t["line"][fr].tolist(), t["name"][fr].tolist())]

    def frames_text(self, stack_id: int) -> str:
        """A stack as lines ``filename:line:name``, innermost first, noise frames left out."""
        if stack_id < 0:
            return "<no stack: allocated before the history, or not recorded>"
        keep = [f for f in self.stack(stack_id)
                if not any(o in (f["name"] or "") for o in _OMIT_NAMES)
                and not any(o in (f["filename"] or "") for o in _OMIT_FILES)]
        return "\n".join(f["name"] if f["filename"] in ("none", "??", "", None) and not f["line"]
                         else f"{f['filename']}:{f['line']}:{f['name']}" for f in keep)

    # -- OOMs --------------------------------------------------------------------------------
    def ooms(self) -> list[dict]:
        """One report per ``oom`` entry (snapshot.oom.reports)."""
        from tb_profiler.snapshot.oom import reports

        return reports(self)

    def action_names(self) -> np.ndarray:
        """Each history entry's action as text."""
        act = self.history["action"].astype(np.int64)
        names = np.array([*ACTIONS, None], dtype=object)[np.where(act < 0, len(ACTIONS), act)]
        other = act < 0
        if other.any():
            names[other] = self._texts(self.history["action_text"][other])
        return names

    def __repr__(self) -> str:
        return (f"Snapshot({self.source!r}, {len(self.segments['address'])} segments, "
                f"{len(self.history['action'])} history entries)")


def largest_first(ids: np.ndarray, sizes: np.ndarray, k: int) -> np.ndarray:
    """The k ids of largest size, largest first, ties in ids' order: a stable sort of all,
    in O(n) (why: a window of a long history overlaps millions of allocations)."""
    if len(ids) > k > 0:
        keep = sizes >= np.partition(sizes, len(sizes) - k)[len(sizes) - k]
        ids, sizes = ids[keep], sizes[keep]
    return ids[np.argsort(-sizes, kind="stable")][:max(k, 0)]


def _totals(segs: dict, acc: dict) -> dict:
    ts = segs["total_size"]
    return {"reserved_bytes": int(np.where(ts == MISSING, 0, ts).sum()),
            **{k: int(acc[k].sum()) for k in _TOTAL_KEYS[1:]}}


def _bucketed(h: DeviceHistory, pos: np.ndarray, max_points: int) -> pd.DataFrame:
    """The curve at positions pos, at most max_points rows: each bucket's highest
    allocated (and reserved) bytes at the bucket's first time."""
    import pandas as pd

    t = h.time_us[pos] if h.has_time else pos
    if len(pos) <= max_points:
        return pd.DataFrame({"time_us": t, "allocated_bytes": h.allocated[pos], "reserved_bytes": h.reserved[pos],
                             "entry": pos})
    edges = np.linspace(0, len(pos), max_points + 1).astype(np.int64)[:-1]
    edges = np.unique(edges)
    return pd.DataFrame({"time_us": t[edges], "allocated_bytes": np.maximum.reduceat(h.allocated[pos], edges),
                         "reserved_bytes": np.maximum.reduceat(h.reserved[pos], edges), "entry": pos[edges]})
