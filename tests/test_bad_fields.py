"""Wrong types and impossible values in a trace's fields never reach a 500 (issue 18).

Every field of every event kind and every top-level field (tests/bad_fields_corpus.py:
FIELDS, TOP_FIELDS) holds each bad value (BAD_VALUES: null, text, a list, an object,
1e400, integers past int64, 0, -1, a time past any clock, NaN and Infinity), and every
route of the plugin answers 200 or a 4xx that says why; ``tb-profiler info --json`` exits
without a traceback.  One file per bad value holds it in every field at once, each field
in an event of its own (an event dropped for its ts hides no other field); the containers
(deviceProperties, distributedInfo, ...) set whole and an event replaced whole are files
of their own.  Each run has a clean second rank, so the distributed routes compare the
mutated rank with a good one.  The five single-file causes the issue names are tested
one by one below, with what ingest decides for them.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_timeline_lod import T0, event_sets, ref_busy, ref_overlapping, windows
from bad_fields_corpus import (
    BAD_VALUES,
    FIELDS,
    HOST_PID,
    T0_US,
    REFUSED,
    TOP_FIELDS,
    base_doc,
    combined_case,
    combined_top_case,
    get_settled,
    hit_every_route,
    info_json,
    render,
)
from datafiles import H100_AFTER_FIX, read_bytes
from werkzeug.test import Client

import tb_profiler
from tb_profiler.plugin import timeline as tl
from tb_profiler.plugin import views
from tb_profiler.plugin.app import ROUTE_PARAMS, ProfilerApp, _encode
from tb_profiler.plugin import timeline_lod as lod_mod
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.trace.categories import Kind

STEPS = 1 + max(len(f) for f in FIELDS.values())  # an event of each kind per field, and a clean step
SAFE_ID = {v: "v" + "".join(c if c.isalnum() else "_" for c in v) for v in BAD_VALUES}


def _strict_json(body: bytes):
    """The body parsed as JSON as a browser's JSON.parse would: no NaN or Infinity."""
    def refuse(name):
        raise ValueError(f"{name} in a JSON answer")
    return json.loads(body, parse_constant=refuse)


def _write(path: Path, text: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)
    past = time.time() - 60  # not "being written" (trace/raw answers 409 for a file changed < 1 s ago)
    os.utime(path, (past, past))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The logdir of every bad value's runs (fields, containers, whole event), served."""
    logdir = tmp_path_factory.mktemp("bad_fields") / "log"
    doc, rank1 = base_doc(STEPS), json.dumps(base_doc(STEPS, rank=1)).encode()
    runs: dict[str, list[str]] = {}
    _write(logdir / "base" / "w.pt.trace.json", json.dumps(doc).encode())
    for vid, literal in BAD_VALUES.items():
        event = json.loads(json.dumps(doc))
        event["traceEvents"][5] = "@@BAD0@@"  # a kernel replaced by the value
        files = {"fields": combined_case(doc, literal)[0], "top": combined_top_case(doc, literal),
                 "event": render(event, {"@@BAD0@@": literal})}
        runs[vid] = []
        for part, text in files.items():
            run = f"{SAFE_ID[vid]}-{part}"
            _write(logdir / run / "w.pt.trace.json", text)
            _write(logdir / run / "r1.pt.trace.json", rank1)
            runs[vid].append(run)
    state = ProfilerState(str(logdir), reload_s=3600, cache_dir=str(tmp_path_factory.mktemp("cache")), jobs=1)
    app = ProfilerApp(state, standalone=True)
    state.start()
    assert state.wait_scanned(60)
    yield Client(app), logdir, runs
    state.stop()
    app.close()


def _check(answers: dict[str, tuple[int, bytes]], run: str) -> dict[str, tuple[int, object]]:
    """Each answer is a 200 of strict JSON or a 4xx whose JSON says why; parsed."""
    assert set(answers) == set(ROUTE_PARAMS)
    out = {}
    for route, (status, body) in answers.items():
        assert status < 500, f"{run} {route}: {status} {body[:400]!r}"
        assert status != 202, f"{run} {route}: still computing after a minute (a walk that never ends?)"
        if route == "trace/raw" and status == 200:  # the file itself, gzipped
            continue
        data = _strict_json(body)
        if status >= 400:
            assert status in (400, 404) and isinstance(data.get("error"), str) and data["error"], (run, route, data)
        out[route] = (status, data)
    return out


