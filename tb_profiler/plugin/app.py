"""The WSGI app behind every route of docs/api.md, for TensorBoard and for ``serve``.

Request threads only validate parameters, look names up, wait (bounded) for loads or
summaries and hand the work to a small thread pool; answers are cached as encoded JSON
keyed by the route, its parameters and the identity (path, size, mtime) of the files
used. Per-trace routes read the trace (the state's LRU); run-level routes (``views`` of a
run of several workers, ``distributed/*``) read the files' summaries only, and share one
cross-rank analysis per (run, span, files). Any problem becomes ``{"error": ...}`` with
400/404 (500 for a bug), never a traceback, and every response carries the
Content-Security-Policy.

Before any route runs, the Host header must name this server (``HostPolicy``: DNS
rebinding), and the query may hold only the names the route reads (``ROUTE_PARAMS``): an
unknown one is a 400, never part of a cache key.
"""
from __future__ import annotations

import gzip
import hashlib
import ipaddress
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import zlib
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterable

from werkzeug.wrappers import Request, Response

from tb_profiler.analysis import stored
from tb_profiler.io.discovery import natural_key
from tb_profiler.plugin import ROUTE_PREFIX, raw, static, views
from tb_profiler.plugin import views_counters
from tb_profiler.plugin import views_compiled
from tb_profiler.plugin import views_integrity
from tb_profiler.plugin import views_graphs
from tb_profiler.plugin import views_snapshot
from tb_profiler.plugin.state import FAILED, LOADED, S_FAILED, FileEntry, LoadFailed, ProfilerState

logger = logging.getLogger("tb_profiler.plugin")

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; "
       "base-uri 'self'; form-action 'self'")
SECURITY_HEADERS = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "same-origin"))

LOAD_WAIT_S = 5.0        # how long a request waits for a trace before answering 202
COMPUTE_WAIT_S = 60.0    # ... and for an analysis
STORE_AFTER_S = 0.5      # a single-trace route's JSON that took this long is kept with the trace's cache
RETRY_AFTER_MS = 500
SUMMARY_RETRY_MS = 1000  # a 202 while a run's summaries are built
RUNS_KEPT = 4            # cross-rank analyses kept in memory (each shared by the run-level routes)
MAX_RANKS_SHOWN = 8      # ranks in one trace/ranks window
DEFAULT_RANKS_SHOWN = 4  # ... when none are named: the slowest ones
MAX_MATRIX_CELLS = 1_000_000  # distributed/ranks' step_matrix
MAX_TEXT = 4096          # longest accepted text parameter
_INT_RE = re.compile(r"-?[0-9]{1,19}")  # fullmatch: ASCII digits only, no space or newline around


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Loading(Exception):
    """The traces a request needs are not in memory yet (HTTP 202)."""

    def __init__(self, body: dict):
        super().__init__("loading")
        self.body = body


# -- parameters ---------------------------------------------------------------------------
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


# -- encoded-response cache ----------------------------------------------------------------
ENTRY_OVERHEAD = 256  # bytes an entry costs besides its key's and body's (dict slot, tuple headers)


def _key_bytes(key) -> int:
    """About what a cache key holds in memory: its strings (query values up to MAX_TEXT
    characters each) counted, not only the bodies."""
    if isinstance(key, (str, bytes)):
        return sys.getsizeof(key)
    if isinstance(key, (tuple, list, frozenset, set)):
        return sys.getsizeof(key) + sum(_key_bytes(k) for k in key)
    return sys.getsizeof(key)


class ResponseCache:
    """LRU of encoded JSON bodies, capped by bytes: each entry counts its body, its key
    and ENTRY_OVERHEAD, so many small answers under long keys stay within the cap too."""

    def __init__(self, cap_bytes: int):
        self.cap = cap_bytes
        self._items: "OrderedDict[Any, tuple[bytes, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key) -> bytes | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key, body: bytes) -> None:
        size = len(body) + _key_bytes(key) + ENTRY_OVERHEAD
        if size > self.cap // 4:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (body, size)
            self._bytes += size
            while self._bytes > self.cap and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped


def _encode(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode("utf-8")


# -- Host header (DNS rebinding) -----------------------------------------------------------
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "*"})
ALLOW_HOSTS_ENV = "TB_PROFILER_ALLOW_HOSTS"
_NAME_RE = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_PORT_RE = re.compile(r":[0-9]{1,5}")


def host_name(value: str | None) -> str | None:
    """The host name a Host header (or an allow-list entry) names: lower case, without its
    port, its trailing dot or an IPv6 address's brackets; None when empty or malformed."""
    if not value or len(value) > 300:
        return None
    v = value.lower()
    if v.startswith("["):
        end = v.find("]")
        name, rest = v[1:end], v[end + 1:]
        if end < 0 or not name:
            return None
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, colon, port = v.partition(":")
        rest = colon + port
        if name.endswith("."):
            name = name[:-1]
        if not _NAME_RE.fullmatch(name):
            return None
    if rest and not _PORT_RE.fullmatch(rest):
        return None
    return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _machine_names() -> set[str]:
    """This machine's own names (what a user on the network types to reach it)."""
    names = set()
    for get in (socket.gethostname, socket.getfqdn):
        try:
            n = host_name(get())
        except OSError:
            n = None
        if n:
            names.add(n)
    return names


