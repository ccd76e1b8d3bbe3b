"""Issue 21, "the first screen answers", in a real Chromium at 1440x900 (browser_support's
server over the V100 ResNet50 run, the sample runs beside it).

The Overview opens on its conclusion: under the cards the diagnosis sentence (the overview
route's ``diagnosis``, made once by analysis/diagnosis.py, the words ``tb-profiler why``
prints), a "Bound by" card, and the Recommendations section, all before the first screen
ends (y < 900 px), the long evidence sections after it.
"""
from __future__ import annotations

from browser_support import V100_RUN, hash_state, wait_js
from test_browser_views import api, card

SCREEN = {"width": 1440, "height": 900}


def test_overview_opens_on_the_diagnosis_and_the_recommendations(serve_url, watch):
    page = watch.page
    page.set_viewport_size(SCREEN)
    ov = api(serve_url, "overview", run=V100_RUN)
    diag = ov["diagnosis"]
    assert diag["bound_by"] == "host" and "waiting on the host" in diag["sentence"]
    page.goto(f"{serve_url}/{hash_state(view='Overview', run=V100_RUN)}")
    line = page.get_by_label("Diagnosis")
    line.wait_for(timeout=60_000)
    assert diag["sentence"] in line.inner_text()
    cards = page.locator(".stats").first.inner_text()
    assert "Bound by" in cards and diag["label"] in cards
    recs = card(page, "Recommendations")
    wait_js(page, "() => document.querySelectorAll('.recs li').length > 0", 60)
    first = recs.locator(".recs li").first
    assert first.inner_text().find(ov["recommendations"][0]["title"]) >= 0
    for el in (line, recs.locator("h2"), first):
        box = el.bounding_box()
        assert box is not None and box["y"] + box["height"] <= SCREEN["height"], (el, box)
    # the evidence comes after the answer
    below = card(page, "Step time breakdown, per step").bounding_box()
    assert below["y"] > recs.bounding_box()["y"]
    watch.shot("overview-first-screen")
    assert watch.errors == [], watch.errors
