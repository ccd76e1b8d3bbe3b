"""Web security of the plugin's HTTP app (issue 11): the Host header is checked (DNS
rebinding), unknown query parameters are refused and the response cache counts its keys,
numbers are ASCII digits only, and the replies werkzeug / http.server make themselves
(414, 431, 400) carry the same security headers as the app's."""
from __future__ import annotations

import argparse
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from datafiles import TENSORLIST_OPS
from werkzeug.test import Client

from tb_profiler.plugin import app as app_mod
from tb_profiler.plugin import hosts as hosts_mod
from tb_profiler.plugin.app import ROUTE_PARAMS, HostPolicy, Params, ProfilerApp, ResponseCache, host_name
from tb_profiler.plugin.state import ProfilerState

P = "/data/plugin/pytorch_profiler/"
RUN = "run1"


def assert_secure(headers) -> None:
    assert "default-src 'self'" in headers.get("Content-Security-Policy", ""), dict(headers)
    assert headers.get("X-Content-Type-Options") == "nosniff", dict(headers)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hardening") / "log"
    (d / RUN).mkdir(parents=True)
    shutil.copy2(TENSORLIST_OPS, d / RUN / "w0.pt.trace.json.gz")  # its old mtime: trace/raw serves it at once
    return d


@pytest.fixture(scope="module")
def app(logdir, tmp_path_factory):
    state = ProfilerState(str(logdir), reload_s=60, cache_dir=str(tmp_path_factory.mktemp("cache")))
    app = ProfilerApp(state, standalone=True)
    state.start()
    assert state.wait_scanned(30)
    yield app
    state.stop()
    app.close()


def get(app, url, host="localhost"):
    """GET with this Host header (None: none at all)."""
    from werkzeug.test import EnvironBuilder, run_wsgi_app
    from werkzeug.wrappers import Response

    if host is not None:
        return Client(app).get(url, environ_overrides={"HTTP_HOST": host})
    path, _, query = url.partition("?")
    env = EnvironBuilder(path=path, query_string=query).get_environ()
    env.pop("HTTP_HOST", None)
    body, status, headers = run_wsgi_app(app, env, buffered=True)
    return Response(b"".join(body), status=status, headers=headers)


def wait_ok(app, url, host="localhost", limit_s=60):
    deadline = time.monotonic() + limit_s
    while True:
        r = get(app, url, host)
        if r.status_code != 202 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


# -- 1. Host header -------------------------------------------------------------------------
FOREIGN = ["evil.example", "evil.example:6006", "127.0.0.1.nip.io", "127.0.0.1.nip.io:6006", "",
           "localhost.evil.example", "localhost:6006@evil.example", "localhost:http", "[::1", "::1",
           "localhost:6006:1", "évil.example", "local host", "evil.example\r\nX: y"]
OWN = ["localhost", "localhost:6006", "LOCALHOST:6006", "localhost.", "127.0.0.1", "127.0.0.1:6006",
       "[::1]", "[::1]:6006", "127.0.0.2:80"]


@pytest.mark.parametrize("route", ["runs", "status", f"trace/raw?run={RUN}", f"views?run={RUN}", "index.js"])
def test_foreign_host_is_refused_everywhere(app, route):
    for host in FOREIGN + [None]:
        r = get(app, P + route, host)
        assert r.status_code == 403, (route, host, r.status_code)
        assert_secure(r.headers)
        assert r.headers["Content-Type"].startswith("application/json")
        body = r.get_data()
        assert len(body) < 600 and b"Host" in body and b"\r" not in body and b"<" not in body
        assert r.headers.get("Content-Disposition") is None  # no trace file handed out
    for page in ("/", "/favicon.ico"):
        r = get(app, page, "evil.example")
        assert r.status_code == 403, page
        assert_secure(r.headers)


def test_own_host_names_are_answered(app):
    for host in OWN:
        r = get(app, P + "runs", host)
        assert r.status_code == 200, (host, r.get_data()[:200])
        assert_secure(r.headers)
    r = wait_ok(app, P + f"trace/raw?run={RUN}", "127.0.0.1:6006")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/gzip"


def test_host_names_parse_strictly():
    assert host_name("LocalHost.:80") == "localhost"
    assert host_name("[::1]:6006") == "::1"
    for bad in ("", None, "::1", "[::1", "[nothost]", "a:b", "a:", "a:123456", "a b", "a/b", "a@b", "x" * 400):
        assert host_name(bad) is None, bad


def test_host_policy_by_bound_address(monkeypatch):
    monkeypatch.delenv(app_mod.ALLOW_HOSTS_ENV, raising=False)
    monkeypatch.setattr(hosts_mod, "_machine_names", lambda: {"box", "box.lab.example"})
    loop = HostPolicy("127.0.0.1")
    assert loop.allows("localhost:1") and loop.allows("[::1]:1") and loop.allows("127.0.0.1")
    for host in ("box", "10.0.0.5", "evil.example", "", None):
        assert not loop.allows(host), host
    assert not HostPolicy().allows("box") and HostPolicy("localhost").allows("localhost")
    for wildcard in ("0.0.0.0", "::", "[::]", ""):
        p = HostPolicy(wildcard)
        for host in ("box:6006", "box.lab.example", "10.0.0.5:6006", "[fe80::1]:6006", "localhost"):
            assert p.allows(host), (wildcard, host)
        for host in ("evil.example", "10.0.0.5.nip.io", "box.evil.example", ""):
            assert not p.allows(host), (wildcard, host)
    named = HostPolicy("Profiler.Lab.Example")
    assert named.allows("profiler.lab.example:6006") and named.allows("box") and named.allows("localhost")
    assert not named.allows("10.0.0.5") and not named.allows("evil.example")
    ip = HostPolicy("10.0.0.5")
    assert ip.allows("10.0.0.5:6006") and not ip.allows("10.0.0.6")


def test_allow_list_and_env(monkeypatch):
    monkeypatch.setenv(app_mod.ALLOW_HOSTS_ENV, " from-env.example , *.corp.example ")
    p = HostPolicy("127.0.0.1", ["proxy.example:443", "[2001:db8::1]", "2001:db8::2"])
    for host in ("proxy.example", "proxy.example:8443", "from-env.example", "a.corp.example", "a.b.corp.example:1",
                 "[2001:db8::1]:6006", "[2001:db8::2]"):
        assert p.allows(host), host
    for host in ("corp.example", "acorp.example", "a.corp.example.evil", "evil.example"):
        assert not p.allows(host), host
    assert not HostPolicy("127.0.0.1", env=False).allows("from-env.example")
    assert HostPolicy("127.0.0.1", ["*"]).allows("anything.example")
    for bad in ("a b", "a/b", "*.", "*.1.2.3.4", "x:y"):
        with pytest.raises(ValueError):
            HostPolicy("127.0.0.1", [bad], env=False)


