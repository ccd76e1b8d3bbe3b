"""The Trace view in a real browser (fixtures: browser_support.py), on the real V100 run (tests/data)
(CUDA kernels, launch flows, a GPU utilization track) and a torch 2.13 CPU sample
(forward -> backward flows, no utilization track).

What the canvas shows is checked through what the view mirrors into the DOM (the
timeline box's data-window-start/-end, data-selected, data-flows "from>to" of the arrows
drawn, data-counters) and through the details panel and tooltips, against the API's own
answers; never through pixels. Screenshots go to test-output/screenshots/ (look at them).
"""
from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, quote, urlparse

import pytest
from browser_support import API, COUNTER_H, GAP, HEADER_H, ROW_H, RULER_H, V100_RUN, get_json, hash_state, until

CPU_RUN = "cnn_dataloader_0workers"
RUNS = (V100_RUN, CPU_RUN)
UNITS = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}


# -- helpers ----------------------------------------------------------------------------------


class TraceTab:
    """The Trace view of one run, with the `trace` window requests the page made."""

    def __init__(self, watch, serve_url: str, run: str, **state: str):
        self.watch, self.page, self.base, self.run = watch, watch.page, serve_url, run
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url) if re.search(r"/trace\?", r.url) else None)
        watch.open(f"{serve_url}/{hash_state(view='Trace', run=run, **state)}")
        self.page.wait_for_selector(".timeline canvas", timeout=60_000)
        watch.settle()

    @property
    def box(self):
        return self.page.locator(".timeline")

    def window(self) -> tuple[int, int]:
        return int(self.box.get_attribute("data-window-start")), int(self.box.get_attribute("data-window-end"))

    def attr(self, name: str) -> str:
        return self.box.get_attribute(name) or ""

    def flows(self) -> set[str]:
        return set(self.attr("data-flows").split())

    def counters(self) -> list[str]:
        return [c for c in self.attr("data-counters").split("|") if c]

    def last_request(self) -> dict:
        q = parse_qs(urlparse(self.requests[-1]).query)
        return {k: v[0] for k, v in q.items()}

    def reply(self) -> dict:
        """The API's answer to the page's latest window request (asked again here)."""
        return get_json(self.requests[-1])[1]

    def canvas(self) -> dict:
        return self.page.locator(".timeline canvas").bounding_box()

    def wait_window_request(self) -> dict:
        """Until the page has asked the server for exactly the window it shows."""
        def asked():
            if not self.requests:
                return None
            r, (a, b) = self.last_request(), self.window()
            return r if r.get("start_ns") == str(a) and r.get("end_ns") == str(b) else None
        found = until(self.page, asked, "a trace request for the visible window")
        self.watch.settle()
        return found

    def event_xy(self, reply: dict, ev: dict) -> tuple[float, float]:
        """Page coordinates of the middle of an event's visible part (no scrolling yet)."""
        c = self.canvas()
        a, b = reply["window"]["start_ns"], reply["window"]["end_ns"]
        x0 = max(ev["ts_ns"], a)
        x1 = min(ev["ts_ns"] + ev["dur_ns"], b)
        x = (((x0 + x1) / 2) - a) / (b - a) * c["width"]
        y = RULER_H + COUNTER_H * len(self.counters())
        for t in reply["tracks"]:
            if t["id"] == ev["track"]:
                break
            y += HEADER_H + (t["max_depth"] + 1) * ROW_H + GAP
        y += HEADER_H + ev["depth"] * ROW_H + ROW_H / 2
        assert y < c["height"] - 4, "the event's row is below the visible area"
        return c["x"] + x, c["y"] + y

    def details(self) -> dict[str, str]:
        """The details panel's rows: label -> text."""
        panel = self.page.locator(".side-panel")
        panel.locator(".details").wait_for(timeout=30_000)
        rows = {}
        for row in panel.locator(".kv-row").all():
            rows[row.locator("dt").inner_text().strip()] = row.locator("dd").inner_text().strip()
        rows["<name>"] = panel.locator(".details-name").inner_text().strip()
        return rows


