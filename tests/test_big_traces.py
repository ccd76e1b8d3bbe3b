"""Big traces (issue 10): the text is decoded where the OS holds it (no copy), the args text
stays out of memory and out of the cache entry, the entry is written after the load and
the trace then serves from it, a reopen reads (and checks) only what is asked for, and
the decoder says how far it got inside one file."""
from __future__ import annotations

import gzip
import json
import os
import threading

import numpy as np
import pytest
from datafiles import V100_TRACE, V100X4, read_bytes

import tb_profiler.decode as decode_mod
from tb_profiler import cache as cache_mod
from tb_profiler.cache import CheckedArrays
from tb_profiler.decode.args_text import BLOCK, BlockArgs, FileArgs, compress_blocks, resident_nbytes
from tb_profiler.trace import load

TEXT = read_bytes(V100X4)  # a small real trace (4xV100), plain JSON


def _events(n: int, pad: int = 0) -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 50}", "pid": 1, "tid": 1 + i % 3, "ts": i, "dur": 1,
             "args": {"External id": i, "Call stack": "f.py(1): g;" * (i % 7), "pad": "x" * pad}}
            for i in range(n)]


def _write(path, events, gz=False):
    data = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# -- progress (the decoder's own: tests/test_decode_keep_input.py) --------------------------------
def test_load_reports_progress_and_a_bad_callback_breaks_nothing(tmp_path):
    p = _write(tmp_path / "w.pt.trace.json", _events(2000))
    calls = []
    load(p, cache=False, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] == p.stat().st_size

    gz = tmp_path / "w2.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    calls.clear()
    load(gz, cache=False, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (2 * p.stat().st_size, 2 * p.stat().st_size)  # inflated, then decoded
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))

    def boom(done, total):
        raise RuntimeError("a caller's bug")

    assert len(load(p, cache=False, progress=boom).events) == 2000


# -- args text out of memory and small in the cache ----------------------------------------------
def test_block_args_answer_any_slice_like_bytes():
    rng = np.random.default_rng(0)
    blob = bytes(rng.integers(0, 6, size=3 * BLOCK + 123, dtype=np.uint8) + ord("a"))
    data, offsets = compress_blocks(blob)
    text = BlockArgs(data, offsets, len(blob))
    assert len(text) == len(blob) and bytes(text) == blob
    for a, b in ((0, 10), (BLOCK - 5, BLOCK + 5), (BLOCK - 1, 3 * BLOCK + 1), (len(blob) - 7, len(blob)), (5, 5)):
        assert text[a:b] == blob[a:b]
    assert resident_nbytes(text) <= 8 * BLOCK


def test_damaged_block_answers_from_the_fallback():
    blob = b"x" * (2 * BLOCK)
    data, offsets = compress_blocks(blob)
    bad = data.copy()
    bad[int(offsets[1]) + 10] ^= 0xFF
    with pytest.raises(Exception):
        BlockArgs(bad, offsets, len(blob))[BLOCK:BLOCK + 5]
    healed = BlockArgs(bad, offsets, len(blob), on_damage=lambda: blob)
    assert healed[BLOCK:BLOCK + 5] == b"xxxxx"


@pytest.mark.parametrize("gz", [False, True])
def test_entry_is_small(tmp_path, gz):
    """A real trace's entry: at most 0.3x its JSON text (it was 0.9x with the args raw)."""
    text = read_bytes(V100_TRACE)
    p = tmp_path / ("w.pt.trace.json.gz" if gz else "w.pt.trace.json")
    p.write_bytes(gzip.compress(text, compresslevel=1) if gz else text)
    entry = load(p, cache_dir=tmp_path / "c").cache_path
    assert os.path.getsize(entry) <= 0.3 * len(text), (os.path.getsize(entry), len(text))


@pytest.mark.parametrize("gz", [False, True])
def test_args_round_trip_through_the_entry(tmp_path, gz):
    p = tmp_path / ("w.pt.trace.json.gz" if gz else "w.pt.trace.json")
    p.write_bytes(gzip.compress(TEXT) if gz else TEXT)
    fresh = load(p, cache_dir=tmp_path / "c")
    assert fresh.cache_path is not None
    again = load(p, cache_dir=tmp_path / "c")
    assert again.from_cache
    assert isinstance(again.args_blob, BlockArgs if gz else FileArgs)
    for i in range(0, len(again.events), 37):
        assert again.args(i) == fresh.args(i)
    assert again.process_names == fresh.process_names  # meta rows' args too


def test_plain_trace_args_come_from_the_file_as_it_was(tmp_path):
    """The args are read through a descriptor opened at the load: a trace replaced by a
    new file (rename, as writers do) keeps answering with the old text."""
    p = _write(tmp_path / "w.pt.trace.json", _events(100))
    t = load(p, cache=False)
    new = _write(tmp_path / "new.json", _events(5))
    new.replace(p)
    assert t.args(99)["External id"] == 99


