"""Per-trace memoization: analyses share derived columns (nesting, launch links) without
recomputing them, and without the Trace model knowing about any analysis."""
from __future__ import annotations

import copy
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


def per_trace_args(fn: Callable[..., T]) -> Callable[..., T]:
    """Cache fn(trace, *args, **kwargs) per trace and per arguments (hashable: a group-by
    name, a flag), for as long as the trace lives. For small results that several routes
    ask for (a table grouped by name serves its pie chart and its table): the caller
    hands out copies when a result can be changed."""

    @functools.wraps(fn)
    def wrapper(trace, *args, **kwargs) -> T:
        memo = _CACHE.setdefault(trace, {})
        key = (f"{fn.__module__}.{fn.__qualname__}", args, tuple(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = fn(trace, *args, **kwargs)
        return memo[key]

    return wrapper


def per_trace_result(fn: Callable[..., T]) -> Callable[..., T]:
    """``per_trace_args`` for a result its callers may change (a dict of DataFrames): kept
    once per trace and arguments, each call gets a deep copy. For an analysis a route asks
    for on every visit of its view. Unhashable arguments are not kept."""
    cached = per_trace_args(fn)

    @functools.wraps(fn)
    def wrapper(trace, *args, **kwargs) -> T:
        try:
            hash((args, tuple(sorted(kwargs.items()))))
        except TypeError:
            return fn(trace, *args, **kwargs)
        return copy.deepcopy(cached(trace, *args, **kwargs))

    return wrapper
