"""Issue 11, polish, in a real browser (fixtures: browser_support.py):

- every chart axis shows nice ticks: multiples of 1, 2, 2.5 or 5 x 10^k in one unit per
  axis (ns/us/ms/s, B/KiB/MiB/GiB), never "1.23 ms" or "37.8 MiB" -- the step-time bars,
  the Operator bars, the Memory curve, the Distributed bars, the launch histograms, the
  timeline's ruler;
- a name holding U+202E is drawn on the timeline's canvas with the control as a visible
  marker (never the raw control, which would draw the label reversed), and isolated (<bdi>)
  in the timeline's tooltip and the details panel;
- a chart's title and subtitle never overlap each other or anything drawn in the chart
  (the Operator view's "Host total time" bars had their subtitle over the title);
- "N files skipped" counts each broken file once: two broken traces, "2 files skipped".

What a canvas shows is read as drawn: an init script wraps CanvasRenderingContext2D's
fillText and records every text with its box on the page (from measureText and the
context's transform) and the aria-label of the chart or canvas it was drawn in. The tick
labels of one axis are the number-and-unit texts drawn on one line of one chart (same
baseline: an x axis or the ruler; same right edge: a y axis).
"""
from __future__ import annotations

import json
import math
import re
import shutil
import sys
import time

import pytest
from browser_support import API, V100_RUN, free_port, get_json, hash_state, start_server, wait_js
from datafiles import V100_RUN as V100_RUN_DIR

expect = pytest.importorskip("playwright.sync_api").expect

RLO = "\u202e"
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
EVIL_KERNEL = f"void gemm{RLO}exe.kernel"
EVIL_OP = f"aten::add{RLO}gpj.exe"
EVIL_THREAD = f"worker{RLO}thread"
MARK = "\u27e8U+202E\u27e9"  # how the frontend shows the control: "⟨U+202E⟩"
POLISH_RUN = "polish"
BROKEN_RUN = "broken"
SAMPLE_CNN = "cnn_dataloader_0workers"
DDP = "ddp_gloo_2ranks"

# Records every fillText: the text, its box and anchor on the page, its alignment and the
# aria-label of the nearest labelled element (the chart, or the timeline's canvas).
RECORD_FILLTEXT = """
(() => {
  const rec = [];
  window.__tbText = rec;
  const orig = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
    try {
      const c = this.canvas;
      if (c && c.isConnected && rec.length < 100000) {
        const m = this.measureText(text);
        const t = this.getTransform();
        const r = c.getBoundingClientRect();
        const sx = c.width ? r.width / c.width : 0, sy = c.height ? r.height / c.height : 0;
        const p0 = t.transformPoint(new DOMPoint(x - m.actualBoundingBoxLeft, y - m.actualBoundingBoxAscent));
        const p1 = t.transformPoint(new DOMPoint(x + m.actualBoundingBoxRight, y + m.actualBoundingBoxDescent));
        const a = t.transformPoint(new DOMPoint(x, y));
        const ox = r.left + scrollX, oy = r.top + scrollY;
        const owner = c.closest('[aria-label]');
        rec.push({
          text: String(text), owner: owner ? owner.getAttribute('aria-label') : '', align: this.textAlign,
          x0: ox + Math.min(p0.x, p1.x) * sx, x1: ox + Math.max(p0.x, p1.x) * sx,
          y0: oy + Math.min(p0.y, p1.y) * sy, y1: oy + Math.max(p0.y, p1.y) * sy,
          ax: ox + a.x * sx, ay: oy + a.y * sy,
        });
      }
    } catch (e) { /* never break the page */ }
    return orig.call(this, text, x, y, ...rest);
  };
})();
"""

UNITS = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9, "B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3,
         "TiB": 1024 ** 4}
QUANTITY = re.compile(r"^([+-]?[\d,]*\.?\d+) (ns|µs|ms|s|B|KiB|MiB|GiB|TiB)$")


# -- a trace of its own: names holding U+202E ------------------------------------------

