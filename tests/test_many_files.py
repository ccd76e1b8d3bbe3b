"""Many files, long jobs: loading N files costs N loads (issue 18).

Before: every cache write listed the cache folder and read every entry's header
(cache_limit.inventory), so N files cost O(N²) (2,000 spans of one worker were not loaded
after 15 minutes), and each load started its own writer thread (hundreds at once).  Now
the cache's bookkeeping is a picture in memory (cache_limit), entries are written by one
writer thread (cache_writer) and the server's loader pool and preparer are fixed.

No timings here: the tests count what grows (header reads, folder listings, threads) and
bound liveness generously; ``benchmarks/bench_many_files.py`` measures the times.
The tiny traces are copies of tests/data's tiny H100 trace (a real Kineto trace), each
with its own first timestamp.
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from datafiles import H100_AFTER_FIX, V100_TRACE
from test_plugin_state import get
from werkzeug.test import Client

import tb_profiler
from tb_profiler import cache as cache_mod
from tb_profiler import cache_folder
from tb_profiler import cache_limit, cache_writer
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState

ROOT = Path(__file__).resolve().parents[1]


def tiny_traces(folder: Path, n: int, name=lambda i: f"w.{1700000000000 + i}.pt.trace.json") -> list[Path]:
    """n copies of the tiny H100 trace under folder, each with its own first ts."""
    text = gzip.decompress(H100_AFTER_FIX.read_bytes()).decode()
    at = text.index('"ts": ') + len('"ts": ')
    out = []
    for i in range(n):
        p = folder / name(i)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text[:at] + str(1000 + i) + text[at:])
        out.append(p)
    return out


@pytest.fixture
def counted(monkeypatch):
    """Counts of the folder listings and entry header reads the cache's bookkeeping makes."""
    counts = {"listings": 0, "headers": 0}
    real_listing, real_source = cache_limit._listing, cache_limit.entry_source

    def listing(root):
        counts["listings"] += 1
        return real_listing(root)

    def source(path):
        counts["headers"] += 1
        return real_source(path)

    monkeypatch.setattr(cache_limit, "_listing", listing)
    monkeypatch.setattr(cache_limit, "entry_source", source)
    monkeypatch.setattr(cache_limit, "RELIST_SECONDS", 3600.0)
    return counts


def test_a_write_reads_no_header_and_lists_the_folder_once(tmp_path, counted):
    """200 loads (and their entries) in a cache folder with room: one listing in all (the
    first write's), no entry header read; the picture counts every entry."""
    cache = tmp_path / "cache"
    for p in tiny_traces(tmp_path / "log", 200):
        tb_profiler.load(p, cache_dir=cache)
    assert cache_writer.drain(120)
    on_disk = sorted(cache.glob("*.tbpc"))
    assert len(on_disk) == 200
    assert counted == {"listings": 1, "headers": 0}
    items, total = cache_limit._ledger_of(cache).snapshot()
    assert total == sum(p.stat().st_size for p in on_disk) and len(items) == 200


def test_at_the_cap_eviction_works_from_the_picture(tmp_path, monkeypatch, counted):
    """Writes over the cap evict the least recently used from the picture, reading each
    entry's header at most once (orphans go first), never listing the folder again."""
    cache = tmp_path / "cache"
    paths = tiny_traces(tmp_path / "log", 60)
    tb_profiler.load(paths[0], cache_dir=cache, background=False)
    one = next(cache.glob("*.tbpc")).stat().st_size
    monkeypatch.setenv(cache_limit.ENV, str(int(10.5 * one)))
    for p in paths[1:]:
        tb_profiler.load(p, cache_dir=cache, background=False)
        assert sum(f.stat().st_size for f in cache.glob("*.tbpc")) <= 10.5 * one
    kept = sorted(int(f.name.split(".")[1]) - 1700000000000 for f in cache.glob("*.tbpc"))
    assert kept == list(range(50, 60))  # the ten last used
    assert counted["listings"] == 1 and counted["headers"] <= 60