def test_the_corpus_covers_every_field_in_a_file_per_value():
    doc = base_doc(STEPS)
    text, placed = combined_case(doc, "null")
    leaves = [t for t in TOP_FIELDS if t != ("traceEvents",) and not any(o[:len(t)] == t != o for o in TOP_FIELDS)]
    assert len(placed) == sum(len(f) - 1 for f in FIELDS.values()) + len(leaves) == 237  # all but the whole event
    assert text.count(b"null") >= len(placed)
    assert b"@@BAD" not in text and b"@@BAD" not in combined_top_case(doc, "1e400")


@pytest.mark.parametrize("vid", list(BAD_VALUES), ids=list(SAFE_ID.values()))
def test_every_route_answers_every_bad_value(corpus, vid):
    client, logdir, runs = corpus
    for run in runs[vid]:
        answers = _check(hit_every_route(client, run, "w", "base"), run)
        refused = vid in REFUSED or (run.endswith("-event") and vid != "object")
        if refused:  # not JSON, or an event that is not an object: the file is refused, saying where
            status, data = answers["overview"]
            assert status == 404 and "w.pt.trace.json" in data["error"] and "at byte" in data["error"], data
            assert answers["trace/raw"][0] == 404
        else:
            assert all(answers[r][0] == 200 for r in ("overview", "trace", "operation/table", "memory_curve")), \
                {r: answers[r] for r in ("overview", "trace")}
        code, out, traceback = info_json(logdir / run / "w.pt.trace.json")
        assert traceback is None and code == (1 if refused else 0), (run, code, traceback)
        if not refused:
            assert _strict_json(out.encode())["path"].endswith("w.pt.trace.json")


# -- the level-of-detail keys hold any span ---------------------------------------------------------
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_sets(), st.sampled_from([16, 20, 24]), st.data())
def test_level_of_detail_keys_too_narrow_for_ns_still_answer_exactly(events, key_bits, data):
    """With keys of 16-24 bits (as 62 bits are for a span of decades over many rows) the
    index ranks the start times and coarsens its finest bin, and still answers as the
    brute force of test_timeline_lod does."""
    track, depth, ts, dur, depths, span = events
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lod_mod, "KEY_BITS", key_bits)
        lod = lod_mod.build(track, depth, ts, dur, T0, depths)
    groups = (lod.levels + 1) * max(lod.rows, 1)
    assert groups.bit_length() + max(lod.ev_shift, lod.bin_shift) <= key_bits  # every key fits
    row = lod.row_start[track] + depth
    for a, b in windows(span, data):
        for min_class in range(lod.levels + 2):
            assert lod.overlapping(ts, dur, a, b, min_class).tolist() == ref_overlapping(ts, dur, lod.widths, a, b,
                                                                                          min_class)
        p = (b - a) / 50
        level = lod.level_for(p)
        if level >= 0:
            scanned = lod.overlapping(ts, dur, a, b, level + 1)
            narrow = scanned[np.maximum(dur[scanned], 0) < p]
            end = ts + np.maximum(dur, 0)
            r, s, e, c = lod.busy(level, a, b, p, dur, row[narrow], ts[narrow], end[narrow])
            extra = list(zip(row[narrow].tolist(), ts[narrow].tolist(), end[narrow].tolist()))
            assert list(zip(r.tolist(), s.tolist(), e.tolist(), c.tolist())) == ref_busy(
                lod, level, row, ts, dur, a, b, p, extra), (a - T0, b - T0, level)
    back = lod_mod.from_arrays(lod.arrays())
    assert back.ranked == lod.ranked and np.array_equal(back.times, lod.times)


