"""Per-trace memoization: analyses share derived columns (nesting, launch links) without
recomputing them, and without the Trace model knowing about any analysis."""
from __future__ import annotations

import functools
import weakref
from typing import Callable, TypeVar

T = TypeVar("T")
_CACHE: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()


def per_trace(fn: Callable[..., T]) -> Callable[..., T]:
    """Cache fn(trace) (one positional argument) for as long as the trace lives."""

    @functools.wraps(fn)
    def wrapper(trace) -> T:
        memo = _CACHE.setdefault(trace, {})
        key = f"{fn.__module__}.{fn.__qualname__}"
        if key not in memo:
            memo[key] = fn(trace)
        return memo[key]

    return wrapper