def parse_duration(text: str) -> float:
    num, unit = text.split()[:2]
    return float(num.replace(",", "")) * UNITS[unit]


def arg_text(v) -> str:
    """As the details panel shows an argument (JSON.stringify for non-strings)."""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def clean(watch) -> None:
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside


# -- zoom and pan ----------------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_zoom_and_pan_move_the_window_and_the_request(run, serve_url, watch):
    tab = TraceTab(watch, serve_url, run)
    _, whole = get_json(f"{serve_url}/{API}/trace?run={quote(run)}&width=100")
    a0, b0 = tab.window()
    assert (a0, b0) == (0, whole["span"]["end_ns"])
    c = tab.canvas()
    page = tab.page

    # Ctrl + wheel over the middle zooms in around the pointer
    page.mouse.move(c["x"] + c["width"] / 2, c["y"] + c["height"] / 2)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -400)
    page.keyboard.up("Control")
    until(page, lambda: tab.window()[1] - tab.window()[0] < (b0 - a0) / 2, "the wheel to zoom in")
    req = tab.wait_window_request()
    a1, b1 = tab.window()
    assert a0 < a1 < b1 < b0
    assert int(req["width"]) == int(c["width"])
    reply = tab.reply()
    assert (reply["window"]["start_ns"], reply["window"]["end_ns"]) == (a1, b1)
    watch.shot(f"timeline-{run}-zoomed")

    # dragging left (on the empty bottom of the plot) shows later time, the same span
    page.mouse.move(c["x"] + 700, c["y"] + c["height"] - 10)
    page.mouse.down()
    page.mouse.move(c["x"] + 600, c["y"] + c["height"] - 10, steps=5)
    page.mouse.move(c["x"] + 400, c["y"] + c["height"] - 10, steps=5)
    page.mouse.up()
    until(page, lambda: tab.window()[0] > a1, "the drag to pan")
    tab.wait_window_request()
    a2, b2 = tab.window()
    assert abs((b2 - a2) - (b1 - a1)) <= 2
    moved_px = (a2 - a1) / ((b1 - a1) / c["width"])
    assert 290 <= moved_px <= 310, moved_px

    # the view's controls: zoom out doubles the span, Whole trace shows everything
    page.get_by_role("button", name="Zoom out").click()
    until(page, lambda: tab.window()[1] - tab.window()[0] > (b2 - a2) * 1.5, "Zoom out")
    page.get_by_role("button", name="Whole trace").click()
    until(page, lambda: tab.window() == (a0, b0), "Whole trace")
    tab.wait_window_request()
    clean(watch)


# -- selection and details -------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_clicking_an_event_shows_the_api_details(run, serve_url, watch):
    _, found = get_json(f"{serve_url}/{API}/trace/search?run={quote(run)}&q=aten::conv2d&limit=1")
    m = found["matches"][0]
    # the operator a third of the window wide
    tab = TraceTab(watch, serve_url, run, t0=str(m["ts_ns"] - m["dur_ns"]), t1=str(m["ts_ns"] + 2 * m["dur_ns"]))
    reply = tab.reply()
    ev = next(e for e in reply["events"] if e["i"] == m["i"])
    tab.page.mouse.click(*tab.event_xy(reply, ev))
    until(tab.page, lambda: tab.attr("data-selected") == str(ev["i"]), "the click to select the event")
    _, api = get_json(f"{serve_url}/{API}/trace/event?run={quote(run)}&i={ev['i']}")
    shown = tab.details()
    assert shown["<name>"] == api["event"]["name"] == ev["name"]
    assert shown["Category"] == api["event"]["cat"]
    assert abs(parse_duration(shown["Duration"]) - api["event"]["dur_ns"]) <= 0.005 * api["event"]["dur_ns"]
    assert shown["Process"] == api["event"]["pid"] and shown["Thread / stream"] == api["event"]["tid"]
    args = {k: v for k, v in (api["args"] or {}).items() if k.lower() not in ("call stack", "python stack", "stack")}
    assert args, "the event has no arguments to compare"
    for k, v in args.items():
        assert shown.get(k) == arg_text(v), (k, shown.get(k), v)
    assert f"ev={ev['i']}" in urlparse(tab.page.url).fragment.split("&")
    watch.shot(f"timeline-{run}-details")
    clean(watch)


