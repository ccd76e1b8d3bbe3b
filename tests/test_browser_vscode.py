"""Jump to source inside VS Code, end to end in a real browser (fixtures: browser_support.py).

VS Code's TensorBoard integration frames TensorBoard in a webview page and forwards a
``message`` event from it only if ``event.origin`` is a prefix of the TensorBoard URL and
``data.filename`` and ``data.line`` are truthy (frontend/src/util/vscode.ts). Here a
stand-in webview page at an https origin of the browser-based VS Code pattern
(``https://tbtest.vscode-cdn.net``, fulfilled by Playwright: no request leaves the
machine) frames the real `tb-profiler serve` page (one hop) or the real TensorBoard (two
hops: webview -> TensorBoard -> plugin iframe) and records every message it receives.
Clicking a frame in the Operator view must post exactly {filename: the absolute path of
an existing file, line: the 0-based line}, from the server's origin; outside VS Code
nothing is posted and the frame is text with a copy button.

The cnn sample's frames are recorded relative to sys.path (``cnn.py(51): forward``) and
its run is copied away from the samples folder, so they only resolve through the source
roots the writer recorded in the trace: this checks the writer and the server too.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from browser_support import API, CHROMIUM, PageWatch, free_port, get_json, hash_state, start_server

from tb_profiler.writer import SOURCE_ROOTS_KEY

WEBVIEW = "https://tbtest.vscode-cdn.net"        # matches vscode.ts's browser VS Code pattern
NOT_VSCODE = "https://tbtest-not-vscode.invalid"  # any other https parent
ROUTED = {urlparse(WEBVIEW).hostname, urlparse(NOT_VSCODE).hostname}
LINE_ONE = 2147483647                              # vscode.ts: what line 1 is sent as
RUN = "cnn_dataloader_0workers"
CNN_LOC = re.compile(r"^cnn\.py:(\d+)$")

PARENT_PAGE = """<!doctype html><meta charset="utf-8"><title>webview stand-in</title>
<script>
window.__received = [];
window.addEventListener("message", (e) => window.__received.push({origin: e.origin, data: e.data}));
</script>
<iframe id="tb" src="%s" style="width:1360px;height:860px;border:0"></iframe>"""


def _host_parent(watch: PageWatch, origin: str, framed_url: str) -> None:
    """Serve a parent page at ``origin`` (intercepted, never fetched) that frames
    ``framed_url`` and records the messages it gets, and open it."""
    body = PARENT_PAGE % json.dumps(framed_url)[1:-1]
    # Mixed content is no obstacle (127.0.0.1 is potentially trustworthy), but Chromium's
    # Local Network Access checks block a public https page from framing a loopback
    # server (net::ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS) until the user allows it,
    # as someone using browser-based VS Code with a local TensorBoard would.
    watch.context.grant_permissions(["local-network-access"], origin=origin)
    watch.context.route(f"{origin}/**", lambda route: route.fulfill(status=200, content_type="text/html", body=body))
    watch.page.goto(f"{origin}/webview.html", wait_until="load", timeout=60_000)


def _app_frame(page, base: str, limit_ms: int = 60_000):
    """The frame showing our app (served from ``base``; inside TensorBoard the innermost
    frame from ``base``, not TensorBoard's page), once its header is drawn."""
    def ours(frame) -> bool:
        return frame.url.startswith(base) and not any(c.url.startswith(base) for c in frame.child_frames)

    for _ in range(limit_ms // 300):
        for frame in filter(ours, page.frames):
            try:
                if "PyTorch Profiler" in frame.inner_text("body", timeout=500):
                    return frame
            except Exception:  # noqa: BLE001 - still navigating
                pass
        page.wait_for_timeout(300)
    raise TimeoutError(f"no frame from {base} rendered the app; frames: {[f.url for f in page.frames]}")


def _received(page, count: int) -> list[dict]:
    page.wait_for_function(f"window.__received.length >= {count}", timeout=10_000)
    return page.evaluate("window.__received")


def _left_localhost(watch: PageWatch) -> list[str]:
    return [u for u in watch.outside if urlparse(u).hostname not in ROUTED]


def _cnn_path(base: str) -> str:
    """The absolute path the API gives the cnn sample's frames (all share one file)."""
    _, doc = get_json(f"{base}/{API}/operation/table?run={RUN}&group_by=OperationAndStack")
    paths = {f.get("path") for r in doc["rows"] for f in r["frames"] if f["file"] == "cnn.py"}
    assert len(paths) == 1, paths
    path = paths.pop()
    assert path and os.path.isabs(path) and os.path.isfile(path) and path.endswith(os.sep + "cnn.py"), path
    return path


@pytest.fixture(scope="module")
def recorded(logdir) -> None:
    """The sample run must carry the writer's source roots (a logdir written by an older
    writer, reused through TB_PROFILER_SAMPLE_LOGDIR, has none: write it again)."""
    for f in (logdir / RUN).glob("*.pt.trace.json"):
        assert SOURCE_ROOTS_KEY in json.loads(f.read_text()), f"{f}: no {SOURCE_ROOTS_KEY}"


def _cnn_stack(frame, watch: PageWatch, tag: str):
    """The first call-stack cell holding a cnn.py frame (a ``button`` link in VS Code, a
    ``span`` elsewhere), once the table has drawn it. A slow CI machine may take a while
    (the first stack table of a run is computed then); if it never comes, the failure
    says what the page showed instead, with a screenshot."""
    details = frame.locator("details.frames-cell", has=frame.locator(f"{tag}.frame-loc", has_text=CNN_LOC)).first
    try:
        details.wait_for(state="attached", timeout=90_000)
    except Exception as exc:  # noqa: BLE001 - re-raised with the page's state
        shot = watch.shot("vscode-no-stack-row")
        raise AssertionError(f"no call stack with a cnn.py {tag} after 90 s ({exc}); errors {watch.errors}; "
                             f"screenshot {shot}; page: {frame.inner_text('body')[:1500]!r}") from None
    return details


def _open_stack_row(frame, watch: PageWatch) -> tuple:
    """Group by call stack: unfold a stack holding a cnn.py frame; (its button, line)."""
    details = _cnn_stack(frame, watch, "button")
    details.locator("summary").click()
    target = details.locator("button.frame-loc", has_text=CNN_LOC).first
    return target, int(CNN_LOC.match(target.inner_text().strip())[1])


def test_csp_lets_vscode_frame_the_pages(serve_url, tensorboard_url):
    """No frame-ancestors / X-Frame-Options forbid a webview from framing either page,
    while scripts stay 'self' only."""
    import urllib.request

    for url in (f"{serve_url}/", f"{tensorboard_url}/", f"{tensorboard_url}/data/plugin_entry.html?name=pytorch_profiler"):
        with urllib.request.urlopen(url, timeout=10) as r:
            csp, xfo = r.headers.get("Content-Security-Policy") or "", r.headers.get("X-Frame-Options")
        assert xfo is None, (url, xfo)
        ancestors = re.search(r"frame-ancestors([^;]*)", csp)
        assert ancestors is None or "*" in ancestors[1].split() or (
            "vscode-webview:" in ancestors[1] and "https://*.vscode-cdn.net" in ancestors[1]), (url, csp)
    with urllib.request.urlopen(f"{serve_url}/", timeout=10) as r:
        csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "default-src 'self';" in csp


def test_serve_in_vscode_posts_the_absolute_path(serve_url, watch, recorded):
    """One hop: the webview page frames `tb-profiler serve`; group by call stack."""
    path = _cnn_path(serve_url)
    _host_parent(watch, WEBVIEW, f"{serve_url}/{hash_state(view='Operator', run=RUN, group='OperationAndStack')}")
    frame = _app_frame(watch.page, serve_url)
    button, line = _open_stack_row(frame, watch)
    assert button.get_attribute("title") == f"Open {path}:{line} in VS Code"
    button.click()
    assert _received(watch.page, 1) == [{"origin": serve_url, "data": {"filename": path, "line": line - 1}}]
    assert frame.locator("button.icon-btn[aria-label^='Copy']").count() == 0  # links, not copy buttons
    watch.shot("vscode-serve-operator-stack")
    assert watch.errors == [], watch.errors
    assert _left_localhost(watch) == [], watch.outside


def test_trace_view_details_post_the_absolute_path(serve_url, watch, recorded):
    """The Trace view's details of a python_function event: its frame is a link posting
    the server-resolved path (trace/event's ``source``), not the recorded relative name."""
    path = _cnn_path(serve_url)
    _, found = get_json(f"{serve_url}/{API}/trace/search?run={RUN}&span=1&q=cnn.py(&limit=1")
    assert found["count"] > 0, found
    i = found["matches"][0]["i"]
    _, detail = get_json(f"{serve_url}/{API}/trace/event?run={RUN}&span=1&i={i}")
    assert detail["source"]["path"] == path and detail["source"]["file"] == "cnn.py", detail.get("source")
    _host_parent(watch, WEBVIEW, f"{serve_url}/{hash_state(view='Trace', run=RUN, span='1', ev=str(i))}")
    frame = _app_frame(watch.page, serve_url)
    button = frame.locator("ol.frames[aria-label='Source'] button.frame-loc")
    button.click()
    line = detail["source"]["line"]
    assert _received(watch.page, 1) == [{"origin": serve_url, "data": {"filename": path, "line": line - 1}}]
    assert watch.errors == [], watch.errors
    assert _left_localhost(watch) == [], watch.outside


@pytest.fixture(scope="module")
def webview_browser(playwright_browser):
    """Chromium as VS Code's webview host treats framed pages: TensorBoard, framed by the
    webview page, may use its localStorage. Chromium blocks third-party storage by
    default ("Failed to read the 'localStorage' property": TensorBoard never draws its
    plugin), Electron's webviews do not. Same launch as browser_support's, plus that."""
    browser = playwright_browser.browser_type.launch(
        executable_path=CHROMIUM, headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-features=TrackingProtection3pcd"])
    yield browser
    browser.close()


@pytest.fixture
def webview_watch(webview_browser):
    w = PageWatch(webview_browser)
    yield w
    w.close()


def test_tensorboard_in_vscode_posts_two_hops_up(tensorboard_url, webview_watch, recorded):
    """Two hops: webview -> TensorBoard -> plugin iframe; expand an operator's stacks."""
    watch = webview_watch
    path = _cnn_path(tensorboard_url)
    tb_hash = ("#pytorch_profiler&p.pytorch_profiler.run=" + RUN + "&p.pytorch_profiler.view=Operator"
               "&p.pytorch_profiler.q=conv2d")
    _host_parent(watch, WEBVIEW, f"{tensorboard_url}/{tb_hash}")
    frame = _app_frame(watch.page, tensorboard_url)
    assert frame.parent_frame is not None and frame.parent_frame.parent_frame is watch.page.main_frame
    frame.get_by_role("button", name="Show call stacks").first.click()
    button = frame.locator("button.frame-loc", has_text=CNN_LOC).first
    line = int(CNN_LOC.match(button.inner_text().strip())[1])
    button.click()
    assert _received(watch.page, 1) == [{"origin": tensorboard_url, "data": {"filename": path, "line": line - 1}}]
    watch.shot("vscode-tensorboard-operator-stacks")
    assert _left_localhost(watch) == [], watch.outside
    assert [e for e in watch.errors if "pytorch_profiler" in e or "plugin" in e.lower()] == [], watch.errors


def _tiny_run(folder: Path) -> Path:
    """A hand-made run whose op sits under a frame on line 1 and one on line 3 of a file
    found only through the recorded root; returns the source file."""
    src = folder / "src" / "tiny.py"
    src.parent.mkdir(parents=True)
    src.write_text("import torch\n\ndef forward(x):\n    return x @ x\n")
    def pyf(name: str, ts: int, dur: int) -> dict:
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}

    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              pyf("tiny.py(1): <module>", 1, 98), pyf("tiny.py(3): forward", 2, 90),
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 50, "args": {}}]
    run = folder / "logs" / "tiny"
    run.mkdir(parents=True)
    doc = {"traceEvents": events, SOURCE_ROOTS_KEY: [str(folder / "nothing-here"), str(src.parent)]}
    (run / "w.1.pt.trace.json").write_text(json.dumps(doc))
    return src