def test_level_of_detail_index_of_a_span_of_decades():
    """A ts of 0 among times of 2024 (56 years) and one near 2**62 ns, over 3,000 rows: no
    ValueError; the events come back from any window."""
    rows = 3000
    ts = np.array([0, T0, T0 + 5, T0 + 10**9, (1 << 62) - 10], np.int64)
    dur = np.array([1, 10**6, 0, 10**3, 5], np.int64)
    track = np.array([0, 1, 2, rows - 1, 5], np.int64)
    lod = lod_mod.build(track, np.zeros(5, np.int64), ts, dur, 0, np.zeros(rows, np.int64))
    assert lod.ranked and lod.base > lod_mod.BASE_NS
    assert lod.overlapping(ts, dur, 0, 1 << 62, 0).tolist() == [0, 1, 2, 3, 4]
    assert lod.overlapping(ts, dur, T0, T0 + 6, 0).tolist() == [1, 2]
    assert lod.overlapping(ts, dur, T0 + 1, T0 + 2, 0).tolist() == [1]


# -- the five single-file causes, and what ingest decides -------------------------------------------
def _h100(tmp_path: Path, change) -> Path:
    """The tiny H100 trace (a real Kineto trace: kernel, flows, 8 devices, baseTimeNanoseconds)
    with ``change(doc)`` applied, written as a plain file."""
    doc = json.loads(read_bytes(H100_AFTER_FIX))
    change(doc)
    text = json.dumps(doc)
    for marker, literal in (('"@@1e400@@"', "1e400"), ('"@@-1e400@@"', "-1e400")):
        text = text.replace(marker, literal)
    return _write(tmp_path / "w.pt.trace.json", text.encode())


def _first(doc: dict, **match) -> dict:
    return next(e for e in doc["traceEvents"] if all(e.get(k) == v for k, v in match.items()))


def _no_info_traceback(path: Path) -> dict:
    code, out, traceback = info_json(path)
    assert traceback is None and code == 0, (code, traceback)
    return _strict_json(out.encode())


def test_kernel_of_zero_duration_gives_the_idle_advice(tmp_path):
    """The idle-gap rule met a device whose only work lasts 0 ns (IndexError): the step is one gap."""
    p = _h100(tmp_path, lambda d: _first(d, cat="kernel").update(dur=0))
    trace = tb_profiler.load(p, cache=False)
    assert trace.events["dur"][trace.events["kind"] == Kind.KERNEL].tolist() == [0]
    ov = views.overview(trace, 1)
    assert _strict_json(_encode(ov)) and views.idle(trace, 30_000)
    _no_info_traceback(p)


def test_device_id_beyond_any_number_is_no_device(tmp_path):
    """deviceProperties[0].id = 1e400 (an OverflowError, and a traceback from info): that
    entry is left out, with a note; device 0 is still the one its kernel ran on."""
    p = _h100(tmp_path, lambda d: d["deviceProperties"][0].update(id="@@1e400@@"))
    trace = tb_profiler.load(p, cache=False)
    assert [d.id for d in trace.devices] == list(range(8))
    assert trace.devices[0].name is None and trace.devices[0].seen_in_events and trace.devices[1].name == "NVIDIA H100"
    assert any("deviceProperties[0].id" in n for n in trace.notes) and trace.repaired == {"toplevel_fields": 1}
    info = _no_info_traceback(p)
    assert [d["id"] for d in info["devices"]] == list(range(8)) and info["devices"][0]["name"] is None


def test_a_ts_of_zero_among_real_times_is_drawn(tmp_path):
    """A ts of 0 among times of 2026 (span 88,511 s): the Trace view's keys and the flows'
    hold it; the whole-trace window shows the event, and a window around the others too."""
    def change(d):
        _first(d, cat="cpu_op", name="op1").update(ts=0)
        _first(d, ph="s").update(ts=0)
    p = _h100(tmp_path, change)
    trace = tb_profiler.load(p, cache=False)
    assert trace.span[0] == 0 and trace.notes == [] and trace.dropped == {}
    whole = tl.window(trace, None, None, 1500, 20000)
    assert "op1" in {e["name"] for e in whole["events"]} or whole["busy"]
    late = tl.window(trace, 88_511_388_202_000, 88_511_388_203_000, 1500, 20000)
    assert {"Kernel", "cudaLaunchKernel"} <= {e["name"] for e in late["events"]}
    assert _strict_json(_encode(tl.on_the_wire(late)))
    _no_info_traceback(p)


