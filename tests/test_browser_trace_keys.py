"""The Trace view's typed range, keyboard cursor, step-relative times and focus ring, in a real
browser (fixtures: browser_support.py) on the real V100 run (tests/data).

A range typed as "step N +10ms..+20ms" selects exactly [step N's start + 10 ms, + 20 ms) (the step's
start from the API's overview): the timeline's band, the statistics panel (its events as
`trace/range_stats` counts them), the URL, the window zoomed to it; a bad input says why and
changes nothing. A clicked event's details give its start as exact µs and relative to its step;
] / [ / Shift+arrows move the selection along its row to the event the window's reply (the API)
has next, the details following; with the details closed the cursor moves alone and Enter opens
them; Shift+↑ goes to the parent. The timeline shows a focus ring when focused by keyboard only,
at least 3:1 against the page. What the canvas shows is read from what the view mirrors into the
DOM (data-range-*, data-selected, data-cursor) and the panels, never from pixels.
Screenshot: test-output/screenshots/trace-keys.png.
"""
from __future__ import annotations

import re
from decimal import Decimal
from urllib.parse import parse_qs, quote, urlparse

import pytest
from browser_support import API, COUNTER_H, GAP, HEADER_H, ROW_H, RULER_H, V100_RUN, get_json, hash_state, until

MS = 1_000_000
UNITS = {"ns": 1, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}




def api(base: str, route: str, **params) -> dict:
    query = "&".join(f"{k}={quote(str(v))}" for k, v in {"run": V100_RUN, **params}.items())
    status, doc = get_json(f"{base}/{API}/{route}?{query}")
    assert status == 200, (route, status)
    return doc


def details(page) -> dict[str, str]:
    """The details panel's rows, label -> text, and its name as "<name>"."""
    panel = page.locator(".side-panel")
    panel.locator(".details").wait_for(timeout=30_000)
    rows = {r.locator("dt").inner_text().strip(): r.locator("dd").inner_text().strip() for r in panel.locator(".kv-row").all()}
    rows["<name>"] = panel.locator(".details-name").inner_text().strip()
    return rows


def exact_offset(text: str) -> tuple[int, int]:
    """"step 17 +103.250123 ms" -> (17, 103250123): exact, through Decimal (no float rounding)."""
    m = re.fullmatch(r"step (\d+) ([+-])([\d.]+) (ns|µs|ms|s)", text)
    assert m, text
    ns = Decimal(m.group(3)) * UNITS[m.group(4)]
    assert ns == ns.to_integral_value(), f"{text}: not a whole number of ns"
    return int(m.group(1)), int(ns) * (-1 if m.group(2) == "-" else 1)


def luminance(rgb: str) -> float:
    def chan(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(x) for x in re.findall(r"\d+", rgb)[:3])
    return 0.2126 * chan(r) + 0.7152 * chan(g) + 0.0722 * chan(b)


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def pick_run(reply: dict) -> tuple[dict, dict, dict]:
    """Three events A, B, C following each other on one host row of the window, each fully in it
    and at least 8 px wide, with no merged (busy) block between them (so the reply's next event
    is the row's next event), and A's row not the outermost (it has a parent)."""
    a, b = reply["window"]["start_ns"], reply["window"]["end_ns"]
    host = {t["id"] for t in reply["tracks"] if t["kind"] == "host"}
    ns_px = reply["ns_per_px"]
    busy = reply["busy"]
    busy_rows = list(zip(busy["track"], busy["depth"], busy["start_ns"], busy["end_ns"])) if isinstance(busy, dict) else \
        [(x["track"], x["depth"], x["start_ns"], x["end_ns"]) for x in busy]
    rows: dict[tuple[int, int], list[dict]] = {}
    for e in reply["events"]:
        rows.setdefault((e["track"], e["depth"]), []).append(e)
    for (track, depth), evs in sorted(rows.items()):
        if track not in host or depth < 1:
            continue
        evs.sort(key=lambda e: (e["ts_ns"], e["i"]))
        for x, y, z in zip(evs, evs[1:], evs[2:]):
            ok = all(a <= e["ts_ns"] and e["ts_ns"] + e["dur_ns"] <= b and e["dur_ns"] >= 8 * ns_px for e in (x, y, z))
            between = any(t == track and d == depth and s < z["ts_ns"] and t_end > x["ts_ns"] + x["dur_ns"]
                          for t, d, s, t_end in busy_rows)
            if ok and not between:
                return x, y, z
    pytest.fail("no three neighbouring host events to step through in the window")


