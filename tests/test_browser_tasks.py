"""Issue 21's nine tasks, each done as a new user would, in a real Chromium at 1440x900,
counting the clicks from the run's landing view (at most 3 each), and the same answers
from Python and from the CLI.

The logdir holds the V100 ResNet50 runs with 0 and 4 DataLoader workers (tests/data), the
sample DDP run over gloo, and a run whose every file is broken (it stays in the run list
and says why). Every answer read off the page is checked against the route that makes it
or the raw trace, never against a figure written here.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import shutil

import pytest
from browser_support import API, hash_state, serving, wait_js
from datafiles import V100, V100_TRACE
from test_browser_views import api, card, picker

expect = pytest.importorskip("playwright.sync_api").expect

SCREEN = {"width": 1440, "height": 900}
W0, W4 = "resnet50_num_workers_0", "resnet50_num_workers_4"
DDP = "ddp_gloo_2ranks"
BROKEN = "all_files_broken"


@pytest.fixture(scope="module")
def tasks_url(tmp_path_factory, sample_logdir):
    root = tmp_path_factory.mktemp("tasks_logdir")
    for run in (W0, W4):
        shutil.copytree(V100 / run, root / run)
    shutil.copytree(sample_logdir / DDP, root / DDP)
    (root / BROKEN).mkdir()
    (root / BROKEN / "worker0.1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": ')
    with serving(root, tmp_path_factory.mktemp("tasks_cache")) as base:
        yield base


class Clicks:
    """Counts what a user does with the mouse: clicks and choices in a <select>."""

    def __init__(self, page) -> None:
        self.page, self.n = page, 0

    def click(self, locator) -> None:
        locator.click()
        self.n += 1

    def choose(self, select, value: str) -> None:
        select.select_option(value)
        self.n += 1


def _landing(watch, base: str, run: str) -> Clicks:
    page = watch.page
    page.set_viewport_size(SCREEN)
    watch.open(f"{base}/{hash_state(run=run)}")
    return Clicks(page)


def _tab(page, name: str):
    return page.get_by_role("tab", name=name, exact=True)


def test_task1_why_is_the_step_slow_and_what_to_change(tasks_url, watch):
    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    ov = api(tasks_url, "overview", run=W0)
    line = page.get_by_label("Diagnosis")
    expect(line).to_contain_text(ov["diagnosis"]["sentence"])
    first = card(page, "Recommendations").locator(".recs li").first
    expect(first).to_contain_text(ov["recommendations"][0]["title"])
    assert first.bounding_box()["y"] < SCREEN["height"]
    assert clicks.n == 0
    # the events behind the verdict, one click away: the longest DataLoader call, selected
    ids = ov["diagnosis"]["evidence"]["event_ids"]
    longest = api(tasks_url, "trace/event", run=W0, i=ids[0])["event"]
    clicks.click(page.get_by_role("button", name="Show the longest in the trace"))
    expect(page.locator(".details .details-name")).to_contain_text(longest["name"])
    assert "enumerate(DataLoader)" in longest["name"] and clicks.n == 1
    assert watch.errors == [], watch.errors


def test_task3_what_num_workers_4_bought(tasks_url, watch):
    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    clicks.click(_tab(page, "Diff"))
    clicks.choose(page.get_by_label("Run of B (experiment)"), W4)
    d = api(tasks_url, "diff", run=W0, exp_run=W4)
    delta = d["summary"]["step_time_avg_ns_delta"]
    assert delta < 0  # 4 workers made the step shorter
    stat = page.locator(".stat").filter(has_text="B − A")
    expect(stat).to_contain_text("-")
    # where the time went: the breakdown's largest change is DataLoader's, shown in the table
    expect(page.locator("body")).to_contain_text("DataLoader")
    assert clicks.n <= 3, clicks.n
    watch.shot("task-diff-workers")
    assert watch.errors == [], watch.errors


def test_task4_which_rank_straggles(tasks_url, watch):
    clicks = _landing(watch, tasks_url, DDP)
    page = watch.page
    clicks.click(_tab(page, "Distributed"))
    st = api(tasks_url, "distributed/stragglers", run=DDP)
    verdict = page.get_by_label("Distributed verdict")
    expect(verdict).to_contain_text(st["verdict"]["sentence"])
    assert verdict.bounding_box()["y"] < SCREEN["height"]
    # the straggler alone: one click, and every per-rank table shows only that rank
    slowest = st["verdict"]["late"]["rank"]
    clicks.click(page.get_by_role("tab", name=f"Arrives last (rank {slowest})"))
    table = card(page, "Collectives").locator("table tbody tr")
    wait_js(page, "() => document.querySelectorAll('section.card tbody tr').length > 0")
    rows = [r.locator("td").first.inner_text() for r in table.all()]
    assert rows and set(rows) == {str(slowest)}, rows
    assert clicks.n <= 3, clicks.n
    watch.shot("task-stragglers")
    assert watch.errors == [], watch.errors


def test_a_run_whose_every_file_fails_stays_listed_with_its_error(tasks_url, watch):
    clicks = _landing(watch, tasks_url, BROKEN)
    page = watch.page
    runs = api(tasks_url, "runs")["runs"]
    assert BROKEN in runs
    expect(page.locator(".error[role=alert]").first).to_contain_text(f"{BROKEN}/worker0.1.pt.trace.json")
    expect(picker(page, "Run")).to_have_value(BROKEN)
    assert clicks.n == 0


def _frames_text(page) -> str:
    return page.locator(".details").inner_text()


def test_task2_which_line_launches_the_costliest_kernel(tasks_url, watch):
    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    clicks.click(_tab(page, "Kernel"))
    table = api(tasks_url, "kernel/table", run=W0, group_by="Kernel")
    top = max(table["rows"], key=lambda r: r["total_ns"])
    first = page.locator("section.card table tbody tr").first
    expect(first).to_contain_text(top["name"][:40])
    clicks.click(first)  # opens its longest call in the Trace view, selected
    kernel = api(tasks_url, "trace/event", run=W0, i=top["longest_event"])
    assert kernel["event"]["dur_ns"] == top["max_ns"]
    details = page.locator(".details")
    expect(details.locator(".details-name")).to_contain_text(top["name"][:40])
    op_link = next(link for link in kernel["links"] if link["relation"] == "operator")
    clicks.click(details.locator(f"li[data-relation=operator][data-i='{op_link['i']}'] button"))
    op = api(tasks_url, "trace/event", run=W0, i=op_link["i"])
    # a backward op (most kernel time) has no stack of its own: its forward op's is shown
    stack = op["stacks"]["Call stack"] if "Call stack" in op.get("stacks", {}) else op["forward_stack"]["frames"]
    if "forward_stack" in op:
        expect(details).to_contain_text(op["forward_stack"]["stack_from"])
    user = next(f for f in stack if "site-packages" not in (f.get("file") or "") and f.get("line"))
    expect(details.locator(".details-name")).to_contain_text(op["event"]["name"])
    expect(details).to_contain_text(f"{user['file'].rsplit('/', 1)[-1]}:{user['line']}")
    assert clicks.n <= 3, clicks.n
    watch.shot("task-kernel-line")
    assert watch.errors == [], watch.errors


def test_task5_what_the_gpu_did_in_a_window_of_a_step_and_who_launched_it(tasks_url, watch):
    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    steps = api(tasks_url, "overview", run=W0)["steps"]
    step = steps[1]  # the second step
    clicks.click(_tab(page, "Trace"))
    box = page.get_by_label("Time range")
    clicks.click(box)
    box.fill(f"step {step['step']} +100ms..+110ms")
    box.press("Enter")
    t0, t1 = step["start_ns"] + 100_000_000, step["start_ns"] + 110_000_000
    stats = api(tasks_url, "trace/range_stats", run=W0, start_ns=t0, end_ns=t1)
    kernels = [r for r in stats["rows"] if r["kind"] == "kernel"]
    assert kernels and all(r["launched_by"] for r in kernels[:5])
    panel = page.locator(".range-stats")
    expect(panel).to_have_attribute("data-events", str(stats["events"]))
    label = next(k["label"] for k in stats["kinds"] if k["kind"] == "kernel")
    clicks.click(panel.get_by_role("tab", name=re.compile(f"^{re.escape(label)}")))
    first = panel.locator("table tbody tr").first
    expect(first).to_contain_text(kernels[0]["launched_by"])
    assert clicks.n <= 3, clicks.n
    watch.shot("task-range-launched-by")
    assert watch.errors == [], watch.errors


def test_task6_memory_near_full_and_the_op_that_allocates_most(tasks_url, watch):
    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    clicks.click(_tab(page, "Memory"))
    rows = api(tasks_url, "memory", run=W0)["rows"]
    curve = api(tasks_url, "memory_curve", run=W0)
    peak = next(p for p in curve["peaks"] if p["device"] == rows[0]["device"])
    share = 100 * peak["peak_allocated"] / peak["total_memory"]
    expect(page.locator(".stat").filter(has_text="Peak / device memory")).to_contain_text(f"{share:.1f}%")
    top = max(rows, key=lambda r: r["self_allocation_size"])
    table = card(page, "Memory by operator").locator("table tbody tr").first
    expect(table).to_contain_text(top["name"])
    assert clicks.n <= 3, clicks.n
    watch.shot("task-memory")
    assert watch.errors == [], watch.errors


# -- tasks 8 and 9: the same answers from Python and from the CLI (no browser) -------------
def _cli(argv: list[str]) -> str:
    from tb_profiler.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_tasks_8_9_the_same_answers_from_python_and_the_cli(tasks_url):
    import tb_profiler
    from tb_profiler.analysis.links import forward_op
    from tb_profiler.plugin.timeline import event_detail

    trace = tb_profiler.load(str(V100_TRACE))
    ov = api(tasks_url, "overview", run=W0, span=1)
    # 1: what bounds the step and what to change: the page's sentence, from Python and the CLI
    assert trace.overview()["diagnosis"]["sentence"] == ov["diagnosis"]["sentence"]
    why = json.loads(_cli(["why", str(V100_TRACE), "--only", "idle", "--json"]))["traces"][0]
    assert why["verdict"]["finding"] == ov["diagnosis"]["sentence"]
    assert ov["diagnosis"]["sentence"] in _cli(["why", str(V100_TRACE), "--only", "idle"])
    # 2: the costliest kernel's longest call, its operator, and that operator's (forward) stack
    top = trace.kernels("name").iloc[0]
    assert top["name"] == api(tasks_url, "kernel/table", run=W0, span=1, group_by="Kernel")["rows"][0]["name"]
    op = next(x for x in event_detail(trace, int(top["longest_event"]))["links"] if x["relation"] == "operator")
    assert forward_op(trace)[op["i"]] >= 0 or "Call stack" in event_detail(trace, op["i"])["args"]
    # 3: what 4 workers bought, per step (Python and CLI agree with the Diff view's route)
    d = api(tasks_url, "diff", run=W0, exp_run=W4)
    run_diff = tb_profiler.load_run(str(V100 / W0)).diff(tb_profiler.load_run(str(V100 / W4)))
    assert run_diff["summary"]["step_time_avg_ns_delta"] == d["summary"]["step_time_avg_ns_delta"]
    cli = json.loads(_cli(["diff", str(V100 / W0), str(V100 / W4), "--json"]))
    assert cli["summary"]["step_time_avg_ns_delta"] == d["summary"]["step_time_avg_ns_delta"]
    # 7: the top kernels as a table from the CLI (the UI's units)
    text = _cli(["summary", str(V100_TRACE), "--top", "20"])
    assert top["name"][:40] in text


def test_the_raw_trace_agrees_on_the_costliest_kernel():
    """The oracle for task 2's first step: the raw JSON's kernel durations, summed by name."""
    totals: dict[str, int] = {}
    with gzip.open(V100_TRACE) as f:
        for e in json.load(f)["traceEvents"]:
            if e.get("cat") == "Kernel" and e.get("ph") == "X":
                totals[e["name"]] = totals.get(e["name"], 0) + e["dur"]
    import tb_profiler

    assert max(totals, key=totals.get) == tb_profiler.load(str(V100_TRACE)).kernels("name").iloc[0]["name"]


def test_task7_a_csv_of_the_top_20_kernels_and_a_link_for_a_colleague(tasks_url, watch, playwright_browser):
    import csv
    from pathlib import Path

    from browser_support import PageWatch

    clicks = _landing(watch, tasks_url, W0)
    page = watch.page
    clicks.click(_tab(page, "Kernel"))
    rows = api(tasks_url, "kernel/table", run=W0, group_by="Kernel")["rows"]
    table = card(page, "Kernels")
    button = table.locator("button.export-csv")
    expect(button).to_contain_text(f"all {len(rows):,} rows, sorted by Total")
    with page.expect_download() as download:
        clicks.click(button)
    exported = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8-sig"))))
    top20 = sorted(rows, key=lambda r: -r["total_ns"])[:20]
    assert [(r["Kernel"], int(r["Total (ns)"])) for r in exported[:20]] == [(r["name"], r["total_ns"]) for r in top20]
    link_button = page.get_by_role("button", name="Copy link")
    clicks.click(link_button)
    link = link_button.get_attribute("data-link")
    assert clicks.n <= 3, clicks.n
    # the colleague opens the link: the same run, view and first row
    fresh = PageWatch(playwright_browser)
    try:
        fresh.open(link)
        again = card(fresh.page, "Kernels").locator("table tbody tr").first
        expect(again).to_contain_text(top20[0]["name"][:40])
        expect(picker(fresh.page, "Run")).to_have_value(W0)
    finally:
        fresh.close()
    assert watch.errors == [], watch.errors


def test_why_json_verdict_opens_as_a_link(tasks_url, watch):
    """`tb-profiler why --json`'s verdict names its run, worker, span and events, and its
    link opens the viewer on the longest of them."""
    doc = json.loads(_cli(["why", str(V100_TRACE), "--only", "idle", "--json"]))["traces"][0]
    ev = doc["verdict"]["evidence"]
    assert (ev["run"], ev["worker"], ev["span"]) == (W0, "worker0", 1) and ev["event_ids"]
    page = watch.page
    page.set_viewport_size(SCREEN)
    watch.open(f"{tasks_url}/{ev['link']}")
    want = api(tasks_url, "trace/event", run=W0, span=1, i=ev["event_ids"][0])["event"]["name"]
    expect(page.locator(".details .details-name")).to_contain_text(want)
    assert watch.errors == [], watch.errors
