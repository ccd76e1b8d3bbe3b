"""The Kernel view's "Compiled kernels" table (issue 19) in a real browser, framed the way
VS Code's TensorBoard integration frames it (test_browser_vscode's stand-in webview page).

The run is tests/data/compiled/run (the Triton fixture in Kineto's format and Inductor's
provenance artifacts beside it): the table shows the four compiled kernels with their
launch config and rates as the compiled_kernels route gives them, and clicking a kernel's
file posts {filename: the generated file, line: LINE_ONE (line 1)} to VS Code exactly as a
stack frame's link does; a provenance source line posts its own file and 0-based line.
"""
from __future__ import annotations

import shutil

import pytest
from browser_support import API, get_json, hash_state, serving
from datafiles import DATA
from test_browser_views import card
from test_browser_vscode import LINE_ONE, WEBVIEW, _app_frame, _host_parent, _left_localhost, _received

import compiled_fixture as fx

RUN = "triton"


@pytest.fixture(scope="module")
def compiled_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compiled_browser")
    shutil.copytree(DATA / "compiled" / "run", tmp / "logdir" / RUN)
    with serving(tmp / "logdir", tmp / "cache") as base:
        yield base


def test_compiled_kernels_table_and_jump_to_the_generated_file(compiled_url, watch):
    _, doc = get_json(f"{compiled_url}/{API}/compiled_kernels?run={RUN}")
    assert [r["name"] for r in doc["rows"]][:2] == ["triton_tem_fused_mm_1", "triton_poi_fused_add_relu_0"]
    _host_parent(watch, WEBVIEW, f"{compiled_url}/{hash_state(view='Kernel', run=RUN)}")
    frame = _app_frame(watch.page, compiled_url)
    sec = card(frame, "Compiled kernels")
    sec.locator("tbody tr").first.wait_for(timeout=60_000)
    text = sec.inner_text()
    for r in doc["rows"]:
        assert r["name"] in text
    assert "warps=8, stages=3, BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8" in text
    assert "Provenance from inductor_provenance_tracking_kernel_stack_traces_0.json" in text
    mm_row = sec.locator("tbody tr", has_text="triton_tem_fused_mm_1")
    link = mm_row.locator("ol.compiled-file button.frame-loc")
    assert link.get_attribute("title") == f"Open {fx.MM_FILE}:1 in VS Code"
    link.click()
    assert _received(watch.page, 1) == [{"origin": compiled_url, "data": {"filename": fx.MM_FILE, "line": LINE_ONE}}]
    mm_row.locator(".compiled-provenance button.frame-loc").click()
    got = _received(watch.page, 2)[1]
    assert got["data"] == {"filename": "/home/user/project/model.py", "line": 12}
    watch.shot("compiled-kernels")
    assert watch.errors == [], watch.errors
    assert _left_localhost(watch) == [], watch.outside


def test_a_cpu_compiled_trace_shows_its_compiled_regions_in_the_operator_view(tmp_path, watch):
    """torch.compile on CPU (a real trace, tests/data/compiled/cpu): no device work, so no
    Kernel view; the Operator view says there are no Triton kernels and what the compiled
    regions ran, as the compiled_kernels route gives it."""
    shutil.copytree(DATA / "compiled" / "cpu", tmp_path / "logdir" / "cpu")
    with serving(tmp_path / "logdir", tmp_path / "cache") as base:
        _, doc = get_json(f"{base}/{API}/compiled_kernels?run=cpu")
        assert doc["rows"] == [] and doc["regions"]["regions"] == 2 and doc["regions"]["compiled_functions"] == 2
        _, views = get_json(f"{base}/{API}/views?run=cpu")
        assert "Kernel" not in views
        watch.page.goto(f"{base}/{hash_state(view='Operator', run='cpu')}")
        sec = card(watch.page, "Compiled kernels")
        sec.locator(".compiled-regions").wait_for(timeout=60_000)
        text = sec.inner_text()
        assert "No Triton kernels in this trace." in text
        assert "2 Torch-Compiled Region ranges, 2 CompiledFunction calls" in text
        for op in doc["regions"]["ops"][:3]:
            assert f"{op['name']} ×{op['calls']}" in text
        watch.shot("compiled-cpu-operator")
        assert watch.errors == [], watch.errors
