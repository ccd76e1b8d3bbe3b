"""Inputs that used to hang, exhaust memory or answer 500: multi-member and padded gzip
(CPython's zlib looped forever after a member's end), gzip bombs, timestamps that are
null / text / objects / out of range, and FIFOs.

Every load that once hung runs in a forked child with a deadline (``guarded``): a
regression fails the test instead of hanging CI. Gzip tests run over both inflaters
(zlib, and python-isal where installed) and check which one ran.
"""
from __future__ import annotations

import gzip
import io
import itertools
import json
import multiprocessing
import os
import time
import traceback
import zlib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from werkzeug.test import Client

import tb_profiler
from tb_profiler import cache as cache_mod
from tb_profiler import cache_folder
from tb_profiler import cli
from tb_profiler import decode as decode_mod
from tb_profiler.analysis.memory import memory_curve
from tb_profiler.errors import TraceFormatError
from tb_profiler.io import read
from tb_profiler.io.read import read_trace_bytes
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState

DEADLINE_S = 30.0
MIB = 1 << 20


# -- helpers ------------------------------------------------------------------------------
def _child(conn, fn, args) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the test
        conn.send(("raised", type(exc).__name__, str(exc), traceback.format_exc()))
    finally:
        conn.close()


def guarded(fn, *args, deadline: float = DEADLINE_S):
    """fn(*args) in a forked child: its result, or ("raised", type name, message).

    Fails the test when the child is still busy at the deadline (and kills it), so a
    hang becomes a failure. The child inherits the test's monkeypatches.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(deadline):
            pytest.fail(f"{getattr(fn, '__name__', fn)} still running after {deadline:.0f} s: a hang")
        answer = parent.recv()
    finally:
        proc.kill()
        proc.join(5)
    return answer[1] if answer[0] == "ok" else answer[:3]


class CountingInflater:
    """An inflater module that counts members and inflated bytes, then delegates."""

    def __init__(self, module):
        self.module, self.members, self.out_bytes = module, 0, 0

    def decompressobj(self, *a):
        self.members += 1
        return _CountingObj(self, self.module.decompressobj(*a))


class _CountingObj:
    def __init__(self, owner: CountingInflater, obj):
        self._owner, self._obj = owner, obj

    def decompress(self, data, max_length=0):
        piece = self._obj.decompress(data, max_length)
        self._owner.out_bytes += len(piece)
        return piece

    def flush(self, *a):
        piece = self._obj.flush(*a)
        self._owner.out_bytes += len(piece)
        return piece

    def __getattr__(self, name):
        return getattr(self._obj, name)


@pytest.fixture(params=sorted(read.INFLATERS))
def inflater(request, monkeypatch) -> CountingInflater:
    """Each installed inflater in turn, counting; the test asserts it is the one that ran."""
    counting = CountingInflater(read.INFLATERS[request.param])
    counting.name = request.param
    monkeypatch.setattr(read, "inflater", counting)
    return counting


def test_the_test_suite_covers_both_inflaters():
    """CI installs the test extra (python-isal): both paths must run there."""
    assert set(read.INFLATERS) == {"zlib", "isal"}


def op(i: int, ts_us: float = 1000.0, dur_us: float = 1.0, **extra) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1, "ts": ts_us, "dur": dur_us,
            **extra}


def trace_text(events: list[dict], **top) -> bytes:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()


def read_with(inflater: CountingInflater, path: Path):
    """read_trace_bytes in a guarded child: (text or error, members, inflated bytes)."""
    def run():
        try:
            out = ("text", bytes(read_trace_bytes(path)))
        except TraceFormatError as exc:
            out = ("error", str(exc))
        return out, read.inflater.members, read.inflater.out_bytes, read.inflater.module.__name__
    return guarded(run)


# -- gzip members, padding, garbage -----------------------------------------------------
def test_multi_member_gzip_reads_every_member(tmp_path, inflater):
    events = [op(i, 1000 + i) for i in range(40_000)]
    text = trace_text(events)
    assert len(text) > 2 * MIB  # past the 1 MiB of one inflate call: where zlib used to spin
    cut = [0, len(text) // 3, len(text) - 2, len(text)]
    p = tmp_path / "members.json.gz"
    p.write_bytes(b"".join(gzip.compress(text[a:b]) for a, b in itertools.pairwise(cut)))
    (kind, got), members, _, module = read_with(inflater, p)
    assert kind == "text" and got == text
    assert members == 3 and module == inflater.module.__name__

    def events_and_span():
        trace = tb_profiler.load(p, cache=False)
        return len(trace.events), trace.span

    assert guarded(events_and_span) == (40_000, (1_000_000, (1000 + 39_999 + 1) * 1000))


def test_zero_padding_after_the_last_member_is_ignored(tmp_path, inflater):
    text = trace_text([op(i, 1000 + i) for i in range(30_000)])
    p = tmp_path / "padded.json.gz"
    p.write_bytes(gzip.compress(text) + b"\0" * 4096)  # what some tape/block writers leave
    (kind, got), members, out_bytes, _ = read_with(inflater, p)
    assert kind == "text" and got == text and members == 1 and out_bytes == len(text)


@pytest.mark.parametrize("junk", [b"garbage!", b"\0\0\0\x01", b"PK\x03\x04" + b"x" * 5000],
                         ids=["text", "zeros-then-1", "zip"])
def test_trailing_garbage_is_reported_with_where_it_starts(tmp_path, inflater, junk):
    text = trace_text([op(i) for i in range(30_000)])
    comp = gzip.compress(text)
    p = tmp_path / "junk.json.gz"
    p.write_bytes(comp + junk)
    (kind, message), *_ = read_with(inflater, p)
    assert kind == "error"
    assert str(p) in message and "trailing garbage" in message
    assert f"ends at compressed byte {len(comp)}" in message and f"{len(junk)} bytes" in message


def test_truncated_member_is_an_error_not_a_hang(tmp_path, inflater):
    text = trace_text([op(i) for i in range(30_000)])
    p = tmp_path / "cut.json.gz"
    p.write_bytes(gzip.compress(text) + gzip.compress(text)[:-9])
    (kind, message), members, *_ = read_with(inflater, p)
    assert kind == "error" and "truncated gzip" in message and members == 2


# -- bombs and the size limit -----------------------------------------------------------
def gzip_of(path: Path, head: bytes, filler: bytes, n: int, tail: bytes = b"") -> Path:
    """A gzip file of head + filler * n + tail, compressed as a stream."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(c.compress(head))
        for _ in range(n):
            f.write(c.compress(filler))
        f.write(c.compress(tail) + c.flush())
    return path