class HostPolicy:
    """Which Host headers the app answers (the others: 403). A web page can make its own
    name resolve to 127.0.0.1 (DNS rebinding) and so reach a server on this machine as the
    same origin, but its requests still carry its own name as Host: only names the server
    is known by are answered.

    - always: localhost, 127.0.0.1 (any loopback address), [::1], with any port;
    - bound to a name or address (``bind``): that one too, and, unless it is a loopback
      address, the machine's own names (socket.gethostname / getfqdn);
    - bound to every interface (0.0.0.0, ::, TensorBoard's --bind_all): the machine's
      names and any IP address literal (a page cannot rebind an address: a browser that
      sends an address as Host went to that address itself);
    - ``allow``: more names (a proxy's): ``name``, ``name:port`` (the port is not
      compared), ``*.example.com`` (every name under it) or ``*`` (every Host: no check);
      plus $TB_PROFILER_ALLOW_HOSTS, comma-separated.
    An empty or missing Host is refused."""

    def __init__(self, bind: str | None = None, allow: Iterable[str] = (), *, env: bool = True,
                 hint: str = "--allow-host or $" + ALLOW_HOSTS_ENV):
        self.hint = hint
        self.names = set(LOOPBACK_NAMES)
        self.suffixes: list[str] = []
        self.any_ip = self.any_host = False
        b = (bind or "").strip().lower()
        b = b[1:-1] if b.startswith("[") and b.endswith("]") else b
        if bind is not None and b in WILDCARD_BINDS:
            self.any_ip = True
            self.names |= _machine_names()
        elif b and b not in LOOPBACK_NAMES and not (_is_ip(b) and ipaddress.ip_address(b).is_loopback):
            self.names.add(b.rstrip("."))
            self.names |= _machine_names()
        entries = list(allow)
        if env:
            entries += os.environ.get(ALLOW_HOSTS_ENV, "").split(",")
        for entry in entries:
            entry = entry.strip().lower()
            if not entry:
                continue
            if entry == "*":
                self.any_host = True
            elif entry.startswith("*.") or entry.startswith("."):
                base = host_name(entry[2:] if entry.startswith("*.") else entry[1:])
                if base is None or _is_ip(base) or ":" in entry:
                    raise ValueError(f"not a host name pattern: {entry!r}")
                self.suffixes.append("." + base)
            else:
                name = host_name(entry) or host_name(f"[{entry}]")
                if name is None:
                    raise ValueError(f"not a host name: {entry!r}")
                self.names.add(name)

    def allows(self, host: str | None) -> bool:
        if self.any_host:
            return True
        name = host_name(host)
        if name is None:
            return False
        if name in self.names or any(name.endswith(s) for s in self.suffixes):
            return True
        if _is_ip(name):
            return self.any_ip or _loopback(name)
        return False

    def allows_origin(self, origin: str | None, host: str | None) -> bool:
        """Whether a request's Origin header is this server's own: absent (the browser sends
        none on a same-origin GET), the same host and port as the Host header, or a name
        given to answer to (a proxy's); "null" (a sandboxed frame, a file) and any other
        page's origin are foreign, a loopback one on another port included."""
        if origin is None:
            return True
        scheme, sep, netloc = origin.strip().lower().partition("://")
        if not sep or scheme not in ("http", "https") or "/" in netloc:
            return False
        if _netloc(netloc, scheme) == _netloc((host or "").lower(), scheme):
            return True
        name = host_name(netloc)
        return name is not None and (self.any_host or name in self.names - LOOPBACK_NAMES
                                     or any(name.endswith(s) for s in self.suffixes))


def _loopback(name: str) -> bool:
    """A loopback address, an IPv4-mapped one included ([::ffff:127.0.0.1], which some
    clients send for 127.0.0.1 and Python's is_loopback does not recognise)."""
    ip = ipaddress.ip_address(name)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def _netloc(netloc: str, scheme: str) -> str:
    """host:port with the scheme's default port written out."""
    if netloc.endswith("]") or ":" not in netloc.rsplit("]", 1)[-1]:
        return f"{netloc}:{443 if scheme == 'https' else 80}"
    return netloc