def test_typed_range_keyboard_cursor_and_focus_ring(serve_url, watch):
    page = watch.page
    windows: list[str] = []
    page.on("request", lambda r: windows.append(r.url) if re.search(r"/trace\?", r.url) else None)
    steps = api(serve_url, "overview")["steps"]
    assert len(steps) >= 3
    step = steps[1]
    n, s0 = step["step"], step["start_ns"]
    assert step["end_ns"] - s0 > 20 * MS
    want = (s0 + 10 * MS, s0 + 20 * MS)

    watch.open(f"{serve_url}/{hash_state(view='Trace', run=V100_RUN)}")
    page.wait_for_selector(".timeline canvas", timeout=60_000)
    watch.settle()
    box = page.locator(".timeline")
    canvas = page.locator(".timeline canvas")
    attr = lambda name: box.get_attribute(name) or ""  # noqa: E731
    panel = page.locator(".range-stats")
    typed = page.get_by_label("Time range")

    # a bad range says what is wrong and selects nothing
    typed.fill("step 99999 +1ms..+2ms")
    typed.press("Enter")
    error = page.locator(".typed-range-error")
    until(page, lambda: error.count() == 1, "the typed range's error")
    assert "no step 99999" in error.inner_text()
    assert typed.get_attribute("aria-invalid") == "true"
    assert attr("data-range-start") == "" and panel.count() == 0

    # "step N +10ms..+20ms": exactly that window of the step, its statistics, the URL, the zoom
    typed.fill(f"step {n} +10ms..+20ms")
    typed.press("Enter")
    until(page, lambda: (attr("data-range-start"), attr("data-range-end")) == tuple(map(str, want)), "the typed range")
    assert error.count() == 0
    until(page, lambda: panel.count() and panel.get_attribute("data-events"), "the range statistics")
    assert (panel.get_attribute("data-start-ns"), panel.get_attribute("data-end-ns")) == tuple(map(str, want))
    stats = api(serve_url, "trace/range_stats", start_ns=want[0], end_ns=want[1])
    assert stats["events"] > 0 and int(panel.get_attribute("data-events")) == stats["events"]
    assert f"step {n} +10.000 ms – +20.000 ms" in panel.locator("h2").inner_text()
    assert typed.input_value() == f"step {n} +10.000ms..+20.000ms"  # what was understood, in the same grammar
    until(page, lambda: f"r0={want[0]}" in page.url and f"r1={want[1]}" in page.url, "the range in the URL")
    until(page, lambda: int(attr("data-window-start")) <= want[0] and want[1] <= int(attr("data-window-end"))
          and int(attr("data-window-end")) - int(attr("data-window-start")) <= 1.2 * (want[1] - want[0]), "the zoom to the range")

    # the window's events as the page got them (asked again): pick three neighbours on a row
    def window_reply() -> dict:
        def asked():
            if not windows:
                return None
            q = {k: v[0] for k, v in parse_qs(urlparse(windows[-1]).query).items()}
            return q.get("start_ns") == attr("data-window-start") and q.get("end_ns") == attr("data-window-end")
        until(page, asked, "the request for the window in view")
        watch.settle()
        return get_json(windows[-1])[1]

    reply = window_reply()
    ev_a, ev_b, ev_c = pick_run(reply)
    counters = len([c for c in attr("data-counters").split("|") if c])

    def xy(e: dict) -> tuple[float, float]:
        c = canvas.bounding_box()
        wa, wb = reply["window"]["start_ns"], reply["window"]["end_ns"]
        x = ((e["ts_ns"] + e["dur_ns"] / 2) - wa) / (wb - wa) * c["width"]
        y = RULER_H + COUNTER_H * counters
        for t in reply["tracks"]:
            if t["id"] == e["track"]:
                break
            y += HEADER_H + (t["max_depth"] + 1) * ROW_H + GAP
        y += HEADER_H + e["depth"] * ROW_H + ROW_H / 2
        assert y < c["height"] - 4, "the event's row is below the visible area"
        return c["x"] + x, c["y"] + y

    # a click selects A: its details give its start exactly, from the trace start and from its step
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.click(*xy(ev_a))
    until(page, lambda: attr("data-selected") == str(ev_a["i"]) and attr("data-cursor") == str(ev_a["i"]), "the click on A")
    shown = details(page)
    assert shown["<name>"] == ev_a["name"]
    ts = ev_a["ts_ns"]
    assert shown["Start"] == f"{ts // 1000:,}.{ts % 1000:03d} µs after the trace start"
    assert exact_offset(shown["Start in step"]) == (n, ts - s0)

    # ] : the details follow the selection to the row's next event in the API's window
    page.keyboard.press("]")
    until(page, lambda: attr("data-selected") == str(ev_b["i"]), "] to select the next event")
    until(page, lambda: details(page)["<name>"] == api(serve_url, "trace/event", i=ev_b["i"])["event"]["name"], "B's details")
    assert exact_offset(details(page)["Start in step"]) == (n, ev_b["ts_ns"] - s0)
    assert f"ev={ev_b['i']}" in urlparse(page.url).fragment.split("&")
    watch.shot("trace-keys")
    page.keyboard.press("[")
    until(page, lambda: attr("data-selected") == str(ev_a["i"]), "[ to select the previous event")
    page.keyboard.press("Shift+ArrowRight")
    until(page, lambda: attr("data-selected") == str(ev_b["i"]), "Shift+→ to select the next event")

    # Escape: the range first, then the details (the cursor stays); ] then moves the cursor alone,
    # and Enter opens its details
    page.keyboard.press("Escape")
    until(page, lambda: attr("data-range-start") == "" and panel.count() == 0, "Escape to clear the range")
    assert attr("data-selected") == str(ev_b["i"])
    page.keyboard.press("Escape")
    until(page, lambda: attr("data-selected") == "" and page.locator(".side-panel").count() == 0, "Escape to close the details")
    assert attr("data-cursor") == str(ev_b["i"])
    page.keyboard.press("]")
    until(page, lambda: attr("data-cursor") == str(ev_c["i"]), "] to move the cursor")
    assert attr("data-selected") == "" and page.locator(".side-panel").count() == 0
    page.keyboard.press("Enter")
    until(page, lambda: attr("data-selected") == str(ev_c["i"]), "Enter to open the cursor's details")
    assert details(page)["<name>"] == ev_c["name"]

    # Shift+↑: C's parent (the event one level up on its track that holds it, as the API has it)
    parent = [e for e in reply["events"] if e["track"] == ev_c["track"] and e["depth"] == ev_c["depth"] - 1
              and e["ts_ns"] <= ev_c["ts_ns"] and ev_c["ts_ns"] + ev_c["dur_ns"] <= e["ts_ns"] + e["dur_ns"]]
    assert len(parent) == 1
    page.keyboard.press("Shift+ArrowUp")
    until(page, lambda: attr("data-selected") == str(parent[0]["i"]), "Shift+↑ to select the parent")
    page.keyboard.press("Shift+ArrowDown")
    until(page, lambda: attr("data-cursor") not in ("", str(parent[0]["i"])), "Shift+↓ to select a child")
    child = int(attr("data-cursor"))
    assert any(e["i"] == child and e["depth"] == ev_c["depth"] and e["track"] == ev_c["track"] for e in reply["events"])

    # the focus ring: shown when the timeline is reached with the keyboard, not after a click
    # (a click on the ruler: nothing is selected there once the range is cleared)
    ring = "el => { const s = getComputedStyle(el.closest('.timeline')); return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }"
    typed.click()
    c = canvas.bounding_box()
    page.mouse.click(c["x"] + 5, c["y"] + RULER_H / 2)
    assert canvas.evaluate("el => document.activeElement === el && !el.matches(':focus-visible')")
    assert canvas.evaluate(ring)[0] == "none"
    typed.click()
    for _ in range(60):
        page.keyboard.press("Tab")
        if canvas.evaluate("el => document.activeElement === el"):
            break
    else:
        pytest.fail("Tab never reached the timeline")
    assert canvas.evaluate("el => el.matches(':focus-visible')")
    style, width, color = canvas.evaluate(ring)
    assert (style, width) == ("solid", "2px")
    page_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert contrast(color, page_bg) >= 3, (color, page_bg)
    # the range box's ring
    typed.focus()
    style, width, color = typed.evaluate("el => { const s = getComputedStyle(el); return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }")
    assert (style, width) == ("solid", "2px") and contrast(color, page_bg) >= 3, (style, width, color)

    # the keys are listed in the ? overlay
    page.keyboard.press("Escape")
    canvas.focus()
    page.keyboard.press("?")
    overlay = page.get_by_role("dialog", name="Keyboard shortcuts")
    until(page, lambda: overlay.count() == 1, "the ? overlay")
    listed = overlay.inner_text()
    for k in ("] / [", "Shift+↑ / Shift+↓", "Enter"):
        assert k in listed, k
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside
