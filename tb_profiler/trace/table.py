"""Table: a light columnar view (dict of numpy arrays + the shared string table).

Why not a DataFrame: building one per table for a million-event trace costs more than
decoding, pandas is not needed by most analyses, and the cache wants plain arrays it can
memory-map.  A table holds its core columns materialized; every args field (grid,
correlation, Addr, ...) stays sparse in the shared store and is densified for this
table's rows only, on first access, then kept.  ``df()`` gives pandas when wanted.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Iterable

import numpy as np

from tb_profiler.decode.schema import STRING_COLUMNS, json_value, missing_value
from tb_profiler.trace.categories import KIND_NAMES
from tb_profiler.trace.strings import safe_ids, used_ids

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Columns holding string-table ids (shown as text by df()).
STRING_COLS = frozenset({"name", "cat", "key", *STRING_COLUMNS})
# Plumbing columns left out of df() unless asked for; and decoder columns that tables
# materialize under a friendlier name (flows.id, counters.value, memory.bytes).
_HIDDEN = frozenset({"row", "args_off", "args_len", "pid_str", "tid_str",
                     "flow_id", "flow_bp", "counter_key", "counter_value", "mem_bytes"})


def place_rows(out: np.ndarray, inverse: np.ndarray, where: np.ndarray, values: np.ndarray) -> None:
    """out[inverse[where]] = values (in place), leaving out the decoded rows ``inverse`` maps
    to -1 (not in this table): a sparse args column densified for a table. Why take and intp
    positions: the decoder's rows are int32, which numpy's indexing casts by a slow path
    (3-4x); and most columns have every row in the table, which needs no masked copies."""
    if not len(where):
        return
    pos = inverse.take(np.asarray(where)).astype(np.intp, copy=False)
    keep = pos >= 0
    if keep.all():
        out[pos] = values
    else:
        out[pos[keep]] = np.asarray(values)[keep]


class SparseStore:
    """The decoder's sparse args columns, shared by all tables of one trace.

    arrays: the trace's arrays ("sparse.<name>.rows" ascending into the decoded row order,
    "sparse.<name>.values"), read only when a column is densified (a cache entry's arrays
    are checked on first read); n_rows: how many rows the decoder produced.  Empty columns
    may be absent (read as all-missing).
    """

    def __init__(self, arrays, n_rows: int, dtypes: dict[str, np.dtype]):
        self.arrays = arrays
        self.n_rows = n_rows
        self.dtypes = dtypes

    def names(self) -> list[str]:
        return list(self.dtypes)

    def _pair(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        if f"sparse.{name}.rows" not in self.arrays:
            return None
        return self.arrays[f"sparse.{name}.rows"], self.arrays[f"sparse.{name}.values"]

    def densify(self, name: str, inverse: np.ndarray, m: int) -> np.ndarray:
        """Column ``name`` for a table of m rows; inverse maps decoded row -> table row or -1."""
        dtype = self.dtypes[name]
        out = np.full(m, missing_value(dtype, name), dtype=dtype)
        pair = self._pair(name)
        if pair is not None:
            place_rows(out, inverse, *pair)
        return out

    def present(self, name: str, inverse: np.ndarray) -> bool:
        """Whether any row of the table (given by its inverse map) carries the field."""
        pair = self._pair(name)
        if pair is None or not len(pair[0]):
            return False
        return bool((inverse[pair[0]] >= 0).any())


class Columns(MutableMapping):
    """A table's columns: its prefix's arrays of the trace ("events.ts" -> "ts"), read
    through on each access (so a cache entry's are checked when first read, and a trace
    that moves to its cache entry moves every table with it), plus the columns the table
    derived itself (densified args fields)."""

    def __init__(self, arrays, prefix: str):
        self.arrays, self.prefix = arrays, prefix
        self.names = [k[len(prefix):] for k in arrays if k.startswith(prefix)]
        self.own: dict[str, np.ndarray] = {}

    def __getitem__(self, col: str) -> np.ndarray:
        got = self.own.get(col)
        if got is not None:
            return got
        if col in self.names:
            return self.arrays[self.prefix + col]
        raise KeyError(col)

    def __setitem__(self, col: str, arr: np.ndarray) -> None:
        self.own[col] = arr

    def __delitem__(self, col: str) -> None:
        del self.own[col]

    def __iter__(self):
        yield from self.names
        yield from (c for c in self.own if c not in self.names)

    def __len__(self) -> int:
        return len(self.names) + sum(c not in self.names for c in self.own)

    def __contains__(self, col) -> bool:
        return col in self.own or col in self.names

    def length(self, col: str) -> int:
        """A column's length without reading it."""
        if col in self.own:
            return len(self.own[col])
        own_len = getattr(self.arrays, "length", None)
        return own_len(self.prefix + col) if own_len else len(self.arrays[self.prefix + col])