def _polish_trace() -> dict:
    """3 steps; per step a CPU op around a child op (their totals nest: the Host total
    chart is bars), a runtime launch and its kernel, and memory records whose totals are
    not round in any unit."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": EVIL_THREAD}},
          {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    total = 0
    for k in range(3):
        t = 1_000_000 + k * 3000
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": t, "dur": 2900},
            {"ph": "X", "cat": "cpu_op", "name": EVIL_OP, "pid": 1, "tid": 1, "ts": t + 100, "dur": 1234,
             "args": {"External id": 10 * k + 1}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 200, "dur": 777,
             "args": {"External id": 10 * k + 2}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 300,
             "dur": 20, "args": {"correlation": 100 + k, "External id": 10 * k + 2}},
            {"ph": "X", "cat": "kernel", "name": EVIL_KERNEL, "pid": 0, "tid": 7, "ts": t + 400, "dur": 1777,
             "args": {"correlation": 100 + k, "External id": 10 * k + 2, "device": 0, "stream": 7}},
        ]
        for j, nbytes in enumerate((13_212_345, 26_424_690, -13_212_345)):
            total += nbytes
            ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": t + 250 + 100 * j,
                       "args": {"Addr": 1000 * k + j, "Bytes": nbytes, "Total Allocated": total,
                                "Total Reserved": 2 * total + 1234567, "Device Type": 1, "Device Id": 0}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85899345920}],
            "traceEvents": ev}


@pytest.fixture(scope="module")
def polish(tmp_path_factory):
    """A server over: the V100 run, a run whose names hold U+202E, and a run of one good
    trace and two broken ones (truncated JSON)."""
    logdir = tmp_path_factory.mktemp("polish_logdir")
    shutil.copytree(V100_RUN_DIR, logdir / V100_RUN)
    (logdir / POLISH_RUN).mkdir()
    (logdir / POLISH_RUN / "worker0.1.pt.trace.json").write_text(json.dumps(_polish_trace()))
    (logdir / BROKEN_RUN).mkdir()
    good = json.dumps(_polish_trace())
    (logdir / BROKEN_RUN / "good.1.pt.trace.json").write_text(good)
    for name in ("bad1", "bad2"):
        (logdir / BROKEN_RUN / f"{name}.1.pt.trace.json").write_text(good[: len(good) // 2])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port)],
                        base, tmp_path_factory.mktemp("cache"))
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


# -- reading the canvas --------------------------------------------------------------

def drawn(page) -> list[dict]:
    return page.evaluate("() => window.__tbText || []")


def redraw(watch) -> None:
    """Forget what was drawn, then make every chart and canvas draw itself again (a resize:
    their ResizeObservers redraw), so that what is read is what the page shows now."""
    watch.page.evaluate("() => { window.__tbText.length = 0; }")
    size = watch.page.viewport_size
    watch.page.set_viewport_size({"width": size["width"] - 20, "height": size["height"]})
    watch.page.wait_for_timeout(300)
    watch.page.set_viewport_size(size)
    watch.settle()


def axis_groups(records: list[dict]) -> dict[tuple, list[tuple[str, float, str]]]:
    """The number-and-unit labels drawn on one line of one chart: (owner, kind, position) ->
    [(text, value in its unit, unit)], each label once."""
    groups: dict[tuple, dict[str, tuple[str, float, str]]] = {}
    for r in records:
        m = QUANTITY.match(r["text"])
        if not m:
            continue
        if r["align"] == "right":
            key = (r["owner"], "y", round(r["ax"]))
        else:
            key = (r["owner"], "x", round(r["ay"]))
        groups.setdefault(key, {})[r["text"]] = (r["text"], float(m.group(1).replace(",", "")), m.group(2))
    return {k: sorted(v.values(), key=lambda t: t[1] * UNITS[t[2]]) for k, v in groups.items()}


def nice(step: float) -> bool:
    p = 10 ** math.floor(math.log10(step) + 1e-9)
    return any(abs(step / p - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))


def check_axes(records: list[dict], owners: list[str]) -> list[str]:
    """Every axis (3 labels or more on one line of a chart) shows one unit and multiples of a
    nice step in it; each owner (a prefix of a chart's label) has such an axis. Returns what
    was checked, to say so in a failure."""
    checked = []
    problems = []
    for (owner, kind, _), labels in axis_groups(records).items():
        if len(labels) < 3:
            continue
        texts = [t for t, _, _ in labels]
        checked.append(f"{owner} {kind}: {', '.join(texts)}")
        base = [v * UNITS[u] for _, v, u in labels]
        if all(b >= 2 * a > 0 for a, b in zip(base, base[1:])):
            # a logarithmic axis (the launch histograms): each tick 1, 2, 2.5 or 5 x 10^k,
            # in the unit of its own size
            odd = [t for t, v, _ in labels if not nice(v)]
            if odd:
                problems.append(f"{owner} {kind}: log ticks {odd} are not 1, 2, 2.5 or 5 x 10^k: {texts}")
            continue
        units = {u for _, _, u in labels}
        if len(units) != 1:
            problems.append(f"{owner} {kind}: more than one unit: {texts}")
            continue
        values = [v for _, v, _ in labels]
        step = min(b - a for a, b in zip(values, values[1:]))
        if not (step > 0 and nice(step)):
            problems.append(f"{owner} {kind}: step {step:g} is not 1, 2, 2.5 or 5 x 10^k: {texts}")
            continue
        off = [t for t, v, _ in labels if abs(v / step - round(v / step)) > 1e-6]
        if off:
            problems.append(f"{owner} {kind}: {off} not multiples of the step {step:g}: {texts}")
    assert not problems, "\n".join(problems + ["checked:"] + checked)
    for o in owners:
        assert any(c.startswith(o) for c in checked), f"no axis of {o!r} was read:\n" + "\n".join(checked)
    return checked


def open_recorded(watch, url: str, ready_js: str) -> None:
    watch.page.add_init_script(RECORD_FILLTEXT)
    watch.open(url)
    wait_js(watch.page, ready_js, 90)
    watch.settle()
    redraw(watch)


def has_chart(label: str) -> str:
    return f"() => !!document.querySelector({json.dumps(f'[aria-label^={json.dumps(label)}] canvas')})"


def shot(watch, name: str) -> None:
    watch.page.evaluate("window.scrollTo(0, 0)")
    watch.shot(name)


def clean(watch) -> None:
    assert watch.errors == [] and watch.outside == [], (watch.errors, watch.outside)


# -- 1. nice ticks -----------------------------------------------------------------------

@pytest.mark.parametrize("view, run, owners", [
    ("Overview", V100_RUN, ["Step time breakdown per step"]),
    ("Operator", V100_RUN, ["Host total time", "Device total time"]),
    ("Kernel", V100_RUN, ["Kernel duration histogram"]),
    ("Memory", V100_RUN, ["Memory over time"]),
    ("Memory", SAMPLE_CNN, ["Memory over time"]),
    ("Distributed", DDP, ["Computation and communication per rank", "Ranks, slowest first"]),
    ("Trace", V100_RUN, ["Trace timeline"]),
    ("Diff", V100_RUN, ["Step time breakdown, A and B", "Largest changes"]),
])
def test_axis_ticks_are_nice(serve_url, watch, view, run, owners):
    state = {"view": view, "run": run}
    if view not in ("Distributed", "Diff"):
        state["span"] = "1"
    open_recorded(watch, f"{serve_url}/{hash_state(**state)}", has_chart(owners[-1]) if view != "Trace"
                  else "() => !!document.querySelector('canvas.timeline-canvas')")
    wait_js(watch.page, f"() => (window.__tbText || []).some(r => r.owner.startsWith({json.dumps(owners[-1])}))", 60)
    checked = check_axes(drawn(watch.page), owners)
    # both axes of the memory curve: time and bytes
    if view == "Memory":
        assert {c.split(":")[0].split(" ")[-1] for c in checked if c.startswith("Memory over time")} == {"x", "y"}, checked
    shot(watch, f"polish-ticks-{view.lower()}-{run[:12]}")
    clean(watch)


def test_memory_ticks_follow_the_range(serve_url, watch):
    """Zoomed to a range whose ends are not round (the URL's m0 / m1): the time axis shows
    the nice times inside it, in one unit."""
    curve = get_json(f"{serve_url}/{API}/memory_curve?run={V100_RUN}&span=1")[1]
    device = curve["default_device"] or curve["devices"][0]
    pts = curve["curves"][device]
    t0, t1 = pts[0]["ts_ns"], pts[-1]["ts_ns"]
    m0, m1 = t0 + (t1 - t0) // 3 + 12_345, t0 + (t1 - t0) // 2 + 6_789
    open_recorded(watch, f"{serve_url}/{hash_state(view='Memory', run=V100_RUN, span='1', dev=device, m0=str(m0), m1=str(m1))}",
                  has_chart("Memory over time"))
    checked = check_axes(drawn(watch.page), ["Memory over time"])
    xs = [c for c in checked if c.startswith("Memory over time") and " x:" in c]
    assert xs, checked
    # the labels lie inside the range
    for text in xs[0].split(": ", 1)[1].split(", "):
        v, unit = QUANTITY.match(text).groups()
        assert m0 - 1 <= float(v.replace(",", "")) * UNITS[unit] <= m1 + 1, (text, m0, m1)
    shot(watch, "polish-ticks-memory-range")
    clean(watch)


# -- 2. names with U+202E on the timeline -----------------------------------------------

def test_timeline_labels_show_the_control_never_obey_it(polish, watch):
    open_recorded(watch, f"{polish}/{hash_state(view='Trace', run=POLISH_RUN)}",
                  "() => !!document.querySelector('canvas.timeline-canvas')")
    page = watch.page
    wait_js(page, "() => (window.__tbText || []).some(r => r.text.includes('gemm'))", 60)
    records = drawn(page)
    raw = [r["text"] for r in records if BIDI_CONTROLS.search(r["text"])]
    assert raw == [], f"text drawn with a raw bidi control: {raw}"
    texts = {r["text"] for r in records}
    assert f"void gemm{MARK}exe.kernel" in texts, sorted(texts)
    assert f"aten::add{MARK}gpj.exe" in texts, sorted(texts)
    assert any(f"worker{MARK}thread" in t for t in texts), sorted(texts)  # the track header
    # the tooltip over the kernel: the name isolated, its control a marker
    box = next(r for r in records if r["text"] == f"void gemm{MARK}exe.kernel")
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.move((box["x0"] + box["x1"]) / 2, (box["y0"] + box["y1"]) / 2)
    tip = page.locator(".tl-tip-name bdi")
    expect(tip).to_have_text(f"void gemm{MARK}exe.kernel")
    assert tip.evaluate("b => getComputedStyle(b).unicodeBidi") == "isolate"
    assert tip.locator(".bidi-ctl").count() == 1
    # the details panel: name and linked events
    page.mouse.click((box["x0"] + box["x1"]) / 2, (box["y0"] + box["y1"]) / 2)
    name = page.locator(".details-name bdi")
    expect(name).to_have_text(f"void gemm{MARK}exe.kernel")
    assert name.evaluate("b => getComputedStyle(b).unicodeBidi") == "isolate"
    panel = page.locator("aside.side-panel")
    expect(panel.locator(".links")).to_be_visible()
    assert RLO not in panel.inner_text() and RLO not in page.inner_text("body")
    shot(watch, "polish-trace-bidi")
    clean(watch)


# -- 3. chart titles and subtitles -------------------------------------------------------

TITLES_JS = """() => [...document.querySelectorAll('[role=img][aria-label]')].map(el => {
  const fig = el.closest('figure');
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
    return {x0: r.left + scrollX, x1: r.right + scrollX, y0: r.top + scrollY, y1: r.bottom + scrollY, text: e.textContent}; };
  const card = el.closest('section.card');
  return {label: el.getAttribute('aria-label'), chart: box(el), card: box(card && card.querySelector('.card-body')),
          title: box(fig && fig.querySelector('.chart-title')), subtitle: box(fig && fig.querySelector('.chart-subtitle'))};
})"""


def overlap(a: dict, b: dict) -> bool:
    return a["x0"] < b["x1"] - 0.5 and b["x0"] < a["x1"] - 0.5 and a["y0"] < b["y1"] - 0.5 and b["y0"] < a["y1"] - 0.5


def chart_titles(page) -> list[dict]:
    """Per chart: its title and subtitle boxes (HTML above it, or text drawn on its canvas:
    the title is the chart's label, the subtitle the line saying why bars are no pie), and
    every other text drawn in it (each text where it was drawn last)."""
    last: dict[tuple[str, str], dict] = {}
    for r in drawn(page):
        last[(r["owner"], r["text"])] = r
    out = []
    for c in page.evaluate(TITLES_JS):
        mine = [r for (owner, _), r in last.items() if owner == c["label"]]
        title, subtitle = c["title"], c["subtitle"]
        if title is None:
            title = next((r for r in mine if r["text"] in (c["label"], "Average step")), None)
        if subtitle is None:
            subtitle = next((r for r in mine if "not a pie" in r["text"]), None)
        others = [r for r in mine if r is not title and r is not subtitle]
        out.append({**c, "title": title, "subtitle": subtitle, "others": others})
    return out


@pytest.mark.parametrize("view, run", [("Operator", POLISH_RUN), ("Operator", V100_RUN), ("Overview", V100_RUN)])
def test_chart_titles_and_subtitles_do_not_overlap(polish, watch, view, run):
    label = "Host total time" if view == "Operator" else "Average step time breakdown"
    watch.page.add_init_script(RECORD_FILLTEXT)
    watch.open(f"{polish}/{hash_state(view=view, run=run, span='1')}")
    wait_js(watch.page, has_chart(label), 90)
    wait_js(watch.page, f"() => (window.__tbText || []).some(r => r.owner === {json.dumps(label)})", 60)
    watch.settle()
    charts = chart_titles(watch.page)
    titled = [c for c in charts if c["title"]]
    assert titled, charts
    if view == "Operator":
        host = next(c for c in charts if c["label"] == "Host total time")
        assert host["title"] and host["subtitle"], host  # nested totals: bars, with a why-line
    else:
        assert any(c["label"] == "Average step time breakdown" for c in titled)
    for c in titled:
        t, s = c["title"], c["subtitle"]
        if s:
            assert not overlap(t, s), f"{c['label']}: the subtitle {s} overlaps the title {t}"
            assert t["y1"] <= s["y0"] + 0.5, f"{c['label']}: the subtitle is not under the title: {t} {s}"
        for part in (t, s):
            if not part:
                continue
            hit = [o["text"] for o in c["others"] if overlap(part, o)]
            assert not hit, f"{c['label']}: {part.get('text')!r} overlaps {hit}"
            if c["card"]:  # inside its card, not cut off
                assert c["card"]["x0"] - 0.5 <= part["x0"] and part["x1"] <= c["card"]["x1"] + 0.5, (c["label"], part, c["card"])
    redraw(watch)  # a window made narrower, then wide again
    for c in chart_titles(watch.page):  # every chart inside its card
        if c["card"]:
            assert c["card"]["x0"] - 0.5 <= c["chart"]["x0"] and c["chart"]["x1"] <= c["card"]["x1"] + 0.5, (c["label"], c["chart"], c["card"])
    shot(watch, f"polish-titles-{view.lower()}-{run[:12]}")
    clean(watch)


# -- 4. the skipped-files badge ----------------------------------------------------------

def test_skipped_badge_counts_each_broken_file_once(polish, watch):
    deadline = time.monotonic() + 60
    while True:
        skipped = get_json(f"{polish}/{API}/status")[1]["skipped"]
        if len(skipped) >= 2:
            break
        assert time.monotonic() < deadline, skipped
        time.sleep(0.2)
    assert sorted(s["path"] for s in skipped) == [f"{BROKEN_RUN}/bad1.1.pt.trace.json", f"{BROKEN_RUN}/bad2.1.pt.trace.json"]
    watch.open(f"{polish}/{hash_state(view='Overview', run=BROKEN_RUN)}")
    badge = watch.page.locator("button.badge.warn")
    expect(badge).to_have_text("2 files skipped")
    badge.click()
    items = watch.page.locator("[role=dialog][aria-label='Skipped files'] ul.skipped li")
    expect(items).to_have_count(2)
    expect(items.first).to_contain_text("bad1.1.pt.trace.json")
    shot(watch, "polish-skipped")
    # the server's own errors are the broken files' (their replies are no page errors)
    clean(watch)
