"""Non-NVIDIA backends in a real browser: the views say what the trace says.

A `tb-profiler serve` over the handmade ROCm, MTIA and CUPTI range-profiler traces of
tests/kineto_fixtures.py (Kineto's format, see there): the Overview names the device
(never "Device Type: CPU"), the Kernel view lists the backend's device compute and, on
AMD, speaks of matrix cores; the Trace view draws the range profiler's pid-0 row as a
device.
"""
from __future__ import annotations

import pytest
from browser_support import API, PageWatch, get_json, hash_state, serving, wait_js
from kineto_fixtures import BACKENDS, device_trace, write_trace

RUNS = {"rocm": "ROCm", "mtia": "MTIA", "range": "CUPTI range"}


@pytest.fixture(scope="module")
def backend_url(tmp_path_factory, playwright_browser):
    logdir = tmp_path_factory.mktemp("backends_logdir")
    for run, backend in RUNS.items():
        write_trace(logdir / run / "worker0.1700000000000.pt.trace.json.gz", device_trace(backend))
    with serving(logdir, tmp_path_factory.mktemp("cache")) as base:
        yield base


@pytest.fixture
def page(playwright_browser):
    w = PageWatch(playwright_browser)
    yield w
    w.close()


@pytest.mark.parametrize("run", list(RUNS))
def test_overview_names_the_device(run, backend_url, page):
    b = BACKENDS[RUNS[run]]
    page.open(f"{backend_url}/{hash_state(view='Overview', run=run)}")
    page.settle()
    text = page.text()
    assert "Device Type" in text and f"{b.word}" in text
    assert "CPU-only" not in text and b.device_name in text
    assert "55.0" in text  # the device's utilization, as the API says
    page.shot(f"backend-{run}-overview")
    assert page.errors == [] and page.outside == []


def test_rocm_kernel_view_says_matrix_cores(backend_url, page):
    _, tc = get_json(f"{backend_url}/{API}/kernel/tc_pie?run=rocm")
    assert tc["unit"] == "Matrix cores" and tc["using_tc_pct"] == pytest.approx(100.0)
    # the operator's eligibility is a column of the kernel + operator grouping (the default is by name)
    page.open(f"{backend_url}/{hash_state(view='Kernel', run='rocm', kgroup='KernelNameAndOp')}")
    page.settle()
    text = page.text()
    # (the pie's title, "Matrix cores (100.0% of kernel time)", is drawn on its canvas)
    assert "Uses matrix cores" in text and "Op eligible for matrix cores" in text
    assert "tensor cores" not in text.lower()
    assert BACKENDS["ROCm"].kernel in text
    page.shot("backend-rocm-kernel")
    assert page.errors == [] and page.outside == []


def test_mtia_kernel_view_lists_ccp_events(backend_url, page):
    page.open(f"{backend_url}/{hash_state(view='Kernel', run='mtia')}")
    page.settle()
    text = page.text()
    assert BACKENDS["MTIA"].kernel in text and "No kernels" not in text
    # MTIA kernel names do not say whether they used matrix units: no column, a sentence
    assert "not known for this backend" in text and "matrix units" not in text.lower().replace(
        "the device's matrix units", "")
    page.shot("backend-mtia-kernel")
    assert page.errors == [] and page.outside == []


def test_range_profiler_row_is_a_device_track(backend_url, page):
    _, doc = get_json(f"{backend_url}/{API}/trace?run=range&width=800")
    device = [t for t in doc["tracks"] if t["kind"] == "device"]
    assert [t["process"] for t in device] == ["GPU 0"]
    page.open(f"{backend_url}/{hash_state(view='Trace', run='range')}")
    page.settle()
    # Track headers are drawn on the canvas; what was drawn is mirrored in data- attributes.
    wait_js(page.page, "() => (document.querySelector('[data-counters]')?.dataset.counters ?? '')"
                       ".includes('GPU 0 utilization')")
    page.shot("backend-range-trace")
    assert page.errors == [] and page.outside == []
