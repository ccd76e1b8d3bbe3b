"""Four more "Why is the step slow" sections (issue 9) in a real browser, against the JSON API.

The Memory view's Copy bandwidth (memcpy) and the Kernel view's Launch queue (queue) over the
V100 ResNet50 trace (pageable host-to-device copies, a launch queue of hundreds); the
Overview's Annotations (annotations) over a handmade trace with record_function and
gpu_user_annotation ranges (one named like an HTML tag); the Distributed view's Late
arrivals (distributed/stragglers) over four handmade gloo ranks, rank 2 late at the
allreduce of steps 2 and 3 (tests/test_late_arrivals.py's traces). Debian's Chromium
(Playwright) drives a real `tb-profiler serve` (fixtures: browser_support.py); tables are
compared with the API's answer through their CSV export (raw values, every row), charts
through the ECharts option each keeps on its element (`tbOption`). No request leaves
localhost, the console stays clean; screenshots: test-output/screenshots/why-more-*.png.
"""
from __future__ import annotations

import json
import shutil

import pytest
from browser_support import hash_state, serving
from datafiles import V100_TRACE
from test_annotations import _launch, _x
from test_browser_views import api, assert_clean, assert_same_rows, card, export_csv, shot, state
from test_browser_why import chart, section_shot
from test_late_arrivals import N as RANKS
from test_late_arrivals import SLOW, _rank

expect = pytest.importorskip("playwright.sync_api").expect

