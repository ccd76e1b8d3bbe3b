"""``tb-profiler mcp LOGDIR``: the profiler's answers for agents, over MCP (stdio).

Why a server of its own and not a summary: an agent must cite numbers, not invent them. Each
tool answers with the JSON a route or CLI verb gives for the same question (plugin.views,
cli.why_doc), under a ``schema`` name and version, so what an agent reads is what a person
opens in the UI.  Why in the CLI's package: ``tb-profiler mcp`` starts it, and it answers
``why`` with the CLI's document (cli.why), so the two are one front end over the plugin's
views and the API:

    runs()                                        the runs, their workers and spans
    overview(run, worker?, span?)                 the overview route's JSON (diagnosis first)
    why(run, worker?, span?, only?)               tb-profiler why --json: the verdict, then the analyses
    diff(run, exp_run, worker?, span?, exp_worker?, exp_span?)   the diff route's JSON
    range_stats(run, start_us, end_us, worker?, span?)           the range's events (µs from the trace start)
    event(run, i, worker?, span?)                 one event's details (the trace/event route)

Runs are the ones discovery finds in LOGDIR (a name names a run, never a path: nothing
outside the logdir is read). Errors come back as tool errors saying what exists. Uses the
official MCP Python SDK (``mcp``, 2.x: ``mcp.server.mcpserver.MCPServer``).
"""
from __future__ import annotations

import os
from typing import Any

SCHEMA_VERSION = 1
WHY_DEFAULT = "idle,launches,queue,steps,critical,memcpy"

__all__ = ["SCHEMA_VERSION", "Answers", "build_server", "serve"]


class Answers:
    """The tools' answers over one logdir, plain functions (the MCP server wraps them)."""

    def __init__(self, logdir: str | os.PathLike, *, cache: bool = True, cache_dir: str | None = None) -> None:
        self.logdir = os.fspath(logdir)
        self._cache, self._cache_dir = cache, cache_dir
        self._runs: dict[str, Any] = {}

    # -- lookups ------------------------------------------------------------------------------
    def _discovery(self):
        from tb_profiler.io.discovery import discover

        return discover(self.logdir)

    def _run(self, name: str):
        from tb_profiler.api import Run

        found = self._discovery()
        info = found.run(name)
        if info is None:
            names = ", ".join(r.name for r in found.runs) or "none"
            raise ValueError(f"run {name[:200]!r} not found; runs: {names}")
        run = self._runs.get(name)
        if run is None or run.info != info:
            run = self._runs[name] = Run(info, found.skipped, cache=self._cache, cache_dir=self._cache_dir)
        return run

    def _trace(self, run: str, worker: str | None, span: int | None):
        r = self._run(run)
        if worker is not None and worker not in r.workers:
            raise ValueError(f"worker {worker[:200]!r} not found in run {run!r}; workers: {', '.join(r.workers)}")
        return r, r.trace(worker, span)

    @staticmethod
    def _doc(kind: str, sel: dict, body: dict) -> dict:
        return {"schema": f"tb_profiler.{kind}", "schema_version": SCHEMA_VERSION,
                **{k: v for k, v in sel.items() if v is not None}, **body}

    # -- tools --------------------------------------------------------------------------------
    def runs(self) -> dict:
        found = self._discovery()
        return self._doc("runs", {}, {"runs": [
            {"run": r.name, "workers": {w: [s.index for s in spans] for w, spans in r.workers.items()}}
            for r in found.runs]})

    def overview(self, run: str, worker: str | None = None, span: int | None = None) -> dict:
        from tb_profiler.plugin import views

        r, t = self._trace(run, worker, span)
        return self._doc("overview", {"run": run, "worker": worker, "span": span},
                         views.overview(t, len(r.workers)))

    def why(self, run: str, worker: str | None = None, span: int | None = None, only: str = WHY_DEFAULT) -> dict:
        from tb_profiler.cli.why import WHY_PARTS, why_doc

        parts = [p.strip() for p in only.split(",") if p.strip()]
        bad = [p for p in parts if p not in WHY_PARTS]
        if bad:
            raise ValueError(f"only: {', '.join(bad)} not one of {', '.join(WHY_PARTS)}")
        _, t = self._trace(run, worker, span)
        return self._doc("why", {"run": run, "worker": worker, "span": span},
                         why_doc(t, parts, 30_000, 1.5, None, 10))

    def diff(self, run: str, exp_run: str, worker: str | None = None, span: int | None = None,
             exp_worker: str | None = None, exp_span: int | None = None) -> dict:
        from tb_profiler.plugin import views

        _, a = self._trace(run, worker, span)
        _, b = self._trace(exp_run, exp_worker, exp_span)
        return self._doc("diff", {"run": run, "worker": worker, "span": span, "exp_run": exp_run,
                                  "exp_worker": exp_worker, "exp_span": exp_span}, views.diff([a], [b]))

    def range_stats(self, run: str, start_us: float, end_us: float, worker: str | None = None,
                    span: int | None = None) -> dict:
        from tb_profiler.plugin import views

        a, b = round(float(start_us) * 1000), round(float(end_us) * 1000)
        if b <= a:
            raise ValueError("end_us must be greater than start_us")
        _, t = self._trace(run, worker, span)
        return self._doc("range_stats", {"run": run, "worker": worker, "span": span},
                         views.range_stats(t, a, b))

    def event(self, run: str, i: int, worker: str | None = None, span: int | None = None) -> dict:
        from tb_profiler.plugin.timeline import event_detail

        _, t = self._trace(run, worker, span)
        if not 0 <= int(i) < len(t.events):
            raise ValueError(f"no event {i}: the trace has {len(t.events)} events")
        return self._doc("event", {"run": run, "worker": worker, "span": span}, event_detail(t, int(i)))


