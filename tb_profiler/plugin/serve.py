"""``tb-profiler serve LOGDIR``: the plugin's app without TensorBoard (werkzeug).

Same routes under the same /data/plugin/pytorch_profiler/ prefix, same bundle; ``/``
serves the page TensorBoard's plugin iframe would.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState


def make_app(logdir: str, *, memory_mb: int | None = None, reload_s: float | None = None,
             threads: int | None = None, cache_dir: str | None = None, source_roots: Sequence[str] = (),
             jobs: int | None = None, dask: str | None = None, summaries: str | None = None,
             start: bool = True) -> ProfilerApp:
    """The app for ``logdir``; ``source_roots``: folders to find stack frames' files under
    (after the roots a trace records, before the folders above it; analysis/sources.py);
    ``jobs`` / ``dask``: where the summaries of runs of several workers are built
    (processes here, or a Dask scheduler's address; default $TB_PROFILER_JOBS or the CPUs,
    $TB_PROFILER_DASK); ``summaries``: a folder or URL to keep them in instead of the cache
    folder (default $TB_PROFILER_SUMMARIES)."""
    from tb_profiler.analysis.sources import set_user_roots

    set_user_roots(source_roots)
    state = ProfilerState(logdir, memory_bytes=(memory_mb << 20) if memory_mb else None, reload_s=reload_s,
                          threads=threads, cache_dir=cache_dir, jobs=jobs, dask=dask, summaries=summaries)
    if start:
        state.start()
    return ProfilerApp(state, standalone=True)


def serve(logdir: str, host: str = "127.0.0.1", port: int = 6006, **kw: Any) -> None:
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        """Logs failed requests only: the UI polls, so a line per request would bury the
        messages that matter (as TensorBoard, which logs none)."""

        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            if str(getattr(code, "value", code)).isdigit() and int(getattr(code, "value", code)) >= 400:
                super().log_request(code, size)

    app = make_app(logdir, **kw)
    server = make_server(host, port, app, threaded=True, request_handler=QuietHandler)
    shown = f"[{host}]" if ":" in host else host
    print(f"tb-profiler: serving {logdir} at http://{shown}:{server.server_port}/ (Ctrl+C to stop)",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        app.state.stop()
        app.close()
