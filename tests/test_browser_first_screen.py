"""Issue 21, "the first screen answers", in a real Chromium at 1440x900 (browser_support's
server over the V100 ResNet50 run, the sample runs beside it).

The Overview opens on its conclusion: under the cards the diagnosis sentence (the overview
route's ``diagnosis``, made once by analysis/diagnosis.py, the words ``tb-profiler why``
prints), a "Bound by" card, and the Recommendations section, all before the first screen
ends (y < 900 px), the long evidence sections after it.
"""
from __future__ import annotations

from browser_support import V100_RUN, hash_state, wait_js
from test_browser_views import api, card, picker

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


def test_a_link_naming_what_does_not_exist_says_so(serve_url, watch):
    """An unknown run, worker, span or view in a URL is said, with what exists; no other
    run's numbers appear and the URL keeps the names it was given."""
    runs = api(serve_url, "runs")["runs"]
    workers = api(serve_url, "workers", run=V100_RUN)
    spans = api(serve_url, "spans", run=V100_RUN, worker=workers[0])
    cases = [
        ({"run": "nope"}, f"run 'nope' not found; runs: {', '.join(runs)}."),
        ({"run": V100_RUN, "worker": "w9"}, f"worker 'w9' not found in run '{V100_RUN}'; workers: {', '.join(workers)}."),
        ({"run": V100_RUN, "worker": workers[0], "span": "77"},
         f"span '77' not found in run '{V100_RUN}'; spans: {', '.join(spans)}."),
        ({"run": V100_RUN, "view": "Kernels"}, "view 'Kernels' not found; views: Overview, Operator, Kernel"),
    ]
    for state, said in cases:
        url = f"{serve_url}/{hash_state(**state)}"
        watch.open(url)
        watch.settle()
        alert = watch.page.get_by_role("alert")
        alert.wait_for(timeout=30_000)
        assert said in alert.inner_text(), (state, alert.inner_text())
        assert watch.page.get_by_label("Diagnosis").count() == 0   # no Overview of another run
        kept = watch.page.evaluate("() => location.hash")
        assert all(f"{k}={v}" in kept for k, v in state.items() if k != "view"), kept  # not swapped for another
    # the offered way out opens what exists
    watch.open(f"{serve_url}/{hash_state(run='nope')}")
    watch.page.get_by_role("button", name=f"Open run {runs[0]}").click()
    wait_js(watch.page, f"() => location.hash.includes('run={runs[0]}')", 30)
    assert watch.errors == [], watch.errors


def test_distributed_opens_on_the_straggler_sentence(serve_url, watch):
    """The Distributed view's verdict (distributed/stragglers' ``verdict``) is its first line,
    on the first 1440x900 screen, above the evidence."""
    page = watch.page
    page.set_viewport_size(SCREEN)
    said = api(serve_url, "distributed/stragglers", run="ddp_gloo_2ranks")["verdict"]
    assert said["late"] is not None and said["sentence"].startswith(f"Rank {said['late']['rank']} arrives last")
    page.goto(f"{serve_url}/{hash_state(view='Distributed', run='ddp_gloo_2ranks')}")
    line = page.get_by_label("Distributed verdict")
    line.wait_for(timeout=60_000)
    assert line.inner_text().strip() == said["sentence"]
    box = line.bounding_box()
    assert box["y"] + box["height"] <= SCREEN["height"]
    assert card(page, "Ranks").bounding_box()["y"] > box["y"]
    watch.shot("distributed-first-screen")
    assert watch.errors == [], watch.errors


def _luminance(rgb: str) -> float:
    vals = [int(x) / 255 for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in vals]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(fg: str, bg: str) -> float:
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_accessibility_basics(serve_url, watch):
    """lang, one h1, 4.5:1 contrast for the brand and the active tab and buttons, the Diff's A
    and B selectors named apart, and a Steps row reached with Tab and opened with Enter."""
    page = watch.page
    page.set_viewport_size(SCREEN)
    watch.open(f"{serve_url}/{hash_state(view='Overview', run=V100_RUN)}")
    watch.settle()
    assert page.evaluate("() => document.documentElement.lang") == "en"
    assert page.locator("h1").count() == 1 and page.locator("h1").inner_text() == "PyTorch Profiler"
    colors = page.evaluate("""() => {
        const c = (el, p) => getComputedStyle(el)[p];
        const brand = document.querySelector('h1.brand'), bar = document.querySelector('.topbar');
        const tab = document.querySelector('.tab.on');
        return {brand: c(brand, 'color'), bar: c(bar, 'backgroundColor'), tab: c(tab, 'color'),
                body: c(document.body, 'backgroundColor')};
    }""")
    assert _contrast(colors["brand"], colors["bar"]) >= 4.5, colors
    assert _contrast(colors["tab"], colors["bar"]) >= 4.5, colors
    # a step row: Tab reaches it, Enter opens it in the Trace view
    row = card(page, "Steps").locator("tbody tr").first
    row.focus()
    assert page.evaluate("() => document.activeElement.tagName") == "TR"
    page.keyboard.press("Enter")
    wait_js(page, "() => location.hash.includes('view=Trace')", 30)
    watch.open(f"{serve_url}/{hash_state(view='Diff', run=V100_RUN)}")
    watch.settle()
    for side in ("A (baseline)", "B (experiment)"):
        for what in ("Run", "Worker", "Span"):
            assert page.get_by_label(f"{what} of {side}", exact=True).count() == 1, (what, side)
    on = page.locator(".seg button.on").first
    if on.count():
        fg, bg = on.evaluate("b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]")
        assert _contrast(fg, bg) >= 4.5, (fg, bg)
    assert watch.errors == [], watch.errors


