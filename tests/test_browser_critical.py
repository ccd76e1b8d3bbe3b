"""The critical path of a step (issue 9) in a real browser, against the JSON API.

The Overview's "Critical path" section over the V100 ResNet50 trace: the stacked bars per step
(device / host / sync / other, through the chart's ECharts option `tbOption`), the headline of
the mean shares, the steps' and the top names' tables (through their CSV export, raw values)
equal `critical_path`. "Show in Trace" on step 5 opens the Trace view with cp=5 and the step's
window (its segments' first start to last end) in the URL, a banner with the step's device and
host time, and the timeline outlines the path's events: its data-highlighted equals the
segments with an event (row >= 0) among the events of the window the timeline drew (the
`trace` reply it drew from). Clear removes cp, the banner and the highlight. Debian's Chromium
(Playwright) drives a real `tb-profiler serve` (fixtures: browser_support.py); no request
leaves localhost, the console stays clean. Screenshots: test-output/screenshots/why-critical*.png.
"""
from __future__ import annotations

import shutil
from urllib.parse import parse_qsl, urlparse

import pytest
from browser_support import API, hash_state, serving
from datafiles import V100_TRACE
from browser_support import until
from test_browser_views import api, assert_clean, assert_same_rows, card, export_csv, state
from test_browser_why import chart, section_shot

expect = pytest.importorskip("playwright.sync_api").expect

RUN = "v100"
STEP = 5

STEPS = [("Step", "step", "num"), ("Step time (ns)", "length_ns", "num"), ("Device (ns)", "device_ns", "num"),
         ("Host (ns)", "host_ns", "num"), ("Sync (ns)", "sync_ns", "num"), ("Other (ns)", "other_ns", "num"),
         ("Device share (%)", lambda r: 100 * r["device_share"], "num")]
TOP = [("Kind", "kind", "text"), ("Name", "name", "text"), ("Time (ns)", "ns", "num"), ("Count", "count", "num")]


@pytest.fixture(scope="module")
def cp_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("why_critical")
    log = tmp / "logdir"
    (log / RUN).mkdir(parents=True)
    shutil.copy(V100_TRACE, log / RUN / V100_TRACE.name)
    with serving(log, tmp / "cache") as base:
        yield base


def test_overview_critical_path_matches_the_api(cp_url, watch):
    d = api(cp_url, "critical_path", run=RUN)
    steps = sorted(d["steps"], key=lambda r: r["step"])
    assert steps and d["top"]
    watch.open(f"{cp_url}/{hash_state(view='Overview', run=RUN)}")
    page = watch.page
    sec = card(page, "Critical path")
    sec.scroll_into_view_if_needed()
    expect(sec.locator(".why-critical")).to_have_attribute("data-steps", str(len(steps)))
    # the bars: device, host, sync, other per step, adding up to the step
    opt = chart(page, "Critical path per step")
    assert opt["xAxis"]["data"] == [str(r["step"]) for r in steps]
    series = {s["name"]: s["data"] for s in opt["series"]}
    assert series == {"Device": [r["device_ns"] for r in steps], "Host": [r["host_ns"] for r in steps],
                      "Sync": [r["sync_ns"] for r in steps], "Other": [r["other_ns"] for r in steps]}
    assert [sum(v[j] for v in series.values()) for j in range(len(steps))] == [r["length_ns"] for r in steps]
    device = round(100 * sum(r["device_share"] for r in steps) / len(steps))
    host = round(100 * sum(r["host_ns"] / r["length_ns"] for r in steps) / len(steps))
    expect(sec.locator(".cp-headline")).to_contain_text(f"device-bound {device} % of the path, host-bound {host} %")
    assert_same_rows(export_csv(sec.locator(".cp-steps .table-wrap")), steps, STEPS)
    assert sec.locator("details.cp-top").get_attribute("open") is None   # folded under the answer (issue 21)
    sec.locator("details.cp-top > summary").click()
    top = export_csv(sec.locator(".cp-top .table-wrap"))
    assert_same_rows(top, d["top"], TOP)
    assert [float(r["Time (ns)"]) for r in top] == sorted((float(r["Time (ns)"]) for r in top), reverse=True)
    section_shot(sec, "why-critical-overview")
    assert_clean(watch)


def test_show_in_trace_highlights_the_path(cp_url, watch):
    d = api(cp_url, "critical_path", run=RUN, step=STEP)
    segs = d["segments"]
    assert d["step"] == STEP and segs and d["segments_total"] == len(segs)
    row = next(r for r in d["steps"] if r["step"] == STEP)
    rows = {s["row"] for s in segs if s["row"] >= 0}
    t0, t1 = min(s["start_ns"] for s in segs), max(s["end_ns"] for s in segs)
    page = watch.page
    replies = []
    page.on("response", lambda r: replies.append(r) if urlparse(r.url).path.endswith(f"/{API}/trace") and r.status == 200 else None)
    watch.open(f"{cp_url}/{hash_state(view='Overview', run=RUN)}")
    sec = card(page, "Critical path")
    sec.scroll_into_view_if_needed()
    sec.locator(f'.cp-steps button.cp-show[data-step="{STEP}"]').click()
    expect(page.get_by_role("tab", name="Trace")).to_have_attribute("aria-selected", "true")
    until(page, lambda: state(page).get("cp") == str(STEP), "cp in the URL")
    st = state(page)
    assert (st["view"], int(st["t0"]), int(st["t1"])) == ("Trace", t0, t1)
    banner = page.locator(".cp-banner")
    expect(banner).to_contain_text(f"Critical path of step {STEP}: device ")
    box = page.locator(".timeline")
    until(page, lambda: box.get_attribute("data-highlighted"), "the highlighted events")
    watch.settle()
    assert int(box.get_attribute("data-highlight-total")) == len(rows)
    # the window drawn: the reply to `trace` for it
    a, b = int(box.get_attribute("data-window-start")), int(box.get_attribute("data-window-end"))
    assert a <= t0 + 1 and b >= t1 - 1, (a, b, t0, t1)
    drawn = None
    for r in reversed(replies):
        q = dict(parse_qsl(urlparse(r.url).query))
        if int(q.get("start_ns", -1)) == a and int(q.get("end_ns", -1)) == b:
            drawn = r.json()
            break
    assert drawn is not None, [r.url for r in replies]
    shown = {e["i"] for e in drawn["events"]} & rows
    assert shown, "no event of the path drawn"
    assert int(box.get_attribute("data-highlighted")) == len(shown)
    watch.page.evaluate("window.scrollTo(0, 0)")
    watch.shot("why-critical")
    banner.get_by_role("button", name="Clear").click()
    until(page, lambda: "cp" not in state(page), "cp cleared")
    expect(banner).to_have_count(0)
    until(page, lambda: box.get_attribute("data-highlighted") == "", "the highlight cleared")
    assert state(page)["t0"] == str(t0)  # the window stays
    assert_clean(watch)
