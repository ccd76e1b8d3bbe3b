"""Issue 18's small web items: the IPv4-mapped loopback Host, cross-site requests refused
(Sec-Fetch-Site, Origin), HTTP/0.9 answered with headers, and trace/raw never a torn file.

Uses test_http_hardening's app and server fixtures (a one-trace logdir)."""
from __future__ import annotations

import gzip
import os
import threading
import time

import pytest
from datafiles import TENSORLIST_OPS
from test_http_hardening import P, RUN, app, assert_secure, get, logdir, raw_http, server, wait_ok  # noqa: F401
from werkzeug.test import Client

from tb_profiler.plugin.app import ROUTE_PARAMS, HostPolicy, ProfilerApp
from tb_profiler.plugin.raw import FileChanging, stable_chunks
from tb_profiler.plugin.state import ProfilerState


def _get(app, url, **headers):
    env = {"HTTP_HOST": "127.0.0.1:6006", **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}}
    return Client(app).get(url, environ_overrides=env)


def test_ipv4_mapped_loopback_is_a_loopback_host(app):
    policy = HostPolicy("127.0.0.1", env=False)
    assert policy.allows("[::ffff:127.0.0.1]") and policy.allows("[::ffff:127.0.0.1]:6006")
    assert policy.allows("[::FFFF:7f00:1]")  # the same address written in hex
    assert not policy.allows("[::ffff:10.0.0.1]") and not policy.allows("[::ffff:8.8.8.8]:6006")
    assert wait_ok(app, P + "runs", "[::ffff:127.0.0.1]:6006").status_code == 200


# a route per declared route (the query does not matter: the refusal comes first), the
# bundle, and the page
ROUTES = [P + r for r in sorted(ROUTE_PARAMS)] + [P + "index.js", "/", "/index.html"]


@pytest.mark.parametrize("url", ROUTES)
def test_cross_site_requests_are_refused_everywhere(app, url):
    """Another site's page can make the browser GET any of these (an img, a form, a
    prefetch); each would cost the server a load or an analysis. Refused: 403, with the
    security headers, before any work."""
    for headers in ({"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"},
                    {"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", "origin": "https://evil.example"},
                    {"origin": "https://evil.example"}, {"origin": "null"},
                    {"origin": "http://127.0.0.1:3000"}):  # a page on another port of this machine
        r = _get(app, url, **headers)
        assert r.status_code == 403, (url, headers, r.status_code)
        assert "another site" in r.get_json()["error"]
        assert_secure(r.headers)


def test_the_app_itself_is_answered(app):
    """Its own requests (same-origin, under TensorBoard and in VS Code's frame too), a
    request without the headers (curl, scripts), and a navigation to the page from a link
    on another site."""
    ok = {"sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "origin": "http://127.0.0.1:6006"}
    assert wait_ok(app, P + "runs", "127.0.0.1:6006").status_code == 200
    assert _get(app, P + "runs", **ok).status_code == 200
    assert _get(app, P + "runs").status_code == 200
    assert _get(app, P + "runs", **{"sec-fetch-site": "none", "sec-fetch-mode": "navigate"}).status_code == 200
    link = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}
    assert _get(app, "/", **link).status_code == 200
    framed = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"}
    assert _get(app, "/", **framed).status_code == 200  # VS Code's webview frames the page
    assert _get(app, P + "runs", **link).status_code == 403  # the data itself is not a page


def test_a_proxy_origin_given_to_answer_to(logdir, tmp_path):
    state = ProfilerState(str(logdir), reload_s=60, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True, hosts=HostPolicy("127.0.0.1", ["profiler.example.org"], env=False))
    try:
        r = _get(app, P + "status", origin="https://profiler.example.org")
        assert r.status_code == 200
        assert _get(app, P + "status", origin="https://other.example.org").status_code == 403
    finally:
        app.close()


def test_http_0_9_is_answered_with_headers(server):
    """An HTTP/0.9 answer is a bare body: no status line, no security header. The server
    answers 505 as HTTP/1.x instead."""
    for request in (b"GET /\n\n", b"GET " + P.encode() + b"runs\r\n\r\n"):
        status, headers, body = raw_http(server, request)
        assert status == 505 and b"HTTP/0.9" in body
        assert_secure(headers)


def test_stable_chunks_refuse_a_file_being_written(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 3000)
    with pytest.raises(FileChanging, match="modified less than"):
        list(stable_chunks(str(path)))
    old = time.time() - 60
    os.utime(path, (old, old))
    assert b"".join(stable_chunks(str(path), block=1000)) == b"x" * 3000
    blocks = stable_chunks(str(path), block=1000)
    assert next(blocks) == b"x" * 1000
    with open(path, "ab") as f:  # written while it is being sent
        f.write(b"y")
    with pytest.raises(FileChanging, match="cut short"):
        list(blocks)