# -- search ----------------------------------------------------------------------------------
@pytest.mark.parametrize("run, q", [(V100_RUN, "CONV"), (CPU_RUN, "Conv")])
def test_search_counts_like_the_api_and_steps_through_matches(run, q, serve_url, watch):
    _, api = get_json(f"{serve_url}/{API}/trace/search?run={quote(run)}&q={quote(q)}&limit=3")
    count = api["count"]
    assert count > 3
    tab = TraceTab(watch, serve_url, run)
    page = tab.page
    page.get_by_label("Search events by name").fill(q)
    counter = page.locator(".search-count")
    until(page, lambda: counter.get_attribute("data-count") == str(count), "the match count")
    assert f"{count:,} matches" in counter.inner_text()

    def at(k: int) -> dict:
        return get_json(f"{serve_url}/{API}/trace/search?run={quote(run)}&q={quote(q)}&limit=1&offset={k}")[1][
            "matches"][0]

    def expect_selected(m: dict, k: int) -> None:
        until(page, lambda: tab.attr("data-selected") == str(m["i"]), f"match {k} to be selected")
        until(page, lambda: counter.inner_text().startswith(f"{k + 1:,} / "), f"the counter to say {k + 1}")
        a, b = tab.window()
        assert a <= m["ts_ns"] and m["ts_ns"] + m["dur_ns"] <= b, "the match is outside the window"
        assert tab.details()["<name>"] == m["name"]

    nxt = page.get_by_role("button", name="Next match")
    prev = page.get_by_role("button", name="Previous match")
    nxt.click()
    expect_selected(api["matches"][0], 0)
    nxt.click()
    expect_selected(api["matches"][1], 1)
    watch.shot(f"timeline-{run}-search")
    prev.click()
    expect_selected(api["matches"][0], 0)
    prev.click()  # wraps to the last match: another page of the server's list
    expect_selected(at(count - 1), count - 1)
    page.get_by_label("Search events by name").press("Enter")
    expect_selected(api["matches"][0], 0)
    page.get_by_label("Search events by name").fill("no-event-is-named-like-this")
    until(page, lambda: counter.inner_text() == "no matches", "no matches")
    tab.wait_window_request()
    clean(watch)


# -- flows -----------------------------------------------------------------------------------
def test_clicking_a_kernel_draws_the_arrow_from_its_launch(serve_url, watch):
    _, found = get_json(f"{serve_url}/{API}/trace/search?run={V100_RUN}&q=volta_scudnn&limit=5")
    kernel = found["matches"][3]
    _, detail = get_json(f"{serve_url}/{API}/trace/event?run={V100_RUN}&i={kernel['i']}")
    links = {link["relation"]: link for link in detail["links"]}
    rt, op = links["launched_by"], links["operator"]
    t0 = min(rt["ts_ns"], op["ts_ns"]) - 50_000
    t1 = kernel["ts_ns"] + kernel["dur_ns"] + 50_000
    tab = TraceTab(watch, serve_url, V100_RUN, t0=str(t0), t1=str(t1))
    assert tab.window() == (t0, t1)
    reply = tab.reply()
    shown = next(e for e in reply["events"] if e["i"] == kernel["i"])
    tab.page.mouse.click(*tab.event_xy(reply, shown))
    until(tab.page, lambda: tab.attr("data-selected") == str(kernel["i"]), "the kernel to be selected")
    until(tab.page, lambda: f"{rt['i']}>{kernel['i']}" in tab.flows(), "the launch arrow")
    assert f"{op['i']}>{kernel['i']}" in tab.flows()  # and the (dashed) one from its operator
    panel = tab.page.locator(".side-panel")
    assert panel.locator("li[data-relation=launched_by] button").inner_text() == rt["name"] == "cudaLaunchKernel"
    assert panel.locator("li[data-relation=operator] button").inner_text() == op["name"]
    watch.shot("timeline-v100-kernel-flow")

    # and the other way round: the runtime call's arrow points at the kernel
    panel.locator("li[data-relation=launched_by] button").click()
    until(tab.page, lambda: tab.attr("data-selected") == str(rt["i"]), "the launch call to be selected")
    until(tab.page, lambda: f"{rt['i']}>{kernel['i']}" in tab.flows(), "the arrow from the launch call")
    assert tab.page.locator(f".side-panel li[data-relation=launched][data-i='{kernel['i']}']").count() == 1
    clean(watch)


