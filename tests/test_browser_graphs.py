"""The Kernel view's "CUDA graphs" section (issue 19) in a real browser: on the replay
annotated by torch's annotate_trace (tests/data/cuda_graphs) it shows the graphs, the
device time per annotation of the captured code, and the route's note; a run without
graph kernels has no such section."""
from __future__ import annotations

import shutil

import graph_fixtures as fx
import pytest
from browser_support import API, get_json, hash_state, serving
from test_browser_views import card


@pytest.fixture(scope="module")
def graphs_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graphs_browser")
    (tmp / "logdir" / "graphs").mkdir(parents=True)
    shutil.copy(fx.DATA / "annotated.pt.trace.json.gz", tmp / "logdir" / "graphs" / "w.pt.trace.json.gz")
    with serving(tmp / "logdir", tmp / "cache") as base:
        yield base


def test_cuda_graphs_section(graphs_url, watch):
    _, doc = get_json(f"{graphs_url}/{API}/graphs?run=graphs")
    assert [r["annotation"] for r in doc["attribution"]] == ["phase_A", "phase_B", "module=decoder, op=fill"]
    watch.open(f"{graphs_url}/{hash_state(view='Kernel', run='graphs')}")
    sec = card(watch.page, "CUDA graphs")
    sec.locator("tbody tr").first.wait_for(timeout=60_000)
    sec.locator("tbody tr", has_text="phase_B").wait_for(timeout=30_000)
    text = sec.inner_text()
    assert doc["notes"][0] in text
    for want in ("phase_A", "module=decoder, op=fill", "Share of GPU time", "Replays"):
        assert want in text, want
    watch.shot("cuda-graphs")
    assert watch.errors == [], watch.errors
