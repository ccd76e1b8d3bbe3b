"""The Distributed view's many-rank sections and the Trace view's Ranks mode in a real browser.

A run of 16 ranks written by benchmarks/make_many_ranks.py from 16 handmade gloo ranks
(Kineto's layout, written here): 6 steps each, an all_reduce per step, a send/recv per step
in process groups of two ranks {2k, 2k+1} (point-to-point traffic the bytes matrix can
attribute); rank 5 is a straggler: its steps take 40 % longer, and make_many_ranks'
--skew options put its clock 300 us late besides (the server's clock alignment corrects
it). Debian's Chromium (Playwright) drives a real `tb-profiler serve` over it (fixtures:
browser_support.py), and every figure the page shows is compared with the API's answer:
tables through their CSV export, charts through the ECharts option each chart keeps on its
element (`tbOption`, components/Chart.tsx) and the data- attributes the sections mirror,
the timeline through its box's data- attributes. No request may leave localhost and the
console stays clean. Screenshots go to test-output/screenshots/ranks-*.png (look at them).
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlparse

import pytest
from browser_support import API, SCREENSHOTS, get_json, hash_state, serving
from datafiles import benchmark_module

expect = pytest.importorskip("playwright.sync_api").expect

RUN = "ranks16"
N = 16
SLOW = 5          # the straggler
STEPS = 6
PERIOD_US = 200
T0_US = 5_000_000_000
# The timeline's layout (frontend/src/timeline/Timeline.tsx), to aim a click at an event row.
RULER_H, HEADER_H, ROW_H, GAP = 26, 18, 18, 2
MAX_WORKERS = 8   # frontend/src/views/trace/merge.ts: an event's id in the Ranks mode is i * 8 + k


# -- the run --------------------------------------------------------------------------------------
def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0_US + ts, "dur": dur, "args": args}


def _rank_trace(rank: int) -> dict:
    """One gloo rank: per step an aten::mm with its backward (a fwdbwd flow), the c10d call,
    gloo:all_reduce on the gloo thread, and a send (even ranks) or recv (odd) to its pair
    with record_param_comms naming the 2-rank process group and the size; the straggler's
    compute is 40 us longer, so it enters the all_reduce late."""
    pid, gloo = 4100 + rank, 5100 + rank
    late = 40 if rank == SLOW else 0
    p2p = "send" if rank % 2 == 0 else "recv"
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": T0_US, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": gloo, "ts": T0_US, "args": {"name": "gloo"}}]
    for s in range(STEPS):
        at, ext = PERIOD_US * s, 10 * s + 1
        jitter = (rank * 7 + s * 3) % 5  # a few us of spread per rank and step
        ev += [_x("user_annotation", f"ProfilerStep#{s + 1}", pid, pid, at, 100 + late + jitter, **{"External id": ext}),
               _x("cpu_op", "aten::mm", pid, pid, at + 10, 20 + late,
                  **{"External id": ext + 1, "Sequence number": s + 7, "Fwd thread id": 0}),
               _x("cpu_op", "MmBackward0", pid, pid, at + 32 + late, 5,
                  **{"External id": ext + 2, "Sequence number": s + 7, "Fwd thread id": 1}),
               {"ph": "s", "id": ext + 1, "pid": pid, "tid": pid, "ts": T0_US + at + 10, "cat": "fwdbwd", "name": "fwdbwd"},
               {"ph": "f", "id": ext + 1, "pid": pid, "tid": pid, "ts": T0_US + at + 32 + late, "cat": "fwdbwd",
                "name": "fwdbwd", "bp": "e"},
               _x("cpu_op", "c10d::allreduce_", pid, pid, at + 40 + late, 4, **{"External id": ext + 3}),
               _x("user_annotation", "gloo:all_reduce", pid, gloo, at + 45 + late, 50 - late,
                  **{"External id": ext + 4, "Input Dims": [[10, 10]], "Input type": ["float"]}),
               _x("user_annotation", f"gloo:{p2p}", pid, gloo, at + 96, 2, **{"External id": ext + 5}),
               _x("cpu_op", "record_param_comms", pid, gloo, at + 96, 2,
                  **{"Collective name": p2p, "In msg nelems": 64 * (rank // 2 + 1), "Out msg nelems": 64 * (rank // 2 + 1),
                     "dtype": "Float", "Group size": 2, "Process Group Name": f"pair{rank // 2}", "Seq": s + 1})]
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": T0_US, "dur": PERIOD_US * STEPS, "args": {"Op count": 0}})
    pgs = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": N, "ranks": list(range(N))}]
    pgs += [{"pg_name": f"pair{k}", "pg_desc": "pair", "pg_size": 2, "ranks": [2 * k, 2 * k + 1]} for k in range(N // 2)]
    info = {"backend": "gloo", "rank": rank, "world_size": N, "pg_count": len(pgs), "pg_config": pgs}
    return {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": info, "traceEvents": ev}


def _make_many_ranks():
    return benchmark_module("make_many_ranks")


@pytest.fixture(scope="module")
def ranks_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranks")
    source = tmp / "source"
    source.mkdir()
    for r in range(N):
        (source / f"rank{r}.{1000 + r}.pt.trace.json").write_text(json.dumps(_rank_trace(r)))
    made = _make_many_ranks().generate(tmp / "logdir" / RUN, N, size=0, source=source, jitter_us=3, seed=1,
                                       skew_rank=SLOW, skew_us=300)
    assert made["offsets_us"][SLOW] >= 300
    with serving(tmp / "logdir", tmp / "cache") as base:
        yield base


# -- helpers --------------------------------------------------------------------------------------
def api(base: str, route: str, **params) -> dict:
    status, doc = get_json(f"{base}/{API}/{route}?{urlencode({k: v for k, v in params.items() if v is not None})}")
    assert status == 200, (route, params, doc)
    return doc


def card(page, title: str):
    return page.locator("section.card").filter(
        has=page.locator("header.card-head h2").filter(has_text=re.compile(f"^{re.escape(title)}$")))


def export_csv(scope) -> list[dict[str, str]]:
    page = scope.page
    with page.expect_download() as download:
        scope.get_by_role("button", name="Export CSV").click()
    return list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8-sig"))))


def _cell(v, kind: str):
    if v is None or v == "":
        return None
    return float(v) if kind == "num" else str(v)


def same_rows(exported: list[dict], api_rows: list[dict], spec: list[tuple], ordered: bool = False) -> None:
    """The exported rows are the API's (spec: CSV header, API key or function, "num" | "text"),
    in the same order when `ordered`."""
    assert exported, "the table exported no rows"
    missing = [h for h, _, _ in spec if h not in exported[0]]
    assert not missing, (missing, list(exported[0]))
    shown = [tuple(_cell(r[h], kind) for h, _, kind in spec) for r in exported]
    wanted = [tuple(_cell(k(r) if callable(k) else r.get(k), kind) for _, k, kind in spec) for r in api_rows]
    if ordered:
        assert shown == wanted, [(a, b) for a, b in zip(shown, wanted) if a != b][:3]
    else:
        assert Counter(shown) == Counter(wanted)


def option(page, label: str) -> dict:
    """The ECharts option a chart drew (its element's tbOption), data only."""
    loc = page.get_by_role("img", name=label)
    expect(loc).to_be_visible()
    return loc.evaluate("el => JSON.parse(JSON.stringify({y: el.tbOption.yAxis.data, x: el.tbOption.xAxis.data, "
                        "zoom: el.tbOption.dataZoom, series: el.tbOption.series.map(s => ({name: s.name, data: s.data}))}))")


def reply_to(route: str, **must):
    def match(response) -> bool:
        url = urlparse(response.url)
        if not url.path.endswith(f"/{API}/{route}") or response.status != 200:
            return False
        query = dict(parse_qsl(url.query))
        return all(query.get(k) == str(v) for k, v in must.items())
    return match


def shot(watch, name: str) -> None:
    watch.page.evaluate("window.scrollTo(0, 0)")
    watch.shot(name)


def section_shot(section, name: str) -> None:
    """A screenshot of one section of the page (test-output/screenshots/NAME.png)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    section.page.evaluate("document.querySelector('.topbar').style.position = 'static'")  # not over the section
    section.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    section.page.evaluate("document.querySelector('.topbar').style.position = ''")


def assert_clean(watch) -> None:
    assert watch.errors == [], watch.errors
    assert watch.outside == [], watch.outside


def fmt_us(ns) -> str:
    return "–" if ns is None else f"{ns / 1e3:,.0f}"


RANKS = [("Rank", "rank", "num"), ("Worker", "worker", "text"), ("Steps", "steps", "num"),
         ("Step time (ns)", "step_ns", "num"), ("Computation (ns)", "computation_ns", "num"),
         ("Communication (ns)", "communication_ns", "num"), ("Overlap (ns)", "overlap_ns", "num"),
         ("Other (ns)", "other_ns", "num"), ("Waiting (ns)", "wait_ns", "num"), ("Transfer (ns)", "transfer_ns", "num"),
         ("Clock shift (ns)", "clock_offset_ns", "num"), ("Clock method", "clock_method", "text"),
         ("Outlier", lambda r: r["outlier_reason"] if r["outlier"] else None, "text")]
INSTANCES = [("Collective", "name", "text"), ("Process group", "pg_name", "text"),
             ("Seq / call", lambda r: r["seq"] if r["seq"] is not None else r["occurrence"], "num"),
             ("Ranks", "ranks", "num"), ("First arrival (ns)", "first_arrival_ns", "num"),
             ("Last arrival (ns)", "last_arrival_ns", "num"), ("Arrival skew (ns)", "skew_ns", "num"),
             ("Slowest rank", "slowest_rank", "num"), ("Mean duration (ns)", "mean_duration_ns", "num"),
             ("Data (bytes)", "bytes", "num"), ("algbw min (GB/s)", "algbw_min_gbps", "num"),
             ("algbw median (GB/s)", "algbw_median_gbps", "num"), ("busbw min (GB/s)", "busbw_min_gbps", "num"),
             ("busbw median (GB/s)", "busbw_median_gbps", "num")]


# -- Distributed: ranks ---------------------------------------------------------------------------
def test_ranks_slowest_first_with_the_straggler_flagged_and_clocks_shown(ranks_url, watch):
    d = api(ranks_url, "distributed/ranks", run=RUN)
    assert d["order"][0] == SLOW, d["order"]  # the run is what this test says it is
    flagged = [r for r in d["ranks"] if r["outlier"]]
    assert [r["rank"] for r in flagged] == [SLOW] and flagged[0]["outlier_reason"]
    by_rank = {r["rank"]: r for r in d["ranks"]}
    watch.open(f"{ranks_url}/{hash_state(view='Distributed', run=RUN)}")
    page = watch.page
    ranks = card(page, "Ranks")
    expect(ranks.locator(".rank-bars")).to_have_attribute("data-order", ",".join(map(str, d["order"])))

    # the bars: one per rank, slowest on top, the outlier marked, each stack the API's parts
    bars = option(page, "Ranks, slowest first")
    assert bars["y"] == [("⚠ " if by_rank[r]["outlier"] else "") + f"rank {r}" for r in d["order"]]
    assert bars["zoom"] == []  # 16 ranks: all in view
    parts = {s["name"]: s["data"] for s in bars["series"]}
    for k, rank in enumerate(d["order"]):
        r = by_rank[rank]
        assert parts["Computation (not overlapped)"][k] == r["computation_ns"] - r["overlap_ns"]
        assert parts["Overlapped"][k] == r["overlap_ns"]
        assert parts["Communication (not overlapped)"][k] == r["communication_ns"] - r["overlap_ns"]
        assert parts["Other"][k] == r["other_ns"]
    # the outliers, with the server's reason
    assert ranks.locator("ul.outliers li").all_inner_texts() == \
        [f"⚠ rank {r['rank']} {r['worker']}: {r['outlier_reason']}" for r in flagged]
    # waiting vs transfer, same order
    ranks.get_by_role("tab", name="Waiting vs transfer").click()
    wait = {s["name"]: s["data"] for s in option(page, "Ranks, slowest first")["series"]}
    assert wait["Synchronizing (waiting)"] == [by_rank[r]["wait_ns"] for r in d["order"]]
    assert wait["Data transfer"] == [by_rank[r]["transfer_ns"] for r in d["order"]]

    # the clock corrections: a note naming the shifted rank, and a column per rank
    moved = [r for r in d["ranks"] if r["clock_offset_ns"]]
    assert [r["rank"] for r in moved] == [SLOW] and moved[0]["clock_method"] == "collectives"
    note = ranks.locator(".clock-note")
    expect(note).to_contain_text(f"1 of {N} ranks shifted")
    expect(note).to_contain_text(f"(rank {SLOW})")
    # the per-rank table: the API's rows, slowest first
    table = ranks.locator(".table-wrap")
    same_rows(export_csv(table), [by_rank[r] for r in d["order"]], RANKS, ordered=True)
    first = table.locator("table.data tbody tr").first.locator("td").all_inner_texts()
    assert first[0] == str(SLOW) and first[3] == fmt_us(by_rank[SLOW]["step_ns"])
    shot(watch, "ranks-distributed")
    assert_clean(watch)


def test_step_heatmap_cells_are_the_api_matrix(ranks_url, watch):
    d = api(ranks_url, "distributed/ranks", run=RUN)
    m = d["step_matrix"]
    assert m["steps"] == list(range(1, STEPS + 1)) and m["ranks"] == list(range(N)) and not m["truncated"]
    wanted = {(rank, step): v for rank, row in zip(m["ranks"], m["step_ns"]) for step, v in zip(m["steps"], row)
              if v is not None}
    watch.open(f"{ranks_url}/{hash_state(view='Distributed', run=RUN)}")
    page = watch.page
    box = page.locator(".step-heatmap")
    for order, ranks in (("Slowest first", d["order"]), ("By rank", m["ranks"])):
        box.get_by_role("tab", name=order).click()
        expect(box).to_have_attribute("data-ranks", ",".join(map(str, ranks)))
        heat = option(page, "Step time per rank and step")
        assert heat["x"] == [str(s) for s in m["steps"]]
        assert heat["y"] == [("⚠ " if r == SLOW else "") + f"rank {r}" for r in ranks]
        cells = {(ranks[y], m["steps"][x]): v for x, y, v in heat["series"][0]["data"]}
        assert cells == wanted  # every cell, none binned or dropped
        expect(box).to_contain_text(f"{N} ranks × {STEPS} steps, one cell each (none merged)")
    # the straggler's steps are the slowest cells
    assert min(v for (r, _), v in wanted.items() if r == SLOW) > max(v for (r, _), v in wanted.items() if r != SLOW)
    section_shot(card(page, "Ranks"), "ranks-heatmap")
    assert_clean(watch)


# -- Distributed: collective instances ------------------------------------------------------------
def test_instances_table_is_the_api_page_and_sorts_on_the_server(ranks_url, watch):
    watch.open(f"{ranks_url}/{hash_state(view='Distributed', run=RUN)}")
    page = watch.page
    inst = card(page, "Collective instances")
    table = inst.locator(".instances")
    expect(table).to_have_attribute("data-sort", "skew")
    first = api(ranks_url, "distributed/instances", run=RUN, sort="skew", limit=100, offset=0)
    assert first["total"] == STEPS + STEPS * N // 2  # an all_reduce and 8 pairs' send/recv per step
    same_rows(export_csv(table), first["rows"], INSTANCES, ordered=True)
    assert first["rows"][0]["slowest_rank"] == SLOW  # the straggler arrives last at the all_reduce
    expect(table.locator(".page-range")).to_have_text(f"1–{first['total']} of {first['total']}")

    # the server sorts: by the select, then by a column header
    with page.expect_response(reply_to("distributed/instances", sort="bytes", offset=0)):
        inst.locator("label.select", has_text="Sort by").locator("select").select_option("bytes")
    expect(table).to_have_attribute("data-sort", "bytes")
    same_rows(export_csv(table), api(ranks_url, "distributed/instances", run=RUN, sort="bytes", limit=100, offset=0)["rows"],
              INSTANCES, ordered=True)
    with page.expect_response(reply_to("distributed/instances", sort="duration")):
        table.locator("th", has_text="Mean duration").get_by_role("button").click()
    expect(table).to_have_attribute("data-sort", "duration")
    expect(table.locator("th[aria-sort=descending]")).to_contain_text("Mean duration")
    same_rows(export_csv(table), api(ranks_url, "distributed/instances", run=RUN, sort="duration", limit=100, offset=0)["rows"],
              INSTANCES, ordered=True)

    # pages of 50: the second holds the rest
    with page.expect_response(reply_to("distributed/instances", limit=50, offset=0)):
        inst.locator("label.select", has_text="Page").locator("select").select_option("50")
    with page.expect_response(reply_to("distributed/instances", limit=50, offset=50)):
        table.get_by_role("button", name="Next page").click()
    expect(table).to_have_attribute("data-offset", "50")
    rest = api(ranks_url, "distributed/instances", run=RUN, sort="duration", limit=50, offset=50)
    assert len(rest["rows"]) == first["total"] - 50
    same_rows(export_csv(table), rest["rows"], INSTANCES, ordered=True)

    # the point-to-point bytes: each pair's sends, as the API's matrix
    mat = api(ranks_url, "distributed/matrix", run=RUN)
    wanted = {(mat["ranks"][i], mat["ranks"][j]): v for i, row in enumerate(mat["bytes"]) for j, v in enumerate(row) if v}
    assert wanted == {(2 * k, 2 * k + 1): STEPS * 64 * (k + 1) * 4 for k in range(N // 2)}
    box = inst.locator(".bytes-matrix")
    expect(box).to_have_attribute("data-ranks", ",".join(map(str, mat["ranks"])))
    heat = option(page, "Point-to-point bytes between ranks")
    assert {(mat["ranks"][y], mat["ranks"][x]): v for x, y, v in heat["series"][0]["data"]} == wanted
    section_shot(inst, "ranks-instances")
    assert_clean(watch)


def test_progress_while_the_server_summarizes_ranks(ranks_url, watch):
    """A 202 with the summaries' progress (docs/api.md) shows "Summarizing k / n ranks…" with
    a bar until the answer comes: the first two answers of distributed/ranks are the server's
    202 body, as a run still being summarized answers."""
    page = watch.page
    left = [2]

    def summarizing(route):
        if left[0] > 0:
            left[0] -= 1
            route.fulfill(status=202, content_type="application/json",
                          body=json.dumps({"loading": True, "summarizing": True, "run": RUN, "summarized": 7,
                                           "total": N, "failed": 0, "retry_after_ms": 2500}))
        else:
            route.continue_()

    page.route(re.compile(r".*/distributed/ranks\?.*"), summarizing)
    watch.open(f"{ranks_url}/{hash_state(view='Distributed', run=RUN)}")
    ranks = card(page, "Ranks")
    status = ranks.get_by_role("status")
    expect(status).to_have_text(f"Summarizing 7 / {N} ranks…")
    expect(status.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "7")
    assert status.locator(".spinner").count() == 0
    shot(watch, "ranks-progress")
    expect(ranks.locator(".rank-bars")).to_be_visible(timeout=30_000)  # then the answer
    assert left[0] == 0
    assert_clean(watch)


# -- Trace: Ranks mode ----------------------------------------------------------------------------
def _tracks(reply: dict) -> list[str]:
    return [f"{t['process']} — {t['thread']}" for t in reply["tracks"]]


def test_trace_ranks_mode_draws_the_chosen_ranks_on_one_axis(ranks_url, watch):
    d = api(ranks_url, "distributed/ranks", run=RUN)
    slowest = d["order"][:4]
    workers = {r["rank"]: r["worker"] for r in d["ranks"]}
    page = watch.page
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/trace/ranks?" in r.url else None)
    watch.open(f"{ranks_url}/{hash_state(view='Trace', run=RUN)}")
    with page.expect_response(reply_to("trace/ranks", workers=",".join(workers[r] for r in slowest))):
        page.get_by_role("tab", name="Ranks").click()
    view = page.locator(".trace-ranks")
    expect(view).to_have_attribute("data-ranks", ",".join(map(str, slowest)))
    expect(page.locator("label.select", has_text="Worker")).to_have_count(0)  # the ranks replace the worker picker
    reply = get_json(asked[-1])[1]
    assert [w["worker"] for w in reply["workers"]] == [workers[r] for r in slowest]
    timeline = page.locator(".timeline")
    expect(timeline).to_have_attribute("data-tracks", json.dumps(_tracks(reply), ensure_ascii=False, separators=(",", ":")))
    assert all(t["process"].startswith(f"{t['worker']}: ") for t in reply["tracks"])
    # the alignment line: every rank's shift, the straggler's clock correction
    line = view.locator(".alignment")
    expect(line).to_have_attribute("data-offsets", "|".join(f"{w['worker']}={w['offset_ns']}" for w in reply["workers"]))
    straggler = next(w for w in reply["workers"] if w["rank"] == SLOW)
    expect(line).to_contain_text(f"rank {SLOW} ({workers[SLOW]})")
    expect(line).to_contain_text("by collectives")
    assert straggler["clock_method"] == "collectives" and straggler["clock_offset_ns"] < 0

    # pick ranks: the straggler and the fastest rank only
    fastest = d["order"][-1]
    page.get_by_role("button", name=re.compile(r"^Ranks: ")).click()
    picker = page.get_by_role("dialog", name="Pick ranks")
    for r in slowest[1:]:
        picker.locator(f"input[data-rank='{r}']").uncheck()
    with page.expect_response(reply_to("trace/ranks", workers=f"{workers[SLOW]},{workers[fastest]}")):
        picker.locator(f"input[data-rank='{fastest}']").check()
    picker.get_by_role("button", name="Close").click()
    expect(view).to_have_attribute("data-ranks", f"{SLOW},{fastest}")
    assert dict(parse_qsl(page.evaluate("location.hash").lstrip("#")))["ranks"] == f"{SLOW},{fastest}"
    reply = get_json(asked[-1])[1]
    expect(timeline).to_have_attribute("data-tracks", json.dumps(_tracks(reply), ensure_ascii=False, separators=(",", ":")))

    # zoom: the window is asked of the server, as in the single-rank view
    n = len(asked)
    view.get_by_role("button", name="Zoom in").click()
    for _ in range(100):
        if len(asked) > n and "start_ns=" in asked[-1]:
            break
        page.wait_for_timeout(100)
    watch.settle()
    q = dict(parse_qsl(urlparse(asked[-1]).query))
    a, b = int(timeline.get_attribute("data-window-start")), int(timeline.get_attribute("data-window-end"))
    assert (q["start_ns"], q["end_ns"]) == (str(a), str(b)) and 0 < b - a < reply["span"]["end_ns"]
    watch.settle()
    view.get_by_role("button", name="Whole trace").click()
    watch.settle()

    # click the fastest rank's first aten::mm (the second rank shown): its details and its backward arrow
    reply = get_json(asked[-1])[1]
    k = [w["worker"] for w in reply["workers"]].index(workers[fastest])
    first, count = reply["workers"][k]["tracks"]
    mm = min((e for e in reply["events"] if e["name"] == "aten::mm" and first <= e["track"] < first + count),
             key=lambda e: e["ts_ns"])
    box = page.locator(".timeline canvas").bounding_box()
    a, b = reply["window"]["start_ns"], reply["window"]["end_ns"]
    x = ((mm["ts_ns"] + mm["dur_ns"] / 2) - a) / (b - a) * box["width"]
    y = RULER_H
    for t in reply["tracks"]:
        if t["id"] == mm["track"]:
            break
        y += HEADER_H + (t["max_depth"] + 1) * ROW_H + GAP
    y += HEADER_H + mm["depth"] * ROW_H + ROW_H / 2
    page.mouse.click(box["x"] + x, box["y"] + y)
    gid = mm["i"] * MAX_WORKERS + k
    expect(timeline).to_have_attribute("data-selected", str(gid))
    detail = api(ranks_url, "trace/event", run=RUN, worker=workers[fastest], i=mm["i"])
    panel = page.locator(".side-panel")
    expect(panel.locator(".details-name")).to_have_text(detail["event"]["name"])
    bwd = next(link for link in detail["links"] if link["relation"] == "backward")
    expect(panel.locator(f"li[data-relation=backward][data-i='{bwd['i'] * MAX_WORKERS + k}']")).to_have_count(1)
    expect(timeline).to_have_attribute("data-flows", re.compile(rf"(^| ){gid}>{bwd['i'] * MAX_WORKERS + k}( |$)"))
    shot(watch, "ranks-trace")
    assert_clean(watch)


# -- bad input ------------------------------------------------------------------------------------
def test_a_cut_off_rank_and_one_of_another_world_are_named_and_the_others_shown(tmp_path, watch):
    """4 ranks of the 16-rank job, one cut off mid-file and one from a job of another world
    size: the view opens, names both under Excluded with the server's reasons, and its
    tables hold the two ranks that agree."""
    run = tmp_path / "logdir" / "broken"
    run.mkdir(parents=True)
    for r in range(4):
        doc = _rank_trace(r)
        if r == 3:
            doc["distributedInfo"]["world_size"] = 8
        (run / f"rank{r}.{1000 + r}.pt.trace.json").write_text(json.dumps(doc))
    cut = run / "rank2.1002.pt.trace.json"
    cut.write_text(cut.read_text()[:3000])
    with serving(tmp_path / "logdir", tmp_path / "cache") as base:
        deadline = time.monotonic() + 60
        while (status := get_json(f"{base}/{API}/distributed/overlap?run=broken"))[0] == 202:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        doc = status[1]
        excluded = {x["worker"]: x["reason"] for x in doc["info"]["excluded"]}
        assert set(excluded) == {"rank2", "rank3"} and cut.name in excluded["rank2"] and "world size" in excluded["rank3"]
        assert sorted({r["rank"] for r in doc["ranks"]}) == [0, 1]
        watch.open(f"{base}/{hash_state(view='Distributed', run='broken')}")
        page = watch.page
        items = page.locator("ul.excluded li")
        expect(items).to_have_count(2)
        expect(page.locator("button.badge.warn")).to_have_text("1 file skipped")  # the cut-off one, once
        texts = items.all_inner_texts()
        assert any("rank2" in t and cut.name in t for t in texts), texts
        assert any("rank3" in t and "world size is 8" in t for t in texts), texts
        expect(card(page, "Ranks").locator(".rank-bars")).to_have_attribute("data-order", re.compile(r"^[01],[01]$"))
        shot(watch, "ranks-excluded")
        assert_clean(watch)