def test_line_one_is_sent_as_a_line_vscode_opens_without_selecting(tmp_path, watch, tmp_path_factory):
    src = _tiny_run(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server([sys.executable, "-m", "tb_profiler.cli", "serve", str(tmp_path / "logs"), "--port", str(port)],
                        base, tmp_path_factory.mktemp("cache"))
    try:
        _host_parent(watch, WEBVIEW, f"{base}/{hash_state(view='Operator', run='tiny', group='OperationAndStack')}")
        frame = _app_frame(watch.page, base)
        frame.locator("details.frames-cell summary").first.click()
        frame.locator("button.frame-loc", has_text="tiny.py:1").click()
        frame.locator("button.frame-loc", has_text="tiny.py:3").click()
        assert _received(watch.page, 2) == [
            {"origin": base, "data": {"filename": str(src), "line": LINE_ONE}},
            {"origin": base, "data": {"filename": str(src), "line": 2}},
        ]
        assert watch.errors == [], watch.errors
        assert _left_localhost(watch) == [], watch.outside
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_outside_vscode_no_message_text_and_copy(serve_url, watch, recorded):
    """A plain top-level page: no message is posted, the frame is text, copy copies the
    resolved path:line."""
    path = _cnn_path(serve_url)
    watch.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=serve_url)
    watch.page.add_init_script("window.__received = []; window.addEventListener('message', "
                               "(e) => window.__received.push({origin: e.origin, data: e.data}));")
    watch.open(f"{serve_url}/{hash_state(view='Operator', run=RUN, group='OperationAndStack')}")
    watch.settle()
    page = watch.page
    details = _cnn_stack(page, watch, "span")
    details.locator("summary").click()
    span = details.locator("span.frame-loc", has_text=CNN_LOC).first
    line = int(CNN_LOC.match(span.inner_text().strip())[1])
    assert page.locator("button.frame-loc").count() == 0  # no VS Code links
    span.click()  # plain text: clicking it posts nothing
    copy = details.get_by_role("button", name=f"Copy {path}:{line}").first
    copy.click()
    # (no wait_for_function here: the page's CSP forbids the eval it polls with)
    details.locator("button.icon-btn", has_text="✓").wait_for(timeout=10_000)
    assert page.evaluate("navigator.clipboard.readText()") == f"{path}:{line}"
    assert page.evaluate("window.__received") == []
    assert watch.errors == [] and watch.outside == [], (watch.errors, watch.outside)


def test_other_https_parent_gets_no_message(serve_url, watch, recorded):
    """Framed by a page that is not a VS Code webview: frames are text, nothing is posted."""
    _host_parent(watch, NOT_VSCODE, f"{serve_url}/{hash_state(view='Operator', run=RUN, group='OperationAndStack')}")
    frame = _app_frame(watch.page, serve_url)
    details = _cnn_stack(frame, watch, "span")
    details.locator("summary").click()
    details.locator("span.frame-loc", has_text=CNN_LOC).first.click()
    assert frame.locator("button.frame-loc").count() == 0
    assert watch.page.evaluate("window.__received") == []
    assert _left_localhost(watch) == [], watch.outside
