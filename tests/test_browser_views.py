"""Memory, Module, Distributed and Diff views in a real browser, against the JSON API.

Debian's Chromium (Playwright) drives a real `tb-profiler serve` over real traces
(fixtures: browser_support.py). Each test does what a user does -- a drag across the memory
curve, a device, rank or side picked in a select, a tree row expanded -- and compares what
the page then shows with the API's answer for the state the URL ends up holding: the
visible figures (formatted as the frontend formats them, util/format.ts) and every row of
the tables through their CSV export (raw values, all rows, not just one page).

No sleeps: every wait is for a condition (a URL state, a response, a text).
"""
from __future__ import annotations

import bisect
import csv
import io
import math
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlparse

import pytest
from browser_support import API, V100_RUN, get_json, hash_state, wait_js

expect = pytest.importorskip("playwright.sync_api").expect

SAMPLE_CNN = "cnn_dataloader_0workers"   # torch 2.13 CPU run: memory with addresses, an nn.Module tree, 2 spans
DDP = "ddp_gloo_2ranks"              # 2 ranks over gloo, 2 spans


# -- the frontend's number formats (frontend/src/util/format.ts), to check visible text --
def _fixed(x: float, digits: int) -> str:
    """JS Number.prototype.toFixed: the exact binary value, halves away from zero."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _trim(s: str) -> str:
    return re.sub(r"\.?0+$", "", s) if "." in s else s


def _sig(x: float, n: int = 3) -> str:
    a = abs(x)
    int_digits = math.floor(math.log10(a)) + 1 if a >= 1 else 1
    return _trim(_fixed(x, max(0, n - int_digits)))


def _js(x: float) -> str:
    """A number as JS prints it in a template string (no trailing .0)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def fmt_duration(ns: float | None, digits: int = 3) -> str:
    if ns is None:
        return "–"
    a = abs(ns)
    if a == 0:
        return "0"
    for limit, div, unit in ((1e3, 1, "ns"), (1e6, 1e3, "µs"), (1e9, 1e6, "ms"), (60e9, 1e9, "s")):
        if a < limit:
            return f"{_sig(ns / div, digits)} {unit}"
    total_s = round(a / 1e9)
    return f"{'-' if ns < 0 else ''}{total_s // 60} min {total_s % 60} s"


def fmt_bytes(b: float | None) -> str:
    if b is None:
        return "–"
    a = abs(b)
    if a < 1024:
        return f"{_js(b)} B"
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u, v = 0, a
    while v >= 1024 and u < len(units) - 1:
        v /= 1024
        u += 1
    return f"{'-' if b < 0 else ''}{_sig(v)} {units[u]}"


def _locale(x: float, digits: int) -> str:
    """toLocaleString('en-US') with `digits` fraction digits (ICU rounds the shortest decimal)."""
    d = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{d:,.{digits}f}"


def fmt_us(ns: float | None) -> str:
    """A table cell of a µs column (DataTable kind "us")."""
    if ns is None:
        return "–"
    us = ns / 1e3
    a = abs(us)
    return _locale(us, 0 if a == 0 else 0 if a >= 100 else 1 if a >= 10 else 2 if a >= 1 else 3)


def fmt_delta_us(ns: float | None) -> str:
    """A table cell of a signed µs column (DataTable kind "delta_us")."""
    return "–" if ns is None else "0" if ns == 0 else ("+" if ns > 0 else "") + fmt_us(ns)


def fmt_pct(p: float | None) -> str:
    return "–" if p is None else f"{_fixed(p, 1)}%"


def rows_text(n: int) -> str:
    """The row count a DataTable's toolbar shows."""
    return f"{n:,} row{'' if n == 1 else 's'}"


# -- talking to the API and to the page -------------------------------------------------
def api(base: str, route: str, **params) -> dict:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    status, doc = get_json(f"{base}/{API}/{route}?{query}")
    assert status == 200, (route, params, doc)
    return doc


def state(page) -> dict[str, str]:
    """The app state the page's URL holds (its hash)."""
    return dict(parse_qsl(page.evaluate("location.hash").lstrip("#")))


def reply_to(route: str, **must):
    """A predicate for page.expect_response: the reply to `route` whose query has `must`."""
    def match(response) -> bool:
        url = urlparse(response.url)
        if not url.path.endswith(f"/{API}/{route}") or response.status != 200:
            return False
        query = dict(parse_qsl(url.query))
        return all((k in query) if v is True else (k not in query) if v is False else query.get(k) == str(v)
                   for k, v in must.items())
    return match


def card(page, title: str):
    """The view's section (card) whose heading is exactly `title`."""
    return page.locator("section.card").filter(
        has=page.locator("header.card-head h2").filter(has_text=re.compile(f"^{re.escape(title)}$")))


def picker(scope, label: str):
    """The <select> of a labelled Select (components/common.tsx) inside `scope` (a page or locator)."""
    page = getattr(scope, "page", scope)
    return scope.locator("label.select").filter(
        has=page.locator("span.select-label").filter(has_text=re.compile(f"^{re.escape(label)}$"))
    ).locator("select")


def stat(page, label: str):
    """A headline figure (components/common.tsx Stat) by its label."""
    return page.locator(".stat").filter(
        has=page.locator(".stat-label").filter(has_text=re.compile(f"^{re.escape(label)}$")))


def row_count(scope):
    """The toolbar text of the scope's table: "N rows" / "K of N rows"."""
    return scope.locator(".table-toolbar > span.muted")


