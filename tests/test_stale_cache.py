"""Never a stale trace: a trace rewritten with the same size and the same modification time
(``cp -p``, ``rsync -t``, a restore from backup) is read as its new self by every cache —
decoded columns, summaries, stored parts and answers, discovery's sniff results — in the
running server and in a restarted one on the same cache (issue 18).  Keys follow what
changes with the content: inode and ctime locally (io.read.stat_key).  The object-store
side (ETag, or a digest of head and tail) is in test_s3.py.

The traces are small Kineto-format files (the ``traceEvents`` layout torch 2.13 writes:
complete ``cpu_op`` events with External id args, as test_s3's ``_trace``); two versions
differ only in their operator names and durations, never in their length.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_plugin_state import P, get, wait_for
from werkzeug.test import Client

import tb_profiler
from tb_profiler.io import discovery
from tb_profiler.io.read import stat_key
from tb_profiler.plugin import app as app_mod
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.summary.ingest import stored_summary, summary_for

ROOT = Path(__file__).resolve().parents[1]


def trace_text(op: str, dur: int, n: int = 40) -> bytes:
    """n cpu_op events named aten::<op><k> of dur µs each; the length depends on len(op),
    the digits of dur and n only."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::{op}{i % 5}", "pid": 1, "tid": 1,
               "ts": 1000 + 100 * i, "dur": dur, "args": {"External id": i + 1}} for i in range(n)]
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def rewrite_keeping_size_and_mtime(path: Path, text: bytes) -> None:
    """What ``cp -p`` or a restore does: new bytes in place, the old modification time set back."""
    before = os.stat(path)
    assert len(text) == before.st_size
    time.sleep(0.02)  # past the filesystem's timestamp tick: the rewrite's ctime is another one
    path.write_bytes(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def op_names(trace) -> set[str]:
    return {trace.str(i) for i in trace.events["name"]}


def test_stat_key_follows_a_rewrite_that_keeps_size_and_mtime(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(trace_text("aaa", 5))
    first = stat_key(p)
    rewrite_keeping_size_and_mtime(p, trace_text("bbb", 7))
    assert stat_key(p)[0] == first[0] and stat_key(p) != first
    replaced = tmp_path / "other.json"  # a new file renamed over it: another inode
    replaced.write_bytes(trace_text("ccc", 9))
    os.utime(replaced, ns=(os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns))
    again = stat_key(p)
    os.replace(replaced, p)
    assert stat_key(p) != again


@pytest.mark.parametrize("gz", [False, True])
def test_load_reads_the_new_version_in_this_process_and_the_next(tmp_path, gz):
    p = tmp_path / ("w.pt.trace.json.gz" if gz else "w.pt.trace.json")
    cache = tmp_path / "cache"

    def write(text: bytes) -> bytes:  # stored blocks: the gzip is as long as the text, plus its frame
        return gzip.compress(text, compresslevel=0, mtime=0) if gz else text

    p.write_bytes(write(trace_text("aaa", 5)))
    first = tb_profiler.load(p, cache_dir=cache, background=False)
    assert op_names(first) == {f"aten::aaa{k}" for k in range(5)}
    assert tb_profiler.load(p, cache_dir=cache).from_cache  # the entry serves the same version
    rewrite_keeping_size_and_mtime(p, write(trace_text("bbb", 7)))

    again = tb_profiler.load(p, cache_dir=cache, background=False)
    assert not again.from_cache and op_names(again) == {f"aten::bbb{k}" for k in range(5)}
    assert set(again.events["dur"].tolist()) == {7000}
    child = ("import sys, json, tb_profiler; t = tb_profiler.load(sys.argv[1], cache_dir=sys.argv[2]); "
             "print(json.dumps([t.from_cache, sorted({t.str(i) for i in t.events['name']})]))")
    out = subprocess.run([sys.executable, "-c", child, str(p), str(cache)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    from_cache, names = json.loads(out.stdout)
    assert from_cache and names == [f"aten::bbb{k}" for k in range(5)]  # the new entry, not the old one


def test_args_text_read_from_the_file_is_never_the_other_version(tmp_path):
    """A plain trace's args stay in the file (decode.args_text.FileArgs): an entry whose
    offsets belong to the old version must not be read against the new bytes."""
    p = tmp_path / "w.pt.trace.json"
    cache = tmp_path / "cache"
    p.write_bytes(trace_text("aaa", 5))
    tb_profiler.load(p, cache_dir=cache, background=False)
    rewrite_keeping_size_and_mtime(p, trace_text("bbb", 7))
    t = tb_profiler.load(p, cache_dir=cache, background=False)
    assert t.args(3)["External id"] == 4 and t.str(t.events["name"][3]) == "aten::bbb3"


def test_a_summary_is_built_again_for_the_new_version(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    cache = tmp_path / "cache"
    p.write_bytes(trace_text("aaa", 5))
    old = summary_for(p, cache_dir=cache)
    assert stored_summary(p, cache_dir=cache) is not None
    assert set(old.operators["name"]) == {f"aten::aaa{k}" for k in range(5)}
    rewrite_keeping_size_and_mtime(p, trace_text("bbb", 7))
    assert stored_summary(p, cache_dir=cache) is None  # the stored one is the old version's
    new = summary_for(p, cache_dir=cache)
    assert set(new.operators["name"]) == {f"aten::bbb{k}" for k in range(5)}
    assert set(stored_summary(p, cache_dir=cache).operators["name"]) == set(new.operators["name"])


def test_discovery_sniffs_a_rewritten_json_file_again(tmp_path):
    """A JSON file not named like torch's traces is sniffed once per version: a file that was
    not a trace and is one now (same size, same mtime) is listed."""
    logdir = tmp_path / "log"
    (logdir / "run").mkdir(parents=True)
    p = logdir / "run" / "rank-0.json"
    trace = trace_text("aaa", 5)
    other = json.dumps({"config": "x" * (len(trace) - len('{"config": ""}'))}).encode()
    assert len(other) == len(trace)
    p.write_bytes(other)
    (logdir / "run" / "w.pt.trace.json").write_bytes(trace)  # a run: its other JSON files are reported
    found = discovery.discover(logdir)
    assert list(found.run("run").workers) == ["w"] and [s.reason for s in found.skipped if s.path == str(p)]
    rewrite_keeping_size_and_mtime(p, trace)
    found = discovery.discover(logdir)
    assert sorted(found.run("run").workers) == ["rank-0", "w"] and not found.skipped


# -- the server: running, and restarted on the same cache --------------------------------------
@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setattr(app_mod, "STORE_AFTER_S", 0.0)  # every answer kept with the trace's cache too
    made = []

    def _make(logdir: Path):
        state = ProfilerState(str(logdir), reload_s=0.2, cache_dir=str(tmp_path / "cache"), jobs=1)
        app = ProfilerApp(state, standalone=True)
        made.append(app)
        state.start()
        return state, Client(app)

    yield _make
    for app in made:
        app.state.stop()
        app.close()


def _ops(client, run: str) -> str:
    return json.dumps(get(client, f"operation/table?run={run}"))


def _summary_ops(state: ProfilerState, worker: str) -> set[str]:
    """The operator names of a worker's summary in run two, once it is ready."""
    entry = [e for e in state.run_entries("two") if e.worker == worker][0]
    return set(entry.summary.operators["name"]) if entry.summary is not None else set()


def test_the_running_server_and_a_restarted_one_serve_the_new_version(tmp_path, server):
    logdir = tmp_path / "log"
    (logdir / "one").mkdir(parents=True)
    (logdir / "two").mkdir()
    single = logdir / "one" / "w.pt.trace.json"
    single.write_bytes(trace_text("aaa", 5))
    ranks = [logdir / "two" / f"rank{r}.pt.trace.json" for r in (0, 1)]
    for r in ranks:
        r.write_bytes(trace_text("rrr", 5))
    state, c = server(logdir)
    assert "aten::aaa0" in _ops(c, "one")
    wait_for(lambda: not get(c, "status")["loading"], "loading to end", timeout=120)
    wait_for(lambda: _summary_ops(state, "rank1") == {f"aten::rrr{k}" for k in range(5)}, "rank1's summary", 120)
    assert "aten::rrr0" in json.dumps(get(c, "operation/table?run=two&worker=rank1"))
    from tb_profiler import cache_writer

    assert cache_writer.drain(60)  # the entries and stored answers of the old version are on disk

    rewrite_keeping_size_and_mtime(single, trace_text("bbb", 7))
    rewrite_keeping_size_and_mtime(ranks[1], trace_text("sss", 7))
    wait_for(lambda: "aten::bbb0" in _ops(c, "one") and "aten::aaa0" not in _ops(c, "one"),
             "the running server to serve the new version", timeout=60)
    raw = wait_for(lambda: (lambda r: r if r.status_code == 200 else None)(c.get(P + "trace/raw?run=one")),
                   "trace/raw to serve the file (409 while it has just changed)")
    assert b"aten::bbb0" in gzip.decompress(raw.get_data())
    wait_for(lambda: _summary_ops(state, "rank1") == {f"aten::sss{k}" for k in range(5)}, "the new summary", 120)
    assert "aten::sss0" in json.dumps(get(c, "operation/table?run=two&worker=rank1"))
    assert "aten::rrr0" in json.dumps(get(c, "operation/table?run=two&worker=rank0"))  # not rewritten
    state.stop()
    assert cache_writer.drain(60)

    # stopped; rewritten again while no server runs; a new server on the same cache
    rewrite_keeping_size_and_mtime(single, trace_text("ccc", 9))
    rewrite_keeping_size_and_mtime(ranks[1], trace_text("ttt", 9))
    state2, c2 = server(logdir)
    ops = _ops(c2, "one")
    assert "aten::ccc0" in ops and "aten::bbb0" not in ops
    wait_for(lambda: _summary_ops(state2, "rank1") == {f"aten::ttt{k}" for k in range(5)},
             "the restarted server's summary", 120)
    assert "aten::ttt0" in json.dumps(get(c2, "operation/table?run=two&worker=rank1"))
