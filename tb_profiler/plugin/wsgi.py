"""The HTTP machinery under every route: the WSGI entry (Host and cross-site checks, the
route lookup, the query's declared names), JSON / error / text responses with the
security headers, the frontend's static files, and the cache of encoded answers.

Why a module of its own: none of it knows what a route computes.  ``WsgiApp`` is the base
of ``app.ProfilerApp``, which supplies ``routes`` (route -> handler), ``route_params``
(route -> the query names it reads), ``standalone`` and ``hosts`` (hosts.HostPolicy).
Any problem becomes ``{"error": ...}`` with its status (500 for a bug, logged), never a
traceback, and every response carries the Content-Security-Policy.
"""
from __future__ import annotations

import gzip
import json
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from tb_profiler.plugin import ROUTE_PREFIX, static
from tb_profiler.plugin.hosts import HostPolicy
from tb_profiler.plugin.params import DECLARED, ApiError, Params, unknown_params

logger = logging.getLogger("tb_profiler.plugin")

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; "
       "base-uri 'self'; form-action 'self'")
SECURITY_HEADERS = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "same-origin"))


class Loading(Exception):
    """The traces a request needs are not in memory yet (HTTP 202)."""

    def __init__(self, body: dict):
        super().__init__("loading")
        self.body = body


def encode(data: Any) -> bytes:
    """A route's answer as sent: compact JSON, UTF-8, no NaN or Infinity."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode("utf-8")


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


# -- the WSGI app ----------------------------------------------------------------------------
class WsgiApp:
    """WSGI app for the routes under ROUTE_PREFIX (and, standalone, ``/``); the subclass
    sets ``routes``, ``route_params``, ``standalone`` and ``hosts``."""

    routes: dict[str, Callable[[Request], Response]]
    route_params: dict[str, frozenset[str]]
    standalone: bool
    hosts: HostPolicy

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
            declared = self.route_params[route]
            unknown = unknown_params(request.args, declared)
            if unknown is not None:
                raise ApiError(400, unknown)
            request.environ[DECLARED] = declared
            return handler(request)
        return self.r_static(request, route)  # files: the query is not read (nor cached)

    @staticmethod
    def params(request: Request) -> Params:
        """The request's query, readable by the names its route declared (ROUTE_PARAMS)."""
        return Params(request.args, request.environ.get(DECLARED, frozenset()))

    # -- responses ---------------------------------------------------------------------------
    def json(self, data: Any, status: int = 200, request: Request | None = None) -> Response:
        return self.body(encode(data), status=status, request=request)

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


__all__ = ["CSP", "ENTRY_OVERHEAD", "SECURITY_HEADERS", "Loading", "ResponseCache", "WsgiApp", "encode"]