def test_whitespace_bomb_fails_after_the_first_mib(tmp_path, inflater):
    p = gzip_of(tmp_path / "bomb.json.gz", b"", b" " * MIB, 512)  # 512 MiB of spaces in ~0.5 MB
    assert p.stat().st_size < MIB
    t0 = time.perf_counter()
    (kind, message), _, out_bytes, _ = read_with(inflater, p)
    assert kind == "error" and str(p) in message and "only whitespace" in message
    assert out_bytes <= 2 * MIB  # stopped at the head, not after 512 MiB
    assert time.perf_counter() - t0 < 10


def test_plain_whitespace_file_fails_on_its_head(tmp_path):
    p = tmp_path / "spaces.json"
    with open(p, "wb") as f:
        f.truncate(0)
        f.write(b"\n" * (3 * MIB))
    with pytest.raises(TraceFormatError, match="no JSON value in the first 1 MiB: only whitespace"):
        read_trace_bytes(p)
    small = tmp_path / "small.json"
    small.write_bytes(b" \t\r\n")
    with pytest.raises(TraceFormatError, match="no JSON value in the file"):
        read_trace_bytes(small)


def test_bomb_with_a_json_start_stops_at_the_limit(tmp_path, inflater, monkeypatch):
    p = gzip_of(tmp_path / "bomb.json.gz", b'{"traceEvents": [', b" " * MIB, 64, b"]}")
    limit = 8 * MIB
    (kind, message), _, out_bytes, _ = guarded(_read_limited, p, limit)
    assert kind == "error" and str(p) in message
    assert f"more than the limit of {limit} bytes" in message and "the max_bytes given" in message
    assert out_bytes <= limit + MIB
    # The same through the environment, and through load(): a TraceFormatError, never MemoryError.
    monkeypatch.setenv(read.MAX_BYTES_ENV, str(limit))
    answer = guarded(lambda: tb_profiler.load(p, cache=False))
    assert answer[0] == "raised" and answer[1] == "TraceFormatError"
    assert f"{limit} bytes" in answer[2] and f"${read.MAX_BYTES_ENV}" in answer[2]