def test_changed_trace_file_is_a_miss_not_wrong_args(tmp_path):
    p = _write(tmp_path / "w.pt.trace.json", _events(100))
    load(p, cache_dir=tmp_path / "c").cache_path
    _write(p, _events(100, pad=3))  # other bytes, other size
    t = load(p, cache_dir=tmp_path / "c")
    assert not t.from_cache and t.args(5)["pad"] == "xxx"


# -- the entry is written after the load, and the trace moves onto it ---------------------------
def test_load_returns_before_the_entry_is_written(tmp_path, monkeypatch):
    p = _write(tmp_path / "w.pt.trace.json", _events(500))
    gate = threading.Event()
    real = cache_mod.write_entry

    def slow_write(*args, **kwargs):
        assert gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_mod, "write_entry", slow_write)
    t = load(p, cache_dir=tmp_path / "c")  # returns while the writer waits at the gate
    assert len(t.events) == 500 and t.args(3)["External id"] == 3
    assert not list((tmp_path / "c").glob("*.tbpc")) if (tmp_path / "c").exists() else True
    gate.set()
    assert t.cache_path is not None  # waits for the writer
    assert isinstance(t._state.arrays, CheckedArrays)  # now served from the mapped entry
    assert t.events["ts"].base is not None and not t.events["ts"].flags.owndata
    assert load(p, cache_dir=tmp_path / "c").from_cache


def test_background_false_writes_before_returning(tmp_path):
    p = _write(tmp_path / "w.pt.trace.json", _events(50))
    t = load(p, cache_dir=tmp_path / "c", background=False)
    assert t._writer is None and t.cache_path is not None
    assert isinstance(t._state.arrays, CheckedArrays)


# -- a reopen reads only what is asked for ------------------------------------------------------
def test_reopen_checks_only_the_arrays_read(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(TEXT)
    load(p, cache_dir=tmp_path / "c").cache_path
    t = load(p, cache_dir=tmp_path / "c")
    arrays = t._state.arrays
    assert t.from_cache and isinstance(arrays, CheckedArrays)
    assert {n for n in arrays._checked if not n.startswith("__")} == set()  # the open read no array of the trace
    t.events["ts"]
    assert {n for n in arrays._checked if not n.startswith("__")} == {"events.ts"}
    len(t.events)  # lengths come from the header
    assert {n for n in arrays._checked if not n.startswith("__")} == {"events.ts"}


def test_damage_in_an_array_read_late_is_never_served(tmp_path):
    """An entry damaged after the open (the map reads the file as it is now): the array's
    check on first read fails, and the answer comes from the trace decoded again."""
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(TEXT)
    fresh = load(p, cache=False)
    entry = load(p, cache_dir=tmp_path / "c").cache_path
    t = load(p, cache_dir=tmp_path / "c")
    assert t.from_cache
    view = t._state.arrays._views["events.dur"]
    raw = bytearray(open(entry, "rb").read())
    pos = raw.find(bytes(memoryview(view).cast("B")[:64]))
    assert pos > 0
    with open(entry, "r+b") as f:
        f.seek(pos)
        f.write(bytes([raw[pos] ^ 0x01]))
    assert np.array_equal(t.events["dur"], fresh.events["dur"])


# -- the server shows progress inside one file ---------------------------------------------------
def test_server_status_counts_the_part_of_a_file_decoded(tmp_path, monkeypatch):
    import time

    import tb_profiler.api as api_pkg  # the plugin loads through tb_profiler.api.load
    from tb_profiler.plugin.state import ProfilerState

    run = tmp_path / "log" / "run"
    run.mkdir(parents=True)
    p = _write(run / "worker0.1.pt.trace.json", _events(200))
    size = p.stat().st_size
    halfway, release = threading.Event(), threading.Event()
    real = api_pkg.load

    def slow_load(path, **kw):
        kw["progress"](size // 2, size)  # what the decoder publishes halfway through the text
        halfway.set()
        assert release.wait(30)
        return real(path, **kw)

    monkeypatch.setattr(api_pkg, "load", slow_load)
    state = ProfilerState(str(tmp_path / "log"), reload_s=0.2, cache_dir=str(tmp_path / "c")).start()
    try:
        deadline = time.monotonic() + 30
        while not state.entries() and time.monotonic() < deadline:
            time.sleep(0.05)
        state.request_load(state.entries()[0])
        assert halfway.wait(30)
        status = state.status()
        assert status["total_bytes"] == size and status["loaded_bytes"] == size // 2
        assert status["runs"][0]["loaded_bytes"] == size // 2
        release.set()
        while state.status()["loading"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state.status()["loaded_bytes"] == size
    finally:
        release.set()
        state.stop()
