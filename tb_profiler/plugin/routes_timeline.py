"""The Trace view's routes: ``trace`` (a window of one trace), ``trace/event`` (one event's
detail), ``trace/search``, ``trace/raw`` (the file itself, gzipped) and ``trace/ranks``
(several ranks' windows on one clock) (docs/api.md, "Trace view").

Why a module of its own: these handlers read the timeline's query (window, width,
bounds) and hand plugin/timeline.py's functions to the app's compute path; ``trace/raw``
streams the file through plugin/raw.py, and ``trace/ranks`` reads the span's summaries
for the ranks' clocks before loading only the ranks shown.
"""
from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import raw, views
from tb_profiler.plugin.params import (
    MAX_TEXT,
    SEL,
    SPAN_FILES,
    TIMELINE,
    ApiError,
    Params,
    time_window,
)
from tb_profiler.plugin.state import FAILED, FileEntry

MAX_RANKS_SHOWN = 8      # ranks in one trace/ranks window
DEFAULT_RANKS_SHOWN = 4  # ... when none are named: the slowest ones
SEARCH_MAX_Q = 200       # longest trace/search query

ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "trace": (*SEL, *TIMELINE), "trace/event": (*SEL, "i"), "trace/raw": SEL,
    "trace/search": (*SEL, "q", "limit", "offset"),
    "trace/ranks": (*SPAN_FILES, "workers", *TIMELINE),
}.items()}


def _drawing(p: Params) -> tuple[int, int, int]:
    """width, max_events, max_flows of a window."""
    return (p.integer("width", 1500, 100, 10000), p.integer("max_events", 20000, 100, 100000),
            p.integer("max_flows", 2000, 0, 20000))


def r_trace(app, request: Request) -> Response:
    from tb_profiler.plugin.timeline import on_the_wire, window

    p = app.params(request)
    a, b = time_window(p)
    width, max_events, max_flows = _drawing(p)
    return app.one(request, lambda t: on_the_wire(window(t, a, b, width, max_events, max_flows)))


def r_trace_event(app, request: Request) -> Response:
    from tb_profiler.plugin.timeline import event_detail

    p = app.params(request)
    i = p.integer("i", None, 0, 1 << 40)
    if i is None:
        raise ApiError(400, "missing query parameter 'i'")

    def detail(trace):
        if i >= len(trace.events):
            raise views.NotFound(f"no event {i}: the trace has {len(trace.events)} events")
        return event_detail(trace, i)

    return app.one(request, detail)


def r_trace_search(app, request: Request) -> Response:
    """Find events by name on the server, so the browser finds matches outside the
    window it holds; q is plain text, bounded (200 chars) and printable."""
    from tb_profiler.plugin.timeline import search

    p = app.params(request)
    q = p.text("q", required=True, max_len=SEARCH_MAX_Q)
    if not q.strip():
        raise ApiError(400, "query parameter 'q' must not be empty")
    if any(ord(c) < 32 for c in q):
        raise ApiError(400, "query parameter 'q' holds a control character")
    limit = p.integer("limit", 500, 1, 5000)
    offset = p.integer("offset", 0, 0, 1 << 40)
    return app.one(request, search, q, limit, offset)


def r_trace_raw(app, request: Request) -> Response:
    entry = app._entry(app.params(request), failed_ok=True)
    if entry.state == FAILED:  # read while it was being rewritten (an empty file): say so, not why it failed
        if raw.being_written(entry.path):
            raise ApiError(409, f"the trace file is being written: try again in a moment ({entry.rel})")
        raise ApiError(404, entry.error or f"{entry.rel}: could not be read")
    name = entry.rel.rsplit("/", 1)[-1]
    gz = name.endswith(".gz")
    if not gz:
        name += ".gz"

    try:  # one version of the file, never a torn one (plugin/raw.py)
        blocks = raw.stable_chunks(entry.path)
    except raw.FileChanging as exc:
        raise ApiError(409, f"the trace file is being written: try again in a moment ({exc})") from None

    def chunks():
        comp = None if gz else zlib.compressobj(1, zlib.DEFLATED, 31)
        for block in blocks:
            yield block if comp is None else comp.compress(block)
        if comp is not None:
            yield comp.flush()

    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return Response(chunks(), content_type="application/gzip", direct_passthrough=True,
                    headers={"Content-Disposition": f'attachment; filename="{safe}"',
                             "Cache-Control": "no-store"})


# -- several ranks ------------------------------------------------------------------------------
def _named_workers(p: Params, entries: list[FileEntry]) -> list[str] | None:
    """trace/ranks' ``workers``: up to MAX_RANKS_SHOWN distinct names of the span, or None."""
    text = p.text("workers", max_len=MAX_TEXT)
    if text is None or text == "":
        return None
    names = [w.strip() for w in text.split(",")]
    if not all(names):
        raise ApiError(400, "query parameter 'workers' holds an empty name")
    if len(names) > MAX_RANKS_SHOWN:
        raise ApiError(400, f"query parameter 'workers' names {len(names)} workers: at most {MAX_RANKS_SHOWN}")
    if len(set(names)) != len(names):
        raise ApiError(400, "query parameter 'workers' names a worker twice")
    known = {e.worker for e in entries}
    unknown = [w for w in names if w not in known]
    if unknown:
        raise ApiError(404, f"run {entries[0].run[:200]!r} has no worker {unknown[0][:200]!r} in this span")
    return names


def r_trace_ranks(app, request: Request) -> Response:
    """Several ranks' timelines in one window, on one clock: the summaries give each
    rank's clock correction (and, by default, the slowest ranks); only the ranks shown
    are loaded (through the LRU)."""
    from tb_profiler.plugin.timeline import on_the_wire

    p = app.params(request)
    entries = app._span_files(p)
    named = _named_workers(p, entries)
    a, b = time_window(p)
    width, max_events, max_flows = _drawing(p)
    run = app._run_summaries(entries)
    clock, slowest = app._pooled(("trace/ranks clock", *(e.key for e in entries)),
                                 lambda: views.clocks(run))
    workers = named or slowest[:DEFAULT_RANKS_SHOWN]
    if not workers:
        raise ApiError(404, "no rank of this span could be summarized: name the workers to show")
    by_worker = {e.worker: e for e in entries}
    chosen = [by_worker[w] for w in workers]
    failed = [e for e in chosen if e.state == FAILED]
    if failed:
        raise ApiError(404, failed[0].error or f"{failed[0].rel}: could not be read")
    span_files = tuple(e.key for e in entries)  # the clocks come from every rank of the span
    return app.compute(request, chosen, lambda traces: on_the_wire(views.trace_ranks(
        traces, workers, clock, a, b, width, max_events, max_flows)), key_extra=(tuple(workers), span_files))


_HANDLERS = {"trace": r_trace, "trace/event": r_trace_event, "trace/raw": r_trace_raw,
             "trace/search": r_trace_search, "trace/ranks": r_trace_ranks}


def routes(app) -> dict[str, Callable[[Any], Any]]:
    """The routes of this module, bound to the app (ProfilerApp)."""
    return {route: partial(fn, app) for route, fn in _HANDLERS.items()}


__all__ = ["DEFAULT_RANKS_SHOWN", "MAX_RANKS_SHOWN", "ROUTE_PARAMS", "SEARCH_MAX_Q", "routes"]