# -- the query parameters each route reads -------------------------------------------------
_SEL = ("run", "worker", "span")        # the trace a per-trace route reads (_entry)
_WINDOW = ("start_ns", "end_ns")
_TIMELINE = (*_WINDOW, "width", "max_events", "max_flows")
_SPAN_FILES = ("run", "span")            # every worker's file of a span (_span_files)
ROUTE_PARAMS: dict[str, frozenset[str]] = {route: frozenset(names) for route, names in {
    "runs": (), "status": (), "skipped": (),
    "views": ("run",), "workers": ("run", "view"), "spans": ("run", "worker"),
    "overview": _SEL,
    "operation": (*_SEL, "group_by", "top"), "operation/table": (*_SEL, "group_by"),
    "operation/stack": (*_SEL, "group_by", "op_name", "input_shape"),
    "kernel": (*_SEL, "top"), "kernel/table": (*_SEL, "group_by"), "kernel/tc_pie": _SEL,
    # memory_metric: the old plugin's unit parameter, accepted and ignored (docs/api.md)
    "memory": (*_SEL, "device", *_WINDOW, "memory_metric"),
    "memory_curve": (*_SEL, *_WINDOW, "max_points"),
    "memory_events": (*_SEL, "device", *_WINDOW, "limit"),
    "module": _SEL, "tree": (*_SEL, "step"),
    "trace": (*_SEL, *_TIMELINE), "trace/event": (*_SEL, "i"), "trace/raw": _SEL,
    "trace/search": (*_SEL, "q", "limit", "offset"),
    "trace/ranks": (*_SPAN_FILES, "workers", *_TIMELINE),
    "distributed/gpuinfo": _SPAN_FILES, "distributed/overlap": _SPAN_FILES,
    "distributed/waittime": _SPAN_FILES, "distributed/commops": _SPAN_FILES,
    "distributed/ranks": _SPAN_FILES, "distributed/instances": (*_SPAN_FILES, "sort", "limit", "offset"),
    "distributed/matrix": _SPAN_FILES, "distributed/stragglers": _SPAN_FILES,
    "diff": (*_SEL, "exp_run", "exp_worker", "exp_span"),
    "diffnode": (*_SEL, "exp_run", "exp_worker", "exp_span", "path"),
    "idle": (*_SEL, "kernel_wait_ns"), "launches": _SEL, "steps/outliers": (*_SEL, "factor_pct"),
    "memcpy": (*_SEL, "bins"), "annotations": _SEL, "queue": (*_SEL, "full_at"),
    "roofline": _SEL, "critical_path": (*_SEL, "step"),
    "trace/range_stats": (*_SEL, *_WINDOW),
}.items()}
ROUTE_PARAMS.update(views_counters.ROUTE_PARAMS)  # routes of new view modules register themselves
ROUTE_PARAMS.update(views_compiled.ROUTE_PARAMS)
ROUTE_PARAMS.update(views_integrity.ROUTE_PARAMS)
ROUTE_PARAMS.update(views_graphs.ROUTE_PARAMS)
ROUTE_PARAMS.update(views_snapshot.ROUTE_PARAMS)
_DECLARED = "tb_profiler.params"  # the environ key holding the route's declared names


