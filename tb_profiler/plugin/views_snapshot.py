"""The memory-snapshot routes (issue 20): ``snapshots``, ``snapshot/summary``, ``snapshot/timeline``,
``snapshot/at``, ``snapshot/ooms``, ``snapshot/live`` and ``snapshot/operator`` (docs/api.md, "Memory snapshots").

Why a module of its own: a snapshot is not a trace. It is addressed by ``run`` + ``snapshot``
(its path relative to the run's folder), and only a name discovery found in that run is
accepted (``ProfilerState.run_snapshots``), so no query can name a file of its own: nothing
outside the logdir, nothing discovery did not list as a snapshot.  Each snapshot file is
loaded once per version (path, size, mtime, tag) through ``tb_profiler.load_snapshot`` (its
on-disk cache, the server's cache settings) on the app's pool, one load at a time per file,
and the last SNAPSHOTS_KEPT stay in memory, their bytes counted against the server's memory
cap (--memory-mb) with the traces it holds (older snapshots go first while the two together
are over it, the newest one always kept); a file that cannot be read is remembered with its
reason (until it changes), so a hostile or broken pickle is refused, clearly, every time
without being read again. Every reply is bounded (MAX_* below) and goes through the app's
response cache.

``snapshot/operator`` joins a snapshot to the run's trace: the innermost operator (a cpu_op,
as the Memory view counts operators) running at a snapshot time (the allocator's ``time_us``,
wall-clock µs) in the trace that run/worker/span name, placed by the trace's wall clock
(baseTimeNanoseconds + ts: ``plugin.timeline.wall_origin``).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tb_profiler.analysis.jsonable import to_jsonable

SNAPSHOTS_KEPT = 2        # loaded snapshots kept in memory (the on-disk cache reopens the others quickly)
FAILED_KEPT = 256         # remembered load failures
MAX_POINTS = 20_000       # snapshot/timeline's max_points, at most
MAX_SEGMENTS = 5_000      # snapshot/at's segments sent, largest first (all are counted)
MAX_BLOCKS = 20_000       # ... and blocks of the segments sent
MAX_TOP = 500             # snapshot/live's top
MAX_OOMS = 50             # snapshot/ooms' reports sent (all are counted)
MAX_STACKS = 2_000        # distinct stacks sent with one reply
MAX_FRAMES = 40           # frames of one stack sent, innermost first
_I64 = (-(1 << 63), (1 << 63) - 1)
_ADDR_COLUMNS = ("addr", "address")


class SnapshotError(Exception):
    """A snapshot that cannot be read; the message names the file (relative) and the problem."""


# -- loading, once per version of a file --------------------------------------------------
class SnapshotCache:
    """The last SNAPSHOTS_KEPT loaded snapshots and the last FAILED_KEPT failures, by file
    version. ``held`` (the state's held_bytes) says what the server holds besides; the kept
    snapshots' bytes go to ``note`` (the state's note_snapshot_bytes) so the traces' LRU and
    the status count them too."""

    def __init__(self, held: Callable[[], int] | None = None, cap: Callable[[], int] | None = None,
                 note: Callable[[int, int], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._kept: "OrderedDict[tuple, tuple[Any, int]]" = OrderedDict()
        self._failed: "OrderedDict[tuple, str]" = OrderedDict()
        self._held, self._cap, self._note = held, cap, note
        self.bytes = 0

    def get(self, key: tuple) -> Any:
        with self._lock:
            if key in self._failed:
                raise SnapshotError(self._failed[key])
            item = self._kept.get(key)
            if item is None:
                return None
            self._kept.move_to_end(key)
            return item[0]

    def put(self, key: tuple, snap: Any) -> None:
        size = int(snap.nbytes()) if hasattr(snap, "nbytes") else 0
        with self._lock:
            old = self._kept.pop(key, None)
            self.bytes += size - (old[1] if old else 0)
            self._kept[key] = (snap, size)
            while len(self._kept) > 1 and (len(self._kept) > SNAPSHOTS_KEPT or self._over()):
                self.bytes -= self._kept.popitem(last=False)[1][1]
            if self._note is not None:
                self._note(self.bytes, len(self._kept))

    def _over(self) -> bool:
        if self._held is None or self._cap is None:
            return False
        return self.bytes + self._held() > self._cap()

    def fail(self, key: tuple, reason: str) -> None:
        with self._lock:
            self._failed[key] = reason
            while len(self._failed) > FAILED_KEPT:
                self._failed.popitem(last=False)


def load(path: str, shown: str, *, cache: bool, cache_dir: str | None) -> Any:
    """tb_profiler.load_snapshot(path), its errors as SnapshotError naming ``shown`` (the
    file relative to the logdir), never the server's paths."""
    try:
        from tb_profiler.snapshot import load_snapshot
    except ImportError:  # a build without the snapshot model
        raise SnapshotError(f"{shown}: this tb_profiler cannot read memory snapshots") from None
    try:
        return load_snapshot(path, cache=cache, cache_dir=cache_dir)
    except MemoryError:
        raise SnapshotError(f"{shown}: out of memory while reading the snapshot") from None
    except OSError as exc:
        raise SnapshotError(f"{shown}: cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - the reader's refusal (TraceFormatError) or a bug: said, not a 500
        text = str(exc).replace(path, shown) or type(exc).__name__
        raise SnapshotError(text if shown in text else f"{shown}: {text}") from None


# -- JSON helpers ---------------------------------------------------------------------------
def _frame(df: pd.DataFrame) -> list[dict]:
    """A model DataFrame as records: MISSING (INT64_MIN) integers as null, addresses as hex
    text (they reach 2**64, beyond a JS number's exact range)."""
    from tb_profiler.decode.snapshot_schema import MISSING

    out = df.copy()
    for col in out.columns:
        values = out[col]
        if col in _ADDR_COLUMNS and values.dtype.kind in "iu":
            out[col] = [None if v == MISSING else hex(int(v) & 0xFFFFFFFFFFFFFFFF) for v in values.to_numpy().tolist()]
        elif values.dtype.kind == "i" and (values == MISSING).any():
            out[col] = values.astype(object).where(values != MISSING, None)
    return to_jsonable(out)


def _value(v: Any) -> Any:
    """A scalar for JSON, MISSING as null."""
    from tb_profiler.decode.snapshot_schema import MISSING

    v = to_jsonable(v)
    return None if v == MISSING else v


def _stacks(snap: Any, ids) -> dict[str, list[dict]]:
    """{stack id: frames (filename, line, name), innermost first} for the distinct ids given
    (at most MAX_STACKS, each at most MAX_FRAMES frames); -1 / missing ids left out."""
    distinct = pd.unique(pd.Series(np.asarray(ids)).dropna())
    out: dict[str, list[dict]] = {}
    for sid in distinct[:MAX_STACKS].tolist():  # a loop over distinct stacks, not over entries
        if isinstance(sid, (int, np.integer)) and int(sid) >= 0:
            out[str(int(sid))] = to_jsonable(list(snap.stack(int(sid)))[:MAX_FRAMES])
    return out


def _pools(segments: pd.DataFrame) -> list[dict]:
    """Reserved / allocated / free (external, internal) per pool, stream and segment type."""
    need = ("total_size", "allocated_bytes", "active_bytes", "free_external_bytes", "free_internal_bytes")
    if segments.empty or not all(c in segments for c in need):
        return []
    keys = [c for c in ("pool", "stream", "segment_type") if c in segments]
    frame = segments[keys + list(need)].copy()
    for k in keys:
        frame[k] = frame[k].map(lambda v: v if isinstance(v, (int, str, np.integer)) or v is None else str(v))
    g = frame.groupby(keys, dropna=False, sort=True)
    out = g[list(need)].sum().reset_index().rename(columns={"total_size": "reserved_bytes"})
    out.insert(len(keys), "segments", g.size().to_numpy())
    return to_jsonable(out.sort_values("reserved_bytes", ascending=False))


# -- the bodies (pure functions of a Snapshot) ----------------------------------------------
def summary(snap: Any) -> dict:
    """Snapshot.summary(), JSON."""
    return to_jsonable(snap.summary())


def timeline(snap: Any, device: int | None, start_us: int | None, end_us: int | None, max_points: int) -> dict:
    """Snapshot.timeline(...): points, peak, the window's allocations (largest first) and their stacks."""
    t = snap.timeline(device=device, start_us=start_us, end_us=end_us, max_points=max_points)
    allocs = t["allocations"]
    return {"device": _value(t["device"]), "time_axis": t.get("time_axis", "time_us"), "points": _frame(t["points"]), "peak": to_jsonable(t["peak"]),
            "allocations": _frame(allocs), "allocations_total": int(t["allocations_total"]),
            "stacks": _stacks(snap, allocs["stack"] if "stack" in allocs else [])}


def at(snap: Any, time_us: int | None, device: int | None) -> dict:
    """Snapshot.at(...): segments (largest first, at most MAX_SEGMENTS), their blocks (at most
    MAX_BLOCKS), totals, and the totals per pool / stream / segment type."""
    state = snap.at(time_us=time_us, device=device)
    segs, blocks = state["segments"], state["blocks"]
    sent = segs.sort_values("total_size", ascending=False, kind="stable").head(MAX_SEGMENTS)
    chosen = blocks[blocks["segment"].isin(sent.index)] if "segment" in blocks else blocks.iloc[:0]
    chosen = chosen.head(MAX_BLOCKS)
    seg_rows = _frame(sent.reset_index(names="segment"))
    return {"time_us": time_us, "device": device, "segments": seg_rows, "segments_total": int(len(segs)),
            "blocks": _frame(chosen), "blocks_total": int(len(blocks)), "totals": to_jsonable(state["totals"]),
            "pools": _pools(segs), "stacks": _stacks(snap, chosen["stack"] if "stack" in chosen else [])}


def live(snap: Any, time_us: int | None, device: int | None, top: int) -> dict:
    """Snapshot.live_at(time_us) (at the peak when no time is given), largest first."""
    if time_us is None:
        frame = snap.live_at_peak(device=device, top=top)
    else:
        frame = snap.live_at(time_us, device=device, top=top)
    return {"time_us": time_us, "at_peak": time_us is None, "device": device, "rows": _frame(frame)}


def ooms(snap: Any) -> dict:
    """Snapshot.ooms(): one report per oom action (the first MAX_OOMS), live allocations by stack."""
    reports = snap.ooms()
    out = []
    for r in reports[:MAX_OOMS]:  # a loop over OOM reports (a handful), not over entries
        row = {k: (_frame(v) if isinstance(v, pd.DataFrame) else to_jsonable(v)) for k, v in r.items()}
        out.append(row)
    return {"ooms": out, "total": len(reports)}


def operator_at(trace, time_us: int) -> dict:
    """The innermost operator running at wall-clock time_us in the trace (the latest-starting
    cpu_op containing it, as analysis.memory counts operators), or null; and the trace's
    wall-clock extent, so the caller can tell whether the trace covers the snapshot."""
    from tb_profiler.analysis.memory_records import memory_ops
    from tb_profiler.plugin.timeline import origin, wall_origin

    t0, wall0 = origin(trace), wall_origin(trace)
    rel = int(time_us) * 1000 - wall0  # ns from the trace's origin
    start_us, end_us = wall0 / 1000, (wall0 + trace.duration_ns) / 1000
    out = {"time_us": time_us, "trace_start_us": start_us, "trace_end_us": end_us,
           "wall_origin_ns": str(wall0), "covers": bool(start_us <= time_us <= end_us), "operator": None}
    ev = trace.events
    ts, dur = ev["ts"], ev["dur"]
    t = rel + t0
    rows = np.flatnonzero(memory_ops(trace) & (ts <= t) & (ts + dur >= t))
    if len(rows):
        i = int(rows[-1])  # events sort by ts then longest first: the last one containing t is innermost
        out["operator"] = {"name": str(trace.strings[ev["name"][i]]), "i": i, "start_ns": int(ts[i]) - t0,
                           "dur_ns": int(dur[i]), "tid": _value(ev["tid"][i]) if "tid" in ev.materialized else None}
    return out


def with_memory(names: list[str], snapshots: bool) -> list[str]:
    """The run's views, the Memory view among them when the run has memory snapshots (its
    Snapshot section shows them even where the trace has no memory records)."""
    from tb_profiler.plugin.views import VIEW_ORDER

    if not snapshots or "Memory" in names:
        return names
    return [v for v in VIEW_ORDER if v in names or v == "Memory"]


# -- routes ----------------------------------------------------------------------------------
_SNAP = ("run", "snapshot")
ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "snapshots": ("run",),
    "snapshot/summary": _SNAP,
    "snapshot/timeline": (*_SNAP, "device", "start_us", "end_us", "max_points"),
    "snapshot/at": (*_SNAP, "time_us", "device"),
    "snapshot/ooms": _SNAP,
    "snapshot/live": (*_SNAP, "time_us", "device", "top"),
    "snapshot/operator": ("run", "worker", "span", "time_us"),
}.items()}


