"""Time-range statistics in the Trace view, in a real browser (fixtures: browser_support.py) on
the real V100 run (tests/data): a drag on the timeline's ruler selects a range (a band over every
track, mirrored into the timeline box's data-range-start/-end), the panel under the timeline asks
`trace/range_stats` for exactly that range and shows the API's rows per kind (checked through
its CSV export), "Zoom to range" shows the range, Escape and a click on the ruler clear it, and
the tracks' drag-pan still pans. Screenshot: test-output/screenshots/range-stats.png.
"""
from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import pytest
from browser_support import API, V100_RUN, get_json, hash_state, serving, until
from datafiles import V100_RUN as V100_RUN_DIR

RULER_H = 26  # frontend/src/timeline/Timeline.tsx


@pytest.fixture(scope="module")
def v100_url(tmp_path_factory):
    """A server of a logdir holding only the V100 run (no torch samples needed)."""
    logdir = tmp_path_factory.mktemp("range_logdir")
    shutil.copytree(V100_RUN_DIR, logdir / V100_RUN)
    with serving(logdir, tmp_path_factory.mktemp("range_cache")) as base:
        yield base




def export_csv(scope) -> list[dict[str, str]]:
    page = scope.page
    with page.expect_download() as download:
        scope.get_by_role("button", name="Export CSV").click()
    text = Path(download.value.path()).read_text(encoding="utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def unguard(s: str) -> str:
    """A name as csv.ts wrote it (a leading = + - @ gets an apostrophe)."""
    return s[1:] if s.startswith("'") and s[1:2] in ("=", "+", "-", "@", "\t", "\r") else s


def test_ruler_drag_selects_a_range_and_shows_its_statistics(v100_url, watch):
    page = watch.page
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/trace/range_stats?" in r.url else None)
    watch.open(f"{v100_url}/{hash_state(view='Trace', run=V100_RUN)}")
    page.wait_for_selector(".timeline canvas", timeout=60_000)
    watch.settle()
    box = page.locator(".timeline")
    canvas = page.locator(".timeline canvas")
    attr = lambda name: box.get_attribute(name) or ""  # noqa: E731
    window = lambda: (int(attr("data-window-start")), int(attr("data-window-end")))  # noqa: E731
    c = canvas.bounding_box()
    a0, b0 = window()
    ns_px = (b0 - a0) / int(c["width"])

    # drag on the ruler from 300 px to 700 px: the band covers the dragged time, in whole ns
    y = c["y"] + RULER_H / 2
    page.mouse.move(c["x"] + 300, y)
    page.mouse.down()
    page.mouse.move(c["x"] + 500, y, steps=5)
    page.mouse.move(c["x"] + 700, y, steps=5)
    page.mouse.up()
    until(page, lambda: attr("data-range-start"), "the drag on the ruler to select a range")
    r0, r1 = int(attr("data-range-start")), int(attr("data-range-end"))
    assert abs(r0 - (a0 + 300 * ns_px)) <= 2 * ns_px and abs(r1 - (a0 + 700 * ns_px)) <= 2 * ns_px, (r0, r1, ns_px)
    assert window() == (a0, b0), "a drag on the ruler must not pan"

    # the panel asked the route for exactly the band's range and shows its answer
    panel = page.locator(".range-stats")
    until(page, lambda: panel.count() and panel.get_attribute("data-events"), "the range statistics")
    assert (panel.get_attribute("data-start-ns"), panel.get_attribute("data-end-ns")) == (str(r0), str(r1))
    q = {k: v[0] for k, v in parse_qs(urlparse(asked[-1]).query).items()}
    assert (q["start_ns"], q["end_ns"], q["run"]) == (str(r0), str(r1), V100_RUN)
    _, api = get_json(f"{v100_url}/{API}/trace/range_stats?run={quote(V100_RUN)}&start_ns={r0}&end_ns={r1}")
    assert api["events"] > 0 and int(panel.get_attribute("data-events")) == api["events"]
    tabs = panel.get_by_role("tab")
    assert [t.inner_text() for t in tabs.all()] == [f"{k['label']} ({k['count']:,})" for k in api["kinds"]]
    watch.shot("range-stats")

    # every kind's table is the API's rows of that kind (CSV: raw ns)
    for k, tab in zip(api["kinds"], tabs.all()):
        tab.click()
        until(page, lambda: panel.locator(".range-kind").get_attribute("data-kind") == k["kind"], f"the {k['kind']} tab")
        shown = {unguard(r["Name"]): (int(r["Count"]), int(r["Total in range (ns)"]), int(r["Self in range (ns)"]),
                                     float(r["Average (whole events) (ns)"]), int(r["Max (whole event) (ns)"])) for r in export_csv(panel)}
        want = {r["name"]: (r["count"], r["total_ns"], r["self_ns"], float(r["avg_ns"]), r["max_ns"])
                for r in api["rows"] if r["kind"] == k["kind"]}
        assert shown == want, k["kind"]
        totals = panel.locator(".range-kind-totals").inner_text()
        assert totals.startswith(f"{k['label']}: {k['count']:,} events")
        more = api["more"].get(k["kind"], 0)
        assert panel.locator(".range-more").count() == (1 if more else 0)
        if more:
            assert f"{more:,} more name" in panel.locator(".range-more").inner_text()

    # Zoom to range shows exactly the range, the band still drawn
    panel.get_by_role("button", name="Zoom to range").click()
    until(page, lambda: window() == (r0, r1), "Zoom to range")
    assert (attr("data-range-start"), attr("data-range-end")) == (str(r0), str(r1))

    # Escape (the timeline focused) clears the selection and closes the panel
    canvas.focus()
    page.keyboard.press("Escape")
    until(page, lambda: attr("data-range-start") == "" and panel.count() == 0, "Escape to clear the range")

    # select again at this zoom, then a click on the ruler (no drag) clears it (the buttons
    # below the timeline may have scrolled the page: the canvas's box again)
    page.evaluate("window.scrollTo(0, 0)")
    c = canvas.bounding_box()
    y = c["y"] + RULER_H / 2
    page.mouse.move(c["x"] + 100, y)
    page.mouse.down()
    page.mouse.move(c["x"] + 400, y, steps=6)
    page.mouse.up()
    until(page, lambda: attr("data-range-start") and panel.count() == 1, "a second range")
    s0, s1 = int(attr("data-range-start")), int(attr("data-range-end"))
    ns_px2 = (r1 - r0) / int(c["width"])
    assert abs(s0 - (r0 + 100 * ns_px2)) <= 2 * ns_px2 + 1 and abs(s1 - (r0 + 400 * ns_px2)) <= 2 * ns_px2 + 1
    until(page, lambda: panel.get_attribute("data-start-ns") == str(s0) and panel.get_attribute("data-events"),
          "the second range's statistics")
    page.mouse.click(c["x"] + 600, y)
    until(page, lambda: attr("data-range-start") == "" and panel.count() == 0, "a click on the ruler to clear the range")

    # drag on the tracks still pans (and selects nothing)
    page.get_by_role("button", name="Whole trace").click()
    until(page, lambda: window() == (a0, b0), "Whole trace")
    canvas.focus()
    page.keyboard.press("w")  # zoom in so that there is room to pan
    until(page, lambda: window()[1] - window()[0] < b0 - a0, "zoom in")
    w0, w1 = window()
    page.evaluate("window.scrollTo(0, 0)")
    c = canvas.bounding_box()
    page.mouse.move(c["x"] + 700, c["y"] + c["height"] - 10)
    page.mouse.down()
    page.mouse.move(c["x"] + 600, c["y"] + c["height"] - 10, steps=5)
    page.mouse.move(c["x"] + 400, c["y"] + c["height"] - 10, steps=5)
    page.mouse.up()
    until(page, lambda: window()[0] > w0, "the drag to pan")
    p0, p1 = window()
    assert abs((p1 - p0) - (w1 - w0)) <= 2
    assert 290 <= (p0 - w0) / ((w1 - w0) / int(c["width"])) <= 310
    assert attr("data-range-start") == "" and panel.count() == 0
    watch.settle()
    # one request per selected range, none while dragging
    ranges = [(q["start_ns"][0], q["end_ns"][0]) for q in (parse_qs(urlparse(u).query) for u in asked)]
    assert ranges == [(str(r0), str(r1)), (str(s0), str(s1))], ranges

    # a range is kept in the URL (r0, r1): a reload shows it and its statistics again
    c = canvas.bounding_box()
    page.mouse.move(c["x"] + 200, c["y"] + RULER_H / 2)
    page.mouse.down()
    page.mouse.move(c["x"] + 500, c["y"] + RULER_H / 2, steps=6)
    page.mouse.up()
    until(page, lambda: attr("data-range-start") and panel.count() == 1, "a third range")
    t0, t1 = attr("data-range-start"), attr("data-range-end")
    until(page, lambda: f"r0={t0}" in page.url and f"r1={t1}" in page.url, "the range in the URL")
    page.reload()
    until(page, lambda: attr("data-range-start") == t0 and attr("data-range-end") == t1, "the range after a reload")
    until(page, lambda: panel.get_attribute("data-start-ns") == t0 and panel.get_attribute("data-events"),
          "its statistics after a reload")
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside
