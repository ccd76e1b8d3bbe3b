"""``tb-profiler serve LOGDIR``: the plugin's app without TensorBoard (werkzeug).

Same routes under the same /data/plugin/pytorch_profiler/ prefix, same bundle; ``/``
serves the page TensorBoard's plugin iframe would.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from tb_profiler.plugin.app import SECURITY_HEADERS, HostPolicy, ProfilerApp
from tb_profiler.plugin.state import ProfilerState


def make_app(logdir: str, *, memory_mb: int | None = None, reload_s: float | None = None,
             threads: int | None = None, cache_dir: str | None = None, source_roots: Sequence[str] = (),
             jobs: int | None = None, dask: str | None = None, summaries: str | None = None,
             start: bool = True, hosts: HostPolicy | None = None) -> ProfilerApp:
    """The app for ``logdir``; ``source_roots``: folders to find stack frames' files under
    (after the roots a trace records, before the folders above it; analysis/sources.py);
    ``jobs`` / ``dask``: where the summaries of runs of several workers are built
    (processes here, or a Dask scheduler's address; default $TB_PROFILER_JOBS or the CPUs,
    $TB_PROFILER_DASK); ``summaries``: a folder or URL to keep them in instead of the cache
    folder (default $TB_PROFILER_SUMMARIES); ``hosts``: the Host headers answered (default:
    the loopback names, and $TB_PROFILER_ALLOW_HOSTS)."""
    from tb_profiler.analysis.sources import set_user_roots

    set_user_roots(source_roots)
    state = ProfilerState(logdir, memory_bytes=(memory_mb << 20) if memory_mb else None, reload_s=reload_s,
                          threads=threads, cache_dir=cache_dir, jobs=jobs, dask=dask, summaries=summaries)
    if start:
        state.start()
    return ProfilerApp(state, standalone=True, hosts=hosts)


def _handler_class():
    import json

    from werkzeug.serving import WSGIRequestHandler

    class Handler(WSGIRequestHandler):
        """Logs failed requests only: the UI polls, so a line per request would bury the
        messages that matter (as TensorBoard, which logs none). Every reply it sends carries
        the app's security headers, those werkzeug and http.server make themselves too (a
        414 for a request line over 64 KiB, 431 for too many headers, 400 for a malformed
        request line, 505 for HTTP/0.9, werkzeug's 500 when the app fails), and their errors
        are JSON as the app's are."""

        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            if str(getattr(code, "value", code)).isdigit() and int(getattr(code, "value", code)) >= 400:
                super().log_request(code, size)

        def send_response(self, code: int, message: str | None = None) -> None:
            self._tb_headers_sent: set[str] = set()
            super().send_response(code, message)

        def send_header(self, keyword: str, value: str) -> None:
            sent = getattr(self, "_tb_headers_sent", None)
            if sent is not None:
                sent.add(keyword.lower())
            super().send_header(keyword, value)

        def end_headers(self) -> None:
            sent = getattr(self, "_tb_headers_sent", None)
            if sent is not None:
                for name, value in SECURITY_HEADERS:
                    if name.lower() not in sent:
                        super().send_header(name, value)
                self._tb_headers_sent = None
            super().end_headers()

        def parse_request(self) -> bool:
            """An HTTP/0.9 request (``GET /``, no version) is answered 505 with a status line
            and headers: a 0.9 answer is a bare body, which carries no security header."""
            if not super().parse_request():
                return False
            if self.request_version == "HTTP/0.9":
                self.send_error(505, "HTTP/0.9 is not supported: send HTTP/1.0 or 1.1")
                return False
            return True

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            short = self.responses.get(code, ("Error", ""))[0]
            message = (message or short)[:200]
            self.log_error("code %d, message %s", code, message)
            if self.request_version == "HTTP/0.9":  # a malformed request line: still a status line and headers
                self.request_version = "HTTP/1.0"
            self.send_response(code, message.encode("latin-1", "replace").decode("latin-1"))
            self.send_header("Connection", "close")
            self.close_connection = True
            body = None
            if code >= 200 and code not in (204, 205, 304):
                body = json.dumps({"error": f"{code} {message}"}).encode("utf-8")
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD" and body:
                self.wfile.write(body)

    return Handler


def make_server(logdir: str, host: str = "127.0.0.1", port: int = 6006, *, allow_hosts: Sequence[str] = (),
                **kw: Any):
    """The werkzeug server of ``serve`` (not started) and its app. ``allow_hosts``: Host
    names answered besides localhost, 127.0.0.1, [::1] and the address bound (HostPolicy:
    ``name``, ``name:port``, ``*.domain``, ``*`` for any), e.g. a reverse proxy's; also
    $TB_PROFILER_ALLOW_HOSTS (comma-separated). Bound to 0.0.0.0 or ::, the machine's own
    names and IP addresses are answered too."""
    from werkzeug.serving import make_server as werkzeug_server

    hosts = HostPolicy(host, allow_hosts)  # a bad name fails here, before anything starts
    app = make_app(logdir, hosts=hosts, **kw)
    try:
        server = werkzeug_server(host, port, app, threaded=True, request_handler=_handler_class())
    except BaseException:
        app.state.stop()
        app.close()
        raise
    return server, app


def serve(logdir: str, host: str = "127.0.0.1", port: int = 6006, *, allow_hosts: Sequence[str] = (),
          **kw: Any) -> None:
    """Serve ``logdir`` until interrupted; ``allow_hosts``: see make_server.  SIGTERM and
    SIGHUP (a process manager's stop, a closed terminal) end the summary worker processes,
    then this process by that signal (summary.procs.stop_on_signals)."""
    from tb_profiler.summary.procs import restore_signals, stop_on_signals

    server, app = make_server(logdir, host, port, allow_hosts=allow_hosts, **kw)
    replaced = stop_on_signals()  # SIGTERM, SIGHUP: the summary processes end with the server
    shown = f"[{host}]" if ":" in host else host
    print(f"tb-profiler: serving {logdir} at http://{shown}:{server.server_port}/ (Ctrl+C to stop)",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        app.state.stop()
        app.close()
        restore_signals(replaced)
