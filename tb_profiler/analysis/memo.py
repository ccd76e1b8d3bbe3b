"""Per-trace memoization: analyses share derived columns (nesting, launch links) without
recomputing them, and without the Trace model knowing about any analysis.

What a trace's memo holds is counted (``memo_nbytes``) and whoever keeps traces in memory
can hear of it growing (``on_growth``): the server's LRU counts it against --memory-mb, so
analyses are held to the cap as loads are (a table of 10 M operator rows is a gigabyte).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import sys
import weakref
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")
_CACHE: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
_LISTENERS: list = []  # weak references to callables f(trace), told when a trace's memo grows
_MAX_WALK = 10_000     # items of a memoized value's containers looked into, at most


def on_growth(listener: Callable[[object], None]) -> None:
    """Call listener(trace) after a new result is memoized for a trace (kept by a weak
    reference: a bound method's object may go away)."""
    ref = weakref.WeakMethod(listener) if hasattr(listener, "__self__") else weakref.ref(listener)
    _LISTENERS.append(ref)


def _grew(trace) -> None:
    for ref in list(_LISTENERS):
        fn = ref()
        if fn is None:
            _LISTENERS.remove(ref)
            continue
        try:
            fn(trace)
        except Exception:  # noqa: BLE001 - a listener's failure must not fail the analysis
            pass


def memo_nbytes(trace) -> int:
    """About the bytes the analyses' results memoized for trace hold: numpy arrays and
    pandas objects by their buffers, containers and dataclasses by what they hold."""
    memo = _CACHE.get(trace)
    if not memo:
        return 0
    budget = [_MAX_WALK]
    return sum(_nbytes(v, budget, set()) for v in list(memo.values()))


def _nbytes(value, budget: list, seen: set) -> int:
    if budget[0] <= 0 or id(value) in seen:
        return 0
    budget[0] -= 1
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes) if value.base is None or value.flags.owndata else 0
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, (pd.DataFrame, pd.Series, pd.Index)):
        usage = value.memory_usage(index=True, deep=False)
        return int(usage.sum() if hasattr(usage, "sum") else usage)
    if isinstance(value, dict):
        return sum(_nbytes(v, budget, seen) for v in list(value.values())) + 64 * len(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_nbytes(v, budget, seen) for v in list(value)) + 8 * len(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_nbytes(getattr(value, f.name, None), budget, seen) for f in dataclasses.fields(value))
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return sum(_nbytes(v, budget, seen) for v in list(vars(value).values()))
    return sys.getsizeof(value) if isinstance(value, (str, bytes)) else 0


def per_trace(fn: Callable[..., T]) -> Callable[..., T]:
    """Cache fn(trace) (one positional argument) for as long as the trace lives."""

    @functools.wraps(fn)
    def wrapper(trace) -> T:
        memo = _CACHE.setdefault(trace, {})
        key = f"{fn.__module__}.{fn.__qualname__}"
        if key not in memo:
            memo[key] = fn(trace)
            _grew(trace)
        return memo[key]

    return wrapper


def per_trace_args(fn: Callable[..., T]) -> Callable[..., T]:
    """Cache fn(trace, *args, **kwargs) per trace and per arguments (hashable: a group-by
    name, a flag), for as long as the trace lives. For small results that several routes
    ask for (a table grouped by name serves its pie chart and its table): the caller
    hands out copies when a result can be changed. The key is the arguments as fn sees
    them (defaults filled in), so ``f(trace)`` and ``f(trace, x=<its default>)`` share
    one result."""
    key_of = _arguments_key(fn)

    @functools.wraps(fn)
    def wrapper(trace, *args, **kwargs) -> T:
        memo = _CACHE.setdefault(trace, {})
        key = key_of(args, kwargs)
        if key not in memo:
            memo[key] = fn(trace, *args, **kwargs)
            _grew(trace)
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

    # The kept result itself, for an analysis that only reads it (no copy): never change it.
    wrapper.shared = cached
    return wrapper


def _arguments_key(fn: Callable) -> Callable[[tuple, dict], tuple]:
    """key(args, kwargs): fn's name and its arguments after the trace, defaults filled in;
    arguments fn does not take: as given (fn raises on the call)."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - a callable without a signature
        sig = None
    var_kw = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None) if sig else None

    def key(args: tuple, kwargs: dict) -> tuple:
        if sig is not None:
            try:
                bound = sig.bind(None, *args, **kwargs)
            except TypeError:
                pass
            else:
                bound.apply_defaults()
                items = tuple(bound.arguments.items())[1:]
                return (name, tuple((k, tuple(sorted(v.items())) if k == var_kw else v) for k, v in items))
        return (name, args, tuple(sorted(kwargs.items())))

    return key
