"""TraceSummary: what the run-level views need of one trace, in kilobytes.

Why: a run of 64 to 4,096 ranks of 100 MB to 2 GB each never fits in memory as events,
and the Distributed view, the run overview and cross-rank diffs need only a few small
tables per rank.  A summary is built once per trace file (analysis.summarize), kept on
disk beside the trace's columns (summary.store), and every run-level analysis reads
summaries only.  Why in analysis/: the run-level analyses (distributed, diff, stragglers)
read it, and they sit below the summary stage (summary/: files to stored summaries, by
a pool or Dask), which only builds and keeps them.  It is plain data: a few small DataFrames, JSON-able facts, nothing per event.

On disk a summary is what the columns cache stores (tb_profiler.cache): named arrays, a
strings table and a JSON meta.  ``to_arrays`` / ``from_arrays`` convert exactly (frames
come back equal, dtypes included): numeric columns as they are, nullable ones as values
plus a mask, text columns as ids into one strings table shared by every frame (each
distinct string stored once), any other object column as JSON in the meta.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tb_profiler.analysis.jsonable import to_jsonable

# Bump when a summary's content changes shape or meaning: it is part of the store's key.
SUMMARY_VERSION = 3  # 2: MTIA dma_request events are copies, not kernels (issue 17)
# 3: host_name and job (PT_PROFILER_JOB_*), collectives' comms_id (issue 19)

class SummaryWarning(UserWarning):
    """A trace file of a run could not be summarized; the others were."""


# The DataFrame fields of a TraceSummary (everything else is JSON-able).
FRAMES = ("steps", "breakdown", "device_summary", "collectives", "step_busy", "communication", "kernels",
          "operators", "modules")


@dataclass
class TraceSummary:
    """One trace file (one worker, one span), summarized for the run-level views.

    Identity: source (absolute path or URL), size and mtime of the file it was built from
    (-1 and None when built from a Trace in memory), worker (discovery's name) and span
    (1-based index among the worker's spans, where known), seconds (to build it).
    Facts: distributedInfo, baseTimeNanoseconds, the device words and kinds, the devices
    (the Distributed view's gpuinfo), view flags (has_memory, has_modules), how the
    distributed numbers are measured (measured_on: device, host or mixed) and the backend
    the events suggest, and the notes of the trace, of its steps and of its collectives.
    Frames: steps (analysis.steps), breakdown (analysis.breakdown, the average row last),
    device_summary (analysis.gpu), collectives (analysis.collectives: one row per
    collective instance), step_busy (per step: computation_ns, communication_ns,
    overlap_ns, as the Distributed view measures them), communication (the merged
    communication intervals: start, end; wait is intersected with them once the ranks'
    collectives are matched), kernels, operators (by name) and modules, inside the steps
    (steps_only), for cross-rank diffs.
    """

    source: str
    worker: str
    size: int = -1
    mtime: int | str | None = None
    span: int | None = None
    seconds: float = 0.0
    distributed_info: dict | None = None
    base_time_ns: int | None = None
    host_name: str | None = None   # Kineto's top-level host_name (libkineto EnvMetadata.h)
    job: dict | None = None        # PT_PROFILER_JOB_NAME/_VERSION/_ATTEMPT_INDEX, where written
    device_word: str | None = None
    device_kinds: tuple[str, ...] = ()
    matrix_unit: str | None = None
    has_device_work: bool = False
    devices: list[dict] = field(default_factory=list)
    has_memory: bool = False
    has_modules: bool = False
    measured_on: str = "host"
    backend_guess: str | None = None
    notes: list[str] = field(default_factory=list)
    step_notes: list[str] = field(default_factory=list)
    collective_notes: list[str] = field(default_factory=list)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    breakdown: pd.DataFrame = field(default_factory=pd.DataFrame)
    device_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    step_busy: pd.DataFrame = field(default_factory=pd.DataFrame)
    communication: pd.DataFrame = field(default_factory=pd.DataFrame)
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    operators: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def rank(self) -> int | None:
        """distributedInfo's rank (None when the trace has none)."""
        info = self.distributed_info if isinstance(self.distributed_info, dict) else {}
        rank = info.get("rank")
        if isinstance(rank, str) and rank.strip().isdigit():
            return int(rank)
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None

    @property
    def nbytes(self) -> int:
        """Memory held by the frames (deep), a measure of the summary's size."""
        return int(sum(getattr(self, f).memory_usage(index=True, deep=True).sum() for f in FRAMES))

    def raw_columns(self, frame: str, only: Sequence[str] | None = None) -> tuple[int, list[tuple[str, tuple]]]:
        """(rows, [(name, (dtype, values, mask or None))]) of one frame (of its columns
        named in ``only``, default all): what ``stack`` joins across summaries without
        building a DataFrame per summary."""
        df = getattr(self, frame)
        return len(df), [(str(c), _raw_series(df.iloc[:, i])) for i, c in enumerate(df.columns)
                         if only is None or str(c) in only]

    def relabel(self, worker: str | None = None, span: int | None = None) -> TraceSummary:
        """The same summary under discovery's worker name and span index (not part of the file)."""
        changes = {k: v for k, v in (("worker", worker), ("span", span)) if v is not None}
        return dataclasses.replace(self, **changes) if changes else self

    def __repr__(self) -> str:
        return (f"<TraceSummary {self.worker} ({self.source}): {len(self.steps)} steps, "
                f"{len(self.collectives)} collectives, measured on {self.measured_on}>")


_FACTS = tuple(f.name for f in dataclasses.fields(TraceSummary) if f.name not in FRAMES)


# -- to and from arrays ----------------------------------------------------------------------

class _Strings:
    """One strings table for every text column: ids per column, each string once."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def codes(self, values: pd.Series) -> np.ndarray:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        lut = np.array([self.ids.setdefault(u, len(self.ids)) for u in uniques.tolist()] + [-1], dtype=np.int32)
        return lut[codes]  # -1 (missing) picks the appended -1

    def table(self) -> np.ndarray:
        out = np.empty(len(self.ids), dtype=object)
        out[:] = list(self.ids)
        return out


def _encode(series: pd.Series, key: str, arrays: dict, strings: _Strings) -> dict:
    """One column into arrays (or JSON); returns how to decode it."""
    spec = {"name": series.name, "dtype": str(series.dtype)}
    if isinstance(series.dtype, np.dtype) and series.dtype.kind in "biuf":
        arrays[key] = series.to_numpy()
        return {**spec, "as": "array"}
    if pd.api.types.is_extension_array_dtype(series.dtype) and series.dtype.kind in "biuf":
        np_dtype = series.dtype.numpy_dtype
        arrays[key] = series.to_numpy(dtype=np_dtype, na_value=np_dtype.type(0))
        arrays[key + ".mask"] = series.isna().to_numpy(bool)
        return {**spec, "as": "masked"}
    if pd.api.types.infer_dtype(series, skipna=True) in ("string", "empty"):
        arrays[key] = strings.codes(series)
        return {**spec, "as": "strings"}
    return {**spec, "as": "json", "values": to_jsonable(series.tolist())}


def _raw(spec: dict, key: str, arrays: dict, strings: np.ndarray) -> tuple[str, np.ndarray, np.ndarray | None]:
    """One stored column as (dtype, values, mask or None): text as an object array (None
    where missing), before any pandas object is built."""
    how, dtype = spec["as"], spec["dtype"]
    if how == "array":
        return dtype, np.array(arrays[key]), None
    if how == "masked":
        return dtype, np.array(arrays[key]), np.array(arrays[key + ".mask"])
    if how == "strings":
        codes = np.asarray(arrays[key], dtype=np.int64)
        values = np.empty(len(codes), dtype=object)
        values[:] = strings[np.maximum(codes, 0)] if len(strings) else None
        values[codes < 0] = None
        return dtype, values, None
    values = np.empty(len(spec["values"]), dtype=object)
    values[:] = spec["values"]
    return "object", values, None


def _raw_series(series: pd.Series) -> tuple[str, np.ndarray, np.ndarray | None]:
    """A column of a frame in memory as ``_raw`` gives a stored one."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind != "O":
        return str(dtype), series.to_numpy(), None
    if pd.api.types.is_extension_array_dtype(dtype) and dtype.kind in "biuf":
        np_dtype = dtype.numpy_dtype
        return str(dtype), series.to_numpy(dtype=np_dtype, na_value=np_dtype.type(0)), series.isna().to_numpy(bool)
    values = series.to_numpy(dtype=object)
    if str(dtype) != "object":  # a string dtype: its missing values as None, as stored
        values = values.copy()
        values[series.isna().to_numpy(bool)] = None
    return str(dtype), values, None


def _join(dtype: str, values: list[np.ndarray], masks: list[np.ndarray | None]):
    """Parts of one column (``_raw``'s) as one array of its dtype (a Series where pandas
    would otherwise infer another dtype for it), ready for a DataFrame built at once."""
    data = values[0] if len(values) == 1 else np.concatenate(values)
    if any(m is not None for m in masks):
        mask = np.concatenate([np.zeros(len(v), bool) if m is None else m for v, m in zip(values, masks)])
        return _masked_type(dtype)(data, mask)
    if data.dtype.kind != "O":
        return data
    if dtype == "object":  # a Series: pandas would infer its string dtype for a bare array
        return pd.Series(data, dtype=object, copy=False)
    return pd.array(data, dtype=dtype)


def _decode(spec: dict, key: str, arrays: dict, strings: np.ndarray):
    """One stored column back (decoded column by column, a DataFrame is then built from
    them at once: a tenth of the cost of concatenating Series)."""
    dtype, values, mask = _raw(spec, key, arrays, strings)
    return _join(dtype, [values], [mask])


@functools.cache
def _masked_type(dtype: str):
    """The pandas array class of a nullable dtype ("Int64": IntegerArray, ...)."""
    return pd.api.types.pandas_dtype(dtype).construct_array_type()


def to_arrays(summary: TraceSummary) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    """(named arrays, strings table, JSON meta): what the store writes."""
    arrays: dict[str, np.ndarray] = {}
    strings = _Strings()
    frames = {}
    for name in FRAMES:
        frame = getattr(summary, name).reset_index(drop=True)
        frames[name] = {"rows": len(frame), "columns": [
            _encode(frame.iloc[:, i].rename(str(c)), f"{name}.{i}", arrays, strings)
            for i, c in enumerate(frame.columns)]}
    facts = {f: getattr(summary, f) for f in _FACTS}
    facts["device_kinds"] = list(summary.device_kinds)
    return arrays, strings.table(), {"facts": to_jsonable(facts), "frames": frames}


def from_arrays(arrays: dict[str, np.ndarray], strings: np.ndarray, meta: dict) -> TraceSummary:
    """The summary ``to_arrays`` wrote (KeyError/ValueError/TypeError on a malformed meta),
    its frames decoded on first use (``StoredSummary``); the arrays are copied, so nothing
    stays mapped from the file."""
    facts = dict(meta["facts"])
    facts["device_kinds"] = tuple(facts.get("device_kinds") or ())
    specs = {name: meta["frames"][name] for name in FRAMES}
    for name, spec in specs.items():
        _check(name, spec, arrays)
    return StoredSummary({k: facts[k] for k in _FACTS if k in facts},
                         ({k: np.array(v) for k, v in arrays.items()}, strings, specs))


def _check(name: str, spec: dict, arrays: dict) -> None:
    """A frame's columns are all there, each of its number of rows (a stored summary that
    fails this is a miss, never a half summary)."""
    rows = int(spec["rows"])
    for i, c in enumerate(spec["columns"]):
        key = f"{name}.{i}"
        n = len(c["values"]) if c["as"] == "json" else len(arrays[key])
        if n != rows or (c["as"] == "masked" and len(arrays[key + ".mask"]) != rows):
            raise ValueError(f"summary frame {name}: column {c['name']!r} has {n} rows, {rows} expected")


def _frame(name: str, spec: dict, arrays: dict, strings: np.ndarray) -> pd.DataFrame:
    names = [c["name"] for c in spec["columns"]]
    cols = [_decode(c, f"{name}.{i}", arrays, strings) for i, c in enumerate(spec["columns"])]
    if not cols:
        return pd.DataFrame(index=pd.RangeIndex(spec["rows"]))
    if len(set(names)) == len(names):
        return pd.DataFrame(dict(zip(names, cols)), copy=False)
    return pd.concat([pd.Series(c, name=n) for n, c in zip(names, cols)], axis=1)  # a dict keeps one of a name


def stack(summaries: Sequence[TraceSummary], frame: str,
          columns: Sequence[str] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """(one frame of every summary (its ``columns``, default all), one after the other, as
    one DataFrame; its rows per summary).

    Why: the cross-rank analyses read a few frames of each of 1,024 summaries; joining
    their columns as arrays costs a tenth of a DataFrame per summary concatenated.  Frames
    of other columns (summaries of another version) are concatenated the slow way."""
    parts = [s.raw_columns(frame, columns) for s in summaries]
    counts = np.array([rows for rows, _ in parts], dtype=np.int64)
    full = [cols for rows, cols in parts if rows]
    if not full:
        empty = getattr(summaries[0], frame).iloc[:0] if summaries else pd.DataFrame()
        return (empty if columns is None else empty.reindex(columns=list(columns))), counts
    head = [(name, raw[0]) for name, raw in full[0]]
    names = [n for n, _ in head]
    if len(set(names)) != len(names) or any([(n, r[0]) for n, r in cols] != head for cols in full):
        table = pd.concat([getattr(s, frame) for s, n in zip(summaries, counts) if n], ignore_index=True)
        return (table if columns is None else table[list(columns)]), counts
    columns = {name: _join(dtype, [cols[i][1][1] for cols in full], [cols[i][1][2] for cols in full])
               for i, (name, dtype) in enumerate(head)}
    return pd.DataFrame(columns, copy=False), counts


class StoredSummary(TraceSummary):
    """A TraceSummary read from the store: each frame is decoded on first use.

    Why: opening a run of 1,024 ranks reads 1,024 summaries, and the cross-rank analysis
    uses five of each one's nine frames; building every frame as a DataFrame up front is
    most of the time the run takes to open.  Everything else is a TraceSummary's: the
    frames are there when asked for, and a pickled one (sent from a pool process) is a
    plain TraceSummary with every frame."""

    def __init__(self, facts: dict, encoded: tuple):
        for name, default in _FACT_DEFAULTS:
            setattr(self, name, facts[name] if name in facts else default())
        self._encoded = encoded  # (arrays, strings, frame specs)

    def __getattr__(self, name: str):  # only for attributes not set yet: the frames not decoded
        encoded = self.__dict__.get("_encoded")
        if name not in FRAMES or encoded is None:
            raise AttributeError(name)
        arrays, strings, specs = encoded
        frame = _frame(name, specs[name], arrays, strings)
        setattr(self, name, frame)
        return frame

    def raw_columns(self, frame: str, only: Sequence[str] | None = None) -> tuple[int, list[tuple[str, tuple]]]:
        if frame in self.__dict__ or frame not in FRAMES:  # decoded already
            return super().raw_columns(frame, only)
        arrays, strings, specs = self._encoded
        spec = specs[frame]
        return int(spec["rows"]), [(c["name"], _raw(c, f"{frame}.{i}", arrays, strings))
                                   for i, c in enumerate(spec["columns"]) if only is None or c["name"] in only]

    def relabel(self, worker: str | None = None, span: int | None = None) -> TraceSummary:
        changes = {k: v for k, v in (("worker", worker), ("span", span)) if v is not None}
        if not changes:
            return self
        out = object.__new__(StoredSummary)
        out.__dict__.update(self.__dict__, **changes)  # frames decoded so far are shared, not copied
        return out

    def __reduce__(self):
        return _plain, ({f.name: getattr(self, f.name) for f in dataclasses.fields(TraceSummary)},)


def _plain(fields: dict) -> TraceSummary:
    return TraceSummary(**fields)


# (name, a function giving its default) of each fact of a TraceSummary
_FACT_DEFAULTS = tuple((f.name, f.default_factory if f.default_factory is not dataclasses.MISSING
                        else (lambda value=f.default: value))
                       for f in dataclasses.fields(TraceSummary) if f.name not in FRAMES)
