"""A small file cannot take the machine (issue 18).

- The padding rule: gzip text past ``read.PADDING_FREE`` bytes that inflates more than
  ``read.MAX_INFLATION`` x the compressed bytes read is refused, with the file named and
  what it holds; a bomb then costs what its file holds (a peak RSS ceiling, measured in a
  child process from its own VmHWM: before, the text was inflated whole).  The real traces of
  tests/data (18-30x) still read.
- Names: a 50 MB event name (the issue's "sent back whole by trace, trace/search,
  trace/event, range_stats": a 100 MB reply, 2.6 GB of RSS to open the Operator view) is
  kept cut by the decoder (tests/test_decode_bounds.py) and shown cut in every reply, with
  its full length; every route answers within a size bound and the server within an RSS
  ceiling.
- Replies: the operator and kernel tables are sent a page at a time (``rows_total``), pies
  are the top rows computed over the table's columns, a Trace view window holds at most
  ``timeline.MAX_BUSY`` busy blocks (a trace nested thousands deep), trace/event does not
  parse an args text over STRING_MAX bytes.
- The load budget (io.budget): loads of every process of the machine share one ledger,
  first come first served; a dead process's share is dropped; a summary worker process
  waits for the budget the server's loads hold.

The hostile files are written here (Kineto's layout: the ``ph: X`` events of a torch
trace, see tests/kineto_fixtures.py); figures for bigger ones (500 MB names, 10 M names,
10^6 nesting) are benchmarks/bench_hostile.py's.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from datafiles import benchmark_module, real_traces, rel
from werkzeug.test import Client

import tb_profiler
from tb_profiler.decode import STRING_MAX
from tb_profiler.errors import TraceFormatError
from tb_profiler.io import budget, read
from tb_profiler.plugin import ROUTE_PREFIX, timeline, views
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.trace.strings import SHOW_MAX, cut_length

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]


# -- helpers ------------------------------------------------------------------------------
def _op(name: str, ts_us: float, dur_us: float, cat: str = "cpu_op", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts_us, "dur": dur_us,
            **({"args": args} if args else {})}


def _step(dur_us: float = 10_000.0) -> dict:
    return _op("ProfilerStep#1", 1000.0, dur_us, cat="user_annotation")


def _text(events: list[dict]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def _gz_stream(path: Path, parts) -> Path:
    """A gzip file of (bytes, repeat) parts, compressed as a stream (bench_hostile's writer)."""
    benchmark_module("bench_hostile")._write_gz_stream(path, parts)
    return path


_CHILD = r"""
import json, sys
from tb_profiler.io import read
read.inflater = read.INFLATERS[sys.argv[1]]
import tb_profiler
try:
    tb_profiler.load(sys.argv[2], cache=False)
    print(json.dumps({"ok": True}))
except Exception as e:
    print(json.dumps({"ok": False, "type": type(e).__name__, "message": str(e)}))
"""


_PEAK = r"""
import resource as _resource
with open("/proc/self/status") as _f:
    _own = next(int(line.split()[1]) for line in _f if line.startswith("VmHWM:"))
print(_json.dumps({"peak_mib": max(_own, _resource.getrusage(_resource.RUSAGE_CHILDREN).ru_maxrss) / 1024}))
"""


def _in_child(script: str, *args: str, env: dict | None = None) -> tuple[dict, float]:
    """(the child's last line of JSON, its peak RSS in MiB).

    Why the child reads its own VmHWM rather than wait4's ru_maxrss: Linux carries the
    parent's high-water mark over fork and exec into the child's ru_maxrss, so under a
    full pytest run (500 MiB and more) wait4 reported the test runner's peak, not the
    child's.  The child's own waited-for children (summary workers) count through
    RUSAGE_CHILDREN."""
    proc = subprocess.Popen([sys.executable, "-c", "import json as _json\n" + script + _PEAK, *args],
                            stdout=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=str(ROOT))
    out, _ = proc.communicate()
    assert proc.returncode == 0, out[-2000:]
    *_, doc, peak = out.strip().splitlines()
    return json.loads(doc), json.loads(peak)["peak_mib"]


# -- the padding rule -----------------------------------------------------------------------
BOMB_CEILING_MIB = 320  # what the child may peak at: the refusal comes after PADDING_FREE (64 MiB) of text


@pytest.mark.parametrize("inflater", sorted(read.INFLATERS))
def test_whitespace_inside_the_events_array_is_refused_as_padding(tmp_path, inflater):
    """The issue's bomb: valid JSON, ``{"traceEvents":[`` and then whitespace (512 MiB here,
    0.5 MB of gzip).  Before: inflated whole (the 2 GiB one: 2.09 GB RSS, an empty trace)."""
    p = _gz_stream(tmp_path / "w.pt.trace.json.gz", [(b'{"traceEvents": [', 1), (b" " * MIB, 512), (b"]}", 1)])
    assert p.stat().st_size < MIB
    doc, rss = _in_child(_CHILD, inflater, str(p))
    assert doc["type"] == "TraceFormatError" and str(p) in doc["message"]
    assert "mostly padding" in doc["message"] and f"inflates more than {read.MAX_INFLATION}x" in doc["message"]
    assert "100.0% whitespace" in doc["message"]
    assert rss < BOMB_CEILING_MIB, f"peak RSS {rss:.0f} MiB"


@pytest.mark.parametrize("inflater", sorted(read.INFLATERS))
def test_a_name_of_hundreds_of_megabytes_in_a_small_gzip_is_refused_as_padding(tmp_path, inflater):
    """The issue's half-megabyte file holding one 500 MB event name (300 MB here)."""
    head = b'{"traceEvents": [' + json.dumps(_step()).encode() + b', {"ph": "X", "cat": "cpu_op", "name": "'
    p = _gz_stream(tmp_path / "w.pt.trace.json.gz", [(head, 1), (b"a" * MIB, 300), (b'", "ts": 1001, "dur": 1}]}', 1)])
    doc, rss = _in_child(_CHILD, inflater, str(p))
    assert doc["type"] == "TraceFormatError" and str(p) in doc["message"] and "mostly padding" in doc["message"]
    assert "0.0% whitespace" in doc["message"]
    assert rss < BOMB_CEILING_MIB, f"peak RSS {rss:.0f} MiB"


def test_text_under_the_free_allowance_is_never_refused(tmp_path):
    """A file may inflate past MAX_INFLATION x while its text stays under PADDING_FREE."""
    p = _gz_stream(tmp_path / "w.pt.trace.json.gz", [(b'{"traceEvents": [', 1), (b" " * MIB, 32),
                                                      (json.dumps(_step()).encode() + b"]}", 1)])
    assert len(read.read_trace_bytes(p)) > 32 * MIB
    assert len(tb_profiler.load(p, cache=False).events) == 1


@pytest.mark.parametrize("path", [p for p in real_traces() if p.name.endswith(".gz")], ids=rel)
def test_the_real_traces_are_within_the_padding_rule(path, monkeypatch):
    """tests/data's gzip traces (they inflate 18-30x) read whole, even with no free allowance."""
    monkeypatch.setattr(read, "PADDING_FREE", 0)
    assert len(read.read_trace_bytes(path)) == len(gzip.decompress(path.read_bytes()))


# -- names and replies ----------------------------------------------------------------------
NAME_BYTES = 50_000_000
NAMES_CEILING_MIB = 700  # before: 2.6 GB for the Operator view of this file


def _long_name_trace(path: Path) -> Path:
    """A step, an operator named by 50 MB of 'x', and kernels of that name (Kineto's
    layout for a kernel: cat kernel, pid the device, args with the stream)."""
    long = "x" * NAME_BYTES
    events = [_step(), _op(long, 1001.0, 5.0), _op("aten::add", 1010.0, 1.0),
              {**_op(long, 1020.0, 3.0, cat="kernel", device=0, stream=7, correlation=1), "pid": 0, "tid": 7}]
    path.write_bytes(_text(events))
    return path


_ROUTES_CHILD = r"""
import json, os, sys, time
from werkzeug.test import Client
from tb_profiler.plugin import ROUTE_PREFIX
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
state = ProfilerState(sys.argv[1], cache_dir=sys.argv[2]).start()
state.wait_scanned(60)
client = Client(ProfilerApp(state))
out = {}
for route in json.loads(sys.argv[3]):
    deadline = time.monotonic() + 120
    while True:
        r = client.get(ROUTE_PREFIX + route, environ_overrides={"HTTP_HOST": "localhost"})
        if r.status_code != 202 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    out[route] = [r.status_code, r.get_data().decode("utf-8")]
state.stop()
print(json.dumps(out))
"""

NAME_ROUTES = ["operation?run=hostile", "operation/table?run=hostile", "kernel?run=hostile",
               "kernel/table?run=hostile", "trace?run=hostile&start_ns=0&end_ns=50000&width=1000", "trace/search?run=hostile&q=xxx",
               "trace/event?run=hostile&i=1", "trace/range_stats?run=hostile&start_ns=0&end_ns=100000000",
               "overview?run=hostile"]


def test_a_50_mb_name_is_shown_cut_by_every_route_within_bounds(tmp_path):
    (tmp_path / "log" / "hostile").mkdir(parents=True)
    _long_name_trace(tmp_path / "log" / "hostile" / "w.pt.trace.json")
    doc, rss = _in_child(_ROUTES_CHILD, str(tmp_path / "log"), str(tmp_path / "cache"), json.dumps(NAME_ROUTES))
    full = f"of {NAME_BYTES} bytes]"
    for route, (status, body) in doc.items():
        assert status == 200, (route, body[:300])
        limit = STRING_MAX + 64 * 1024 if route.startswith("trace/event") else 256 * 1024
        assert len(body.encode()) < limit, (route, len(body))
        if not route.startswith("overview"):  # the routes that list names: a prefix, and the full length
            assert "x" * (SHOW_MAX - 64) in body and full in body, route
    event = json.loads(doc["trace/event?run=hostile&i=1"][1])["event"]
    assert len(event["name"].encode()) <= STRING_MAX and cut_length(event["name"]) == NAME_BYTES
    assert rss < NAMES_CEILING_MIB, f"peak RSS {rss:.0f} MiB"


def _many_ops(n: int) -> list[dict]:
    return [_step(10.0 * n + 100)] + [_op(f"op_{i}", 1001.0 + 10 * i, 5.0 + (i % 13)) for i in range(n)]


def test_operator_tables_are_sent_a_page_at_a_time(tmp_path, monkeypatch):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(_text(_many_ops(300)))
    trace = tb_profiler.load(p, cache=False)
    monkeypatch.setattr(views, "MAX_TABLE_ROWS", 100)
    table = views.operation_table(trace, "Operation")
    full = trace.operators("name")
    assert table["rows_total"] == len(full) == 300 and table["truncated"] and len(table["rows"]) == 100
    assert [r["name"] for r in table["rows"]] == full["name"].head(100).tolist()  # the table's own order
    pie = views.operation_pie(trace, "Operation", 10)["host_self"]
    top = full.sort_values("host_self_ns", ascending=False, kind="stable")
    assert [s["name"] for s in pie[:10]] == top["name"].head(10).tolist()
    assert pie[10] == {"name": "Other", "value_ns": int(top["host_self_ns"].iloc[10:].sum())}
    small = views.operation_table(tb_profiler.load(_write(tmp_path / "s.pt.trace.json", _many_ops(20)),
                                                   cache=False), "Operation")
    assert (len(small["rows"]), small["rows_total"], small["truncated"]) == (20, 20, False)


def _write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(_text(events))
    return path


def test_a_deeply_nested_window_sends_at_most_max_busy_blocks(tmp_path, monkeypatch):
    """A chain nested 3,000 deep, each op 2 us longer than its child, viewed whole with at
    most 100 events: the 100 longest are sent as events, the other 2,900 become busy
    blocks, one per depth; the shallowest MAX_BUSY of them are kept and the rest counted."""
    n = 3000
    events = [_op(f"aten::op{i % 7}", 1000.0 + i, 4.0 * n - 2 * i) for i in range(n)]
    trace = tb_profiler.load(_write(tmp_path / "w.pt.trace.json", events), cache=False)
    full = timeline.window(trace, None, None, 100, 100, 0)
    monkeypatch.setattr(timeline, "MAX_BUSY", 50)
    cut = timeline.window(trace, None, None, 100, 100, 0)
    assert full["counts"]["busy"] > 50 and not full["busy_truncated"]
    assert cut["busy_truncated"] and len(cut["busy"]) == 50
    assert cut["counts"]["busy_in_window"] == full["counts"]["busy_in_window"] == len(full["busy"])
    assert cut["counts"]["in_window"] == full["counts"]["in_window"]
    depths = sorted(b["depth"] for b in full["busy"])
    assert sorted(b["depth"] for b in cut["busy"]) == depths[:50]


def test_an_args_text_over_string_max_is_not_parsed_by_trace_event(tmp_path):
    p = _write(tmp_path / "w.pt.trace.json", [_step(), _op("aten::mm", 1001.0, 5.0, note="n" * (STRING_MAX + 10))])
    trace = tb_profiler.load(p, cache=False)
    args = timeline.event_args(trace, 1)
    raw = len(json.dumps({"note": "n" * (STRING_MAX + 10)}))  # the args text as written
    assert list(args) == ["<cut>"] and len(args["<cut>"]) < SHOW_MAX + 200
    assert f"args text of {raw} bytes" in args["<cut>"]
    assert timeline.event_args(trace, 0) == {}


# -- the load budget ------------------------------------------------------------------------
@pytest.fixture()
def ledger(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "loads.ledger"
    monkeypatch.setenv(budget.LEDGER_ENV, str(path))
    monkeypatch.setenv(budget.BUDGET_ENV, "100")  # MiB
    return path


_HOLD_CHILD = r"""
import sys, time
from tb_profiler.io import budget
with budget.reserve(int(sys.argv[1]) << 20):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_loads_of_two_processes_share_one_budget_first_come_first_served(ledger):
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_CHILD, "70"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=dict(os.environ), cwd=str(ROOT), text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        order = []
        t = threading.Thread(target=lambda: _reserve_then(order, "second", 60))
        t.start()
        time.sleep(0.5)  # a chance to be (wrongly) granted while the other process holds 70 of 100
        assert order == [] and [e["granted"] for e in budget.held()] == [True, False]
        holder.stdin.write("\n")
        holder.stdin.flush()
        t.join(60)
        assert order == ["second"]
    finally:
        holder.kill()
        holder.wait()
    assert budget.held() == []


def _reserve_then(order: list, name: str, mib: int) -> None:
    with budget.reserve(mib << 20):
        order.append(name)


def test_a_dead_process_share_is_dropped(ledger):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    ledger.write_text(f"{int(dead.stdout)} 1 {90 << 20} 1\n")
    with budget.reserve(50 << 20) as waited:
        assert [e["pid"] for e in budget.held()] == [os.getpid()]
    assert waited < 30  # a liveness bound: it did not wait for the dead process


def test_one_load_bigger_than_the_budget_runs_alone(ledger):
    with budget.reserve(500 << 20):
        assert budget.held() == [{"pid": os.getpid(), "bytes": 500 << 20, "granted": True}]


def test_a_summary_worker_waits_for_the_budget_the_server_holds(ledger, tmp_path):
    """summarize_files runs in worker processes (summary/procs.py): their loads reserve from
    the ledger this process holds."""
    from tb_profiler.summary.pool import summarize_files

    paths = [str(_write(tmp_path / f"rank{k}.pt.trace.json", _many_ops(50))) for k in range(2)]
    done = []
    with budget.reserve(100 << 20):  # all of it
        t = threading.Thread(target=lambda: done.append(summarize_files(paths, jobs=2, cache_dir=str(tmp_path / "c"))))
        t.start()
        deadline = time.monotonic() + 60
        while not any(not e["granted"] for e in budget.held()) and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = [e for e in budget.held() if not e["granted"]]
        assert waiting and all(e["pid"] != os.getpid() for e in waiting) and not done
    t.join(120)
    assert done and all(not isinstance(s, BaseException) for s in done[0])


def test_the_budget_is_half_the_memory_unless_set(monkeypatch):
    monkeypatch.delenv(budget.BUDGET_ENV, raising=False)
    monkeypatch.setattr(budget, "_meminfo", lambda: {"MemTotal": 16 << 30, "MemAvailable": 12 << 30})
    assert budget.budget_bytes() == 8 << 30
    monkeypatch.setattr(budget, "_meminfo", lambda: {"MemTotal": 16 << 30, "MemAvailable": 3 << 30})
    assert budget.budget_bytes(held_now=2 << 30) == 5 << 30  # what is free now plus what the ledger holds
    monkeypatch.setenv(budget.BUDGET_ENV, "300")
    assert budget.budget_bytes() == 300 << 20


def test_text_size_hint_reads_the_gzip_trailer(tmp_path):
    text = _text(_many_ops(200))
    gz = tmp_path / "a.json.gz"
    gz.write_bytes(gzip.compress(text))
    plain = _write(tmp_path / "b.json", _many_ops(200))
    assert read.text_size_hint(gz) == len(text) and read.text_size_hint(plain) == len(text)
    assert read.text_size_hint(tmp_path / "missing.json") == 0


# -- --memory-mb holds what analyses keep ------------------------------------------------------
def test_what_analyses_keep_counts_against_the_memory_cap(tmp_path):
    """Two traces fit the LRU's cap; the Operator view of one keeps its call tree and table
    (analysis.memo): that counts too, and the other trace is let go."""
    from tb_profiler.analysis.memo import memo_nbytes
    from tb_profiler.plugin.loading import trace_nbytes

    for run in ("a", "b"):
        (tmp_path / "log" / run).mkdir(parents=True)
        _write(tmp_path / "log" / run / "w.pt.trace.json", _many_ops(20_000))
    probe = tb_profiler.load(tmp_path / "log" / "a" / "w.pt.trace.json", cache=False)
    timeline.lod_index(probe)  # what the preparer thread keeps with each loaded trace
    one = trace_nbytes(probe) + memo_nbytes(probe)
    state = ProfilerState(str(tmp_path / "log"), memory_bytes=int(2.3 * one), cache=False, reload_s=3600).start()
    try:
        assert state.wait_scanned(60)
        entries = {e.run: e for e in state.entries()}
        assert state.wait_loaded(list(entries.values()), 120)
        for run in ("a", "b"):  # built here, so the preparer thread's growth is counted before, not
            timeline.lod_index(state.trace(entries[run]))  # racing the Operator view's below
        assert state.resident(entries["a"]) and state.resident(entries["b"])
        before = state.memory_used()
        b = state.trace(entries["b"])
        views.operation_table(b, "Operation")
        assert memo_nbytes(b) > 0.3 * one  # the call tree and the table: more than the room left
        assert state.resident(entries["b"]) and not state.resident(entries["a"])
        assert state.memory_used() > before - one
    finally:
        state.stop()
