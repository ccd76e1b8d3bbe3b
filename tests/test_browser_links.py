"""Links that open what was seen (issue 21), in a real browser (fixtures: browser_support.py).

A table's sort, page, page size and filter are part of the page's address (DataTable,
components/tableState: "<table id>.sort=-calls", ".page", ".size"; the Operator view's filter
is its "q"), so "Copy link" opened in a fresh page shows the same rows in the same order on
the same page. The Export CSV button says what the file holds -- "168 of 577 rows, filtered
'conv', sorted by Calls ▼" -- and the file holds exactly those rows, every page, in that
order. Inside TensorBoard, a Copy link address pasted into the open TensorBoard tab (only
TensorBoard's hash changes; nothing reloads) is followed by the plugin, and so is Back.

No sleeps: every wait is for a condition (the address, a text, an attribute).
Screenshots: test-output/screenshots/links-*.png.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

import pytest
from browser_support import API, V100_RUN, PageWatch, get_json, hash_state, plugin_frame, settle, wait_js

expect = pytest.importorskip("playwright.sync_api").expect

GROUP = "OperationAndInputShape"   # 577 operator rows in span 1 of the V100 run: several pages
FILTER = "conv"
PAGE_SIZE = 50


def operators(base: str, group: str, run: str = V100_RUN, worker: str = "", span: str = "1") -> list[dict]:
    query = urlencode({"run": run, "span": span, "group_by": group, **({"worker": worker} if worker else {})})
    _, reply = get_json(f"{base}/{API}/operation/table?{query}")
    return reply["rows"]


def shown_order(rows: list[dict], text: str) -> list[dict]:
    """The rows the table shows for a filter, sorted by Calls, largest first: the filter keeps
    a row whose Name or Input shape (its text columns) holds the text, ignoring case; equal
    calls keep the API's order (TanStack's sort is stable)."""
    t = text.lower()
    kept = [r for r in rows if t in r["name"].lower() or t in (r.get("input_shape") or "").lower()]
    return sorted(kept, key=lambda r: -r["calls"])


def card(scope, title: str):
    """The view's section whose heading is `title` (scope: a page or the plugin's frame; a
    selector, not a has= locator, which must come from the same frame)."""
    return scope.locator(f"section.card:has(> header.card-head h2:text-is({json.dumps(title)}))")


def header(table, name: str):
    """A column's <th> (its button reads "Calls", "Calls ▼" or "Calls ▲")."""
    pattern = json.dumps(f"^{re.escape(name)}( [▲▼])?$", ensure_ascii=False)
    return table.locator(f"thead th:has(button.th-sort:text-matches({pattern}))")


def first_row(table) -> list[str]:
    return [c.strip() for c in table.locator("table.data tbody tr").first.locator("td").all_inner_texts()]


def hash_of(target) -> dict[str, str]:
    return dict(parse_qsl(target.evaluate("location.hash").lstrip("#")))


def table_id(state: dict[str, str]) -> str:
    ids = {k.split(".")[0] for k, v in state.items() if k.endswith(".sort") and v == "-calls"}
    assert len(ids) == 1, state
    return ids.pop()


def unguard(s: str) -> str:
    """A name as csv.ts wrote it (a leading = + - @ gets an apostrophe)."""
    return s[1:] if s.startswith("'") and s[1:2] in ("=", "+", "-", "@", "\t", "\r") else s