def _unknown_params(args, declared: frozenset[str]) -> str | None:
    """The 400 message naming the query's unknown parameters (bounded, escaped), or None."""
    unknown = sorted({k for k in args.keys() if k not in declared})
    if not unknown:
        return None
    shown = ", ".join(ascii(k[:40]) for k in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    accepted = ", ".join(sorted(declared)) or "none"
    return f"unknown query parameter{'s' if len(unknown) > 1 else ''} {shown} (this route reads: {accepted})"


class ProfilerApp:
    """WSGI app for the routes under ROUTE_PREFIX (and, standalone, ``/``)."""

    def __init__(self, state: ProfilerState, *, standalone: bool = False, hosts: HostPolicy | None = None):
        """``hosts``: the Host headers answered (default: this machine's loopback names,
        and $TB_PROFILER_ALLOW_HOSTS)."""
        self.state = state
        self.standalone = standalone
        self.hosts = hosts if hosts is not None else HostPolicy()
        self.pool = ThreadPoolExecutor(max_workers=max(2, state.threads), thread_name_prefix="tb_profiler-api")
        self.responses = ResponseCache(max(16 << 20, min(256 << 20, state.memory_bytes // 4)))
        self._inflight: dict[Any, Future] = {}
        self._inflight_lock = threading.Lock()
        self._runs: "OrderedDict[tuple, views.RunSummaries]" = OrderedDict()
        self.routes: dict[str, Callable[[Request], Response]] = {
            "runs": self.r_runs, "status": self.r_status, "skipped": self.r_skipped,
            "views": self.r_views, "workers": self.r_workers, "spans": self.r_spans,
            "overview": self.r_overview,
            "operation": self.r_operation, "operation/table": self.r_operation_table,
            "operation/stack": self.r_operation_stack,
            "kernel": self.r_kernel, "kernel/table": self.r_kernel_table, "kernel/tc_pie": self.r_kernel_tc,
            "memory": self.r_memory, "memory_curve": self.r_memory_curve, "memory_events": self.r_memory_events,
            "module": self.r_module, "tree": self.r_tree,
            "trace": self.r_trace, "trace/event": self.r_trace_event, "trace/raw": self.r_trace_raw,
            "trace/search": self.r_trace_search,
            "trace/ranks": self.r_trace_ranks,
            "distributed/gpuinfo": self.r_dist_gpuinfo, "distributed/overlap": self.r_dist_overlap,
            "distributed/waittime": self.r_dist_wait, "distributed/commops": self.r_dist_commops,
            "distributed/ranks": self.r_dist_ranks, "distributed/instances": self.r_dist_instances,
            "distributed/matrix": self.r_dist_matrix, "distributed/stragglers": self.r_dist_stragglers,
            "diff": self.r_diff, "diffnode": self.r_diffnode,
            "idle": self.r_idle, "launches": self.r_launches, "steps/outliers": self.r_step_outliers,
            "memcpy": self.r_memcpy, "annotations": self.r_annotations, "queue": self.r_queue,
            "roofline": self.r_roofline, "critical_path": self.r_critical_path,
            "trace/range_stats": self.r_range_stats,
        }
        self.routes.update(views_counters.routes(self))
        self.routes.update(views_compiled.routes(self))
        self.routes.update(views_integrity.routes(self))
        self.routes.update(views_graphs.routes(self))
        self.routes.update(views_snapshot.routes(self))

        assert set(self.routes) == set(ROUTE_PARAMS), set(self.routes) ^ set(ROUTE_PARAMS)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- WSGI ---------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        request = Request(environ)
        try:
            host = environ.get("HTTP_HOST")
            if not self.hosts.allows(host):
                shown = ascii(host[:100]) if host else "none"
                raise ApiError(403, f"this server does not answer to the Host {shown} (a page on another site "
                                    f"must not read it: DNS rebinding); a proxy's name can be allowed with "
                                    f"{self.hosts.hint}")
            self._refuse_cross_site(environ, host, request.path)
            response = self.dispatch(request)
        except ApiError as exc:
            response = self.error(exc.status, exc.message)
        except Loading as exc:
            response = self.json(exc.body, status=202)
        except Exception as exc:  # a bug: log it, answer without a traceback
            logger.exception("tb_profiler: %s failed", request.path)
            response = self.error(500, f"internal error: {type(exc).__name__}: {str(exc)[:500]}")
        for name, value in SECURITY_HEADERS:
            response.headers[name] = value
        return response(environ, start_response)

    def _refuse_cross_site(self, environ, host: str | None, path: str) -> None:
        """403 for what another site's page makes the browser ask (blind GETs that cost a
        load or an analysis): a foreign Origin, or Sec-Fetch-Site cross-site on anything
        but a navigation to the page itself (a link to the app from anywhere still opens it;
        the page's own requests are same-origin, under TensorBoard and in VS Code too)."""
        origin = environ.get("HTTP_ORIGIN")
        if not self.hosts.allows_origin(origin, host):
            raise ApiError(403, f"requests from another site's page are refused (Origin {ascii(origin[:100])}); "
                                f"a proxy's name can be allowed with {self.hosts.hint}")
        site = environ.get("HTTP_SEC_FETCH_SITE", "").lower()
        page = ROUTE_PREFIX not in path and environ.get("HTTP_SEC_FETCH_MODE", "").lower() == "navigate"
        if site == "cross-site" and not page:
            raise ApiError(403, "requests from another site's page are refused (Sec-Fetch-Site: cross-site); "
                                "open the app itself")

    def dispatch(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, f"method {request.method} not allowed")
        path = request.path
        at = path.find(ROUTE_PREFIX)
        if at < 0:
            if self.standalone and path == "/favicon.ico":  # no icon: say so without a 404
                return Response(status=204, headers={"Cache-Control": "max-age=86400"})
            if self.standalone and path in ("/", "/index.html"):
                return self.text(static.standalone_page(static.bundle_built()), "text/html",
                                 status=200 if static.bundle_built() else 503)
            raise ApiError(404, "not found")
        route = path[at + len(ROUTE_PREFIX):]
        handler = self.routes.get(route)
        if handler is not None:
            declared = ROUTE_PARAMS[route]
            unknown = _unknown_params(request.args, declared)
            if unknown is not None:
                raise ApiError(400, unknown)
            request.environ[_DECLARED] = declared
            return handler(request)
        return self.r_static(request, route)  # files: the query is not read (nor cached)

    @staticmethod
    def params(request: Request) -> Params:
        """The request's query, readable by the names its route declared (ROUTE_PARAMS)."""
        return Params(request.args, request.environ.get(_DECLARED, frozenset()))

    # -- responses ---------------------------------------------------------------------------
    def json(self, data: Any, status: int = 200, request: Request | None = None) -> Response:
        return self.body(_encode(data), status=status, request=request)

    def body(self, body: bytes, status: int = 200, request: Request | None = None) -> Response:
        headers = {"Cache-Control": "no-store"}
        if request is not None and len(body) > 4096 and "gzip" in request.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        return Response(body, status=status, headers=headers, content_type="application/json")

    def error(self, status: int, message: str) -> Response:
        return self.json({"error": message}, status=status)

    def text(self, text: str, content_type: str, status: int = 200) -> Response:
        return Response(text.encode("utf-8"), status=status, content_type=f"{content_type}; charset=utf-8",
                        headers={"Cache-Control": "no-store"})

    # -- lookups -------------------------------------------------------------------------------
    def _run_entries(self, run: str) -> list[FileEntry]:
        entries = self.state.run_entries(run)
        if not entries:
            if not self.state.wait_scanned(0) and self.state.wait_scanned(LOAD_WAIT_S):
                entries = self.state.run_entries(run)
            if not entries:
                raise ApiError(404, f"no run named {run[:200]!r}")
        return entries

    def _run(self, p: Params) -> tuple[str, list[FileEntry]]:
        run = p.text("run", required=True)
        return run, self._run_entries(run)

    @staticmethod
    def _usable(entries: list[FileEntry]) -> list[FileEntry]:
        return [e for e in entries if e.state != FAILED]

    def _workers(self, entries: list[FileEntry]) -> list[str]:
        return sorted({e.worker for e in self._usable(entries)}, key=natural_key)  # discovery's order

    def _entry(self, p: Params, prefix: str = "", failed_ok: bool = False) -> FileEntry:
        """The file that run/worker/span (exp_run/... with prefix "exp_") name (one that
        could not be read: a 404 saying why, unless failed_ok)."""
        run = p.text(prefix + "run", required=True)
        entries = self._run_entries(run)
        worker = p.text(prefix + "worker")
        if worker in (None, "", "All"):
            workers = self._workers(entries) or sorted({e.worker for e in entries}, key=natural_key)
            worker = workers[0]
        mine = [e for e in entries if e.worker == worker]
        if not mine:
            raise ApiError(404, f"run {run[:200]!r} has no worker {worker[:200]!r}")
        span = p.integer(prefix + "span", None, 1, 1_000_000)
        if span is None:
            usable = self._usable(mine)
            entry = max(usable or mine, key=lambda e: e.index)
        else:
            entry = next((e for e in mine if e.index == span), None)
            if entry is None:
                raise ApiError(404, f"worker {worker[:200]!r} of run {run[:200]!r} has no span {span}")
        if entry.state == FAILED and not failed_ok:
            raise ApiError(404, entry.error or f"{entry.rel}: could not be read")
        return entry

    def _side(self, p: Params, prefix: str) -> list[FileEntry]:
        worker = p.text(prefix + "worker")
        if worker in (None, "", "All"):
            return self._span_files(p, prefix)
        return [self._entry(p, prefix)]

    # -- the compute path -----------------------------------------------------------------------
    @staticmethod
    def _key(request: Request, entries: list[FileEntry], key_extra: tuple) -> tuple:
        return (request.path.rsplit(ROUTE_PREFIX, 1)[-1], tuple(sorted(request.args.items(multi=True))),
                tuple(e.key for e in entries), key_extra)

    def compute(self, request: Request, entries: list[FileEntry], fn: Callable[[list], Any],
                key_extra: tuple = ()) -> Response:
        """fn(traces) on the pool, through the response cache, after the traces are loaded."""
        key = self._key(request, entries, key_extra)
        cached = self.responses.get(key)
        if cached is not None:
            return self.body(cached, request=request)
        self._await_loaded(entries)
        body = self._pooled(key, lambda: self._computed(key, entries, fn))
        return self.body(body, request=request)

    def _computed(self, key: tuple, entries: list[FileEntry], fn: Callable[[list], Any]) -> bytes:
        """fn's JSON; for one trace, kept beside its cache entry when it cost STORE_AFTER_S
        or more, and read from there by a later server (a reopen does not compute it again)."""
        traces = [self.state.trace(e) for e in entries]
        part = None
        if len(traces) == 1:
            part = "route-" + hashlib.sha256(repr((key[0], key[1], key[3])).encode()).hexdigest()[:24]
            kept = stored.read_bytes(traces[0], part)
            if kept is not None:
                self.responses.put(key, kept)
                return kept
        t0 = time.perf_counter()
        body = self._encoded(key, fn(traces))
        if part is not None and time.perf_counter() - t0 >= STORE_AFTER_S:
            stored.write_bytes_later(traces[0], part, body)
        return body

    def compute_run(self, request: Request, entries: list[FileEntry], fn: Callable[[views.RunSummaries], Any],
                    key_extra: tuple = ()) -> Response:
        """fn(the files' RunSummaries) on the pool, through the response cache, once every
        file's summary is ready or failed: no trace is loaded."""
        key = self._key(request, entries, key_extra)
        cached = self.responses.get(key)
        if cached is not None:
            return self.body(cached, request=request)
        run = self._run_summaries(entries)
        body = self._pooled(key, lambda: self._encoded(key, fn(run)))
        return self.body(body, request=request)

    def _encoded(self, key, data: Any) -> bytes:
        body = _encode(data)
        self.responses.put(key, body)
        return body

    def _pooled(self, key, work: Callable[[], Any]) -> Any:
        """work() on the pool, once at a time per key (a second request waits for the same
        run of it); after COMPUTE_WAIT_S a 202 (computing) while it goes on."""
        with self._inflight_lock:
            fut = self._inflight.get(key)
            if fut is None:
                fut = self.pool.submit(self._run_pooled, key, work)
                self._inflight[key] = fut
        try:
            return fut.result(timeout=COMPUTE_WAIT_S)
        except FutureTimeout:
            raise Loading({"loading": True, "computing": True, "retry_after_ms": 2000}) from None

    def _run_pooled(self, key, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except LoadFailed as exc:
            raise ApiError(404, str(exc)) from None
        except views.NotFound as exc:
            raise ApiError(404, str(exc)) from None
        finally:
            with self._inflight_lock:
                self._inflight.pop(key, None)

    def _await_loaded(self, entries: list[FileEntry]) -> None:
        """Wait (bounded) until each file has been parsed once (then its columns are in the
        disk cache: the compute reloads an evicted one cheaply), else 202 with progress. Not
        all in memory at once: an LRU smaller than the files would never get there."""
        if all(self.state.resident(e) for e in entries):
            return
        self.state.wait_loaded(entries, LOAD_WAIT_S)
        failed = [e for e in entries if e.state == FAILED]
        if failed:
            raise ApiError(404, failed[0].error or f"{failed[0].rel}: could not be read")
        if not all(e.state == LOADED for e in entries):
            done, total = self.state.progress(entries)
            run_done, run_total = self.state.progress(self.state.run_entries(entries[0].run))
            raise Loading({"loading": True, "run": entries[0].run, "loaded_bytes": done, "total_bytes": total,
                           "run_loaded_bytes": run_done, "run_total_bytes": run_total,
                           "retry_after_ms": RETRY_AFTER_MS})

    def _run_summaries(self, entries: list[FileEntry]) -> views.RunSummaries:
        """The files' summaries (waiting, bounded, for them to be built: else 202 with the
        progress), as one RunSummaries per set of files, kept for the next routes."""
        self.state.request_summaries(entries)
        if not self.state.wait_summarized(entries, LOAD_WAIT_S):
            progress = self.state.summary_progress(entries)
            raise Loading({"loading": True, "summarizing": True, "run": entries[0].run, **progress,
                           "loaded_bytes": progress["summarized_bytes"], "retry_after_ms": SUMMARY_RETRY_MS})
        key = tuple((e.key, e.summary_state) for e in entries)
        with self._inflight_lock:
            run = self._runs.get(key)
            if run is None:
                run = views.RunSummaries([views.SummaryMissing(e.worker, e.summary_error or "not summarized")
                                          if e.summary_state == S_FAILED else e.summary for e in entries])
                self._runs[key] = run
                while len(self._runs) > RUNS_KEPT:
                    self._runs.popitem(last=False)
            self._runs.move_to_end(key)
            return run

    def one(self, request: Request, fn: Callable[..., Any], *args, **kw) -> Response:
        """fn(trace, *args) on the trace that run/worker/span name."""
        entry = self._entry(self.params(request))
        return self.compute(request, [entry], lambda traces: fn(traces[0], *args, **kw))

    # -- discovery routes ---------------------------------------------------------------------
    def r_runs(self, request: Request) -> Response:
        self.state.wait_scanned(LOAD_WAIT_S)
        return self.json({"runs": self.state.run_names(), "failed": self.state.failed_runs(),
                          "loading": self.state.loading})

    def r_status(self, request: Request) -> Response:
        self.state.wait_scanned(LOAD_WAIT_S)
        return self.json(self.state.status(), request=request)

    def r_skipped(self, request: Request) -> Response:
        self.state.wait_scanned(LOAD_WAIT_S)
        return self.json({"skipped": self.state.skipped()}, request=request)

    def r_views(self, request: Request) -> Response:
        p = self.params(request)
        run, entries = self._run(p)
        usable = self._usable(entries)
        if not usable:  # say which files and why: the run stays listed for this
            why = "; ".join((e.error or f"{e.rel}: not read")[:300] for e in entries[:3])
            more = f" (and {len(entries) - 3} more files)" if len(entries) > 3 else ""
            raise ApiError(404, f"no trace of run {run[:200]!r} could be read: {why}{more}")
        latest = {}
        for e in usable:
            if e.worker not in latest or e.index > latest[e.worker].index:
                latest[e.worker] = e
        chosen = [latest[w] for w in sorted(latest, key=natural_key)]
        snaps = bool(self.state.run_snapshots(run))  # memory snapshots show in the Memory view
        if len(chosen) > 1:  # a run of several workers: from their summaries, no trace loaded
            return self.compute_run(request, chosen, lambda run: views_snapshot.with_memory(
                views.views(run.ok, len(chosen)), snaps), (snaps,))
        return self.compute(request, chosen, lambda traces: views_snapshot.with_memory(views.views(traces, 1), snaps),
                            (snaps,))

    def r_workers(self, request: Request) -> Response:
        p = self.params(request)
        run, entries = self._run(p)
        view = p.text("view", max_len=64)
        if view == "Distributed":
            return self.json(["All"])
        return self.json(self._workers(entries))

    def r_spans(self, request: Request) -> Response:
        p = self.params(request)
        run, entries = self._run(p)
        worker = p.text("worker")
        usable = self._usable(entries)
        if worker not in (None, "", "All"):
            if not any(e.worker == worker for e in entries):
                raise ApiError(404, f"run {run[:200]!r} has no worker {worker[:200]!r}")
            usable = [e for e in usable if e.worker == worker]
        return self.json([str(i) for i in sorted({e.index for e in usable})])

    # -- per-trace routes ---------------------------------------------------------------------
    def r_overview(self, request: Request) -> Response:
        p = self.params(request)
        entry = self._entry(p)
        n_workers = len(self._workers(self.state.run_entries(entry.run)))
        return self.compute(request, [entry], lambda t: views.overview(t[0], n_workers), (n_workers,))

    def r_operation(self, request: Request) -> Response:
        p = self.params(request)
        group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
        top = p.integer("top", 10, 1, 100)
        return self.one(request, views.operation_pie, group_by, top)

    def r_operation_table(self, request: Request) -> Response:
        p = self.params(request)
        group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
        return self.one(request, views.operation_table, group_by)

    def r_operation_stack(self, request: Request) -> Response:
        p = self.params(request)
        group_by = p.choice("group_by", tuple(views.OP_GROUPS), "Operation")
        op_name = p.text("op_name", required=True)
        input_shape = p.text("input_shape")
        return self.one(request, views.operation_stack, group_by, op_name, input_shape)

    def r_kernel(self, request: Request) -> Response:
        p = self.params(request)
        top = p.integer("top", 10, 1, 100)
        return self.one(request, views.kernel_pie, top)

    def r_kernel_table(self, request: Request) -> Response:
        p = self.params(request)
        group_by = p.choice("group_by", tuple(views.KERNEL_GROUPS), "KernelNameAndOp")
        return self.one(request, views.kernel_table, group_by)

    def r_kernel_tc(self, request: Request) -> Response:
        return self.one(request, views.kernel_tc)

    _NS_MAX = 1 << 62

    def _window(self, p: Params) -> tuple[int | None, int | None]:
        a = p.integer("start_ns", None, -self._NS_MAX, self._NS_MAX)
        b = p.integer("end_ns", None, -self._NS_MAX, self._NS_MAX)
        if a is not None and b is not None and b <= a:
            raise ApiError(400, "end_ns must be greater than start_ns")
        return a, b

    def r_memory(self, request: Request) -> Response:
        p = self.params(request)
        device = p.text("device", max_len=64) or None
        a, b = self._window(p)
        return self.one(request, views.memory_stats, device, a, b)

    def r_memory_curve(self, request: Request) -> Response:
        p = self.params(request)
        a, b = self._window(p)
        max_points = p.integer("max_points", 2000, 10, 20000)
        return self.one(request, views.memory_curve, a, b, max_points)

    def r_memory_events(self, request: Request) -> Response:
        p = self.params(request)
        device = p.text("device", max_len=64) or None
        a, b = self._window(p)
        limit = p.integer("limit", 10000, 1, 200000)
        return self.one(request, views.memory_events, device, a, b, limit)

    # -- why a step is slow (issue 9) ------------------------------------------------------------
    def r_idle(self, request: Request) -> Response:
        p = self.params(request)
        kernel_wait_ns = p.integer("kernel_wait_ns", 30_000, 0, 10_000_000_000)
        return self.one(request, views.idle, kernel_wait_ns)

    def r_launches(self, request: Request) -> Response:
        return self.one(request, views.launches)

    def r_memcpy(self, request: Request) -> Response:
        bins = self.params(request).integer("bins", 200, 1, 2000)
        return self.one(request, views.memcpy, bins)

    def r_queue(self, request: Request) -> Response:
        full_at = self.params(request).integer("full_at", 1024, 1, 1 << 20)
        return self.one(request, views.queue, full_at)

    def r_roofline(self, request: Request) -> Response:
        return self.one(request, views.roofline)

    def r_critical_path(self, request: Request) -> Response:
        step = self.params(request).integer("step", None, -(1 << 62), 1 << 62)
        return self.one(request, views.critical_path, step)

    def r_annotations(self, request: Request) -> Response:
        return self.one(request, views.annotations)

    def r_step_outliers(self, request: Request) -> Response:
        p = self.params(request)
        factor_pct = p.integer("factor_pct", 150, 101, 10_000)
        return self.one(request, views.step_outliers, factor_pct / 100)

    def r_range_stats(self, request: Request) -> Response:
        p = self.params(request)
        a = p.integer("start_ns", None, -self._NS_MAX, self._NS_MAX)
        b = p.integer("end_ns", None, -self._NS_MAX, self._NS_MAX)
        if a is None or b is None:
            raise ApiError(400, "start_ns and end_ns are both required")
        if b <= a:
            raise ApiError(400, "end_ns must be greater than start_ns")
        return self.one(request, views.range_stats, a, b)

    def r_module(self, request: Request) -> Response:
        return self.one(request, views.module)

    def r_tree(self, request: Request) -> Response:
        p = self.params(request)
        step = p.integer("step", None, -(1 << 62), 1 << 62)
        return self.one(request, views.tree, step)

    def r_trace(self, request: Request) -> Response:
        from tb_profiler.plugin.timeline import on_the_wire, window

        p = self.params(request)
        a, b = self._window(p)
        width = p.integer("width", 1500, 100, 10000)
        max_events = p.integer("max_events", 20000, 100, 100000)
        max_flows = p.integer("max_flows", 2000, 0, 20000)
        return self.one(request, lambda t: on_the_wire(window(t, a, b, width, max_events, max_flows)))

    def r_trace_event(self, request: Request) -> Response:
        from tb_profiler.plugin.timeline import event_detail

        p = self.params(request)
        i = p.integer("i", None, 0, 1 << 40)
        if i is None:
            raise ApiError(400, "missing query parameter 'i'")

        def detail(trace):
            if i >= len(trace.events):
                raise views.NotFound(f"no event {i}: the trace has {len(trace.events)} events")
            return event_detail(trace, i)

        return self.one(request, detail)

    SEARCH_MAX_Q = 200

    def r_trace_search(self, request: Request) -> Response:
        """Find events by name on the server, so the browser finds matches outside the
        window it holds; q is plain text, bounded (200 chars) and printable."""
        from tb_profiler.plugin.timeline import search

        p = self.params(request)
        q = p.text("q", required=True, max_len=self.SEARCH_MAX_Q)
        if not q.strip():
            raise ApiError(400, "query parameter 'q' must not be empty")
        if any(ord(c) < 32 for c in q):
            raise ApiError(400, "query parameter 'q' holds a control character")
        limit = p.integer("limit", 500, 1, 5000)
        offset = p.integer("offset", 0, 0, 1 << 40)
        return self.one(request, search, q, limit, offset)

    def r_trace_raw(self, request: Request) -> Response:
        entry = self._entry(self.params(request), failed_ok=True)
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

    # -- distributed ---------------------------------------------------------------------------
    def _span_files(self, p: Params, prefix: str = "") -> list[FileEntry]:
        """Every worker's file of one span (default: each worker's latest), those that could
        not be read too: the run-level routes name them (info.excluded, a diff's notes)
        instead of hiding them."""
        run = p.text(prefix + "run", required=True)
        entries = self._run_entries(run)
        span = p.integer(prefix + "span", None, 1, 1_000_000)
        by_worker: dict[str, list[FileEntry]] = {}
        for e in entries:  # one pass: a run of 4,096 ranks is grouped in linear time
            by_worker.setdefault(e.worker, []).append(e)
        out = []
        for worker in sorted(by_worker, key=natural_key):
            mine = by_worker[worker]
            pick = max(mine, key=lambda e: e.index) if span is None else next(
                (e for e in mine if e.index == span), None)
            if pick is not None:
                out.append(pick)
        if not out or all(e.state == FAILED for e in out):
            raise ApiError(404, f"run {run[:200]!r} has no readable trace" +
                           (f" for span {span}" if span is not None else ""))
        return out

    def _dist(self, request: Request, fn: Callable[[views.RunSummaries], Any]) -> Response:
        """fn(the span's RunSummaries): the cross-rank analysis is computed once and shared."""
        entries = self._span_files(self.params(request))

        def body(run: views.RunSummaries) -> Any:
            if len(entries) < 2:
                only = run.summaries[0]
                if isinstance(only, views.SummaryMissing):
                    raise views.NotFound(only.reason)
                info = only.distributed_info
                if not (isinstance(info, dict) and (info.get("world_size") or 1) > 1):
                    raise views.NotFound("this run has a single worker and no distributed information")
            return fn(run)

        return self.compute_run(request, entries, body)

    def r_dist_gpuinfo(self, request: Request) -> Response:
        return self._dist(request, views.dist_gpuinfo)

    def r_dist_overlap(self, request: Request) -> Response:
        return self._dist(request, views.dist_overlap)

    def r_dist_wait(self, request: Request) -> Response:
        return self._dist(request, views.dist_wait)

    def r_dist_commops(self, request: Request) -> Response:
        return self._dist(request, views.dist_commops)

    def r_dist_ranks(self, request: Request) -> Response:
        return self._dist(request, lambda run: views.dist_ranks(run, MAX_MATRIX_CELLS))

    def r_dist_stragglers(self, request: Request) -> Response:
        return self._dist(request, views.dist_stragglers)

    def r_dist_instances(self, request: Request) -> Response:
        p = self.params(request)
        sort = p.choice("sort", tuple(views.INSTANCE_SORTS), "skew")
        limit = p.integer("limit", 200, 1, 5000)
        offset = p.integer("offset", 0, 0, 1 << 40)
        return self._dist(request, lambda run: views.dist_instances(run, sort, limit, offset))

    def r_dist_matrix(self, request: Request) -> Response:
        return self._dist(request, views.dist_matrix)

    def _named_workers(self, p: Params, entries: list[FileEntry]) -> list[str] | None:
        """trace/ranks' ``workers``: up to MAX_RANKS_SHOWN distinct names of the span, or None."""
        raw = p.text("workers", max_len=MAX_TEXT)
        if raw is None or raw == "":
            return None
        names = [w.strip() for w in raw.split(",")]
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

    def r_trace_ranks(self, request: Request) -> Response:
        """Several ranks' timelines in one window, on one clock: the summaries give each
        rank's clock correction (and, by default, the slowest ranks); only the ranks shown
        are loaded (through the LRU)."""
        from tb_profiler.plugin.timeline import on_the_wire

        p = self.params(request)
        entries = self._span_files(p)
        named = self._named_workers(p, entries)
        a, b = self._window(p)
        width = p.integer("width", 1500, 100, 10000)
        max_events = p.integer("max_events", 20000, 100, 100000)
        max_flows = p.integer("max_flows", 2000, 0, 20000)
        run = self._run_summaries(entries)
        clock, slowest = self._pooled(("trace/ranks clock", *(e.key for e in entries)),
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
        return self.compute(request, chosen, lambda traces: on_the_wire(views.trace_ranks(
            traces, workers, clock, a, b, width, max_events, max_flows)), key_extra=(tuple(workers), span_files))

    # -- diff ------------------------------------------------------------------------------------
    def _diff_sides(self, request: Request) -> tuple[list[FileEntry], list[FileEntry]]:
        p = self.params(request)
        return self._side(p, ""), self._side(p, "exp_")

    def _diff(self, request: Request, fn: Callable[[list, list], Any]) -> Response:
        """fn(side A, side B): one trace against one from their traces; a side of several
        workers from their summaries, never from all their events in memory."""
        a, b = self._diff_sides(request)
        n = len(a)
        if n == 1 and len(b) == 1:
            return self.compute(request, a + b, lambda traces: fn(traces[:n], traces[n:]))

        def body(run: views.RunSummaries) -> Any:
            sides = [[s for s in side if not isinstance(s, BaseException)]
                     for side in (run.summaries[:n], run.summaries[n:])]
            if not all(sides):
                raise views.NotFound("diff: a side has no readable trace: " + "; ".join(map(str, run.missing)))
            out = fn(*sides)
            if isinstance(out.get("notes"), list):  # the workers left out are named, never hidden
                out["notes"] = [f"left out, not summarized: {s}" for s in run.missing] + out["notes"]
            return out

        return self.compute_run(request, a + b, body)

    def r_diff(self, request: Request) -> Response:
        return self._diff(request, views.diff)

    def r_diffnode(self, request: Request) -> Response:
        path = self.params(request).text("path") or ""
        return self._diff(request, lambda a, b: views.diffnode(a, b, path))

    # -- static ----------------------------------------------------------------------------------
    def r_static(self, request: Request, route: str) -> Response:
        if route in ("", "index.html") and self.standalone:
            return self.text(static.standalone_page(static.bundle_built()), "text/html",
                             status=200 if static.bundle_built() else 503)
        if route == static.STANDALONE_ENTRY:
            return self.text(static.standalone_entry_module(), "text/javascript")
        path = static.resolve(route)
        if path is None:
            if route == static.ENTRY:
                return self.text(static.not_built_module(), "text/javascript")
            raise ApiError(404, f"no route or file {route[:200]!r}")
        ctype = static.content_type(path)
        if ctype.startswith("text/") or ctype in ("application/json", "image/svg+xml"):
            ctype += "; charset=utf-8"
        # The bundle's names carry no hash (index.js, index.css): the browser revalidates
        # every file, so a reinstalled bundle never runs with a stale stylesheet or chunk.
        headers = {"Cache-Control": "no-cache", "ETag": static.etag(path)}
        if request.if_none_match.contains(headers["ETag"].strip('"')):
            return Response(status=304, headers=headers)
        with open(path, "rb") as f:
            data = f.read()
        return Response(data, content_type=ctype, headers=headers)