class Table:
    """Columns of one kind of trace row (events, instants, counters, flows, ...).

    ``t["ts"]`` (or ``t.ts``) gives a column (numpy array), ``len(t)`` the row count,
    ``t.df()`` a pandas DataFrame.  ``t.label`` is the table's own name ("events"): use
    ``t["name"]`` for the event-name column.  ``row`` is each row's index in the file's event order.
    """

    def __init__(self, label: str, columns: "dict[str, np.ndarray] | Columns", strings: np.ndarray,
                 store: SparseStore | None = None, state=None):
        self.label = label
        self._cols = columns if isinstance(columns, Columns) else dict(columns)
        self.strings = strings
        self._store = store
        # The trace's TraceState (its args text), never the Trace: a table pointing back at
        # its Trace makes a cycle that keeps a freed trace's arrays alive until the cyclic
        # GC runs (a process summarizing trace after trace grew by ~100 MB a file).
        self._state = state
        self._inverse: np.ndarray | None = None
        cols = self._cols
        n = {cols.length(c) for c in cols} if isinstance(cols, Columns) else {len(v) for v in cols.values()}
        if len(n) > 1:
            raise ValueError(f"table {label}: columns of different lengths {sorted(n)}")
        self._n = n.pop() if n else 0

    # -- access ---------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __contains__(self, col: str) -> bool:
        return col in self._cols or (self._store is not None and col in self._store.dtypes)

    def __getitem__(self, col: str) -> np.ndarray:
        arr = self._cols.get(col)
        if arr is not None:
            return arr
        if self._store is not None and col in self._store.dtypes and "row" in self._cols:
            arr = self._store.densify(col, self.inverse, self._n)
            self._cols[col] = arr
            return arr
        raise KeyError(f"table {self.label!r} has no column {col!r}")

    def get(self, col: str, default=None):
        return self[col] if col in self else default

    def __getattr__(self, col: str) -> np.ndarray:
        if col.startswith("_"):
            raise AttributeError(col)
        try:
            return self[col]
        except KeyError:
            raise AttributeError(col) from None

    @property
    def columns(self) -> list[str]:
        """Materialized columns, then every args column available on demand."""
        extra = [c for c in (self._store.names() if self._store else []) if c not in self._cols]
        return list(self._cols) + extra

    @property
    def materialized(self) -> dict[str, np.ndarray]:
        """The columns held in memory now (what the cache stores)."""
        return self._cols

    @property
    def inverse(self) -> np.ndarray:
        """Decoded row -> this table's row (or -1); built once, 4 bytes per decoded row."""
        if self._inverse is None:
            n_rows = self._store.n_rows if self._store else 0
            inv = np.full(n_rows, -1, dtype=np.int32 if self._n < 2**31 else np.int64)
            inv[self._cols["row"]] = np.arange(self._n, dtype=inv.dtype)
            self._inverse = inv
        return self._inverse

    def present_columns(self) -> list[str]:
        """Materialized columns plus the args columns that at least one row carries."""
        out = list(self._cols)
        if self._store is not None and "row" in self._cols and self._n:
            inv = self.inverse
            out += [c for c in self._store.names() if c not in self._cols and self._store.present(c, inv)]
        return out

    # -- derived ----------------------------------------------------------------------
    def str(self, col: str) -> np.ndarray:
        """A string-id column resolved to text (object array; None where missing)."""
        from tb_profiler.trace.strings import resolve

        return resolve(self[col], self.strings)

    def take(self, index, label: str | None = None) -> "Table":
        """A new table of the selected rows (boolean mask or integer positions)."""
        cols = {k: v[index] for k, v in self._cols.items()}
        return Table(label or self.label, cols, self.strings, self._store, self._state)

    def args(self, i: int) -> dict:
        """The full args object of row i, parsed from its raw JSON text ({} if none)."""
        if self._state is None:
            raise ValueError("table not attached to a trace")
        return json_loads_blob(self._state.args_blob, int(self["args_off"][i]), int(self["args_len"][i]))

    def df(self, columns: Iterable[str] | None = None, strings: str = "category") -> "pd.DataFrame":
        """A pandas DataFrame of the table.

        columns: which to include (default: core columns plus args fields present in
            these rows, without plumbing such as args_off).
        strings: "category" (pandas Categorical of the used strings, fast and small),
            "object" (Python str) or "id" (the raw int ids).
        """
        import pandas as pd

        if columns is None:
            columns = [c for c in self.present_columns() if c not in _HIDDEN]
            # Text pids/tids ("Spans", "stream 7") read as 0 in pid/tid: show their text too.
            columns += [c for c in ("pid_str", "tid_str") if c in self._cols and _has_text(self[c], self.strings)]
        data = {}
        for c in columns:
            arr = self[c]
            if c in STRING_COLS and strings != "id":
                data[c] = _categorical(arr, self.strings) if strings == "category" else self.str(c)
            elif c == "kind":
                data[c] = pd.Categorical.from_codes(arr.astype(np.int16), categories=list(KIND_NAMES))
            else:
                data[c] = arr
        return pd.DataFrame(data, copy=False)

    def __repr__(self) -> str:
        return f"<Table {self.label}: {self._n} rows, columns {list(self._cols)}>"


def _has_text(ids: np.ndarray, strings: np.ndarray) -> bool:
    """Whether any id names a string that is not an integer (a textual pid/tid)."""
    for i in used_ids(ids, len(strings)).tolist():
        text = strings[i].strip().lstrip("-")
        if not text.isdigit():
            return True
    return False


def _categorical(ids: np.ndarray, strings: np.ndarray):
    """pandas Categorical with only the used strings as categories (missing -> NaN)."""
    import pandas as pd

    ids = np.asarray(ids)
    used = used_ids(ids, len(strings))
    lut = np.full(len(strings) + 1, -1, dtype=np.int32)
    lut[used] = np.arange(len(used), dtype=np.int32)
    codes = lut.take(safe_ids(ids, len(strings)))
    cats = list(strings[used]) if len(used) else []
    try:
        return pd.Categorical.from_codes(codes, categories=cats)
    except ValueError:  # duplicate strings in the table: fall back to plain text
        from tb_profiler.trace.strings import resolve

        return resolve(ids, strings)


def json_loads_blob(blob, off: int, length: int) -> dict:
    """Parse one args object from the blob (bytes-like); {} when there is none."""
    if length <= 0:
        return {}
    raw = bytes(blob[off:off + length])
    try:
        return json_value(raw)
    except (UnicodeDecodeError, ValueError):
        return json_value(raw.decode("utf-8", "replace"))