def test_forward_op_draws_the_arrow_to_its_backward_and_flows_in_view(serve_url, watch):
    _, whole = get_json(f"{serve_url}/{API}/trace?run={CPU_RUN}&width=1000")
    f = next(f for f in whole["flows"] if f["kind"] == "fwdbwd")
    tab = TraceTab(watch, serve_url, CPU_RUN, ev=str(f["from"]))
    until(tab.page, lambda: f"{f['from']}>{f['to']}" in tab.flows(), "the forward -> backward arrow")
    panel = tab.page.locator(".side-panel")
    _, bwd = get_json(f"{serve_url}/{API}/trace/event?run={CPU_RUN}&i={f['to']}")
    assert panel.locator(f"li[data-relation=backward][data-i='{f['to']}'] button").inner_text() == bwd["event"]["name"]
    assert len(tab.flows()) == len(get_json(f"{serve_url}/{API}/trace/event?run={CPU_RUN}&i={f['from']}")[1]["links"])

    # "Flows in view" adds every arrow of the window the server sent
    tab.page.get_by_label("Flows in view").check()
    reply = tab.reply()
    want = {f"{x['from']}>{x['to']}" for x in reply["flows"]}
    until(tab.page, lambda: want <= tab.flows(), "every flow in view")
    assert len(want) == reply["counts"]["flows"] > 10
    watch.shot("timeline-cpu-flows")
    clean(watch)


# -- utilization -----------------------------------------------------------------------------
def test_utilization_track_on_the_v100_run_shows_the_api_values(serve_url, watch):
    tab = TraceTab(watch, serve_url, V100_RUN)
    assert tab.counters()[0] == "GPU 0 utilization"
    assert tab.page.get_by_label("GPU utilization").is_checked()
    reply = tab.reply()
    (util,) = [c for c in reply["counters"] if c["kind"] == "utilization"]  # then the launch queue's
    assert util["bins"] == int(tab.canvas()["width"])
    c = tab.canvas()
    busy = [k for k, v in enumerate(util["values"]) if 0.2 < v < 0.98 and 0.2 < util["values"][k - 1] < 0.98]
    k = busy[len(busy) // 2]
    tab.page.mouse.move(c["x"] + k + 0.5, c["y"] + RULER_H + COUNTER_H / 2)
    tip = tab.page.locator(".tl-tip")
    tip.wait_for(timeout=10_000)
    assert "GPU 0 utilization" in tip.inner_text()
    shown = float(re.search(r"([\d.]+)%", tip.inner_text()).group(1))
    assert min(abs(shown - 100 * util["values"][j]) for j in (k - 1, k)) <= 0.051, (shown, util["values"][k - 1:k + 1])
    watch.shot("timeline-v100-utilization")

    tab.page.get_by_label("GPU utilization").uncheck()
    until(tab.page, lambda: "GPU 0 utilization" not in tab.counters(), "the track to hide")
    clean(watch)


def test_no_utilization_track_without_device_kernels(serve_url, watch):
    tab = TraceTab(watch, serve_url, CPU_RUN)
    assert tab.reply()["counters"] == []
    assert not any("utilization" in c for c in tab.counters())
    assert tab.page.get_by_label("GPU utilization").count() == 0
    assert tab.attr("data-window-end") == str(tab.reply()["span"]["end_ns"])
    clean(watch)