RUN = "v100"
ANN_RUN = "annotated"   # handmade: host and device annotation ranges
JOB = "late"            # handmade: 4 gloo ranks, rank 2 late
SCREENS = "why-more"
EVIL = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def more_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("why_more")
    log = tmp / "logdir"
    (log / RUN).mkdir(parents=True)
    shutil.copy(V100_TRACE, log / RUN / V100_TRACE.name)
    (log / ANN_RUN).mkdir()
    ev = [_x("user_annotation", "ProfilerStep#1", 0, 1000),
          _x("user_annotation", "model", 10, 500),
          _x("user_annotation", "attention", 20, 100), *_launch(30, 1, 100, 40), *_launch(40, 2, 140, 60),
          _x("user_annotation", "mlp", 200, 100), *_launch(210, 3, 300, 50),
          _x("user_annotation", "attention", 400, 50), *_launch(410, 4, 500, 10, stream=9),
          _x("user_annotation", EVIL, 590, 50), *_launch(600, 5, 700, 30),
          _x("gpu_user_annotation", "attention", 100, 100, pid=0, tid=7, device=0),
          _x("gpu_user_annotation", "mlp", 290, 80, pid=0, tid=7, device=0)]
    (log / ANN_RUN / "worker0.1.pt.trace.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    (log / JOB).mkdir()
    for r in range(RANKS):
        (log / JOB / f"rank{r}.{1000 + r}.pt.trace.json").write_text(json.dumps(_rank(r)))
    with serving(log, tmp / "cache") as base:
        yield base


DIRECTIONS = [("Direction", "direction", "text"), ("Source", "src", "text"), ("Destination", "dst", "text"),
              ("Copies", "copies", "num"), ("Bytes (bytes)", "bytes", "num"), ("Time (ns)", "time_ns", "num"),
              ("GB/s", "gbps", "num"), ("Median GB/s", "gbps_median", "num"), ("Min GB/s", "gbps_min", "num"),
              ("Max GB/s", "gbps_max", "num")]
COPIES = [("Copy", "name", "text"), ("Direction", "direction", "text"), ("Start (ns)", "start_ns", "num"),
          ("Duration (ns)", "dur_ns", "num"), ("Bytes (bytes)", lambda c: c["bytes"] if c["bytes"] >= 0 else None, "num"),
          ("GB/s", "gbps", "num")]
STREAMS = [("Stream", "stream", "num"), ("Operations", "operations", "num"), ("Longest queue", "max_len", "num"),
           ("Mean queue", "mean_len", "num"), ("Time full (ns)", "time_full_ns", "num"),
           ("Blocked calls", "blocked_calls", "num"), ("Blocked time (ns)", "blocked_ns", "num")]
ANNOTATIONS = [("Annotation", "name", "text"), ("Count", "count", "num"), ("Total (ns)", "total_ns", "num"),
               ("Mean (ns)", "mean_ns", "num"), ("Max (ns)", "max_ns", "num"), ("Kernels", "kernels", "num")]
LATE = [("Rank", "rank", "num"), ("Worker", "worker", "text"), ("Instances", "instances", "num"), ("Last", "last", "num"),
        ("Last share (%)", lambda r: None if r["last_share"] is None else 100 * r["last_share"], "num"),
        ("Late total (ns)", "late_ns", "num"), ("Late per step (ns)", "late_per_step_ns", "num"),
        ("Late max (ns)", "late_max_ns", "num"), ("Worst step", "worst_step", "num"),
        ("Worst step late (ns)", "worst_step_late_ns", "num")]
LATE_OPS = [("Rank", "rank", "num"), ("Operator", "name", "text"), ("Rank time (ns)", "rank_ns", "num"),
            ("Median rank (ns)", "median_ns", "num"), ("Excess (ns)", "excess_ns", "num")]


def test_memory_copy_bandwidth_matches_the_api(more_url, watch):
    d = api(more_url, "memcpy", run=RUN)
    assert d["directions"] and d["copies_total"] == sum(r["copies"] for r in d["directions"])
    assert any(r["src"] == "Pageable" for r in d["directions"])  # this trace copies from pageable memory
    watch.open(f"{more_url}/{hash_state(view='Memory', run=RUN)}")
    page = watch.page
    sec = card(page, "Copy bandwidth")
    sec.scroll_into_view_if_needed()
    expect(sec.locator(".why-memcpy")).to_have_attribute("data-copies", str(d["copies_total"]))
    assert_same_rows(export_csv(sec.locator(".copy-directions .table-wrap")), d["directions"], DIRECTIONS)
    expect(sec.locator(".pageable-note")).to_contain_text("pageable host memory")
    opt = chart(page, "Copy bandwidth over time")
    series = {s["name"]: [p[1] for p in s["data"]] for s in opt["series"]}
    assert series == {k: v for k, v in d["over_time"].items() if k != "edges"}
    assert [opt["xAxis"]["min"], opt["xAxis"]["max"]] == [d["over_time"]["edges"][0], d["over_time"]["edges"][-1]]
    largest = sec.locator(".copy-largest .table-wrap")
    expect(largest).to_contain_text(f"{len(d['copies'])} of {d['copies_total']} copies")
    rows = export_csv(largest)
    assert_same_rows(rows, d["copies"], COPIES)
    sizes = [float(r["Bytes (bytes)"] or -1) for r in rows]
    assert sizes == sorted(sizes, reverse=True)  # largest first
    section_shot(sec, f"{SCREENS}-memcpy")
    assert_clean(watch)


def test_kernel_launch_queue_matches_the_api(more_url, watch):
    d = api(more_url, "queue", run=RUN)
    assert d["streams"] and d["full_at"] == 1024
    ov = api(more_url, "overview", run=RUN)
    dw = ov["device_word"] if ov["device_kinds"] else "Device"  # what the UI calls the accelerator
    watch.open(f"{more_url}/{hash_state(view='Kernel', run=RUN)}")
    page = watch.page
    sec = card(page, "Launch queue")
    sec.scroll_into_view_if_needed()
    q = sec.locator(".why-queue")
    expect(q).to_have_attribute("data-full-at", str(d["full_at"]))
    assert_same_rows(export_csv(sec.locator(".queue-streams .table-wrap")), d["streams"], [(dw, "device", "num"), *STREAMS])
    s0 = d["streams"][0]
    verdict = sec.locator(".queue-verdict")
    expect(verdict).to_contain_text(f"{dw} {s0['device']} stream {s0['stream']} queue")
    if not any(s["time_full_ns"] or s["blocked_calls"] for s in d["streams"]):
        expect(verdict).to_contain_text("never blocked")
    section_shot(sec, f"{SCREENS}-queue")
    verdict.get_by_role("link", name="Trace view").click()
    expect(page.get_by_role("tab", name="Trace")).to_have_attribute("aria-selected", "true")
    assert state(page)["view"] == "Trace"
    assert_clean(watch)


def test_overview_annotations_match_the_api(more_url, watch):
    d = api(more_url, "annotations", run=ANN_RUN)
    assert d["host"] and d["device"] and any(r["name"] == EVIL for r in d["host"])
    ov = api(more_url, "overview", run=ANN_RUN)
    dw = ov["device_word"] if ov["device_kinds"] else "Device"  # what the UI calls the accelerator
    watch.open(f"{more_url}/{hash_state(view='Overview', run=ANN_RUN)}")
    page = watch.page
    sec = card(page, "Annotations")
    sec.scroll_into_view_if_needed()
    host = export_csv(sec.locator(".annotations-host .table-wrap"))
    assert [r["Annotation"] for r in host] == [r["name"] for r in d["host"]]  # by total time, as the API
    assert_same_rows(host, d["host"], [*ANNOTATIONS, ("Kernel time (ns)", "kernel_ns", "num")])
    assert_same_rows(export_csv(sec.locator(".annotations-device .table-wrap")), d["device"],
                     [(dw, "device", "num"), *ANNOTATIONS, ("Busy time (ns)", "kernel_ns", "num")])
    expect(sec.locator("img")).to_have_count(0)
    expect(sec.locator(".annotations-host")).to_contain_text(EVIL)  # the name, as text
    assert page.evaluate("window.__pwned") is None
    section_shot(sec, f"{SCREENS}-annotations")
    assert_clean(watch)

    # a trace without annotations: no section at all
    assert api(more_url, "annotations", run=RUN)["host"] == []
    watch.open(f"{more_url}/{hash_state(view='Overview', run=RUN)}")
    expect(card(page, "Step time")).to_be_visible()
    expect(card(page, f"{dw} idle time")).to_be_visible()
    page.wait_for_load_state("networkidle")
    expect(card(page, "Annotations")).to_have_count(0)
    assert_clean(watch)


def test_distributed_late_arrivals_match_the_api(more_url, watch):
    d = api(more_url, "distributed/stragglers", run=JOB)
    assert d["ranks"][0]["rank"] == SLOW and d["operators"][0]["name"] == "aten::mm"
    watch.open(f"{more_url}/{hash_state(view='Distributed', run=JOB)}")
    page = watch.page
    sec = card(page, "Late arrivals")
    sec.scroll_into_view_if_needed()
    expect(sec.locator(".late-summary")).to_contain_text(f"rank {SLOW}")
    rows = export_csv(sec.locator(".late-ranks .table-wrap"))
    assert [int(r["Rank"]) for r in rows] == [r["rank"] for r in d["ranks"]]  # latest first, as the API
    assert_same_rows(rows, d["ranks"], LATE)
    assert_same_rows(export_csv(sec.locator(".late-operators .table-wrap")), d["operators"], LATE_OPS)
    bars = chart(page, "Lateness per rank")
    assert bars["yAxis"]["data"] == [f"rank {r['rank']}" for r in d["ranks"]]
    assert bars["series"][0]["data"] == [r["late_per_step_ns"] for r in d["ranks"]]
    assert bars["dataZoom"] == []  # 4 ranks: no window
    expect(sec.locator(".late-bars")).to_have_attribute("data-shown", str(RANKS))
    section_shot(sec, f"{SCREENS}-late")
    shot(watch, f"{SCREENS}-distributed")
    assert_clean(watch)