def _read_limited(p: Path, limit: int):
    try:
        out = ("text", len(read_trace_bytes(p, max_bytes=limit)))
    except TraceFormatError as exc:
        out = ("error", str(exc))
    return out, read.inflater.members, read.inflater.out_bytes, None


def test_plain_file_over_the_limit_is_refused_before_reading(tmp_path, monkeypatch):
    p = tmp_path / "big.json"
    p.write_bytes(trace_text([op(i) for i in range(1000)]))
    reads = []
    real_open = read.open_regular
    monkeypatch.setattr(read, "open_regular", lambda path: reads.append(path) or real_open(path))
    with pytest.raises(TraceFormatError, match=rf"{p.stat().st_size} bytes, over the limit of 1000 bytes"):
        read_trace_bytes(p, max_bytes=1000)
    assert len(reads) == 1  # opened to stat it, nothing read: the size said enough
    assert len(read_trace_bytes(p, max_bytes=p.stat().st_size)) == p.stat().st_size


def test_default_limit_follows_the_environment_and_memory(monkeypatch):
    monkeypatch.setenv(read.MAX_BYTES_ENV, "123456789")
    assert read.max_trace_bytes() == 123456789
    monkeypatch.setenv(read.MAX_BYTES_ENV, "4e9")
    assert read.max_trace_bytes() == 4_000_000_000
    monkeypatch.delenv(read.MAX_BYTES_ENV)
    monkeypatch.setattr(read, "_available_memory", lambda: 10 << 30)
    assert read.max_trace_bytes() == 5 << 30


def test_memory_error_becomes_trace_format_error_and_no_traceback(tmp_path, monkeypatch, capsys):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(trace_text([op(1)]))

    def no_memory(*a, **k):
        return np.empty(1 << 62, dtype=np.uint8)  # numpy's own MemoryError

    monkeypatch.setattr(decode_mod, "decode", no_memory)
    with pytest.raises(TraceFormatError, match="out of memory") as exc:
        tb_profiler.load(p, cache=False)
    assert str(p) in str(exc.value)
    assert cli.main(["info", "--no-cache", str(p)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "out of memory" in err and str(p) in err and "Traceback" not in err


# -- FIFOs and other files that are not regular -----------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "w.pt.trace.json"
    os.mkfifo(fifo)
    answer = guarded(lambda: tb_profiler.load(fifo, cache=False))
    assert answer[:2] == ("raised", "TraceFormatError") and "not a regular file: a FIFO" in answer[2]
    assert str(fifo) in answer[2]

    def info():
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["info", "--no-cache", str(fifo)])
        return code, err.getvalue()

    code, err = guarded(info)
    assert code == cli.EXIT_BAD_INPUT and "not a regular file: a FIFO" in err and "Traceback" not in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_character_device_is_refused():
    answer = guarded(lambda: read_trace_bytes("/dev/zero"))
    assert answer[:2] == ("raised", "TraceFormatError") and "not a regular file: a character device" in answer[2]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_at_a_cache_entry_path_is_a_miss_and_replaced(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(trace_text([op(i, 1000 + i) for i in range(10)]))
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    entry = Path(cache_folder.entry_path(read.source_id(p), cache_dir))
    os.mkfifo(entry)

    def load_twice():
        first = tb_profiler.load(p, cache_dir=cache_dir)
        second = tb_profiler.load(p, cache_dir=cache_dir)
        return len(first.events), first.from_cache, second.from_cache, entry.is_fifo()

    assert guarded(load_twice) == (10, False, True, False)


def test_directory_is_still_named_as_such(tmp_path):
    with pytest.raises(TraceFormatError, match="is a directory, not a trace file"):
        read_trace_bytes(tmp_path)


# -- timestamps that are not times ------------------------------------------------------
BAD_TS = 5  # null, text, an object, 1e400, 2**63: the decoder's MISSING_INT
FAR_TS = 2  # parse, but beyond 2**62 ns (the event's start, or its end)


def memory_record(ts, total: int) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "cat": "cpu_instant_event", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Addr": 4096, "Bytes": 64, "Total Allocated": total, "Total Reserved": 1 << 20,
                     "Device Type": 0, "Device Id": -1}}


