"""Every view in a real browser: Debian's Chromium driven by Playwright, against a real
`tb-profiler serve` and a real TensorBoard over real traces.

Each view must render without console errors and without a single request leaving
localhost; a screenshot of each is written to test-output/screenshots/ (look at them).
Needs the frontend bundle (built by `pip install -e .`) and /usr/bin/chromium (the README's
test command installs it); outside CI a missing one skips these tests, in CI it fails.
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
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
BUNDLE = ROOT / "tb_profiler" / "plugin" / "static" / "index.js"
API = "data/plugin/pytorch_profiler"
V100_RUN = "resnet50_num_workers_0"
VIEWS = ("Overview", "Operator", "Kernel", "Trace", "Memory", "Module", "Distributed", "Diff")


def _require(ok: bool, why: str) -> None:
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def playwright_browser():
    _require(Path(CHROMIUM).exists(), f"{CHROMIUM} missing (apt-get install chromium)")
    _require(BUNDLE.exists(), "frontend bundle not built (pip install -e . builds it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, sample_logdir) -> Path:
    out = tmp_path_factory.mktemp("browser_logdir")
    shutil.copytree(SHARED / "kineto-resnet50-v100" / V100_RUN, out / V100_RUN)
    for run in ("cnn_workers0", "ddp_gloo"):
        shutil.copytree(sample_logdir / run, out / run)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, json.loads(r.read() or b"null")


def _wait_loaded(base: str, proc: subprocess.Popen, limit_s: float = 120) -> None:
    """Until every file of the logdir is loaded (or failed), bounded in time."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            status, doc = _get_json(f"{base}/{API}/status")
            if status == 200 and not doc.get("loading") and doc.get("runs"):
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{base} did not finish loading in {limit_s} s")


def _start(cmd: list[str], base: str, cache_dir: Path) -> subprocess.Popen:
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        _wait_loaded(base, proc)
    except Exception:
        proc.kill()
        raise
    return proc


@pytest.fixture(scope="module")
def serve_url(logdir, tmp_path_factory):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port)],
                  base, tmp_path_factory.mktemp("cache"))
    yield base
    proc.terminate()
    proc.wait(timeout=20)


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

    def settle(self) -> None:
        self.page.wait_for_load_state("networkidle", timeout=60_000)
        self.page.wait_for_timeout(500)

    def text(self) -> str:
        return self.page.inner_text("body")

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def watch(playwright_browser):
    w = PageWatch(playwright_browser)
    yield w
    w.close()


def _hash(**state: str) -> str:
    return "#" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in state.items())


@pytest.mark.parametrize("view", VIEWS)
def test_each_view_renders_offline_without_errors(view, serve_url, watch):
    run = "ddp_gloo" if view == "Distributed" else V100_RUN
    watch.open(f"{serve_url}/{_hash(view=view, run=run)}")
    watch.settle()
    watch.shot(f"serve-{view.lower()}")
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside
    assert "Traceback" not in watch.text()


def test_overview_shows_the_api_numbers(serve_url, watch):
    _, overview = _get_json(f"{serve_url}/{API}/overview?run={V100_RUN}&span=1")
    watch.open(f"{serve_url}/{_hash(view='Overview', run=V100_RUN, span='1')}")
    watch.settle()
    text = watch.text()
    # The device name and the average step as the API gives them (177.6 ms for this span).
    assert "Tesla V100-DGXS-32GB" in text
    avg_ms = overview["summary"]["step_time_avg_ns"] / 1e6 if "summary" in overview else None
    assert avg_ms is None or f"{avg_ms:.1f}" in text.replace(",", "")
    watch.shot("serve-overview-span1")


def test_untrusted_names_render_as_text(tmp_path, playwright_browser, tmp_path_factory):
    """An operator named like markup shows up as literal text and runs no script."""
    run = tmp_path / "xss"
    run.mkdir()
    name = '<img src=x onerror="window.__pwned=1">'
    events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10, "dur": 50}]
    (run / "w.1.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start([sys.executable, "-m", "tb_profiler.cli", "serve", str(tmp_path), "--port", str(port)],
                  base, tmp_path_factory.mktemp("cache"))
    w = PageWatch(playwright_browser)
    try:
        w.open(f"{base}/{_hash(view='Operator', run='xss')}")
        w.settle()
        assert w.page.evaluate("window.__pwned === undefined")
        assert name in w.text()
        w.shot("serve-operator-untrusted-name")
    finally:
        w.close()
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def tensorboard_url(logdir, tmp_path_factory):
    from importlib.metadata import entry_points

    _require(any(e.name == "pytorch_profiler" for e in entry_points(group="tensorboard_plugins")),
             "the pytorch_profiler TensorBoard plugin is not registered (pip install -e .)")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
           "--host", "127.0.0.1", "--reload_interval", "2"]
    proc = _start(cmd, base, tmp_path_factory.mktemp("cache"))
    yield base
    proc.terminate()
    proc.wait(timeout=20)


def _plugin_frame(page, limit_s: float = 60):
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


def test_inside_tensorboard_the_tab_shows_the_overview(tensorboard_url, watch):
    watch.open(f"{tensorboard_url}/#pytorch_profiler")
    frame = _plugin_frame(watch.page)
    frame.wait_for_load_state("networkidle", timeout=60_000)
    watch.page.wait_for_timeout(1000)
    text = frame.inner_text("body")
    assert "Average step time" in text or "Step time breakdown" in text, text[:500]
    watch.shot("tensorboard-overview")
    assert watch.outside == [], watch.outside
    assert [e for e in watch.errors if "pytorch_profiler" in e or "plugin" in e.lower()] == [], watch.errors


def test_operator_table_matches_api_filters_and_exports_csv(serve_url, watch):
    _, api = _get_json(f"{serve_url}/{API}/operation/table?run={V100_RUN}&span=1&group_by=Operation")
    rows = api["rows"]
    top = max(rows, key=lambda r: (r["device_self_ns"], r["host_self_ns"]))
    watch.open(f"{serve_url}/{_hash(view='Operator', run=V100_RUN, span='1')}")
    watch.settle()
    page = watch.page
    assert f"{len(rows)} rows" in watch.text()
    assert top["name"] in page.locator("table tbody tr").first.inner_text()  # sorted by device self
    page.get_by_placeholder("Filter operators…").fill("convolution")
    expected = [r for r in rows if "convolution" in r["name"].lower()]  # the filter ignores case
    page.wait_for_timeout(500)
    assert f"{len(expected)} of {len(rows)} rows" in watch.text()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export CSV").first.click()
    lines = Path(download.value.path()).read_text(encoding="utf-8-sig").strip().splitlines()
    assert len(lines) == len(expected) + 1  # header + the filtered rows, not just one page
    assert sorted(line.split(",")[0].strip('"') for line in lines[1:]) == sorted(r["name"] for r in expected)
    assert watch.errors == [] and watch.outside == []


def test_kernel_view_table_matches_api(serve_url, watch):
    _, table = _get_json(f"{serve_url}/{API}/kernel/table?run={V100_RUN}&span=1&group_by=KernelNameAndOp")
    top = max(table["rows"], key=lambda r: r["total_ns"])
    watch.open(f"{serve_url}/{_hash(view='Kernel', run=V100_RUN, span='1')}")
    watch.settle()
    assert f"{len(table['rows'])} rows" in watch.text()
    first = watch.page.locator("table tbody tr").first.inner_text()
    assert top["name"] in first and top["op"] in first  # sorted by total time
    assert watch.errors == [] and watch.outside == []
