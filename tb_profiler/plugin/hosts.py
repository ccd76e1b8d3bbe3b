"""The Host and Origin policy of the HTTP server: which Host headers it answers (DNS
rebinding) and which Origin headers are its own pages'.

Why a module of its own: the policy is about names and addresses (this machine's, the
bind address, an allow-list of a proxy's), not about any route; the WSGI layer (wsgi.py)
asks it before a route runs, and ``serve`` / TensorBoard's plugin build it from their
bind address and --allow-host.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable

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


__all__ = ["ALLOW_HOSTS_ENV", "LOOPBACK_NAMES", "WILDCARD_BINDS", "HostPolicy", "host_name"]