def bad_ts_trace(path: Path) -> Path:
    """Two steps of ops and 400 memory records (enough to be downsampled), plus events
    whose ts is null, text, an object, 1e400, 2**63 (written as JSON numbers), and two
    events beyond 2**62 ns; and metadata rows, which have no ts and are kept."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 500},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1500, "dur": 500},
    ]
    events += [op(i, 1000 + 4 * i, 3) for i in range(250)]
    events += [memory_record(1000 + i, 64 * (i % 50)) for i in range(400)]
    events += [op(900, "TS_NULL"), op(901, "TS_TEXT"), op(902, "TS_OBJECT"), op(903, "TS_HUGE"),
               memory_record("TS_BIG", 0)]
    events += [op(904, 5e15), op(905, 1000.0, 9e15)]  # 5e18 ns > 2**62; an end of 9e18 ns
    events += [{"ph": "C", "name": "GPU Utilization", "pid": 1, "tid": 0, "ts": None, "args": {"v": 1}},
               {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": {"x": 1}}]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    for key, value in (("TS_NULL", "null"), ("TS_TEXT", '"soon"'), ("TS_OBJECT", '{"us": 1000}'),
                       ("TS_HUGE", "1e400"), ("TS_BIG", "9223372036854775808")):
        text = text.replace(f'"{key}"', value)
    path.write_text(text)
    return path


EXPECTED_NOTES = [
    ("dropped 7 events whose ts is missing or not a usable number (null, text, an object, or beyond int64): "
     "4 complete events, 1 instant, 1 counter sample, 1 flow event"),
    "dropped 2 events whose ts or end (ts + dur) lies beyond ±2^62 ns: 2 complete events",
]


def test_events_without_a_usable_ts_are_dropped_with_notes(tmp_path):
    trace = tb_profiler.load(bad_ts_trace(tmp_path / "w.pt.trace.json"), cache=False)
    assert trace.notes == EXPECTED_NOTES
    assert len(trace.events) == 252 and len(trace.memory_records) == 400 and len(trace.meta_events) == 2
    assert trace.span == (1_000_000, 2_000_000)
    assert trace.thread_names == {(1, 1): "main"}
    ov = trace.overview()
    assert ov["notes"][:2] == EXPECTED_NOTES and ov["summary"]["num_steps"] == 2
    curves = memory_curve(trace, max_points=60)  # 400 records: downsampled
    assert curves and all(0 < len(c) <= 60 for c in curves.values())
    info = cli.trace_info(trace, 0.0)
    assert info["notes"] == EXPECTED_NOTES and info["span_ns"]["duration"] == 1_000_000


def test_notes_survive_the_cache(tmp_path):
    p = bad_ts_trace(tmp_path / "w.pt.trace.json")
    first = tb_profiler.load(p, cache_dir=tmp_path / "cache")
    again = tb_profiler.load(p, cache_dir=tmp_path / "cache")
    assert again.from_cache and again.notes == first.notes == EXPECTED_NOTES


def test_info_prints_the_notes(tmp_path, capsys):
    p = bad_ts_trace(tmp_path / "w.pt.trace.json")
    assert cli.main(["info", "--no-cache", str(p)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert all(f"note         {n}" in out for n in EXPECTED_NOTES)


def test_plugin_routes_answer_on_bad_timestamps(tmp_path):
    (tmp_path / "log" / "run").mkdir(parents=True)
    bad_ts_trace(tmp_path / "log" / "run" / "w.pt.trace.json")
    state = ProfilerState(str(tmp_path / "log"), reload_s=0.2, cache_dir=str(tmp_path / "cache"))
    app = ProfilerApp(state, standalone=True)
    state.start()
    try:
        c = Client(app)
        prefix = "/data/plugin/pytorch_profiler/"
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            r = c.get(prefix + "overview?run=run&worker=w&span=1")
            if r.status_code != 202:
                break
            time.sleep(0.1)
        assert r.status_code == 200, r.get_data()[:300]
        assert json.loads(r.get_data())["notes"][:2] == EXPECTED_NOTES
        r = c.get(prefix + "memory_curve?run=run&worker=w&span=1&max_points=60")
        assert r.status_code == 200, r.get_data()[:300]
        assert json.loads(r.get_data())
    finally:
        state.stop()
        app.close()
