"""Query parameters of the HTTP routes: strict accessors, and the check that a query holds
only the names its route reads.

Why a module of its own: every route module (routes_*.py, views_*.py) parses its query
through ``Params`` and declares the names it reads (its ``ROUTE_PARAMS``), and the WSGI
layer (wsgi.py) refuses any other name before a route runs; none of that is about what a
route computes.  An unknown name is a 400, never part of a cache key; a route reading a
name it did not declare is a bug (500), so the declarations cannot drift from the code.
"""
from __future__ import annotations

import re

MAX_TEXT = 4096          # longest accepted text parameter
NS_MAX = 1 << 62         # bound of a relative time in ns (start_ns, end_ns, step)
DECLARED = "tb_profiler.params"  # the environ key holding the route's declared names
_INT_RE = re.compile(r"-?[0-9]{1,19}")  # fullmatch: ASCII digits only, no space or newline around

# Names many routes read, for their ROUTE_PARAMS.
SEL = ("run", "worker", "span")          # the trace a per-trace route reads (ProfilerApp._entry)
WINDOW = ("start_ns", "end_ns")
TIMELINE = (*WINDOW, "width", "max_events", "max_flows")
SPAN_FILES = ("run", "span")             # every worker's file of a span (ProfilerApp._span_files)


class ApiError(Exception):
    """An answer other than 200 (its status and message): the app sends ``{"error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Params:
    """Strict accessors over the query string: bounded text, decimal integers in range.
    ``declared``: the names the route declared (ROUTE_PARAMS); reading another one is a
    bug of the route (500), so the declarations cannot drift from what the routes read."""

    def __init__(self, args, declared: frozenset[str] | None = None):
        self.args = args
        self.declared = declared

    def text(self, name: str, required: bool = False, max_len: int = MAX_TEXT) -> str | None:
        if self.declared is not None and name not in self.declared:
            raise RuntimeError(f"the route reads query parameter {name!r} it does not declare")
        values = self.args.getlist(name)
        if not values:
            if required:
                raise ApiError(400, f"missing query parameter '{name}'")
            return None
        if len(values) > 1:
            raise ApiError(400, f"query parameter '{name}' given {len(values)} times")
        value = values[0]
        if len(value) > max_len:
            raise ApiError(400, f"query parameter '{name}' is longer than {max_len} characters")
        if "\x00" in value:
            raise ApiError(400, f"query parameter '{name}' holds a NUL character")
        return value

    def integer(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        raw = self.text(name, max_len=24)
        if raw is None or raw == "":
            return default
        if not _INT_RE.fullmatch(raw):
            raise ApiError(400, f"query parameter '{name}' must be a decimal integer, not {raw[:40]!r}")
        value = int(raw)
        if not lo <= value <= hi:
            raise ApiError(400, f"query parameter '{name}' must be between {lo} and {hi}, not {value}")
        return value

    def choice(self, name: str, choices, default: str) -> str:
        raw = self.text(name, max_len=64)
        if raw is None or raw == "":
            return default
        if raw not in choices:
            raise ApiError(400, f"query parameter '{name}' must be one of {', '.join(choices)}, not {raw[:40]!r}")
        return raw


def time_window(p: Params) -> tuple[int | None, int | None]:
    """start_ns / end_ns (relative ns, each optional); end after start when both are given."""
    a = p.integer("start_ns", None, -NS_MAX, NS_MAX)
    b = p.integer("end_ns", None, -NS_MAX, NS_MAX)
    if a is not None and b is not None and b <= a:
        raise ApiError(400, "end_ns must be greater than start_ns")
    return a, b


def unknown_params(args, declared: frozenset[str]) -> str | None:
    """The 400 message naming the query's unknown parameters (bounded, escaped), or None."""
    unknown = sorted({k for k in args.keys() if k not in declared})
    if not unknown:
        return None
    shown = ", ".join(ascii(k[:40]) for k in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    accepted = ", ".join(sorted(declared)) or "none"
    return f"unknown query parameter{'s' if len(unknown) > 1 else ''} {shown} (this route reads: {accepted})"


__all__ = ["DECLARED", "MAX_TEXT", "NS_MAX", "SEL", "SPAN_FILES", "TIMELINE", "WINDOW", "ApiError", "Params",
           "time_window", "unknown_params"]