def test_another_process_s_entries_are_counted_at_the_next_listing(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    key = cache_mod.CacheKey("/x/a.json", 1, 1, "t", 1)
    arrays = {"a": np.zeros(4000, np.uint8)}
    assert cache_mod.write_entry(str(cache / cache_folder.entry_name("/x/a.json")), key, arrays, ["s"], b"", {})
    one = next(cache.glob("*.tbpc")).stat().st_size
    child = ("import sys, numpy as np; from tb_profiler import cache as c; from tb_profiler.cache_folder import entry_path; "
             "[c.write_entry(entry_path(f'/y/{i}.json', sys.argv[1]), c.CacheKey(f'/y/{i}.json', 1, 1, 't', 1), "
             "{'a': np.zeros(4000, np.uint8)}, ['s'], b'', {}) for i in range(4)]")
    subprocess.run([sys.executable, "-c", child, str(cache)], check=True, cwd=ROOT)
    assert len(list(cache.glob("*.tbpc"))) == 5
    monkeypatch.setenv(cache_limit.ENV, str(3 * one))
    assert cache_limit._ledger_of(cache).snapshot()[1] == one  # not seen yet: written elsewhere
    monkeypatch.setattr(cache_limit, "RELIST_SECONDS", 0.0)  # the listing is due
    key_b = cache_mod.CacheKey("/x/b.json", 1, 1, "t", 1)
    assert cache_mod.write_entry(str(cache / cache_folder.entry_name("/x/b.json")), key_b, arrays, ["s"], b"", {})
    assert len(list(cache.glob("*.tbpc"))) == 3  # the others' entries were counted, and evicted


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc (Linux)")
def test_small_traces_hold_no_file_open(tmp_path):
    """A plain trace under load.ARGS_IN_MEMORY_BELOW is read like a gzip file's text and an
    entry under cache.READ_BELOW is read, not mapped: thousands of loaded small traces hold
    no descriptors (1,024 is the default limit)."""
    from test_plugin_state import _held

    cache = tmp_path / "cache"
    paths = tiny_traces(tmp_path / "log", 20)
    fresh = [tb_profiler.load(p, cache_dir=cache) for p in paths]
    assert cache_writer.drain(60)
    again = [tb_profiler.load(p, cache_dir=cache) for p in paths]
    assert all(t.from_cache for t in again)
    entries = sorted(cache.glob("*.tbpc"))
    assert len(entries) == 20 and all(e.stat().st_size < cache_mod.READ_BELOW for e in entries)
    assert not [h for p in [*paths, *entries] for h in _held(p)]
    assert fresh[3].args(0) == again[3].args(0) and fresh[3].args(0) is not None


# -- the one writer ---------------------------------------------------------------------------------
def test_writes_run_in_order_on_one_thread_and_join_waits(tmp_path):
    ran: list[tuple[int, str]] = []
    jobs = [cache_writer.later(lambda i=i: ran.append((i, threading.current_thread().name)), key=f"k{i}")
            for i in range(50)]
    jobs[-1].join(30)
    assert [i for i, _ in ran] == list(range(50)) and {n for _, n in ran} == {"tb_profiler-cache-writer"}
    assert all(j.done() for j in jobs)


def test_a_failing_write_does_not_stop_the_writer(caplog):
    def boom():
        raise RuntimeError("disk on fire")

    cache_writer.later(boom)
    after = cache_writer.later(lambda: None)
    assert after.join(30)
    assert "writing a cache entry failed" in caplog.text


def test_the_queue_is_bounded(monkeypatch):
    """A caller past MAX_PENDING waiting writes waits for room: a loader never runs further
    ahead of the disk (each waiting write holds a decoded trace)."""
    monkeypatch.setattr(cache_writer, "MAX_PENDING", 2)
    gate = threading.Event()
    cache_writer.later(gate.wait)          # running, blocked
    cache_writer.later(lambda: None)
    cache_writer.later(lambda: None)       # two waiting: full
    third = threading.Thread(target=lambda: cache_writer.later(lambda: None))
    third.start()
    third.join(0.5)
    assert third.is_alive()                # waits for room
    gate.set()
    third.join(30)
    assert not third.is_alive() and cache_writer.drain(30)


def test_entries_queued_at_exit_are_written(tmp_path):
    """A command that loads and exits at once still leaves its entries (drained at exit)."""
    [p] = tiny_traces(tmp_path / "log", 1)
    child = "import sys, tb_profiler; tb_profiler.load(sys.argv[1], cache_dir=sys.argv[2])"
    subprocess.run([sys.executable, "-c", child, str(p), str(tmp_path / "cache")], check=True, cwd=ROOT)
    assert tb_profiler.load(p, cache_dir=tmp_path / "cache").from_cache


# -- the server -------------------------------------------------------------------------------------
def test_a_long_job_of_many_spans_loads_with_a_fixed_number_of_threads(tmp_path, counted):
    """300 spans of one worker and a good run: every file loads (a generous liveness
    bound), the good run answers meanwhile (each answer within a generous bound), the
    threads alive never grow with the files, and the cache folder is listed once."""
    logdir = tmp_path / "log"
    tiny_traces(logdir / "long_job", 300)
    (logdir / "good").mkdir()
    (logdir / "good" / "w.pt.trace.json").write_bytes(gzip.decompress(V100_TRACE.read_bytes()))
    state = ProfilerState(str(logdir), reload_s=0.5, cache_dir=str(tmp_path / "cache"), threads=2)
    app = ProfilerApp(state, standalone=True)
    c = Client(app)
    before = threading.active_count()
    state.start()
    most, worst, end = before, 0.0, time.monotonic() + 600
    try:
        assert get(c, "overview?run=good")["summary"] is not None
        i = 0
        while state.loading and time.monotonic() < end:
            i += 1
            t0 = time.monotonic()
            get(c, f"operation?run=good&top={i}")
            get(c, "runs")
            worst = max(worst, time.monotonic() - t0)
            most = max(most, threading.active_count())
            time.sleep(0.1)
        assert not state.loading, "300 tiny spans not loaded in 10 minutes"
        st = get(c, "status")
        job = next(r for r in st["runs"] if r["name"] == "long_job")
        assert job["loaded_files"] == 300 and job["failed_files"] == 0
        # discovery, 2 loaders, the preparer, summaries, the cache writer, the API pool (2),
        # the decoders' progress reporters (2): never a thread per file
        assert most - before <= 12, most - before
        assert worst < 30, f"the good run took {worst:.1f} s to answer"  # liveness, not a timing
        assert counted["listings"] == 1
    finally:
        state.stop()
        app.close()
    assert cache_writer.drain(120)
