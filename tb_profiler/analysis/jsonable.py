"""Analysis results as plain JSON data: the one conversion the CLI and the plugin share.

Analyses return pandas DataFrames, numpy arrays/scalars and dicts of them; JSON wants
lists, dicts, str, int, float, bool and null. NaN, infinities and pandas' missing values
become null (JSON has no NaN), DataFrames become lists of row records.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["to_jsonable"]

_PLAIN = frozenset({str, int, bool})  # exact types: numpy's scalars (np.float64 is a float) go the long way


def to_jsonable(value: Any) -> Any:
    """DataFrames to lists of records, numpy scalars to Python, NaN/inf to None, recursively."""
    kind = type(value)
    if kind in _PLAIN or value is None:  # most leaves of a big table: answered before the checks below
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, pd.DataFrame):
        return [to_jsonable(r) for r in value.to_dict("records")]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, pd.Series):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
