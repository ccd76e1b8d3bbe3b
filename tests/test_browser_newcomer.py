"""Issue 11, "what a newcomer met", in a real browser (fixtures: browser_support.py):

- an open page shows a run the server has just found within 5 s (the run picker polls);
- the Kernel view's time columns are seen at a 1400 px wide window without scrolling;
- a name holding a bidirectional-control character (U+202E) is isolated (<bdi>, computed
  unicode-bidi: isolate) and its control is shown as a marker, not obeyed.

One `tb-profiler serve` for the module, rescanning its logdir every half second.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from browser_support import API, V100_RUN, free_port, get_json, hash_state, start_server, wait_js
from datafiles import V100_RUN as V100_RUN_DIR

RLO = "\u202e"
BIDI_RUN = "bidi"
EVIL_OP = f"aten::add{RLO}gpj.exe"


def _tiny_trace(op_name: str) -> dict:
    """A CPU-only Kineto trace: one profiler step around one operator."""
    return {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": op_name, "pid": 1, "tid": 1, "ts": 1100, "dur": 300, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1500, "dur": 200, "args": {}},
    ]}


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("newcomer_logdir")
    shutil.copytree(V100_RUN_DIR, logdir / V100_RUN)
    (logdir / BIDI_RUN).mkdir()
    (logdir / BIDI_RUN / "worker0.1.pt.trace.json").write_text(json.dumps(_tiny_trace(EVIL_OP)))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server([sys.executable, "-m", "tb_profiler.cli", "serve", str(logdir), "--port", str(port),
                         "--reload-interval", "0.5"], base, tmp_path_factory.mktemp("cache"))
    try:
        yield base, logdir
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _run_options(page) -> list[str]:
    return page.evaluate("""() => {
        const label = [...document.querySelectorAll('label.select')].find(l => l.textContent.startsWith('Run'));
        return label ? [...label.querySelectorAll('option')].map(o => o.value) : [];
    }""")


def test_a_new_run_shows_within_5_s_of_the_server_listing_it(newcomer, watch):
    base, logdir = newcomer
    watch.open(f"{base}/{hash_state(view='Overview', run=V100_RUN)}")
    wait_js(watch.page, f"() => document.body.innerText.includes('PyTorch Profiler') && "
                        f"[...document.querySelectorAll('option')].some(o => o.value === {json.dumps(V100_RUN)})")
    # let the page settle into its steady polling before the run arrives
    watch.page.wait_for_timeout(4000)
    assert "late_run" not in _run_options(watch.page)
    (logdir / "late_run.tmp").mkdir()
    (logdir / "late_run.tmp" / "worker0.1.pt.trace.json").write_text(json.dumps(_tiny_trace("aten::relu")))
    (logdir / "late_run.tmp").rename(logdir / "late_run")
    deadline = time.monotonic() + 60
    while "late_run" not in get_json(f"{base}/{API}/runs")[1]["runs"]:
        assert time.monotonic() < deadline, "the server never listed the new run"
        time.sleep(0.1)
    listed = time.monotonic()
    while "late_run" not in _run_options(watch.page):
        waited = time.monotonic() - listed
        assert waited < 5, f"the run picker still lacks the new run {waited:.1f} s after the server listed it"
        time.sleep(0.1)
    assert watch.errors == [] and watch.outside == []


def test_kernel_time_columns_are_seen_at_1400_px(newcomer, watch):
    base, _ = newcomer
    assert watch.page.viewport_size["width"] == 1400
    watch.open(f"{base}/{hash_state(view='Kernel', run=V100_RUN, span='1')}")
    wait_js(watch.page, "() => [...document.querySelectorAll('table.data th')].some(t => t.textContent.startsWith('Total (µs)'))", 60)
    watch.settle()
    for header in ("Total (µs)", "Mean (µs)", "Calls"):
        th = watch.page.locator("table.data th", has_text=header).first
        box = th.bounding_box()
        assert box is not None, header
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1400, f"{header!r} lies at {box}, past the 1400 px window"
    # the scroller was not scrolled sideways to get there
    assert watch.page.evaluate("() => [...document.querySelectorAll('.table-scroll')].every(s => s.scrollLeft === 0)")
    watch.shot("newcomer-kernel-1400")
    assert watch.errors == [] and watch.outside == []


def test_a_name_with_u202e_is_isolated_and_its_control_shown(newcomer, watch):
    base, _ = newcomer
    watch.open(f"{base}/{hash_state(view='Operator', run=BIDI_RUN)}")
    marker = "aten::add⟨U+202E⟩gpj.exe"
    wait_js(watch.page, f"() => [...document.querySelectorAll('table.data td bdi')].some(b => b.textContent === {json.dumps(marker)})", 60)
    info = watch.page.evaluate(f"""() => {{
        const b = [...document.querySelectorAll('table.data td bdi')].find(b => b.textContent === {json.dumps(marker)});
        return {{bidi: getComputedStyle(b).unicodeBidi, raw: b.textContent.includes('\\u202e'),
                 marker: !!b.querySelector('.bidi-ctl')}};
    }}""")
    assert info == {"bidi": "isolate", "raw": False, "marker": True}
    # no rendered text anywhere obeys the control
    assert RLO not in watch.text()
    # the run picker shows the run names isolated from direction tricks too (options hold text)
    assert BIDI_RUN in _run_options(watch.page)
    watch.shot("newcomer-operator-bidi")
    assert watch.errors == [] and watch.outside == []


def test_a_missing_logdir_says_so(tmp_path, watch):
    """A log directory that does not exist (`tb-profiler serve` refuses one at the start;
    TensorBoard does not, and a folder can vanish): the page says the log directory cannot
    be read and why (not "holds no trace files"), and never shows the server's path."""
    missing = tmp_path / "not-there"
    missing.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env_cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "tb_profiler.cli", "serve", str(missing), "--port", str(port),
                             "--reload-interval", "0.5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TB_PROFILER_CACHE_DIR=str(env_cache)))
    try:
        deadline = time.monotonic() + 60
        while True:  # until the server answers, then the folder goes
            try:
                if get_json(f"{base}/{API}/status")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        missing.rmdir()
        while True:  # until the server has scanned (and failed to)
            try:
                code, doc = get_json(f"{base}/{API}/status")
                if code == 200 and doc.get("scan_error"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        watch.open(f"{base}/")
        wait_js(watch.page, "() => document.body.innerText.includes('cannot be read')", 60)
        text = watch.text()
        assert "does not exist" in text and "holds no trace files" not in text
        assert str(missing) not in text and "<logdir>" not in text
        assert watch.errors == [] and watch.outside == []
    finally:
        proc.terminate()
        proc.wait(timeout=20)