def build_server(logdir: str | os.PathLike, *, cache: bool = True, cache_dir: str | None = None):
    """The MCP server (mcp's MCPServer) with the tools of Answers over ``logdir``."""
    from mcp.server.mcpserver import MCPServer

    answers = Answers(logdir, cache=cache, cache_dir=cache_dir)
    server = MCPServer("tb_profiler", instructions=(
        "PyTorch profiler traces in a TensorBoard logdir. Start with runs(), then overview(run) "
        "(its 'diagnosis' says what bounds the step) or why(run) (its 'verdict'). Cite the figures "
        "as given; times are ns unless a field says otherwise."))
    for name in ("runs", "overview", "why", "diff", "range_stats", "event"):
        server.add_tool(_said(getattr(answers, name)), name=name, description=_DESCRIPTIONS[name])
    return server


def _said(fn):
    """fn with its refusals (an unknown run, a bad argument, an unreadable trace) as the SDK's
    ToolError, whose text reaches the agent; anything else stays a crash the server logs."""
    import functools

    from mcp.server.mcpserver.exceptions import ToolError

    from tb_profiler.errors import TraceFormatError

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, KeyError, OSError, TraceFormatError) as exc:
            raise ToolError(str(exc).strip("'\"")) from None

    return call


_DESCRIPTIONS = {
    "runs": "The runs of the logdir, each with its workers and their spans (1-based).",
    "overview": "The Overview of one trace (run, worker, span; default: the first worker's latest span): "
                "diagnosis, step breakdown, devices, recommendations, steps.",
    "why": "Why the step is slow: the verdict (what bounds it), then device idle time, kernel launches, "
           "launch queues, outlier steps, critical path and copies (only: a comma list of those).",
    "diff": "One trace (run, worker, span) against another (exp_run, exp_worker, exp_span): step breakdown, "
            "operators, kernels and modules, deltas.",
    "range_stats": "The events of one trace in [start_us, end_us) (µs from the trace's start, as the Trace "
                   "view shows): operators, kernels and what ran, by name.",
    "event": "One event of a trace (index i, as the Trace view's links give it): its columns, args and linked "
             "events.",
}


def serve(logdir: str | os.PathLike, *, cache: bool = True, cache_dir: str | None = None) -> None:
    """Serve the tools over stdio until the client closes it."""
    build_server(logdir, cache=cache, cache_dir=cache_dir).run("stdio")