def test_copy_link_names_what_the_page_shows(serve_url, watch):
    """"Copy link" gives the address of this view with its run, worker and span named (the
    page's own address leaves the defaults out), and that address opens the same trace."""
    page = watch.page
    workers = api(serve_url, "workers", run=V100_RUN)
    spans = api(serve_url, "spans", run=V100_RUN, worker=workers[0])
    watch.open(f"{serve_url}/{hash_state(view='Kernel', run=V100_RUN)}")   # no worker, no span: defaults
    watch.settle()
    button = page.get_by_role("button", name="Copy link")
    link = button.get_attribute("data-link")
    assert f"worker={workers[0]}" in link and f"span={spans[-1]}" in link and "view=Kernel" in link, link
    watch.open(link)
    watch.settle()
    assert page.evaluate("() => location.hash") == link[link.index("#"):]
    assert picker(page, "Span").input_value() == spans[-1] and picker(page, "Worker").input_value() == workers[0]
    page.locator("table tbody tr").first.wait_for(timeout=60_000)   # the Kernel view of that trace
    assert watch.errors == [], watch.errors


def test_a_recommendation_opens_its_evidence(serve_url, watch):
    """Each recommendation links to the view (and the table filter or search) that shows what
    it counts: DataLoader's opens the Trace view searching the DataLoader's ranges, its
    matches counted as the search route counts them."""
    page = watch.page
    page.set_viewport_size(SCREEN)
    recs = api(serve_url, "overview", run=V100_RUN)["recommendations"]
    dl = next(r for r in recs if r["id"] == "dataloader")
    assert dl["link"] == {"view": "Trace", "find": "DataLoader"}
    want = api(serve_url, "trace/search", run=V100_RUN, q="DataLoader", limit=1)["count"]
    assert want > 0
    watch.open(f"{serve_url}/{hash_state(view='Overview', run=V100_RUN)}")
    watch.settle()
    page.get_by_role("button", name="Show DataLoader in the Trace view").click()
    wait_js(page, "() => location.hash.includes('view=Trace') && location.hash.includes('find=DataLoader')", 30)
    wait_js(page, f"() => document.querySelector('.search-count')?.getAttribute('data-count') === '{want}'", 60)
    assert page.locator("input[type=search]").input_value() == "DataLoader"
    assert watch.errors == [], watch.errors


def test_folded_stacks_show_the_users_line(serve_url, watch):
    """Grouped by call stack, a folded stack shows its innermost frame of the user's own code
    (cnn.py:N), not the library frame under it (torch/nn/modules/...); library frames are
    dimmed when it is unfolded."""
    page = watch.page
    rows = api(serve_url, "operation/table", run="cnn_dataloader_0workers", group_by="OperationAndStack")["rows"]
    want = [r for r in rows if r.get("frames") and any((f.get("file") or "").endswith("cnn.py") for f in r["frames"])
            and (r["frames"][0].get("file") or "").startswith("torch/")]
    assert want, "no stack with a torch frame inside a cnn.py frame"
    watch.open(f"{serve_url}/{hash_state(view='Operator', run='cnn_dataloader_0workers', group='OperationAndStack')}")
    watch.settle()
    summaries = page.locator("details.frames-cell summary")
    summaries.first.wait_for(timeout=60_000)
    texts = summaries.all_inner_texts()
    assert any("cnn.py:" in t for t in texts), texts[:5]
    assert not any("torch/nn/modules" in t for t in texts), [t for t in texts if "torch/" in t][:3]
    cell = page.locator("details.frames-cell").filter(has_text="cnn.py:").first
    cell.locator("summary").click()
    assert cell.locator("li.frame.lib").count() >= 1 and cell.locator("li.frame:not(.lib)").count() >= 1
    assert watch.errors == [], watch.errors


def test_trace_view_keys(serve_url, watch):
    """The Trace view's keyboard (issue 21): "/" puts the cursor in the search, n / N step
    through its matches, "?" lists every key, Escape closes that list."""
    page = watch.page
    watch.open(f"{serve_url}/{hash_state(view='Trace', run=V100_RUN)}")
    watch.settle()
    box = page.get_by_label("Search events by name")
    box.wait_for(timeout=60_000)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "Search events by name"
    page.keyboard.type("aten::conv2d")
    wait_js(page, "() => Number(document.querySelector('.search-count')?.getAttribute('data-count') || 0) > 2", 60)
    page.keyboard.press("Enter")
    wait_js(page, "() => /^1 \\/ /.test(document.querySelector('.search-count')?.textContent ?? '')", 60)
    page.locator("body").click(position={"x": 5, "y": 5})   # leave the field: n / N are the view's
    page.keyboard.press("n")
    wait_js(page, "() => /^2 \\/ /.test(document.querySelector('.search-count')?.textContent ?? '')", 30)
    page.keyboard.press("Shift+N")
    wait_js(page, "() => /^1 \\/ /.test(document.querySelector('.search-count')?.textContent ?? '')", 30)
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    dialog.wait_for(timeout=10_000)
    assert "search events by name" in dialog.inner_text() and "zoom to a range" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached", timeout=10_000)
    assert watch.errors == [], watch.errors
