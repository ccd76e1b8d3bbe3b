"""One args key's values for many events at once, read from the raw args text.

Why: the decoder turns the args keys every analysis needs into columns (``decode.schema``);
a few keys matter only for a handful of events of one backend (MTIA's DMA requests keep
their size and direction in ``args.size`` / ``args.direction``, ``trace.roles.NAMED_COPIES``).
Parsing each event's args object (``Trace.args(i)``) would be a Python loop over events;
here the args text of the wanted rows is gathered with numpy into one buffer (rows
separated by NUL, which JSON text never holds raw) and the key is found by one regular
expression per row with pandas' vectorized string methods.  The text is read in windows
of at most ``WINDOW`` bytes of the args store, so a trace whose args live in its file or
in compressed cache blocks (``decode.args_text``) is never read whole at once.

The first occurrence of the key in the row's args wins (Kineto writes flat args objects);
a value is a JSON string (unescaped) or a number (one written as a string, ``"size":
"2560"``, reads the same).
"""
from __future__ import annotations

import json
import re

import numpy as np

__all__ = ["WINDOW", "arg_numbers", "arg_strings", "keys_mentioned"]

WINDOW = 64 << 20  # bytes of the args store read at once
_STRING = r'"((?:[^"\\]|\\.)*)"'
_NUMBER = r'"?(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"?'


def arg_strings(trace, rows: np.ndarray, key: str) -> np.ndarray:
    """Object array: the string value of ``key`` in each row's args (None where absent
    or not a string)."""
    import pandas as pd  # on use: the trace layer never imports pandas with its modules

    out = _extract(trace, rows, key, _STRING)
    escaped = np.flatnonzero(pd.Series(out, dtype=object).str.contains("\\", regex=False).fillna(False).to_numpy())
    for i in escaped.tolist():  # only values with a JSON escape, rare
        out[i] = json.loads('"' + out[i] + '"')
    return out


def arg_numbers(trace, rows: np.ndarray, key: str) -> np.ndarray:
    """float64 array: the numeric value of ``key`` in each row's args (NaN where absent or
    not a number)."""
    import pandas as pd

    found = _extract(trace, rows, key, _NUMBER)
    return pd.to_numeric(pd.Series(found, dtype=object), errors="coerce").to_numpy(np.float64)


def keys_mentioned(trace, rows: np.ndarray, keys) -> set[str]:
    """The keys of ``keys`` whose quoted name occurs in some row's args text (one read of
    the texts for all of them). A key not among them has no value in any of these rows:
    ``arg_strings`` and ``arg_numbers`` find none."""
    rows = np.asarray(rows, dtype=np.int64)
    return _mentioned(_texts(trace, rows), keys) if len(rows) else set()


def _mentioned(texts: list[str], keys) -> set[str]:
    joined = "\x00".join(texts)  # no key holds a NUL: no match across two rows
    return {k for k in keys if '"' + k + '"' in joined}


def _extract(trace, rows: np.ndarray, key: str, value: str) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.int64)
    out = np.full(len(rows), None, dtype=object)
    if not len(rows):
        return out
    pattern = r'(?<!\\)"' + re.escape(key) + r'"\s*:\s*' + value
    texts = _texts(trace, rows)
    if not _mentioned(texts, (key,)):  # the pattern needs the quoted key: no row can match
        return out
    import pandas as pd

    found = pd.Series(texts, dtype=object).str.extract(pattern, expand=False)
    out[:] = found.where(found.notna(), None).to_numpy(dtype=object)
    return out


def _texts(trace, rows: np.ndarray) -> list[str]:
    """The args text of each row (in the order of ``rows``; "" without args)."""
    ev = trace.events
    off = ev["args_off"][rows].astype(np.int64)
    length = np.maximum(ev["args_len"][rows].astype(np.int64), 0)
    order = np.argsort(off, kind="stable")
    texts = np.empty(len(rows), dtype=object)
    window = (off[order] - off[order[0]]) // WINDOW  # rows whose text starts in one window
    bounds = np.flatnonzero(np.r_[True, window[1:] != window[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # a loop over windows, not rows
        sel = order[a:b]
        texts[sel] = _window_texts(trace.args_blob, off[sel], length[sel])
    return texts.tolist()


def _window_texts(blob, off: np.ndarray, length: np.ndarray) -> list[str]:
    """Rows' texts from one read of the blob span that holds them all."""
    lo = int(off.min())
    hi = int((off + length).max())
    span = np.frombuffer(bytes(blob[lo:hi]), dtype=np.uint8) if hi > lo else np.zeros(0, np.uint8)
    step = length + 1                      # each row's text and its NUL
    start = np.cumsum(step) - step         # where each row begins in the joined buffer
    src = np.arange(int(step.sum()), dtype=np.int64) - np.repeat(start, step) + np.repeat(off - lo, step)
    joined = span[np.clip(src, 0, max(len(span) - 1, 0))] if len(span) else np.zeros(len(src), np.uint8)
    joined[start + length] = 0
    text = joined.tobytes().decode("utf-8", "replace")
    return text.split("\x00")[:-1]
