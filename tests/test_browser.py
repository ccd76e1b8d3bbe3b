"""Every view in a real browser: Debian's Chromium driven by Playwright, against a real
`tb-profiler serve` and a real TensorBoard over real traces (fixtures: browser_support.py).

Each view must render without console errors and without a single request leaving
localhost; a screenshot of each is written to test-output/screenshots/ (look at them).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from browser_support import (API, V100_RUN, VIEWS, PageWatch, free_port, get_json, hash_state, plugin_frame, settle,
                             start_server)


@pytest.mark.parametrize("view", VIEWS)
def test_each_view_renders_offline_without_errors(view, serve_url, watch):
    run = "ddp_gloo_2ranks" if view == "Distributed" else V100_RUN
    watch.open(f"{serve_url}/{hash_state(view=view, run=run)}")
    watch.settle()
    watch.shot(f"serve-{view.lower()}")
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside
    assert "Traceback" not in watch.text()


def test_overview_shows_the_api_numbers(serve_url, watch):
    _, overview = get_json(f"{serve_url}/{API}/overview?run={V100_RUN}&span=1")
    watch.open(f"{serve_url}/{hash_state(view='Overview', run=V100_RUN, span='1')}")
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
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server([sys.executable, "-m", "tb_profiler.cli", "serve", str(tmp_path), "--port", str(port)],
                  base, tmp_path_factory.mktemp("cache"))
    w = PageWatch(playwright_browser)
    try:
        w.open(f"{base}/{hash_state(view='Operator', run='xss')}")
        w.settle()
        assert w.page.evaluate("window.__pwned === undefined")
        assert name in w.text()
        w.shot("serve-operator-untrusted-name")
    finally:
        w.close()
        proc.terminate()
        proc.wait(timeout=20)


def test_inside_tensorboard_the_tab_shows_the_overview(tensorboard_url, watch):
    watch.open(f"{tensorboard_url}/#pytorch_profiler")
    frame = plugin_frame(watch.page)
    settle(frame)
    text = frame.inner_text("body")
    assert "Average step time" in text or "Step time breakdown" in text, text[:500]
    watch.shot("tensorboard-overview")
    assert watch.outside == [], watch.outside
    assert [e for e in watch.errors if "pytorch_profiler" in e or "plugin" in e.lower()] == [], watch.errors


def test_operator_table_matches_api_filters_and_exports_csv(serve_url, watch):
    _, api = get_json(f"{serve_url}/{API}/operation/table?run={V100_RUN}&span=1&group_by=Operation")
    rows = api["rows"]
    top = max(rows, key=lambda r: (r["device_self_ns"], r["host_self_ns"]))
    watch.open(f"{serve_url}/{hash_state(view='Operator', run=V100_RUN, span='1')}")
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
    """Grouped by kernel name by default (issue 21: the costliest kernel is the first row),
    by kernel, operator and launch config when asked."""
    for kgroup in (None, "KernelNameAndOp"):
        _, table = get_json(f"{serve_url}/{API}/kernel/table?run={V100_RUN}&span=1&group_by={kgroup or 'Kernel'}")
        top = max(table["rows"], key=lambda r: r["total_ns"])
        extra = {"kgroup": kgroup} if kgroup else {}
        watch.open(f"{serve_url}/{hash_state(view='Kernel', run=V100_RUN, span='1', **extra)}")
        watch.settle()
        assert f"{len(table['rows'])} rows" in watch.text()
        first = watch.page.locator("table tbody tr").first.inner_text()
        assert top["name"] in first  # sorted by total time
        assert (top["op"] in first) if kgroup else ("op" not in top)
    assert watch.errors == [] and watch.outside == []