def export_csv(scope) -> list[dict[str, str]]:
    """Every row of the scope's table as exported (filtered and sorted as shown, raw values)."""
    page = scope.page
    with page.expect_download() as download:
        scope.get_by_role("button", name="Export CSV").click()
    text = Path(download.value.path()).read_text(encoding="utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def _cell(v, kind: str):
    """A value normalized for comparison: numbers as floats, empty text as None."""
    if v is None or v == "":
        return None
    if kind == "num":
        return float(v)
    s = str(v)
    return s[1:] if s.startswith("'") and s[1:2] in ("=", "+", "-", "@") else s  # csv.ts guards formulas


def assert_same_rows(exported: list[dict[str, str]], api_rows: list[dict], spec: list[tuple]) -> None:
    """The exported table holds exactly the API's rows: spec is (CSV header, API key or
    function, "num" | "text") per column; rows compared as a multiset (the table sorts)."""
    assert exported, "the table exported no rows"
    missing = [h for h, _, _ in spec if h not in exported[0]]
    assert not missing, (missing, list(exported[0]))
    shown = Counter(tuple(_cell(r[h], kind) for h, _, kind in spec) for r in exported)
    wanted = Counter(tuple(_cell(k(r) if callable(k) else r.get(k), kind) for _, k, kind in spec) for r in api_rows)
    assert shown == wanted, (f"{sum((shown - wanted).values())} shown rows not in the API, "
                             f"{sum((wanted - shown).values())} API rows not shown: "
                             f"{list(shown - wanted)[:3]} / {list(wanted - shown)[:3]}")


def visible_rows(scope) -> list[list[str]]:
    """The cells' text of the rows the scope's table shows (the current page), a tree
    row's expander mark (▸ / ▾) left out."""
    return [[re.sub(r"^[▸▾]\s*", "", c.strip()) for c in r.locator("td").all_inner_texts()]
            for r in scope.locator("table.data tbody tr").all()]


def shot(watch, name: str) -> None:
    """A full-page screenshot from the top (the sticky top bar would cover what is under
    it at the scroll position the test left)."""
    watch.page.evaluate("window.scrollTo(0, 0)")
    watch.shot(name)


def assert_clean(watch) -> None:
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside


# -- Memory -----------------------------------------------------------------------------
MEM_STATS = [("Operator", "name", "text"), ("Calls", "calls", "num"),
             ("Size increase (bytes)", "size_increase", "num"), ("Self size increase (bytes)", "self_size_increase", "num"),
             ("Allocations", "allocation_count", "num"), ("Self allocations", "self_allocation_count", "num"),
             ("Allocation size (bytes)", "allocation_size", "num"),
             ("Self allocation size (bytes)", "self_allocation_size", "num"),
             ("Frees", "free_count", "num"), ("Free size (bytes)", "free_size", "num")]
MEM_EVENTS = [("Operator", "op", "text"), ("Parent operator", "parent_op", "text"), ("Size (bytes)", "bytes", "num"),
              ("Allocated at (ns)", "alloc_ns", "num"), ("Freed at (ns)", "free_ns", "num"),
              ("Lifetime (ns)", "duration_ns", "num"), ("Freed by", "free_op", "text"), ("Address", "addr", "text")]


def test_memory_peaks_per_device_match_api(serve_url, watch):
    """Every device of the V100 run (GPU0 and CPU): the headline figures are the API's peaks."""
    curve = api(serve_url, "memory_curve", run=V100_RUN, span="1")
    assert curve["devices"] == ["GPU0", "CPU"]
    watch.open(f"{serve_url}/{hash_state(view='Memory', run=V100_RUN, span='1')}")
    page = watch.page
    for device in curve["devices"]:
        peak = next(p for p in curve["peaks"] if p["device"] == device)
        if device != curve["default_device"]:
            picker(page, "Device").select_option(device)
            wait_js(page, f"() => location.hash.includes('dev={device}')")
        expect(card(page, f"Memory over time — {device}")).to_be_visible()
        _assert_curve_shows_the_peak(page, curve, device)
        _assert_drawn_curve_is_the_api_curve(page, curve, device)
        figure = stat(page, "Peak allocated")
        expect(figure.locator(".stat-value")).to_have_text(fmt_bytes(peak["peak_allocated"]))
        # the hover hint carries the exact figure, not just the rounded one
        assert figure.get_attribute("title").startswith(f"{int(peak['peak_allocated']):,} bytes")
        expect(stat(page, "Peak at").locator(".stat-value")).to_have_text(fmt_duration(peak["peak_allocated_ns"]))
        expect(stat(page, "Peak reserved").locator(".stat-value")).to_have_text(fmt_bytes(peak["peak_reserved"]))
        expect(stat(page, "Device memory").locator(".stat-value")).to_have_text(fmt_bytes(peak["total_memory"]))
        if peak["total_memory"]:
            share = 100 * peak["peak_allocated"] / peak["total_memory"]
            expect(stat(page, "Peak / device memory").locator(".stat-value")).to_have_text(fmt_pct(share))
            assert stat(page, "Device memory").get_attribute("title") == f"{int(peak['total_memory']):,} bytes"
        else:
            expect(stat(page, "Peak / device memory")).to_have_count(0)
        shot(watch, f"views-memory-{device.lower()}")
    assert_clean(watch)


# The memory chart's plot area inside its element (grid in Memory.tsx): left, right, top, bottom px.
PLOT = (80, 30, 36, 70)


def _assert_curve_shows_the_peak(page, curve: dict, device: str) -> None:
    """Hovering the curve where the API puts the peak shows the API's curve there (a point
    within 2 px of it, its time and bytes)."""
    chart = page.get_by_role("img", name=f"Memory over time, {device}")
    expect(chart).to_be_visible()
    peak = next(p for p in curve["peaks"] if p["device"] == device)
    points = curve["curves"][device]
    lo, hi = points[0]["ts_ns"], points[-1]["ts_ns"]
    left, right, top, bottom = PLOT
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    px_per_ns = (box["width"] - left - right) / (hi - lo)
    page.mouse.move(box["x"] + left + (peak["peak_allocated_ns"] - lo) * px_per_ns,
                    box["y"] + top + (box["height"] - top - bottom) / 2)
    title = chart.locator(".tt-title")
    expect(title).to_be_visible()
    shown = (title.inner_text(), title.locator("xpath=..").inner_text())
    near = [p for p in points if abs(p["ts_ns"] - peak["peak_allocated_ns"]) * px_per_ns <= 2]
    assert any(shown[0] == fmt_duration(p["ts_ns"]) and f"Allocated: {fmt_bytes(p['allocated'])}" in shown[1]
               for p in near), (shown, near)
    page.mouse.move(0, 0)
    expect(title).to_be_hidden()


# The top of the "Allocated" line in each pixel column of the plot (#5470c6, PALETTE[0]):
# opaque pixels only (the area under it is filled at 15% opacity).
TOP_OF_LINE_JS = """([left, right, top, bottom]) => {
    const c = document.querySelector('[aria-label="%s"] canvas');
    const r = window.devicePixelRatio || 1;
    const w = c.width, h = c.height;
    const d = c.getContext('2d').getImageData(0, 0, w, h).data;
    const out = [];
    for (let x = left; x < w / r - right; x++) {
        let found = -1;
        for (let y = Math.max(0, top - 4); y <= h / r - bottom + 2 && found < 0; y++) {
            const i = (Math.round(y * r) * w + Math.round(x * r)) * 4;
            if (d[i + 3] > 200 && Math.abs(d[i] - 84) < 30 && Math.abs(d[i + 1] - 112) < 30 && Math.abs(d[i + 2] - 198) < 30) found = y;
        }
        out.push(found);
    }
    return out;
}"""


def _column_levels(points: list[dict], width: float) -> list[float]:
    """Per pixel column of the plot, the highest level the API's step curve ("end": a
    point's level holds until the next point) reaches during that column."""
    ts = [p["ts_ns"] for p in points]
    lo, hi = ts[0], ts[-1]
    out = []
    for x in range(int(width)):
        a, z = lo + x / width * (hi - lo), lo + (x + 1) / width * (hi - lo)
        i, j = max(0, bisect.bisect_right(ts, a) - 1), bisect.bisect_left(ts, z)
        out.append(max(p["allocated"] for p in points[i:max(j, i + 1)]))
    return out


def _assert_drawn_curve_is_the_api_curve(page, curve: dict, device: str) -> None:
    """The line drawn in every pixel column stands as high as the API's curve there, on
    one scale fitted over the flat stretches, to 3 px and 2 columns (the line is 2 px wide,
    antialiased): the chart draws every point it gets, peaks included. (Client-side LTTB
    sampling once drew another curve, the peak mark floating over nothing.)"""
    chart = page.get_by_role("img", name=f"Memory over time, {device}")
    expect(chart).to_be_visible()
    page.mouse.move(0, 0)   # no axis pointer over the plot
    left, right, top, bottom = PLOT
    # read once the canvas is settled: two reads 250 ms apart agree (a re-render after the
    # device switch, a resize, may still be under way)
    read = lambda: page.evaluate(TOP_OF_LINE_JS % f"Memory over time, {device}", [left, right, top, bottom])
    tops = read()
    for _ in range(20):
        page.wait_for_timeout(250)
        again = read()
        if again == tops:
            break
        tops = again
    box = chart.bounding_box()
    width = box["width"] - left - right
    points = curve["curves"][device]
    levels = _column_levels(points, width)
    lo, hi = points[0]["ts_ns"], points[-1]["ts_ns"]
    peak = next(p for p in curve["peaks"] if p["device"] == device)
    peak_x = (peak["peak_allocated_ns"] - lo) / (hi - lo) * width
    rows = []   # (lowest, highest level within 2 columns, height drawn)
    for x, level in enumerate(levels):
        if abs(x - peak_x) < 20:   # the peak mark (a pin) is drawn over the peak
            continue
        near = levels[max(0, x - 2):x + 3]
        rows.append((min(near), max(near), (box["height"] - bottom) - tops[x] if tops[x] >= 0 else None))
    flat = [(v, h) for v, w, h in rows if v == w and h is not None]
    assert len(flat) >= 50, len(flat)   # enough to fit the scale
    scale = sum(v * h for v, h in flat) / sum(v * v for v, _ in flat)
    off = [(x, round(v), round(w), h) for x, (v, w, h) in enumerate(rows)
           if h is None or not scale * v - 3 <= h <= scale * w + 3]
    assert not off, f"{len(off)} of {len(rows)} columns drawn off the API's curve (column, levels, px): {off[:8]}"


def _drag_across_plot(page, chart, frac0: float, frac1: float, on_slider: bool = False) -> None:
    """Mouse drag across the plot area of the memory chart (its grid: Memory.tsx), or
    across the zoom slider under it (30 px high, 12 px from the bottom, as wide as the plot)."""
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    left, right, top, bottom = PLOT
    y = box["y"] + (box["height"] - 12 - 15 if on_slider else top + (box["height"] - top - bottom) / 2)
    width = box["width"] - left - right
    page.mouse.move(box["x"] + left + frac0 * width, y)
    page.mouse.down()
    page.mouse.move(box["x"] + left + frac1 * width, y, steps=12)
    page.mouse.up()


def test_memory_range_selection_filters_both_tables_like_the_api(serve_url, watch):
    """A drag across the curve selects a window: the URL holds it, the statistics and
    allocations tables show exactly the API's rows for it; Reset brings back the whole trace."""
    run = SAMPLE_CNN
    curve = api(serve_url, "memory_curve", run=run)
    device = curve["default_device"]
    points = curve["curves"][device]
    t0, t1 = points[0]["ts_ns"], points[-1]["ts_ns"]
    whole_stats = api(serve_url, "memory", run=run, device=device)["rows"]
    whole_events = api(serve_url, "memory_events", run=run, device=device)
    assert whole_events["total"] > 100 and not whole_events["truncated"]

    watch.open(f"{serve_url}/{hash_state(view='Memory', run=run)}")
    page = watch.page
    stats_card, events_card = card(page, "Memory by operator"), card(page, "Allocations")
    expect(row_count(events_card)).to_have_text(rows_text(whole_events["total"]))
    expect(row_count(stats_card)).to_have_text(rows_text(len(whole_stats)))

    chart = page.get_by_role("img", name=f"Memory over time, {device}")
    with page.expect_response(reply_to("memory_events", start_ns=True)) as ev_reply, \
            page.expect_response(reply_to("memory", start_ns=True)) as st_reply:
        _drag_across_plot(page, chart, 0.25, 0.55)
    st = state(page)
    m0, m1 = int(st["m0"]), int(st["m1"])
    # the window is where the mouse went (to a few pixels), on the curve's time axis
    assert abs(m0 - (t0 + 0.25 * (t1 - t0))) < 0.01 * (t1 - t0), (m0, t0, t1)
    assert abs(m1 - (t0 + 0.55 * (t1 - t0))) < 0.01 * (t1 - t0), (m1, t0, t1)
    # both tables asked the API for exactly the URL's window
    for reply in (ev_reply.value, st_reply.value):
        query = dict(parse_qsl(urlparse(reply.url).query))
        assert (query.get("start_ns"), query.get("end_ns"), query.get("device")) == (str(m0), str(m1), device), reply.url
    expect(page.get_by_text(f"Range {fmt_duration(m0)} – {fmt_duration(m1)}")).to_be_visible()

    stats = api(serve_url, "memory", run=run, device=device, start_ns=m0, end_ns=m1)["rows"]
    events = api(serve_url, "memory_events", run=run, device=device, start_ns=m0, end_ns=m1)
    # the window must really restrict both tables, else this test would prove nothing
    assert 0 < events["total"] < whole_events["total"] and not events["truncated"]
    assert 0 < len(stats) and stats != whole_stats
    for scope, n in ((events_card, events["total"]), (stats_card, len(stats))):
        expect(scope.get_by_text("Updating…")).to_have_count(0)
        expect(row_count(scope)).to_have_text(rows_text(n))
    assert_same_rows(export_csv(events_card), events["rows"], MEM_EVENTS)
    assert_same_rows(export_csv(stats_card), stats, MEM_STATS)
    # the first allocation shown (sorted by time, allocations from before the trace first)
    first = min(events["rows"], key=lambda r: (r["alloc_ns"] is not None, r["alloc_ns"] or 0))
    assert visible_rows(events_card)[0][3] == fmt_us(first["alloc_ns"])
    shot(watch, "views-memory-range")

    # the slider under the curve: a drag on it outside the current window selects a new one
    with page.expect_response(reply_to("memory_events", start_ns=True)) as ev_reply:
        _drag_across_plot(page, chart, 0.65, 0.9, on_slider=True)
    st = state(page)
    m0, m1 = int(st["m0"]), int(st["m1"])
    assert abs(m0 - (t0 + 0.65 * (t1 - t0))) < 0.01 * (t1 - t0), (m0, t0, t1)
    assert abs(m1 - (t0 + 0.9 * (t1 - t0))) < 0.01 * (t1 - t0), (m1, t0, t1)
    query = dict(parse_qsl(urlparse(ev_reply.value.url).query))
    assert (query.get("start_ns"), query.get("end_ns")) == (str(m0), str(m1))
    events = api(serve_url, "memory_events", run=run, device=device, start_ns=m0, end_ns=m1)
    stats = api(serve_url, "memory", run=run, device=device, start_ns=m0, end_ns=m1)["rows"]
    for scope, n in ((events_card, events["total"]), (stats_card, len(stats))):
        expect(scope.get_by_text("Updating…")).to_have_count(0)
        expect(row_count(scope)).to_have_text(rows_text(n))
    assert_same_rows(export_csv(events_card), events["rows"], MEM_EVENTS)
    assert_same_rows(export_csv(stats_card), stats, MEM_STATS)

    page.get_by_role("button", name="Reset range").click()   # (the whole trace's rows come from the cache)
    wait_js(page, "() => !/[#&]m[01]=/.test(location.hash)")
    expect(row_count(events_card)).to_have_text(rows_text(whole_events["total"]))
    expect(row_count(stats_card)).to_have_text(rows_text(len(whole_stats)))
    assert_same_rows(export_csv(stats_card), whole_stats, MEM_STATS)
    assert_clean(watch)


# -- Module -----------------------------------------------------------------------------
MODULE_COLS = [("Module", "name", "text"), ("Type", "module_type", "text"), ("Calls", "calls", "num"),
               ("Operators", "operators", "num"), ("Host total (ns)", "host_total_ns", "num"),
               ("Host self (ns)", "host_self_ns", "num"), ("Device total (ns)", "device_total_ns", "num"),
               ("Device self (ns)", "device_self_ns", "num")]


def _preorder(rows: list[dict]) -> list[tuple[int, dict]]:
    """(depth, row) in the tree table's order: parents before children, siblings as the API lists them."""
    children: dict[int, list[dict]] = {}
    ids = {r["node_id"] for r in rows}
    roots = [r for r in rows if r["parent_id"] not in ids]
    for r in rows:
        if r["parent_id"] in ids:
            children.setdefault(r["parent_id"], []).append(r)
    out: list[tuple[int, dict]] = []

    def walk(r: dict, depth: int) -> None:
        out.append((depth, r))
        for c in children.get(r["node_id"], []):
            walk(c, depth + 1)
    for r in roots:
        walk(r, 0)
    return out


def _canvas_ink(canvas) -> float:
    """The share of the canvas's pixels not of its background (its bottom-right pixel: the
    flame graph paints its background first, then a 20 px row per depth, 4 px spare below)."""
    return canvas.evaluate("""c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const bg = d.slice(d.length - 4);
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (d[i] !== bg[0] || d[i + 1] !== bg[1] || d[i + 2] !== bg[2]) n++;
        return n / (c.width * c.height);
    }""")


def _assert_flame_top_left(page, flame, nodes: list[dict]) -> None:
    """Hovering the left of the flame graph's top row names the root drawn there, with its time."""
    canvas = flame.locator("canvas").first
    expect(canvas).to_be_visible()
    box = canvas.bounding_box()
    assert box["width"] > 100 and box["height"] >= 20
    assert _canvas_ink(canvas) > 0.2   # drawn, not just its background
    lo, hi = min(n["start_ns"] for n in nodes), max(n["end_ns"] for n in nodes)
    at = lo + 0.01 * (hi - lo)
    node = next(n for n in nodes if n["start_ns"] <= at < n["end_ns"])
    page.mouse.move(box["x"] + 0.01 * box["width"], box["y"] + 8)
    tip = flame.locator(".tl-tip")
    expect(tip.locator(".tl-tip-name")).to_have_text(node["name"])
    expect(tip).to_contain_text(fmt_duration(node["end_ns"] - node["start_ns"]))


def test_module_tree_matches_api_expands_and_draws_the_flame_graph(serve_url, watch):
    run = SAMPLE_CNN
    rows = api(serve_url, "module", run=run)["rows"]
    tree = api(serve_url, "tree", run=run)
    assert rows and tree["nodes"]
    order = _preorder(rows)
    watch.open(f"{serve_url}/{hash_state(view='Module', run=run)}")
    page = watch.page
    table = card(page, "Modules")
    expect(row_count(table)).to_have_text(rows_text(len(rows)))

    # every row, in tree order with its depth, with the API's numbers (CSV: raw ns)
    exported = export_csv(table)
    assert [(int(r["Depth"]), r["Module"]) for r in exported] == [(d, r["name"]) for d, r in order]
    assert_same_rows(exported, rows, MODULE_COLS)
    # and as shown: name, host and device times in µs, every row expanded (the tree is small)
    shown = visible_rows(table)
    assert len(shown) == len(order)
    for cells, (_, r) in zip(shown, order):
        assert cells[0] == r["name"], cells
        assert cells[4:8] == [fmt_us(r[k]) for k in ("host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns")], (cells, r)

    # collapse everything, then expand the first root: its children, in order, appear under it
    roots = [r for d, r in order if d == 0]
    first = roots[0]
    kids = [r for d, r in order if r["parent_id"] == first["node_id"]]
    assert kids
    table.get_by_role("button", name="Collapse all").click()
    expect(table.locator("table.data tbody tr")).to_have_count(len(roots))
    expander = table.locator("table.data tbody tr").first.get_by_role("button", name="Expand")
    expander.click()
    expect(table.locator("table.data tbody tr")).to_have_count(len(roots) + len(kids))
    names = [cells[0] for cells in visible_rows(table)]
    assert names == [first["name"]] + [k["name"] for k in kids] + [r["name"] for r in roots[1:]]
    expect(table.locator("table.data tbody tr").first.get_by_role("button", name="Collapse")).to_have_attribute("aria-expanded", "true")

    # the flame graph is drawn from the tree: the whole trace's aggregate, each module once
    flame = card(page, "Flame graph (nn.Module)")
    _assert_flame_top_left(page, flame, tree["nodes"])
    shot(watch, "views-module")

    # one step: the URL holds it, the tree is asked for it, and the graph draws that step's
    # module calls as they ran (the first call, not the aggregate of every call)
    step = str(api(serve_url, "overview", run=run)["steps"][0]["step"])
    calls = api(serve_url, "tree", run=run, step=step)["calls"]
    assert calls and calls[0]["end_ns"] - calls[0]["start_ns"] != tree["nodes"][0]["end_ns"] - tree["nodes"][0]["start_ns"]
    page.mouse.move(0, 0)
    with page.expect_response(reply_to("tree", step=step)):
        picker(flame, "Step").select_option(step)
    assert state(page)["step"] == step
    _assert_flame_top_left(page, flame, calls)
    assert_clean(watch)


# -- Distributed ------------------------------------------------------------------------
FIGURES = [("Rank", "rank", "num"), ("Worker", "worker", "text"), ("Step time (ns)", "step_ns", "num"),
           ("Computation (ns)", "computation_ns", "num"), ("Communication (ns)", "communication_ns", "num"),
           ("Overlap (ns)", "overlap_ns", "num"), ("Other (ns)", "other_ns", "num"),
           ("Waiting (ns)", "wait_ns", "num"), ("Transfer (ns)", "transfer_ns", "num")]
COMMOPS = [("Rank", "rank", "num"), ("Collective", "name", "text"), ("Process group", "pg_name", "text"),
           ("Group size", "group_size", "num"), ("Calls", "calls", "num"), ("Data (bytes)", "bytes", "num"),
           ("Data out (bytes)", "out_bytes", "num"), ("Total time (ns)", "total_ns", "num"),
           ("Mean time (ns)", "avg_ns", "num"), ("algbw (GB/s)", "algbw_gbps", "num"),
           ("busbw (GB/s)", "busbw_gbps", "num"), ("Timed on", "time_on", "text"),
           ("Waiting (ns)", "wait_ns", "num"), ("Transfer (ns)", "transfer_ns", "num")]


def _shown(spec: list[tuple], rows: list[dict]) -> list[tuple]:
    """The columns the Distributed view shows for these rows: the rank's and the name's
    always, any other only where some row has a value (empty columns are hidden)."""
    return [c for c in spec if c[1] in ("rank", "name", "worker")
            or any((c[1](r) if callable(c[1]) else r.get(c[1])) not in (None, "") for r in rows)]


def _fmt_gbps(x: float | None) -> str:
    """A bandwidth cell: toLocaleString('en-US', {maximumSignificantDigits: 3})."""
    if x is None:
        return "–"
    d = Decimal(repr(float(x)))
    return f"{d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP).normalize():,f}"


def _joined(overlap: list[dict], wait: list[dict]) -> list[dict]:
    by = {(w["rank"], w.get("step")): w for w in wait}
    return [{**r, **{k: by[(r["rank"], r.get("step"))][k] for k in ("wait_ns", "transfer_ns")}} for r in overlap]


def test_distributed_figures_and_collectives_per_rank_match_api(serve_url, watch):
    overlap = api(serve_url, "distributed/overlap", run=DDP)
    wait = api(serve_url, "distributed/waittime", run=DDP)
    ops = api(serve_url, "distributed/commops", run=DDP)
    assert [r["rank"] for r in overlap["ranks"]] == [0, 1] and ops["rows"]
    watch.open(f"{serve_url}/{hash_state(view='Distributed', run=DDP)}")
    page = watch.page
    expect(page.get_by_text(overlap["info"]["backend"], exact=True)).to_be_visible()

    # per rank: computation / communication / overlap / other (and waiting / transfer)
    figures = card(page, "Computation and communication")
    expect(figures.get_by_role("img", name="Computation and communication per rank")).to_be_visible()
    expect(row_count(figures)).to_have_text(rows_text(len(overlap["ranks"])))
    per_rank = _joined(overlap["ranks"], wait["ranks"])
    assert_same_rows(export_csv(figures), per_rank, FIGURES + [("Steps", "steps", "num")])
    # every figure says what it covers, and each rank's Communication is set beside the Overview's
    steps = {r["steps"] for r in overlap["ranks"]}
    assert len(steps) == 1  # the sample profiles the same steps on both ranks
    expect(figures.get_by_text(f"Per rank: each figure is the total over {next(iter(steps))} steps")).to_be_visible()
    assert figures.locator("ul.comm-lines li").all_inner_texts() == \
        [f"rank {r['rank']}: {r['communication_note']}" for r in overlap["ranks"]]
    for cells in visible_rows(figures):
        r = next(x for x in per_rank if str(x["rank"]) == cells[0])
        assert cells[1] == r["worker"]
        assert cells[3:] == [fmt_us(r[k]) for k in ("step_ns", "computation_ns", "communication_ns", "overlap_ns",
                                                     "other_ns", "wait_ns", "transfer_ns")], (cells, r)
    shot(watch, "views-distributed")

    # per rank and step
    page.get_by_role("tab", name="Per rank and step").click()
    expect(row_count(figures)).to_have_text(rows_text(len(overlap["steps"])))
    expect(figures.get_by_text("Per rank and step: each figure is one step")).to_be_visible()
    assert_same_rows(export_csv(figures), _joined(overlap["steps"], wait["steps"]), FIGURES + [("Step", "step", "num")])

    # the collectives, one rank at a time, then all
    collectives = card(page, "Collectives")
    expect(collectives.get_by_text(f"Per rank and collective, total over {next(iter(steps))} steps; bandwidth in GB/s "
                                   "(nccl-tests' algbw and busbw)")).to_be_visible()
    for rank in sorted({r["rank"] for r in ops["rows"]}):
        mine = [r for r in ops["rows"] if r["rank"] == rank]
        picker(collectives, "Rank").select_option(str(rank))
        expect(row_count(collectives)).to_have_text(rows_text(len(mine)))
        cols = _shown(COMMOPS, mine)
        exported = export_csv(collectives)
        assert list(exported[0]) == [h for h, _, _ in cols]  # a column empty for every row is hidden
        assert_same_rows(exported, mine, cols)
        at = {h.split(" (")[0]: i for i, h in enumerate(collectives.locator("table.data thead th").all_inner_texts())}
        for cells in visible_rows(collectives):
            r = next(x for x in mine if x["name"] == cells[at["Collective"]]
                     and ("Process group" not in at or x["pg_name"] == cells[at["Process group"]]))
            assert cells[at["Rank"]] == str(rank) and cells[at["Group size"]] == str(r["group_size"])
            assert [cells[at[h]] for h in ("Total time", "Mean time", "Timed on")] == \
                [fmt_us(r["total_ns"]), fmt_us(r["avg_ns"]), r["time_on"]]
            for h, k in (("algbw", "algbw_gbps"), ("busbw", "busbw_gbps")):
                assert h not in at or cells[at[h]] == _fmt_gbps(r[k])
    picker(collectives, "Rank").select_option("all")
    expect(row_count(collectives)).to_have_text(rows_text(len(ops["rows"])))
    assert_same_rows(export_csv(collectives), ops["rows"], _shown(COMMOPS, ops["rows"]))
    assert_clean(watch)


# -- Diff -------------------------------------------------------------------------------
SIDE = {"a": "A only", "b": "B only", "both": "both"}


def _metric(header: str, key: str) -> list[tuple]:
    unit = "" if key == "calls" else " (ns)"
    return [(f"{header} A{unit}", f"{key}_a", "num"), (f"{header} B{unit}", f"{key}_b", "num"),
            (f"Δ {header}{unit}", f"{key}_delta", "num")]


DIFF_OPS = [("Operator", "name", "text"), ("In", lambda r: SIDE[r["side"]], "text"), *_metric("Calls", "calls"),
            *_metric("Host self", "host_self_ns"), *_metric("Host total", "host_total_ns"),
            *_metric("Device self", "device_self_ns"), *_metric("Device total", "device_total_ns")]
DIFF_KERNELS = [("Kernel", "name", "text"), ("In", lambda r: SIDE[r["side"]], "text"), *_metric("Calls", "calls"),
                *_metric("Time", "total_ns")]
DIFF_MODULES = [("Path", "path", "text"), ("In", lambda r: SIDE[r["side"]], "text"), *_metric("Calls", "calls"),
                *_metric("Host total", "host_total_ns"), *_metric("Device total", "device_total_ns")]


def side_picker(page, label: str):
    return page.locator(".side-picker").filter(has=page.locator(".side-label", has_text=label))


def sides(page) -> dict:
    """The diff's two sides as the pickers show them, as API parameters."""
    a, b = side_picker(page, "A (baseline)"), side_picker(page, "B (experiment)")
    return {"run": picker(a, "Run").input_value(), "worker": picker(a, "Worker").input_value(),
            "span": picker(a, "Span").input_value(), "exp_run": picker(b, "Run").input_value(),
            "exp_worker": picker(b, "Worker").input_value(), "exp_span": picker(b, "Span").input_value()}


def _delta_text(ns: float | None) -> str:
    return "–" if ns is None else "0" if ns == 0 else ("+" if ns > 0 else "") + fmt_duration(ns)


def test_diff_pickers_change_side_b_and_the_deltas_follow_the_api(serve_url, watch):
    watch.open(f"{serve_url}/{hash_state(view='Diff', run=V100_RUN)}")
    page = watch.page
    b = side_picker(page, "B (experiment)")
    # defaults: the run's latest span against its oldest
    expect(picker(b, "Span")).to_have_value("1")
    assert sides(page) == {"run": V100_RUN, "worker": "worker0", "span": "2",
                           "exp_run": V100_RUN, "exp_worker": "worker0", "exp_span": "1"}

    # B: another run -> the URL holds it and the diff is asked for it
    with page.expect_response(reply_to("diff", exp_run=SAMPLE_CNN)):
        picker(b, "Run").select_option(SAMPLE_CNN)
    assert state(page)["erun"] == SAMPLE_CNN
    expect(picker(b, "Worker")).to_have_value(SAMPLE_CNN)
    expect(picker(b, "Span")).to_have_value("2")   # another run: its latest span
    # B: its other span
    with page.expect_response(reply_to("diff", exp_run=SAMPLE_CNN, exp_span="1")):
        picker(b, "Span").select_option("1")
    assert state(page)["espan"] == "1"
    # A: its other span
    a = side_picker(page, "A (baseline)")
    with page.expect_response(reply_to("diff", span="1", exp_span="1")):
        picker(a, "Span").select_option("1")
    assert state(page)["span"] == "1"
    params = sides(page)
    assert params == {"run": V100_RUN, "worker": "worker0", "span": "1",
                      "exp_run": SAMPLE_CNN, "exp_worker": SAMPLE_CNN, "exp_span": "1"}
    diff = api(serve_url, "diff", **params)

    s = diff["summary"]
    expect(stat(page, "Average step, A").locator(".stat-value")).to_have_text(fmt_duration(s["step_time_avg_ns_a"], 4))
    expect(stat(page, "Average step, B").locator(".stat-value")).to_have_text(fmt_duration(s["step_time_avg_ns_b"], 4))
    expect(stat(page, "B − A").locator(".stat-value")).to_contain_text(_delta_text(s["step_time_avg_ns_delta"]))

    table = card(page, "Operators")
    expect(row_count(table)).to_have_text(rows_text(len(diff["operators"])))
    exported = export_csv(table)
    assert_same_rows(exported, diff["operators"], DIFF_OPS)
    # in the API's order: the largest change first, a saving as much as a loss
    assert [r["Operator"] for r in exported] == [r["name"] for r in diff["operators"]]
    top = diff["operators"][0]
    cells = visible_rows(table)[0]
    assert cells[:2] == [top["name"], SIDE[top["side"]]]
    assert cells[5:8] == [fmt_us(top["host_self_ns_a"]), fmt_us(top["host_self_ns_b"]),
                          fmt_delta_us(top["host_self_ns_delta"])]
    # a delta column sorts by the size of the change, never by its sign
    table.get_by_role("button", name=re.compile("^Δ Host self")).click()
    expect(table.get_by_role("columnheader", name=re.compile("^Δ Host self"))).to_have_attribute("aria-sort", "descending")
    shown = [float(r["Δ Host self (ns)"]) for r in export_csv(table)]
    assert shown == sorted((r["host_self_ns_delta"] for r in diff["operators"]), key=abs, reverse=True)
    assert min(shown) < 0 < max(shown)
    shot(watch, "views-diff")

    page.get_by_role("tab", name="Kernels").click()
    kernels = card(page, "Kernels")
    expect(row_count(kernels)).to_have_text(rows_text(len(diff["kernels"])))
    assert diff["kernels"] and {r["side"] for r in diff["kernels"]} == {"a"}   # the CPU run has no kernels
    assert_same_rows(export_csv(kernels), diff["kernels"], DIFF_KERNELS)
    assert_clean(watch)


DIFF_BREAKDOWN = [("Category", "label", "text"), ("A (ns)", "time_ns_a", "num"), ("B (ns)", "time_ns_b", "num"),
                  ("Δ (ns)", "time_ns_delta", "num"), ("Δ of A's step (%)", "delta_pct", "num")]


def test_diff_leads_with_the_step_time_breakdown(serve_url, watch):
    """The V100 run against the CPU sample: the view's first section is the step-time
    breakdown, its rows the API's in the API's order (largest |delta| first), and its
    cells the API's numbers."""
    watch.open(f"{serve_url}/{hash_state(view='Diff', run=V100_RUN, erun=SAMPLE_CNN)}")
    page = watch.page
    expect(picker(side_picker(page, "B (experiment)"), "Run")).to_have_value(SAMPLE_CNN)
    first = page.locator("section.card").first
    expect(first.locator("header.card-head h2")).to_have_text("Step time breakdown (per step)")
    diff = api(serve_url, "diff", **sides(page))
    rows = diff["breakdown"]
    assert [abs(r["time_ns_delta"]) for r in rows] == sorted((abs(r["time_ns_delta"]) for r in rows), reverse=True)
    assert {r["category"] for r in rows} == {"kernel", "memcpy", "memset", "communication", "runtime", "dataloader",
                                             "cpu_exec", "other"}
    expect(row_count(first)).to_have_text(rows_text(len(rows)))
    exported = export_csv(first)
    assert_same_rows(exported, rows, DIFF_BREAKDOWN)
    assert [r["Category"] for r in exported] == [r["label"] for r in rows]
    shown = visible_rows(first)
    for cells, r in zip(shown, rows):
        assert cells == [r["label"], fmt_us(r["time_ns_a"]), fmt_us(r["time_ns_b"]), fmt_delta_us(r["time_ns_delta"]),
                         fmt_pct(r["delta_pct"])]
    # the CPU run has no kernels: the V100's 98.5 ms of kernels per step is the largest change
    assert shown[0][0] == "Kernel" and rows[0]["time_ns_b"] == 0
    expect(first.locator("canvas").first).to_be_visible()
    shot(watch, "views-diff-breakdown")
    assert_clean(watch)


def test_diff_modules_tree_matches_diffnode(serve_url, watch):
    """B picked as one worker of the DDP run; the modules tab's tree is diffnode's, level by level."""
    watch.open(f"{serve_url}/{hash_state(view='Diff', run=SAMPLE_CNN)}")
    page = watch.page
    b = side_picker(page, "B (experiment)")
    with page.expect_response(reply_to("diff", exp_run=DDP)):
        picker(b, "Run").select_option(DDP)
    expect(picker(b, "Worker")).to_have_value("All")   # several workers: every one by default
    with page.expect_response(reply_to("diff", exp_run=DDP, exp_worker="rank1")):
        picker(b, "Worker").select_option("rank1")
    assert (state(page)["erun"], state(page)["eworker"]) == (DDP, "rank1")
    params = sides(page)
    assert params["exp_worker"] == "rank1" and params["run"] == SAMPLE_CNN
    diff = api(serve_url, "diff", **params)

    page.get_by_role("tab", name="Modules").click()
    table = card(page, "Modules")
    expect(row_count(table)).to_have_text(rows_text(len(diff["modules"])))
    assert_same_rows(export_csv(table), diff["modules"], DIFF_MODULES)

    roots = api(serve_url, "diffnode", **params)["children"]

    def path_col() -> list[str]:
        return [cells[1] for cells in visible_rows(table)]

    assert sorted(path_col()) == sorted(r["path"] for r in roots)
    found = {r["side"] for r in roots}
    assert {"a", "b"} <= found, found   # two different models: roots on one side only
    first = path_col()[0]
    node = api(serve_url, "diffnode", path=first, **params)
    assert node["children"]
    row = table.locator("table.data tbody tr").first
    row.get_by_role("button", name="Expand").click()
    expect(table.locator("table.data tbody tr")).to_have_count(len(roots) + len(node["children"]))
    shown = path_col()
    assert sorted(shown[1:1 + len(node["children"])]) == sorted(c["path"] for c in node["children"])
    for cells in visible_rows(table)[1:1 + len(node["children"])]:
        child = next(c for c in node["children"] if c["path"] == cells[1])
        assert cells[2] == SIDE[child["side"]]
        assert cells[6:9] == [fmt_us(child["host_total_ns_a"]), fmt_us(child["host_total_ns_b"]),
                              fmt_delta_us(child["host_total_ns_delta"])]
    shot(watch, "views-diff-modules")
    assert_clean(watch)