def test_trace_raw_is_never_torn(tmp_path):
    """A trace rewritten in place, again and again, while it is downloaded: each answer is
    a 409 ("being written"), a download cut short, or exactly one whole version."""
    log = tmp_path / "log"
    (log / RUN).mkdir(parents=True)
    target = log / RUN / "w0.pt.trace.json"
    versions = [gzip.decompress(TENSORLIST_OPS.read_bytes()).replace(b'"aten::', b'"aten%d::' % i) for i in range(3)]
    target.write_bytes(versions[0])
    state = ProfilerState(str(log), reload_s=60, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True)
    state.start()
    stop = threading.Event()

    def rewrite():  # in place (truncate, then the text in pieces), as a naive exporter does
        i = 0
        while not stop.is_set():
            data = versions[i % 3]
            with open(target, "r+b") as f:
                f.truncate(0)
                for k in range(0, len(data), 4096):
                    f.write(data[k:k + 4096])
                    f.flush()
                    time.sleep(0.0005)
            i += 1

    outcomes = {"409": 0, "cut": 0, "whole": 0}
    try:
        assert state.wait_scanned(30)
        writer = threading.Thread(target=rewrite, daemon=True)
        writer.start()
        for _ in range(30):
            r = Client(app).get(P + f"trace/raw?run={RUN}&worker=w0", environ_overrides={"HTTP_HOST": "localhost"})
            if r.status_code == 409:
                assert "being written" in r.get_json()["error"]
                outcomes["409"] += 1
                continue
            assert r.status_code in (200, 202), (r.status_code, r.get_data()[:300])
            if r.status_code == 202:
                continue
            try:
                body = gzip.decompress(r.get_data())
            except FileChanging:
                outcomes["cut"] += 1
                continue
            assert body in versions, "a torn file was served"
            outcomes["whole"] += 1
    finally:
        stop.set()
        state.stop()
        app.close()
    assert outcomes["409"] + outcomes["cut"] > 0, outcomes  # the rewrite was seen
    # once it stops, the file settles and is served whole



def test_trace_raw_of_a_file_caught_empty_while_rewritten_says_it_is_being_written(tmp_path, monkeypatch):
    """The loader read the file at the instant a rewrite had truncated it ("empty file": the
    entry failed).  While the file is still being written, trace/raw answers 409, not the
    stale reason of that failed read (a fresh-clone CI run saw a 404 "empty file"); once
    it has settled, the 404 with the reason.  The server loads a one-worker run as soon as
    it is found, so its loads wait until the test has truncated the file (else on a busy
    machine the loader may read the whole file first, and there is no failed read)."""
    import threading

    import tb_profiler.api as api_pkg  # the plugin loads through tb_profiler.api.load

    truncated, real_load = threading.Event(), api_pkg.load

    def load_after_the_truncation(*args, **kw):
        truncated.wait(60)
        return real_load(*args, **kw)

    monkeypatch.setattr(api_pkg, "load", load_after_the_truncation)
    (tmp_path / "log" / RUN).mkdir(parents=True)
    target = tmp_path / "log" / RUN / "w0.pt.trace.json"
    target.write_bytes(gzip.decompress(TENSORLIST_OPS.read_bytes()))
    state = ProfilerState(str(tmp_path / "log"), reload_s=3600, cache=False)
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        assert state.wait_scanned(30)
        target.write_bytes(b"")  # found whole, then truncated by a rewrite before its first load
        truncated.set()
        url = P + f"trace/raw?run={RUN}&worker=w0"
        deadline = time.monotonic() + 60
        while True:
            overview = Client(app).get(P + f"overview?run={RUN}&worker=w0", environ_overrides={"HTTP_HOST": "localhost"})
            if overview.status_code != 202 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert overview.status_code == 404 and "empty file" in overview.get_json()["error"], overview.get_data()[:300]
        os.utime(target)  # written again just now
        r = Client(app).get(url, environ_overrides={"HTTP_HOST": "localhost"})
        assert r.status_code == 409 and "being written" in r.get_json()["error"], r.get_data()[:300]
        past = time.time() - 60
        os.utime(target, (past, past))
        r = Client(app).get(url, environ_overrides={"HTTP_HOST": "localhost"})
        assert r.status_code == 404 and "empty file" in r.get_json()["error"], r.get_data()[:300]
    finally:
        state.stop()
        app.close()