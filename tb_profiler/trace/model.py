"""Trace: one trace file as columnar tables, plus the metadata around them.

Why this shape: analyses work on whole columns (numpy), so a Trace is a handful of
Tables over shared arrays, a string table and the raw args text; everything small
(process names, devices, steps) is derived lazily from those and costs nothing until
asked for.  A Trace built from the decoder and one reopened from the cache (arrays
memory-mapped) are the same object with the same behaviour.

The analyses are not here: a Trace is data, and analysis/ reads it (a trace never imports
an analysis).  ``tb_profiler.load`` gives ``tb_profiler.api.Trace``, this class with one
method per analysis (``trace.kernels()``, ``trace.idle()``, ...).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.build import PHASES, TraceState
from tb_profiler.trace.categories import KIND_NAMES, Kind
from tb_profiler.trace.devices import (
    DEVICE_WORDS,
    MATRIX_UNITS,
    Device,
    backends,
    device_list,
    event_devices,
    device_properties,
    runtime_names,
)
from tb_profiler.trace.metadata import ProcessInfo, parse_toplevel, step_number
from tb_profiler.trace.roles import DEVICE_SIDE, DEVICE_WORK, Role, role_column, role_mask
from tb_profiler.trace.strings import map_string_ids, resolve, used_ids
from tb_profiler.trace.table import Columns, SparseStore, Table

_MEMORY_COLUMNS = {"addr": "addr", "bytes": "mem_bytes", "total_allocated": "total_allocated",
                   "total_reserved": "total_reserved", "device_type": "device_type", "device_id": "device_id"}


class Trace:
    """One trace file (one worker, one span), columnar.

    Tables: ``events`` (ph X, sorted by ts then longest first), ``instants`` (ph i/I),
    ``memory_records`` (the ``[memory]`` instants with their allocator fields), ``counters``
    (ph C), ``flows`` (ph s/t/f), ``meta_events`` (ph M).  Times are int64 ns.
    The analyses' methods are tb_profiler.api.Trace's (a subclass).
    """

    def __init__(self, state: TraceState, *, decode_seconds: float = 0.0, from_cache: bool = False):
        self._state = state
        self.strings: np.ndarray = state.strings
        meta = state.meta
        self.source: str = meta.get("source", "<bytes>")
        self.n_rows: int = int(meta.get("n_rows", 0))
        self.phase_counts: dict[str, int] = dict(meta.get("phase_counts", {}))
        # What building the tables left out and why (e.g. events without a usable ts).
        self.notes: list[str] = list(meta.get("notes", []))
        # The same, machine-readable (trace.build): {reason: rows dropped}, {field: rows read as missing}.
        self.dropped: dict[str, int] = dict(meta.get("dropped", {}))
        self.repaired: dict[str, int] = dict(meta.get("repaired", {}))
        self.decode_seconds: float = float(meta.get("decode_seconds", decode_seconds))
        self.from_cache = from_cache
        self.load_seconds: float = 0.0
        self._cache_path: str | None = None
        self._writer = None  # the thread writing its cache entry (trace.load), if any
        # (entry file, CacheKey) of this trace in the cache, set by trace.load when the cache
        # is on: where results derived from it are kept too (analysis.stored)
        self.cache_ref = None
        # the folder files beside this trace may be read from (the server's logdir; None: a
        # file the user opened, whose neighbours are theirs): analysis.graph_annotations
        self.data_root: str | None = None
        dtypes = {k: np.dtype(v) for k, v in meta.get("sparse_dtypes", {}).items()}
        self._store = SparseStore(state.arrays, self.n_rows, dtypes)
        tables = {}
        for table in PHASES:
            tables[table] = Table(table, Columns(state.arrays, table + "."), self.strings, self._store, state)
        self.events: Table = tables["events"]
        self.instants: Table = tables["instants"]
        self.counters: Table = tables["counters"]
        self.flows: Table = tables["flows"]
        self.meta_events: Table = tables["meta"]

    # -- strings and args ------------------------------------------------------------
    def str(self, ids):
        """The string for an id (or an object array of strings for an array of ids)."""
        if np.ndim(ids) == 0:
            i = int(ids)
            return self.strings[i] if 0 <= i < len(self.strings) else None
        return resolve(np.asarray(ids), self.strings)

    def args(self, i: int, table: str | Table = "events") -> dict:
        """The full args object of row i of a table (default: events), parsed on demand."""
        t = getattr(self, "meta_events" if table == "meta" else table) if isinstance(table, str) else table
        return t.args(i)

    @property
    def cache_path(self) -> str | None:
        """The cache entry this trace was read from or written to (None: no cache); waits
        for an entry still being written."""
        writer = self._writer
        if writer is not None:
            writer.join()
        return self._cache_path

    @property
    def args_blob(self):
        """Every event's raw args JSON text, addressed by the args_off/args_len columns
        (bytes-like, or decode.args_text's FileArgs/BlockArgs: slice it for bytes)."""
        return self._state.args_blob

    def adopt(self, arrays, args_blob) -> None:
        """Read the same arrays and args text from elsewhere from now on (the cache entry
        just written: memory-mapped instead of anonymous memory).  Every table reads
        through the state's arrays, so they all move; what they derived stays."""
        state = self._state
        state.arrays, state.args_blob = arrays, args_blob
        self._store.arrays = arrays
        for table in (self.events, self.instants, self.counters, self.flows, self.meta_events):
            cols = table._cols
            if isinstance(cols, Columns):
                cols.arrays = arrays

    # -- metadata -------------------------------------------------------------------
    @cached_property
    def metadata(self) -> dict:
        """Every top-level key of the file but traceEvents, parsed (schemaVersion, ...)."""
        return parse_toplevel(self._state.meta.get("toplevel", {}))

    schema_version = property(lambda self: self.metadata.get("schemaVersion"))
    distributed_info = property(lambda self: self.metadata.get("distributedInfo"))
    base_time_ns = property(lambda self: self.metadata.get("baseTimeNanoseconds"))
    display_time_unit = property(lambda self: self.metadata.get("displayTimeUnit"))
    trace_id = property(lambda self: self.metadata.get("trace_id"))
    trace_name = property(lambda self: self.metadata.get("traceName"))

    @cached_property
    def device_properties(self) -> list[dict]:
        return device_properties(self.metadata)

    @cached_property
    def _process_info(self) -> ProcessInfo:
        return ProcessInfo(self.meta_events, lambda i: self.meta_events.args(i))

    process_names = property(lambda self: self._process_info.process_names, doc="{pid: name}")
    thread_names = property(lambda self: self._process_info.thread_names, doc="{(pid, tid): name}")
    process_labels = property(lambda self: self._process_info.process_labels, doc="{pid: labels}")
    process_sort_index = property(lambda self: self._process_info.process_sort_index)
    thread_sort_index = property(lambda self: self._process_info.thread_sort_index)

    # -- devices --------------------------------------------------------------------
    @cached_property
    def kind_counts(self) -> np.ndarray:
        """Number of events per Kind value (index with ``Kind.KERNEL``)."""
        return np.bincount(self.events["kind"], minlength=len(KIND_NAMES))

    @cached_property
    def roles(self) -> np.ndarray:
        """What each event is (a ``trace.roles.Role`` per row): the one answer to "is this
        device compute, a copy, a runtime call, host work?" that every analysis reads."""
        out = role_column(self.events["kind"], self.events["name"], self.strings)
        out.flags.writeable = False
        return out

    @cached_property
    def role_counts(self) -> np.ndarray:
        """Number of events per Role value (index with ``Role.COMPUTE``)."""
        return np.bincount(self.roles, minlength=len(Role))

    @property
    def has_device_work(self) -> bool:
        """Whether any device compute, copy or fill is in the trace, on any backend."""
        return bool(sum(int(self.role_counts[r]) for r in DEVICE_WORK))

    @cached_property
    def device_kinds(self) -> tuple[str, ...]:
        """Backends the trace shows: ("CUDA",), ("ROCm",), ("XPU",), ... or () for CPU only."""
        return backends(self.kind_counts, self.has_device_work, runtime_names(self.events, self.strings),
                        self.device_properties)

    @property
    def device_word(self) -> str:
        """What to call the device the trace ran on (GPU, XPU, NPU, MTIA, HPU; "CPU" for a
        CPU-only trace, as the distributed view says).  Whether there is an accelerator is
        ``device_kinds`` (empty for CPU only), never this word."""
        return DEVICE_WORDS.get(self.device_kinds[0], self.device_kinds[0]) if self.device_kinds else "CPU"

    @property
    def matrix_unit(self) -> str | None:
        """What to call the matrix-multiply units the tensor-core figures are about ("Tensor
        cores", "Matrix cores" on AMD); None on a backend whose kernel names do not tell
        (MTIA, XPU, ...): no tensor-core figure is shown there rather than a false 0 %."""
        return MATRIX_UNITS.get(self.device_kinds[0]) if self.device_kinds else "Tensor cores"

    @cached_property
    def devices(self) -> list[Device]:
        """deviceProperties entries plus device ids seen on kernels/memcpy/memset, by id."""
        return device_list(self.device_properties, self.event_devices, self.device_kinds[0] if self.device_kinds else None)

    @cached_property
    def event_devices(self) -> np.ndarray:
        """Device id per event (args "device", else the pid of a device row); -1 on the host."""
        out = event_devices(self.events, role_mask(self.roles, DEVICE_SIDE))
        out.flags.writeable = False
        return out

    @cached_property
    def event_streams(self) -> np.ndarray:
        """Stream per device event (args "stream", else the tid: Kineto writes a device
        row's stream as its tid); -1 on the host and where neither is known."""
        ev = self.events
        s = np.where(ev["stream"] != MISSING_INT, ev["stream"], ev["tid"]).astype(np.int64)
        out = np.where((s != MISSING_INT) & role_mask(self.roles, DEVICE_SIDE), s, -1)
        out.flags.writeable = False
        return out

    # -- derived tables -------------------------------------------------------------
    @cached_property
    def steps(self) -> Table:
        """ProfilerStep#N events on the host: number, start, end, dur (ns), event (row in events)."""
        ev = self.events
        num = map_string_ids(ev["name"], self.strings, step_number, np.int64, -1)
        idx = np.flatnonzero((num >= 0) & ~role_mask(self.roles, DEVICE_SIDE))
        start = ev["ts"][idx]
        return Table("steps", {"number": num[idx], "start": start, "end": start + ev["dur"][idx],
                               "dur": ev["dur"][idx], "event": idx}, self.strings)

    @cached_property
    def memory_records(self) -> Table:
        """The allocator records ([memory] instants): ts, pid, tid, addr, bytes, totals, device."""
        inst = self.instants
        ids = [i for i in used_ids(inst["name"], len(self.strings)).tolist() if self.strings[i] == "[memory]"]
        sub = inst.take(np.isin(inst["name"], ids), "memory_records")
        cols = {c: sub[c] for c in ("row", "ts", "pid", "tid", "pid_str", "tid_str", "args_off", "args_len")}
        cols.update({c: sub[src] for c, src in _MEMORY_COLUMNS.items()})
        return Table("memory_records", cols, self.strings, self._store, self._state)

    # -- summaries ------------------------------------------------------------------
    @cached_property
    def span(self) -> tuple[int, int]:
        """(first start, last end) in ns over events, instants and counters; (0, 0) if empty."""
        lo, hi = [], []
        for t in (self.events, self.instants, self.counters):
            ts = t["ts"]
            ok = ts != MISSING_INT
            if ok.any():
                lo.append(int(ts[ok].min()))
                end = ts[ok] + t["dur"][ok] if "dur" in t.materialized else ts[ok]
                hi.append(int(end.max()))
        return (min(lo), max(hi)) if lo else (0, 0)

    @property
    def duration_ns(self) -> int:
        return self.span[1] - self.span[0]

    def category_counts(self, raw: bool = False) -> dict[str, int]:
        """Events per canonical kind ("kernel": 8772, ...), or per category as written."""
        if not raw:
            return {KIND_NAMES[k]: int(c) for k, c in enumerate(self.kind_counts.tolist()) if c}
        cat = self.events["cat"]
        valid = (cat >= 0) & (cat < len(self.strings))
        counts = np.bincount(cat[valid], minlength=len(self.strings))
        out = {self.strings[i]: int(counts[i]) for i in np.flatnonzero(counts).tolist()}
        if (~valid).any():
            out[""] = int((~valid).sum())
        return out

    @property
    def counts(self) -> dict[str, int]:
        """Rows per table."""
        return {t: len(getattr(self, "meta_events" if t == "meta" else t)) for t in PHASES}

    def __repr__(self) -> str:
        kinds = ",".join(self.device_kinds) or "CPU"
        return (f"<Trace {self.source}: {len(self.events)} events, {len(self.instants)} instants, "
                f"{len(self.flows)} flows, {len(self.counters)} counters, devices {kinds}>")


__all__ = ["Trace", "Kind", "Device"]
