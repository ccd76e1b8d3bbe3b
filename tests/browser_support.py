"""Browser-test fixtures shared by the tests/test_browser*.py files (registered in conftest).

Debian's Chromium driven by Playwright, against a real `tb-profiler serve` and a real
TensorBoard over real traces, each started once per test session. ``watch`` gives a page
that records console errors, page errors and requests leaving localhost; ``shot`` writes
screenshots to test-output/screenshots/ (look at them). Needs the frontend bundle (built by
`pip install -e .`) and /usr/bin/chromium (the README's test command installs it); outside
CI a missing one skips the browser tests, in CI it fails them.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
from datafiles import V100_RUN as V100_RUN_DIR

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
BUNDLE = ROOT / "tb_profiler" / "plugin" / "static" / "index.js"
API = "data/plugin/pytorch_profiler"
V100_RUN = V100_RUN_DIR.name  # "resnet50_num_workers_0", the run's name in the browser tests' logdir
VIEWS = ("Overview", "Operator", "Kernel", "Trace", "Memory", "Module", "Distributed", "Diff")


def require(ok: bool, why: str) -> None:
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="session")
def playwright_browser():
    require(Path(CHROMIUM).exists(), f"{CHROMIUM} missing (apt-get install chromium)")
    require(BUNDLE.exists(), "frontend bundle not built (pip install -e . builds it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # expect() polls until its condition holds: a longer ceiling costs a passing test
    # nothing, and Playwright's 5 s failed a page on a busy 2-core machine while its
    # trace was still loading
    sync_api.expect.set_options(timeout=30_000)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def logdir(tmp_path_factory, sample_logdir) -> Path:
    out = tmp_path_factory.mktemp("browser_logdir")
    shutil.copytree(V100_RUN_DIR, out / V100_RUN)
    for run in ("cnn_dataloader_0workers", "ddp_gloo_2ranks"):
        shutil.copytree(sample_logdir / run, out / run)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, json.loads(r.read() or b"null")


def server_log(proc: subprocess.Popen) -> str:
    """The last lines the server wrote to stderr (its request log, warnings, tracebacks)."""
    try:
        return Path(proc.log_path).read_text(errors="replace")[-3000:]  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return ""


def wait_loaded(base: str, proc: subprocess.Popen, limit_s: float = 120) -> None:
    """Until every file of the logdir is loaded (or failed), bounded in time."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{server_log(proc)}")
        try:
            status, doc = get_json(f"{base}/{API}/status")
            if status == 200 and not doc.get("loading") and doc.get("runs"):
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{base} did not finish loading in {limit_s} s:\n{server_log(proc)}")


def start_server(cmd: list[str], base: str, cache_dir: Path) -> subprocess.Popen:
    """The server's stderr goes to a file, never to an unread pipe: the server logs every
    request there, and once a pipe's 64 KiB filled up it would block mid-request (the
    browser tests late in a session then timed out waiting for it)."""
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    log_path = cache_dir.parent / f"{cache_dir.name}-server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    proc.log_path = log_path  # type: ignore[attr-defined]
    try:
        wait_loaded(base, proc)
    except Exception:
        proc.kill()
        raise
    return proc


@contextmanager
def serving(logdir: Path, cache_dir: Path):
    """A `tb-profiler serve` of logdir on a free port, loaded; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port)],
                        base, cache_dir)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="session")
def serve_url(logdir, tmp_path_factory):
    with serving(logdir, tmp_path_factory.mktemp("cache")) as base:
        yield base


class PageWatch:
    """A page that records console errors, page errors and requests leaving localhost."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        # "Failed to load resource" repeats what the response listener reports with its URL.
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._request)
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)

    def _request(self, request) -> None:
        host = urlparse(request.url).hostname
        if request.url.startswith(("data:", "blob:", "about:")):
            return
        if host not in ("127.0.0.1", "localhost"):
            self.outside.append(request.url)

    def open(self, url: str) -> None:
        self.page.goto(url, wait_until="networkidle", timeout=60_000)

    def settle(self, timeout_s: float = 60) -> None:
        settle(self.page, timeout_s)

    def text(self) -> str:
        return self.page.inner_text("body")

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


def settle(target, timeout_s: float = 60) -> None:
    """Until the network of a page (or frame) is idle and no view shows its loading
    indicator (``.loading``).

    Why both: a view whose trace is still loading is answered 202 and asks again after
    ``retry_after_ms``; the network is idle between two asks, so on a busy machine
    networkidle alone came while the page still said "Loading…"."""
    deadline = time.monotonic() + timeout_s
    while True:
        target.wait_for_load_state("networkidle", timeout=60_000)
        if not target.evaluate("document.querySelector('.loading') !== null"):
            break
        if time.monotonic() > deadline:
            break  # the test's own assertions say what is missing
        target.wait_for_timeout(200)
    target.wait_for_timeout(500)


@pytest.fixture
def watch(playwright_browser):
    w = PageWatch(playwright_browser)
    yield w
    w.close()


def wait_js(target, expression: str, timeout_s: float = 30) -> None:
    """Until a JS expression (or "() => ..." function) is truthy in a page or frame, polled
    with evaluate. Not Playwright's wait_for_function: after its first check it polls with
    eval, which the app's CSP (script-src 'self') forbids, so it fails unless the first
    check already passes."""
    deadline = time.monotonic() + timeout_s
    while not target.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{expression!r} still false after {timeout_s} s")
        time.sleep(0.1)


def until(page, fn, what: str, tries: int = 300):
    """Polls fn() (a condition on the page or on recorded requests, in Python) until it
    holds, and returns its value."""
    for _ in range(tries):
        value = fn()
        if value:
            return value
        page.wait_for_timeout(100)
    pytest.fail(f"timed out waiting for {what}")


# The timeline's layout (frontend/src/timeline/model.ts), to aim a click at an event's row.
RULER_H, COUNTER_H, HEADER_H, ROW_H, GAP = 26, 40, 18, 18, 2


def hash_state(**state: str) -> str:
    return "#" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in state.items())


@pytest.fixture(scope="session")
def tensorboard_url(logdir, tmp_path_factory):
    from importlib.metadata import entry_points

    require(any(e.name == "pytorch_profiler" for e in entry_points(group="tensorboard_plugins")),
             "the pytorch_profiler TensorBoard plugin is not registered (pip install -e .)")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
           "--host", "127.0.0.1", "--reload_interval", "2"]
    proc = start_server(cmd, base, tmp_path_factory.mktemp("cache"))
    yield base
    proc.terminate()
    proc.wait(timeout=20)


def plugin_frame(page, limit_s: float = 60):
    """The iframe TensorBoard renders the plugin in, once the app has drawn its header."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for frame in page.frames:
            if frame is not page.main_frame and "pytorch_profiler" in frame.url:
                try:
                    if "PyTorch Profiler" in frame.inner_text("body", timeout=1000):
                        return frame
                except Exception:  # noqa: BLE001 - the frame may still be navigating
                    pass
        page.wait_for_timeout(300)
    raise TimeoutError("the plugin never rendered inside TensorBoard")
