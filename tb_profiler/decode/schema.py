"""The decoder's output contract: which columns a trace file becomes, and their types.

This file is the single source of truth shared by the native decoder (native/), the
reference decoder used by the tests (tests/reference_decode.py) and the Trace model.
Every event of `traceEvents` (whatever its `ph`) becomes one row; the Trace model
splits rows by phase afterwards.

Memory layout
-------------
A 1 GB trace must decode within a few GB, so only a handful of columns are dense (one
value per event); every args field is sparse: a (rows, values) pair listing only the
events that carry it (a kernel's grid, a memory record's address, ...). The raw JSON
text of each event's `args` object is kept, compacted in place at the front of the
caller's (writable) input buffer: the decoder moves each args text down to a write
pointer that never passes the read pointer, so no second copy of the trace is made.

Conventions
-----------
- Missing dense int64 values are ``MISSING_INT`` (INT64_MIN); a sparse column simply has
  no row for an event that lacks the field or whose value does not convert.
- ``ts`` and ``dur`` are exact int64 nanoseconds taken from the decimal text of the
  microsecond value (no float round trip); digits beyond nanoseconds round half to even.
- Integer fields take any JSON number (or a string holding one: some vendors write
  numbers as text) whose exact value is an integer within int64; anything else
  (fraction, out of range, bool, null, object, non-numeric string) is absent.
- Float fields take any JSON number, or a numeric string, converted with correct
  rounding (as Python's ``float(text)``); anything else is absent.
- String fields hold an id into ``strings``. "text" fields intern the decoded string
  value (a non-string value interns its raw JSON text); "json" fields always intern the
  exact raw JSON text of the value (e.g. ``[[2, 3], []]`` byte for byte as in the file).
- Dim3 fields (``grid``, ``block``) take a JSON array of 3 integers; else absent.
- Counter events (ph "C"): counter_key/counter_value come from the first member of
  ``args`` whose value is a number.
- When a key appears twice in one object, the last one wins (as ``json.loads``).
- A lone UTF-16 surrogate in a ``\\u`` escape decodes to U+FFFD.
- Nesting deeper than ``MAX_DEPTH`` is malformed; the outermost container is depth 1.
- "A string holding a number" means the strict JSON number grammar inside the quotes
  (``"1e3"`` is 1000; ``"+12"``, ``" 12"``, ``"012"``, ``"0x10"`` are not numbers); this
  holds for ts/dur and dim3 elements too. Only ``flow_id`` also reads ``"0x1f"`` as hex.
- Counters: any ``ph`` starting with ``C``; only JSON numbers (not numeric strings).
- ``ph`` and ``bp`` take the first byte of the decoded string.
- An ``args`` that is not an object counts as no args. A repeated ``traceEvents`` key:
  the last array wins.
- Raw JSON text kept by the decoder (args, top-level values) is read with ``json_value``:
  as ``json.loads``, except that a number beyond float64 (``1e400``) reads as its text,
  never as an infinity no JSON answer can carry.
"""
from __future__ import annotations

import json
import math

import numpy as np

MISSING_INT = np.iinfo(np.int64).min
# Most |ts| and |ts + dur| the Trace keeps, in ns (~146 years): far beyond any clock, yet any
# two such times subtract without int64 overflow (trace/build.py drops rows beyond it).
TIME_LIMIT_NS = 1 << 62

# Dense columns: one value per event, for every event.
DENSE: dict[str, tuple[str, str]] = {
    # column: (JSON key, kind)
    "ph": ("ph", "uint8"),          # first byte of the ph string; 0 if missing
    "cat": ("cat", "str"),
    "name": ("name", "str"),
    "pid": ("pid", "int64"),        # a string pid gives its integer value if it is one, else 0
    "pid_str": ("pid", "strtext"),  # string id when pid was a JSON string, else -1
    "tid": ("tid", "int64"),
    "tid_str": ("tid", "strtext"),
    "ts": ("ts", "ns"),             # MISSING_INT when absent or not a number
    "dur": ("dur", "ns"),           # MISSING_INT when absent or not a number
    "args_off": ("args", "int64"),  # offset of the args object's raw text in args_blob
    "args_len": ("args", "int32"),  # its length in bytes; 0 when the event has no args
}