def test_copy_link_reopens_the_tables_sort_page_and_filter_and_export_says_what_it_holds(serve_url, watch, playwright_browser):
    rows = operators(serve_url, GROUP)
    want = shown_order(rows, FILTER)
    assert len(want) > 2 * PAGE_SIZE, len(want)   # the second page of 50 is a full one
    page = watch.page
    watch.open(f"{serve_url}/{hash_state(view='Operator', run=V100_RUN, span='1', group=GROUP)}")
    watch.settle()
    table = card(page, "Operators")
    table.locator("table.data tbody tr").first.wait_for(timeout=60_000)

    header(table, "Calls").locator("button").click()       # numbers sort largest first
    wait_js(page, "() => /\\.sort=-calls(&|$)/.test(location.hash)")
    table.get_by_placeholder("Filter operators…").fill(FILTER)
    wait_js(page, f"() => location.hash.includes('q={FILTER}')")
    table.get_by_label("Rows per page").select_option(str(PAGE_SIZE))
    wait_js(page, f"() => location.hash.includes('.size={PAGE_SIZE}')")
    table.locator(".pager button", has_text="›").click()
    wait_js(page, "() => location.hash.includes('.page=2')")

    state = hash_of(page)
    tid = table_id(state)
    assert state["q"] == FILTER and state[f"{tid}.page"] == "2" and state[f"{tid}.size"] == str(PAGE_SIZE), state
    pages = -(-len(want) // PAGE_SIZE)
    expect(table.locator(".pager")).to_contain_text(f"Page 2 of {pages}")
    seen_first = first_row(table)
    assert seen_first[1:3] == [want[PAGE_SIZE]["name"], want[PAGE_SIZE].get("input_shape") or ""], seen_first

    # Export CSV: the label says which rows and in what order, the file holds exactly those
    label = f"Export CSV ({len(want)} of {len(rows)} rows, filtered '{FILTER}', sorted by Calls ▼)"
    button = table.locator("button.export-csv")
    expect(button).to_have_text(label)
    with page.expect_download() as download:
        button.click()
    assert re.fullmatch(r"resnet50_num_workers_0-worker0-span1-operators-OperationAndInputShape-filtered\.csv",
                        download.value.suggested_filename), download.value.suggested_filename
    exported = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8-sig"))))
    assert [(unguard(r["Name"]), r["Input shape"], int(r["Calls"])) for r in exported] == \
        [(r["name"], r.get("input_shape") or "", r["calls"]) for r in want]
    watch.page.evaluate("window.scrollTo(0, 0)")
    watch.shot("links-table-state")

    link = page.get_by_role("button", name="Copy link").get_attribute("data-link")
    assert link.startswith(f"{serve_url}/#") and f"{tid}.page=2" in link and f"{tid}.sort=-calls" in link, link

    fresh = PageWatch(playwright_browser)
    try:
        fresh.open(link)
        fresh.settle()
        again = card(fresh.page, "Operators")
        again.locator("table.data tbody tr").first.wait_for(timeout=60_000)
        assert fresh.page.evaluate("location.hash") == link[link.index("#"):]
        assert again.get_by_placeholder("Filter operators…").input_value() == FILTER
        assert again.get_by_label("Rows per page").input_value() == str(PAGE_SIZE)
        expect(header(again, "Calls")).to_have_attribute("aria-sort", "descending")
        expect(again.locator(".pager")).to_contain_text(f"Page 2 of {pages}")
        assert first_row(again) == seen_first
        expect(again.locator("button.export-csv")).to_have_text(label)
        fresh.page.evaluate("window.scrollTo(0, 0)")
        fresh.shot("links-table-state-reopened")
        assert fresh.errors == [] and fresh.outside == [], (fresh.errors, fresh.outside)
    finally:
        fresh.close()
    assert watch.errors == [] and watch.outside == [], (watch.errors, watch.outside)


def test_a_link_pasted_into_the_open_tensorboard_tab_is_followed(tensorboard_url, watch):
    """Pasting a Copy link address into the address bar of a TensorBoard tab already showing
    the plugin changes only TensorBoard's hash: the same plugin document (no reload) shows
    what the link names, the table sorted as it was; Back shows the view before it."""
    page = watch.page
    watch.open(f"{tensorboard_url}/#pytorch_profiler")
    frame = plugin_frame(page)
    settle(frame)
    frame.get_by_role("tab", name="Operator", exact=True).click()
    settle(frame)
    table = card(frame, "Operators")
    table.locator("table.data tbody tr").first.wait_for(timeout=60_000)
    header(table, "Calls").locator("button").click()
    wait_js(frame, "() => /\\.sort=-calls(&|$)/.test(location.hash)")
    tid = table_id(hash_of(frame))
    link = frame.get_by_role("button", name="Copy link").get_attribute("data-link")
    assert link.startswith(f"{tensorboard_url}/#pytorch_profiler&"), link
    assert f"p.pytorch_profiler.{tid}.sort=-calls" in link and "p.pytorch_profiler.view=Operator" in link, link

    frame.get_by_role("tab", name="Overview", exact=True).click()
    wait_js(page, "() => location.hash.includes('view=Overview') && !location.hash.includes('.sort=')")
    settle(frame)
    frame.evaluate("window.__sameDocument = true")

    page.goto(link)   # what the address bar does with a pasted address that differs in its hash only
    wait_js(frame, "() => location.hash.includes('view=Operator')")
    assert frame.evaluate("window.__sameDocument === true"), "the plugin's page was loaded again"
    assert page.evaluate("location.href") == link   # TensorBoard's address is the link, as pasted
    assert hash_of(frame)[f"{tid}.sort"] == "-calls"
    settle(frame)
    table = card(frame, "Operators")
    expect(frame.get_by_role("tab", name="Operator", exact=True)).to_have_attribute("aria-selected", "true")
    expect(header(table, "Calls")).to_have_attribute("aria-sort", "descending")
    shown = hash_of(frame)   # the run, worker and span the link names (Copy link names them all)
    rows = operators(tensorboard_url, "Operation", shown["run"], shown["worker"], shown["span"])
    by_calls = sorted(rows, key=lambda r: -r["calls"])
    assert by_calls[0]["calls"] > by_calls[1]["calls"], by_calls[:2]   # one row can be first
    assert first_row(table)[1] == by_calls[0]["name"]
    page.evaluate("window.scrollTo(0, 0)")
    watch.shot("links-tensorboard-pasted")

    page.evaluate("history.back()")   # to the Overview the tab showed before the paste
    wait_js(frame, "() => location.hash.includes('view=Overview')")
    expect(frame.get_by_role("tab", name="Overview", exact=True)).to_have_attribute("aria-selected", "true")
    assert frame.evaluate("window.__sameDocument === true")
    assert watch.outside == [], watch.outside
    assert [e for e in watch.errors if "pytorch_profiler" in e or "plugin" in e.lower()] == [], watch.errors


def test_a_link_naming_another_tables_columns_or_garbage_opens_the_defaults(serve_url, watch):
    """A hand-edited link: a sort by a column the table lacks, a page past the end and a
    page size not offered are not obeyed -- the table shows its default sort, its last page
    and its own page size -- and nothing fails."""
    rows = operators(serve_url, GROUP)
    page = watch.page
    watch.open(f"{serve_url}/{hash_state(view='Operator', run=V100_RUN, span='1', group=GROUP)}")
    watch.settle()
    table = card(page, "Operators")
    table.locator("table.data tbody tr").first.wait_for(timeout=60_000)
    header(table, "Calls").locator("button").click()
    wait_js(page, "() => /\\.sort=-calls(&|$)/.test(location.hash)")
    tid = table_id(hash_of(page))
    bad = {f"{tid}.sort": "-no_such_column", f"{tid}.page": "999", f"{tid}.size": "7"}
    page.goto("about:blank")   # a fresh load of the link, not a hash change of the open page
    watch.open(f"{serve_url}/{hash_state(view='Operator', run=V100_RUN, span='1', group=GROUP)}&"
               + "&".join(f"{k}={quote(v)}" for k, v in bad.items()))
    watch.settle()
    table = card(page, "Operators")
    table.locator("table.data tbody tr").first.wait_for(timeout=60_000)
    last = -(-len(rows) // 100)
    expect(table.locator(".pager")).to_contain_text(f"Page {last} of {last}")
    expect(header(table, "Device self (µs)")).to_have_attribute("aria-sort", "descending")   # the view's default
    assert table.get_by_label("Rows per page").input_value() == "100"
    wait_js(page, f"() => location.hash.includes('{tid}.page={last}')")   # the address says the page shown
    assert watch.errors == [] and watch.outside == [], (watch.errors, watch.outside)