class SnapshotRoutes:
    """The routes bound to the app (ProfilerApp): lookups, loading and the response cache."""

    def __init__(self, app) -> None:
        self.app = app
        st = app.state
        self.cache = SnapshotCache(held=lambda: st.trace_bytes, cap=lambda: st.memory_bytes,
                                   note=st.note_snapshot_bytes)

    def _file(self, p) -> tuple[str, Any]:
        """(shown name, SnapshotFile) that run + snapshot name: one discovery found, else 404."""
        from tb_profiler.plugin.params import ApiError

        run = p.text("run", required=True)
        self.app._run_entries(run)  # 404 for an unknown run
        name = p.text("snapshot", required=True)
        found = {s.rel: s for s in self.app.state.run_snapshots(run)}
        snap = found.get(name)
        if snap is None:
            listed = ", ".join(sorted(found)[:10]) or "none"
            raise ApiError(404, f"run {run[:200]!r} has no memory snapshot {name[:200]!r} (its snapshots: "
                                f"{listed[:1000]}; a pickle that is not one is in the skipped list)")
        return (name if run in (".", "") else f"{run}/{name}"), snap

    def _snapshot(self, shown: str, f) -> Any:
        """The loaded Snapshot of file f (loading it on the pool, once at a time per version)."""
        from tb_profiler.plugin.params import ApiError

        key = (f.path, f.size, f.mtime, f.tag)
        try:
            snap = self.cache.get(key)
        except SnapshotError as exc:
            raise ApiError(400, str(exc)) from None
        if snap is not None:
            return snap

        def work() -> Any:
            try:
                loaded = self.cache.get(key)
                if loaded is None:
                    state = self.app.state
                    loaded = load(f.path, shown, cache=state.cache, cache_dir=state.cache_dir)
                    self.cache.put(key, loaded)
                return loaded
            except SnapshotError as exc:
                self.cache.fail(key, str(exc))
                raise ApiError(400, str(exc)) from None

        return self.app._pooled(("snapshot-load", key), work)

    def answer(self, request, fn: Callable[..., Any], *args) -> Any:
        """fn(snapshot, *args) as JSON through the app's response cache."""
        shown, f = self._file(self.app.params(request))
        key = ("snapshot", request.path, tuple(sorted(request.args.items(multi=True))), f.path, f.size, f.mtime, f.tag)
        cached = self.app.responses.get(key)
        if cached is not None:
            return self.app.body(cached, request=request)
        snap = self._snapshot(shown, f)
        body = self.app._pooled(key, lambda: self.app._encoded(key, {"snapshot": f.rel, **fn(snap, *args)}))
        return self.app.body(body, request=request)

    # the handlers
    def r_snapshots(self, request) -> Any:
        p = self.app.params(request)
        run = p.text("run", required=True)
        self.app._run_entries(run)
        rows = [{"snapshot": s.rel, "size": s.size, "mtime": s.mtime} for s in self.app.state.run_snapshots(run)]
        return self.app.json({"run": run, "snapshots": rows}, request=request)

    def r_summary(self, request) -> Any:
        return self.answer(request, summary)

    def r_timeline(self, request) -> Any:
        p = self.app.params(request)
        return self.answer(request, timeline, p.integer("device", None, 0, 1 << 20), p.integer("start_us", None, *_I64),
                           p.integer("end_us", None, *_I64), p.integer("max_points", 2000, 10, MAX_POINTS))

    def r_at(self, request) -> Any:
        p = self.app.params(request)
        return self.answer(request, at, p.integer("time_us", None, *_I64), p.integer("device", None, 0, 1 << 20))

    def r_ooms(self, request) -> Any:
        return self.answer(request, ooms)

    def r_live(self, request) -> Any:
        p = self.app.params(request)
        return self.answer(request, live, p.integer("time_us", None, *_I64), p.integer("device", None, 0, 1 << 20),
                           p.integer("top", 50, 1, MAX_TOP))

    def r_operator(self, request) -> Any:
        p = self.app.params(request)
        time_us = p.integer("time_us", None, *_I64)
        if time_us is None:
            from tb_profiler.plugin.params import ApiError

            raise ApiError(400, "missing query parameter 'time_us'")
        return self.app.one(request, operator_at, time_us)


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    r = SnapshotRoutes(app)
    return {"snapshots": r.r_snapshots, "snapshot/summary": r.r_summary, "snapshot/timeline": r.r_timeline,
            "snapshot/at": r.r_at, "snapshot/ooms": r.r_ooms, "snapshot/live": r.r_live,
            "snapshot/operator": r.r_operator}


__all__ = ["ROUTE_PARAMS", "SnapshotCache", "SnapshotError", "SnapshotRoutes", "at", "live", "load", "ooms",
           "operator_at", "routes", "summary", "timeline", "with_memory"]