def test_base_time_beyond_any_number_is_missing(tmp_path):
    """baseTimeNanoseconds = 1e400 (OverflowError in every route reading wall time): missing, noted."""
    p = _h100(tmp_path, lambda d: d.update(baseTimeNanoseconds="@@1e400@@"))
    trace = tb_profiler.load(p, cache=False)
    assert trace.base_time_ns is None and "baseTimeNanoseconds" not in trace.metadata
    assert trace.notes == ["1 top-level field of the wrong type or out of range is read as missing: "
                           "baseTimeNanoseconds"]
    assert tl.wall_origin(trace) == tl.origin(trace)
    assert _strict_json(_encode(views.memory_events(trace, None, None, None, 10)))
    _no_info_traceback(p)


def test_args_values_beyond_float64(tmp_path):
    """An args value of 1e400 (trace/event could not encode it): shown as its text; a
    float field of that value (blocks per SM) is missing for the analyses."""
    def change(d):
        _first(d, cat="kernel")["args"].update({"blocks per SM": "@@1e400@@", "custom": "@@-1e400@@"})
        _first(d, cat="cpu_op", name="op1")["args"]["big"] = 10**30
    p = _h100(tmp_path, change)
    trace = tb_profiler.load(p, cache=False)
    k = int(np.flatnonzero(trace.events["kind"] == Kind.KERNEL)[0])
    assert np.isnan(trace.events["blocks_per_sm"][k])
    detail = _strict_json(_encode(tl.event_detail(trace, k)))
    assert detail["args"]["blocks per SM"] == "1e400" and detail["args"]["custom"] == "-1e400"
    op = int(np.flatnonzero(trace.str(trace.events["name"]) == "op1")[0])
    assert _strict_json(_encode(tl.event_detail(trace, op)))["args"]["big"] == 10**30


def test_dropped_events_are_counted_by_reason(tmp_path):
    """Times that cannot be times: dropped, counted by reason in notes and Trace.dropped,
    the span from the events kept; kept through the cache."""
    doc = base_doc(2)
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["ts"], ops[1]["ts"], ops[2]["ts"] = None, "soon", "@@1e400@@"
    ops[3]["dur"] = 5e15  # ends 5e18 ns: beyond 2**62
    mem = next(e for e in doc["traceEvents"] if e.get("name") == "[memory]")
    mem["ts"] = [1]
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": HOST_PID, "tid": HOST_PID,
                               "ts": T0_US + 1, "dur": None})
    p = _write(tmp_path / "w.pt.trace.json", json.dumps(doc).replace('"@@1e400@@"', "1e400").encode())
    clean = tb_profiler.load(_write(tmp_path / "clean" / "w.pt.trace.json", json.dumps(base_doc(2)).encode()),
                             cache=False)
    tb_profiler.load(p, cache_dir=tmp_path / "cache")
    for cached in (False, True):
        trace = tb_profiler.load(p, cache_dir=tmp_path / "cache") if cached else tb_profiler.load(p, cache=False)
        assert trace.dropped == {"ts_missing": 4, "time_out_of_range": 1}
        assert trace.repaired == {"dur_missing": 1}
        assert trace.span == clean.span and len(trace.events) == len(clean.events) - 4 + 1
        assert trace.notes[:3] == [
            "dropped 4 events whose ts is missing or not a usable number (null, text, an object, or beyond int64): "
            "3 complete events, 1 instant",
            "dropped 1 event whose ts or end (ts + dur) lies beyond ±2^62 ns: 1 complete event",
            "1 complete event has no usable dur (missing, null, text, an object, or beyond int64): read as "
            "zero-length"]
    assert trace.from_cache and clean.dropped == {} and clean.repaired == {} and clean.notes == []


@pytest.mark.timeout(120)
def test_zero_length_calls_at_one_time_end_the_critical_path_walk(tmp_path):
    """ts 0 and dur 0 in every field (the corpus's "0" file) gave runtime calls that ended
    where they started, each one "before" the other: the walk went round for good and
    critical_path answered 202 forever.  Each node is walked once; the rest is "other"."""
    p = _write(tmp_path / "w.pt.trace.json", combined_case(base_doc(STEPS), "0")[0])
    trace = tb_profiler.load(p, cache=False)
    out = views.critical_path(trace, 1)
    assert _strict_json(_encode(out))["steps"]
    cp = trace.critical_path()
    assert (cp["steps"]["path_ns"] <= cp["steps"]["length_ns"]).all()