# Sparse columns: (rows, values) pairs holding only the events where the key is present
# with a value that converts under the rules above; rows are int32, strictly ascending.
EVENT_SPARSE: dict[str, tuple[str, str]] = {
    "flow_id": ("id", "int64"),     # flow events; a string id "0x1f"/"31" is parsed as hex/decimal
    "flow_bp": ("bp", "uint8"),     # first byte of bp ("e")
}

# Args fields (keys inside each event's `args` object), exact key spelling from Kineto.
ARG_INT: dict[str, str] = {
    "external_id": "External id",
    "correlation": "correlation",
    "seq_num": "Sequence number",
    "fwd_tid": "Fwd thread id",
    "record_function_id": "Record function id",
    "ev_idx": "Ev Idx",
    "python_id": "Python id",
    "python_parent_id": "Python parent id",
    "python_module_id": "Python module id",
    "python_tid": "Python thread",
    "device": "device",
    "stream": "stream",
    "context": "context",
    "registers": "registers per thread",
    "shared_memory": "shared memory",
    "queued": "queued",
    "copy_bytes": "bytes",              # memcpy/memset size
    "mem_bytes": "Bytes",               # [memory] record: + alloc / - free
    "addr": "Addr",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
    "device_type": "Device Type",
    "device_id": "Device Id",
    "in_msg_nelems": "In msg nelems",
    "out_msg_nelems": "Out msg nelems",
    "group_size": "Group size",
    "rank": "Rank",
    "seq": "Seq",                       # a collective's sequence number in its process group
    "sort_index": "sort_index",         # process/thread sort index metadata
    "flops": "flops",                   # an operator's FLOPs, recorded with with_flops=True
    "graph_id": "graph id",             # device work replayed from a CUDA/HIP graph: its exec graph
    "graph_node_id": "graph node id",   # ... and its node (torch's graph annotations' toolsId key)
}

# Other spellings of the same field, key -> column (the column's kind applies): PyTorch
# 1.8/1.9 Kineto wrote "external id" on runtime, kernel, memcpy and memset events, and
# PyTorch 1.8 wrote "Input dims".
ARG_ALIASES: dict[str, str] = {
    "external id": "external_id",
    "Input dims": "input_dims",
}

ARG_FLOAT: dict[str, str] = {
    "blocks_per_sm": "blocks per SM",
    "warps_per_sm": "warps per SM",
    "occupancy": "est. achieved occupancy %",
    "bandwidth": "memory bandwidth (GB/s)",
}

# [x, y, z] arrays -> three int32 columns each (col_x, col_y, col_z), -1 when missing.
ARG_DIM3: dict[str, str] = {
    "grid": "grid",
    "block": "block",
}

ARG_TEXT: dict[str, str] = {
    "call_stack": "Call stack",
    "collective_name": "Collective name",
    "dtype": "dtype",
    "pg_name": "Process Group Name",
    "pg_desc": "Process Group Description",
    "arg_name": "name",                 # process_name / thread_name metadata
}

ARG_JSON: dict[str, str] = {
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "input_strides": "Input Strides",
    "concrete_inputs": "Concrete Inputs",
    "pg_ranks": "Process Group Ranks",
}

# Counter events (ph "C") carry {series: value}: the first numeric member is extracted.
COUNTER: dict[str, str] = {
    "counter_key": "str",       # string id of the first member's key whose value is numeric
    "counter_value": "float64",
}


_KIND_DTYPE = {"uint8": np.uint8, "int32": np.int32, "int64": np.int64, "ns": np.int64,
               "str": np.int32, "strtext": np.int32, "float64": np.float64}


def dense_dtypes() -> dict[str, np.dtype]:
    """The dense columns with their numpy dtypes, in a fixed order."""
    return {col: np.dtype(_KIND_DTYPE[kind]) for col, (_, kind) in DENSE.items()}


