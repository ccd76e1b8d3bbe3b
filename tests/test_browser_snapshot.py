"""The Memory view's Snapshot section (issue 20) in a real browser, on a real `tb-profiler serve`.

The run holds a Kineto trace written here (the format torch.profiler's export_chrome_trace
writes: cpu_op events and the ``[memory]`` instants torch 2.13 records with
``profile_memory=True`` on device 0, ts in µs from ``baseTimeNanoseconds``, which puts them
on the snapshot fixtures' clock) and tests/snapshot_fixtures.cuda_oom() beside it. The
section shows the figures the snapshot routes give (summary, live at the peak, OOM triage
with its advice), and the Memory curve carries the snapshot's allocated curve as a second
series, the trace covering the snapshot's time.
"""
from __future__ import annotations

import json

import snapshot_fixtures as fx
from browser_support import API, get_json, hash_state, serving, wait_js
from test_browser_views import card

RUN = "job"
SNAP = "oom.pickle"


def _fmt_bytes(b: int) -> str:
    """The frontend's fmtBytes (util/format.ts) for sizes >= 1 KiB: 3 significant digits."""
    v, units = float(b), ["B", "KiB", "MiB", "GiB"]
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v /= 1024
        u += 1
    digits = 3 - len(str(int(v)))
    text = f"{v:.{max(digits, 0)}f}".rstrip("0").rstrip(".") if digits > 0 else str(round(v))
    return f"{text} {units[u]}"


def _trace(path) -> None:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 200}]
    for k in range(4):  # 1 MiB allocated then freed, four times, over the snapshot's time
        ev.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 20 + 200 * k,
                   "args": {"Total Reserved": 2 << 20, "Total Allocated": 1 << 20, "Bytes": 1 << 20, "Device Id": 0,
                            "Device Type": 1, "Addr": 0x7f0000000000 + (1 << 20) * k}})
        ev.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 120 + 200 * k,
                   "args": {"Total Reserved": 2 << 20, "Total Allocated": 0, "Bytes": -(1 << 20), "Device Id": 0,
                            "Device Type": 1, "Addr": 0x7f0000000000 + (1 << 20) * k}})
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": fx.T0_US * 1000, "traceEvents": ev}))


def test_snapshot_section_shows_the_routes_figures(tmp_path, watch):
    run = tmp_path / "logdir" / RUN
    run.mkdir(parents=True)
    _trace(run / "w.pt.trace.json")
    fx.write(run / SNAP, fx.cuda_oom())
    with serving(tmp_path / "logdir", tmp_path / "cache") as base:
        q = f"run={RUN}&snapshot={SNAP}"
        _, summary = get_json(f"{base}/{API}/snapshot/summary?{q}")
        _, ooms = get_json(f"{base}/{API}/snapshot/ooms?{q}")
        _, live = get_json(f"{base}/{API}/snapshot/live?{q}&device=0")
        watch.page.goto(f"{base}/{hash_state(view='Memory', run=RUN)}")
        sec = card(watch.page, f"Snapshot — {SNAP}")
        sec.get_by_label("Snapshot summary").wait_for(timeout=60_000)
        sec.locator(".oom-report").first.wait_for(timeout=60_000)
        stats = sec.get_by_label("Snapshot summary").inner_text()
        assert _fmt_bytes(summary["peak_allocated_bytes"]) in stats
        assert _fmt_bytes(summary["reserved_bytes"]) in stats
        oom = sec.locator(".oom-report").first.inner_text()
        report = ooms["ooms"][0]
        assert _fmt_bytes(report["requested_bytes"]) in oom  # 10 MiB asked for
        assert _fmt_bytes(report["largest_free_block_bytes"]) in oom
        for advice in report["advice"]:
            assert advice in oom
        first_live = live["rows"][0]["frames"].split("\n")[0]
        assert first_live in sec.inner_text()
        # the trace's Memory curve carries the snapshot's allocated curve (the trace covers its time)
        curve = watch.page.get_by_label("Memory over time, GPU0")
        curve.wait_for(timeout=60_000)
        watch.page.wait_for_function(
            "() => (document.querySelector('[aria-label=\"Memory over time, GPU0\"]').tbOption?.series ?? [])"
            ".some(s => s.name.startsWith('Snapshot allocated'))", timeout=60_000)
        watch.shot("memory-snapshot")
        assert watch.errors == [], watch.errors


def test_trace_view_draws_the_snapshot_under_the_operators(tmp_path, watch):
    """The Trace view's memory tracks carry the snapshot's allocated curve of the same device
    (asked for over the window only) beside the trace's own curve."""
    run = tmp_path / "logdir" / RUN
    run.mkdir(parents=True)
    _trace(run / "w.pt.trace.json")
    fx.write(run / SNAP, fx.cuda_oom())
    with serving(tmp_path / "logdir", tmp_path / "cache") as base:
        watch.page.goto(f"{base}/{hash_state(view='Trace', run=RUN)}")
        want = f"Snapshot allocated ({SNAP}), GPU0"
        wait_js(watch.page, "() => [...document.querySelectorAll('[data-counters]')]"
                f".some(e => e.getAttribute('data-counters').split('|').includes({json.dumps(want)}))", 60)
        names = watch.page.locator("[data-counters]").first.get_attribute("data-counters").split("|")
        assert names.index("Memory allocated, GPU0") < names.index(want)
        watch.shot("trace-snapshot-track")
        assert watch.errors == [], watch.errors