def test_tensorboard_plugin_checks_host(logdir, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.plugins import base_plugin

    from tb_profiler.plugin import tb_plugin

    monkeypatch.delenv(app_mod.ALLOW_HOSTS_ENV, raising=False)
    monkeypatch.setattr(hosts_mod, "_machine_names", lambda: {"box"})

    def flags(**kw):
        base = dict(host=None, bind_all=False, pytorch_profiler_allow_hosts=None, pytorch_profiler_memory_mb=None,
                    reload_interval=0)
        base.update(kw)
        return argparse.Namespace(**base)

    p = tb_plugin.host_policy(flags())  # TensorBoard's default: localhost
    assert p.allows("localhost:6006") and p.allows("127.0.0.1:6006") and not p.allows("box:6006")
    assert not p.allows("") and not p.allows(None) and not p.allows("evil.example")
    assert tb_plugin.host_policy(flags(host="127.0.0.1")).allows("localhost")
    assert tb_plugin.host_policy(flags(bind_all=True)).allows("box:6006")
    assert tb_plugin.host_policy(flags(bind_all=True)).allows("192.168.1.9:6006")
    assert tb_plugin.host_policy(flags(host="0.0.0.0")).allows("box")
    assert tb_plugin.host_policy(flags(host="box.lab")).allows("box.lab:6006")
    assert tb_plugin.host_policy(flags(pytorch_profiler_allow_hosts="tb.proxy,*.k8s")).allows("x.k8s")
    assert not tb_plugin.host_policy(flags(pytorch_profiler_allow_hosts="bad name")).allows("bad name")

    plugin = tb_plugin.ProfilerPlugin(base_plugin.TBContext(logdir=str(logdir), flags=flags(host="127.0.0.1")))
    try:
        wsgi = plugin.get_plugin_apps()["/*"]
        assert get(wsgi, P + "runs", "127.0.0.1:6006").status_code == 200
        for host in ("evil.example:6006", "", None):
            r = get(wsgi, P + "runs", host)
            assert r.status_code == 403, host
            assert_secure(r.headers)
            assert b"--pytorch_profiler_allow_hosts" in r.get_data()
    finally:
        plugin._state.stop()
        plugin._app.close()


# -- 2. unknown parameters, cache keys --------------------------------------------------------
def test_unknown_parameters_are_refused(app):
    for url in ("runs?x=1", f"overview?run={RUN}&_=123", f"trace?run={RUN}&cachebust=1",
                f"distributed/ranks?run={RUN}&worker=All", "status?run=r"):
        r = get(app, P + url)
        assert r.status_code == 400, (url, r.status_code)
        assert_secure(r.headers)
        name = url.rsplit("&", 1)[-1].split("?")[-1].split("=")[0]
        assert repr(name) in json.loads(r.get_data())["error"], url
    huge = "<script>\x07" + "k" * 60_000
    r = get(app, P + f"overview?run={RUN}&" + "&".join(f"{huge}{i}=v" for i in range(8)))
    assert r.status_code == 400
    err = json.loads(r.get_data())["error"]
    assert len(err) < 1000 and "\x07" not in err and "\\x07" in err and "and 3 more" in err
    # the names a route reads still work
    assert wait_ok(app, P + f"overview?run={RUN}&worker=&span=").status_code == 200
    assert wait_ok(app, P + f"operation?run={RUN}&group_by=Operation&top=5").status_code == 200


def test_every_route_declares_what_it_reads(app):
    """A route reading a name it does not declare is a 500 (Params checks): every route's
    full query works; the frontend's names are declared."""
    assert set(ROUTE_PARAMS) == set(app.routes)
    for route, names in ROUTE_PARAMS.items():
        assert all(n.isidentifier() for n in names), route
    with pytest.raises(RuntimeError):
        Params({}, frozenset({"run"})).text("worker")
    sel = f"run={RUN}&worker=&span="
    for url in (f"overview?{sel}", f"operation/table?{sel}&group_by=Operation", f"kernel?{sel}&top=3",
                f"memory?{sel}&device=&start_ns=&end_ns=&memory_metric=KB", f"memory_curve?{sel}&max_points=100",
                f"memory_events?{sel}&limit=5", f"tree?{sel}&step=", f"trace?{sel}&start_ns=&end_ns=&width=500",
                f"trace/event?{sel}&i=0", f"trace/search?{sel}&q=aten&limit=5&offset=0", f"idle?{sel}&kernel_wait_ns=5",
                f"memcpy?{sel}&bins=10", f"queue?{sel}&full_at=10", f"steps/outliers?{sel}&factor_pct=150",
                f"critical_path?{sel}&step=", f"diff?{sel}&exp_run={RUN}&exp_worker=&exp_span=",
                f"diffnode?{sel}&exp_run={RUN}&exp_worker=&exp_span=&path=", f"workers?run={RUN}&view=Overview",
                f"spans?run={RUN}&worker="):
        r = wait_ok(app, P + url)
        assert r.status_code in (200, 404), (url, r.status_code, r.get_data()[:300])


def test_cache_counts_its_keys():
    cap = 1 << 20
    cache = ResponseCache(cap)
    for i in range(200):
        cache.put(("overview", (("x", f"{i}" + "k" * 60_000),), (), ()), b"{}")
    assert len(cache._items) <= cap // 60_000
    assert cache.bytes <= cap
    cache.put(("big", "k" * (cap // 4)), b"{}")  # an entry over a quarter of the cap is not kept
    assert cache.get(("big", "k" * (cap // 4))) is None
    small = ResponseCache(cap)
    for i in range(100):
        small.put(("r", i), b"x" * 100)
    assert len(small._items) == 100 and small.get(("r", 5)) == b"x" * 100


# -- 3. numbers -------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["١", "１", "𝟏", " 1", "1 ", "1\n", "\t1", "+1", "1_0", "0x1", "1.0", "٣٢"])
def test_numbers_are_ascii_digits_only(app, raw):
    from werkzeug.datastructures import MultiDict

    with pytest.raises(app_mod.ApiError):
        Params(MultiDict([("n", raw)])).integer("n", None, -10, 100)
    from urllib.parse import quote

    r = get(app, P + f"overview?run={RUN}&span={quote(raw)}")
    assert r.status_code == 400, (raw, r.status_code)
    assert "decimal integer" in json.loads(r.get_data())["error"]


def test_plain_numbers_still_parse():
    from werkzeug.datastructures import MultiDict

    p = Params(MultiDict([("a", "1"), ("b", "-42"), ("c", "0012")]))
    assert (p.integer("a", None, 0, 9), p.integer("b", None, -99, 0), p.integer("c", None, 0, 99)) == (1, -42, 12)


# -- 4. the server's own replies ---------------------------------------------------------------
@pytest.fixture(scope="module")
def server(logdir, tmp_path_factory):
    from tb_profiler.plugin.serve import make_server

    srv, app = make_server(str(logdir), "127.0.0.1", 0, allow_hosts=["proxy.example"], reload_s=60,
                           cache_dir=str(tmp_path_factory.mktemp("cache")))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()
    app.state.stop()
    app.close()


def raw_http(port: int, data: bytes) -> tuple[int, dict, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
            if b"\r\n\r\n" in b"".join(chunks):
                head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                if length and len(rest) >= length[0]:
                    break
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip()] = v.strip()
    return status, headers, body


def test_server_errors_carry_security_headers(server):
    cases = {
        414: b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
        431: b"GET / HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(150)) + b"\r\n",
        400: b"GET / HTTP/9.9 junk\r\nHost: localhost\r\n\r\n",
        505: b"GET / HTTP/2.0\r\nHost: localhost\r\n\r\n",
        -400: b"GARBAGE\r\n\r\n",
    }
    for expect, data in cases.items():
        status, headers, body = raw_http(server, data)
        assert status == abs(expect), (expect, status, body[:200])
        assert_secure(headers)
        assert headers.get("Content-Type") == "application/json" and "error" in json.loads(body)


def test_served_host_check_over_http(server):
    for host, expect in ((f"127.0.0.1:{server}", 200), (f"localhost:{server}", 200), ("proxy.example", 200),
                         ("evil.example", 403), (f"127.0.0.1.nip.io:{server}", 403), ("", 403)):
        status, headers, body = raw_http(server, b"GET " + P.encode() + b"runs HTTP/1.1\r\nHost: " + host.encode() +
                                         b"\r\nConnection: close\r\n\r\n")
        assert status == expect, (host, status, body[:200])
        assert_secure(headers)
    status, headers, _ = raw_http(server, b"GET " + P.encode() + b"runs HTTP/1.0\r\n\r\n")  # no Host at all
    assert status == 403
    assert_secure(headers)


def test_werkzeug_500_carries_security_headers():
    """An app failing before it answers gets werkzeug's own 500 page: with the headers too."""
    from werkzeug.serving import make_server as werkzeug_server

    from tb_profiler.plugin.serve import _handler_class

    def broken(environ, start_response):
        raise RuntimeError("boom")

    srv = werkzeug_server("127.0.0.1", 0, broken, threaded=True, request_handler=_handler_class())
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        status, headers, _ = raw_http(srv.server_port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert status == 500
        assert_secure(headers)
    finally:
        srv.shutdown()
        srv.server_close()


def test_real_tensorboard_checks_host(logdir, tmp_path):
    """TensorBoard's own server, its flags (--host, the plugin's --pytorch_profiler_allow_hosts)
    reaching the plugin through its context."""
    import subprocess
    import sys
    from importlib.metadata import entry_points

    pytest.importorskip("tensorboard")
    if not any(e.name == "pytorch_profiler" for e in entry_points(group="tensorboard_plugins")):
        pytest.skip("the pytorch_profiler TensorBoard plugin is not registered (pip install -e .)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "tb.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
                             "--host", "127.0.0.1", "--pytorch_profiler_allow_hosts", "proxy.example"],
                            stdout=log, stderr=subprocess.STDOUT)

    def ask(host):
        return raw_http(port, b"GET " + P.encode() + b"runs HTTP/1.1\r\nHost: " + host.encode() +
                        b"\r\nConnection: close\r\n\r\n")

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                status, _, _ = ask(f"127.0.0.1:{port}")
                if status == 200:
                    break
            except (OSError, IndexError, ValueError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "tb.log").read_text()[-2000:]
            time.sleep(0.3)
        for host, expect in ((f"localhost:{port}", 200), ("proxy.example:443", 200), ("evil.example", 403),
                             (f"127.0.0.1.nip.io:{port}", 403), ("", 403)):
            status, headers, body = ask(host)
            assert status == expect, (host, status, body[:200])
            if expect == 403:
                assert_secure(headers)
                assert b"pytorch_profiler_allow_hosts" in body
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