def sparse_dtypes() -> dict[str, np.dtype]:
    """The sparse columns with the dtype of their values, in a fixed order."""
    out: dict[str, np.dtype] = {col: np.dtype(_KIND_DTYPE[kind]) for col, (_, kind) in EVENT_SPARSE.items()}
    out.update({col: np.dtype(np.int64) for col in ARG_INT})
    out.update({col: np.dtype(np.float64) for col in ARG_FLOAT})
    out.update({f"{col}_{axis}": np.dtype(np.int32) for col in ARG_DIM3 for axis in "xyz"})
    out.update({col: np.dtype(np.int32) for col in (*ARG_TEXT, *ARG_JSON)})
    out.update({col: np.dtype(_KIND_DTYPE[kind]) for col, kind in COUNTER.items()})
    return out


STRING_COLUMNS = ("cat", "name", "pid_str", "tid_str", *ARG_TEXT, *ARG_JSON, "counter_key")
MAX_DEPTH = 256  # JSON nesting deeper than this is rejected as malformed


from dataclasses import dataclass, field  # noqa: E402


@dataclass
class Decoded:
    """What decoding one trace file yields; the Trace model is built from this alone.

    dense: every column of ``dense_dtypes()``, equal-length 1-D arrays, one row per
        event in file order.
    sparse: every column of ``sparse_dtypes()`` as (rows int32 ascending, values).
    strings: the interned string table; string columns hold indexes into it.
    args_blob: the raw JSON text of every event's args, concatenated (bytes-like);
        ``args_off``/``args_len`` address it.
    toplevel: raw JSON text of each top-level key other than ``traceEvents``
        (``schemaVersion``, ``deviceProperties``, ``distributedInfo``,
        ``baseTimeNanoseconds``, ``displayTimeUnit``, ``trace_id``, ``traceName``, ...);
        empty for the legacy bare-array layout.
    source: the file (or URL) it came from, for error messages.
    """

    dense: dict[str, np.ndarray]
    sparse: dict[str, tuple[np.ndarray, np.ndarray]]
    strings: list[str]
    args_blob: bytes | bytearray | memoryview
    toplevel: dict[str, str] = field(default_factory=dict)
    source: str = "<bytes>"

    def __len__(self) -> int:
        return len(self.dense["ph"])

    def column(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """A dense view of any column, for all events or the given event rows.

        Sparse columns are expanded with their missing value (MISSING_INT, NaN, -1).
        """
        if name in self.dense:
            col = self.dense[name]
            return col if rows is None else col[rows]
        where, values = self.sparse[name]
        n = len(self)
        out = np.full(n if rows is None else len(rows), missing_value(values.dtype, name), dtype=values.dtype)
        if rows is None:
            out[where] = values
            return out
        pos = np.searchsorted(where, rows)
        pos_clipped = np.minimum(pos, max(len(where) - 1, 0))
        hit = (pos < len(where)) & (where[pos_clipped] == rows) if len(where) else np.zeros(len(rows), bool)
        out[hit] = values[pos_clipped[hit]]
        return out

    def has(self, name: str) -> np.ndarray:
        """Boolean mask over all events: which carry a value for this sparse column."""
        mask = np.zeros(len(self), dtype=bool)
        mask[self.sparse[name][0]] = True
        return mask


def missing_value(dtype: np.dtype, name: str = "") -> int | float:
    """The fill value for an absent field of this dtype (-1 for ids, dims and bytes flags)."""
    if dtype.kind == "f":
        return float("nan")
    if dtype == np.int64:
        return MISSING_INT
    return -1 if dtype.kind == "i" else 0


def json_value(text: str | bytes | bytearray):
    """The value of a JSON text the decoder kept (an event's args, a top-level value): as
    ``json.loads``, but a number beyond float64 reads as its own text ("1e400"), a wrong
    type like any other, so an infinity never reaches an analysis or a JSON answer."""
    return json.loads(text, parse_float=_finite_float, parse_constant=str)


def _finite_float(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text
