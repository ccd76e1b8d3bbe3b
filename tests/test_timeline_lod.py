"""The trace view's level-of-detail index (plugin/timeline_lod.py) against brute force.

The index's two questions (which events of some duration classes overlap a window; which
bins of a level the short events touch) are checked against plain loops on random small
event sets: nested, zero-length and negative durations, events across the window's edges,
many rows.  Through ``timeline.window`` on real Trace objects: the events sent are those
of the old full scan at every zoom, windows finer than the finest bin get exactly the old
pixel-column blocks, coarser ones blocks that cover every short event at bin granularity,
and a whole-trace reply stays bounded however many events the trace holds.  No timings.
"""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tb_profiler
from tb_profiler.plugin import timeline as tl
from tb_profiler.plugin import timeline_flows as flows_mod
from tb_profiler.plugin import timeline_lod as lod_mod

T0 = 1_600_000_000_000_000_000  # absolute ns, as Kineto's


# -- random event sets (arrays) ------------------------------------------------------------------
@st.composite
def event_sets(draw, max_events: int = 60):
    n_tracks = draw(st.integers(1, 4))
    depths = np.array(draw(st.lists(st.integers(0, 3), min_size=n_tracks, max_size=n_tracks)), np.int64)
    n = draw(st.integers(0, max_events))
    span = draw(st.sampled_from([5_000, 200_000, 3_000_000, 80_000_000]))
    track = np.array(draw(st.lists(st.integers(0, n_tracks - 1), min_size=n, max_size=n)), np.int64)
    depth = np.array([draw(st.integers(0, int(depths[t]))) for t in track.tolist()], np.int64)
    rel = np.array(draw(st.lists(st.integers(0, span), min_size=n, max_size=n)), np.int64)
    durations = {"zero": st.just(0), "neg": st.just(-5), "tiny": st.integers(1, 999),
                 "mid": st.integers(1000, 50_000), "long": st.integers(min(50_000, span), span),
                 "huge": st.just(span * 2)}
    kinds = draw(st.lists(st.sampled_from(sorted(durations)), min_size=n, max_size=n))
    dur = np.array([draw(durations[k]) for k in kinds], np.int64)
    order = np.argsort(rel, kind="stable") if draw(st.booleans()) else np.arange(n)  # traces are time-ordered
    return track[order], depth[order], T0 + rel[order], dur[order], depths, span


def _class(d: int, widths: np.ndarray) -> int:
    return int(np.sum(widths <= max(d, 0)))


def ref_overlapping(ts, dur, widths, a, b, min_class):
    out = []
    for i, (t, d) in enumerate(zip(ts.tolist(), dur.tolist())):
        e = t + max(d, 0)
        if t >= T0 and _class(d, widths) >= min_class and t < b and (e > a or (e == a and t == a)):
            out.append(i)
    return out


def ref_busy(lod, level, row, ts, dur, a, b, p, extra):
    """Per row: the runs of consecutive bins of [a, b) touched by class <= level events
    that hold an event overlapping the window (counted in the run of its start bin, the
    first bin for one starting before), and the bins of the extra events (one each);
    blocks at most a pixel apart merged."""
    w = lod.width(level)
    widths = lod.widths
    ja = max((a - lod.t0) // w, 0)
    jb = (b - 1 - lod.t0) // w
    touched: dict[int, set] = {}
    counted: dict[int, list] = {}
    for r, t, d in zip(row.tolist(), ts.tolist(), dur.tolist()):
        if t >= lod.t0 and _class(d, widths) <= level:
            rel = t - lod.t0
            lo, hi = max(rel // w, ja), min((rel + max(d, 1) - 1) // w + 1, jb + 1)
            if hi > lo:
                touched.setdefault(r, set()).update(range(lo, hi))
            e = t + max(d, 0)
            if t < b and (e > a or (e == a and t == a)):
                counted.setdefault(r, []).append(lo)
    pieces: dict[int, list] = {}  # row -> [(lo, hi, count)]
    for r, bins in touched.items():
        bins = sorted(bins)
        runs = [[bins[0], bins[0] + 1]]
        for j in bins[1:]:
            if j == runs[-1][1]:
                runs[-1][1] = j + 1
            else:
                runs.append([j, j + 1])
        for lo, hi in runs:
            n = sum(1 for s in counted.get(r, []) if lo <= s < hi)
            if n:
                pieces.setdefault(r, []).append((lo, hi, n))
    for r, t, e in extra:
        rel, rel_end = t - lod.t0, max(e - lod.t0, t - lod.t0 + 1)
        lo, hi = max(rel // w, ja), min((rel_end - 1) // w + 1, jb + 1)
        if hi > lo:
            pieces.setdefault(r, []).append((lo, hi, 1))
    out = []
    gap = int(p // w)
    for r in sorted(pieces):
        blocks = []
        for lo, hi, n in sorted(pieces[r]):
            if blocks and lo - blocks[-1][1] <= gap:
                blocks[-1][1] = max(blocks[-1][1], hi)
                blocks[-1][2] += n
            else:
                blocks.append([lo, hi, n])
        out += [(r, lod.t0 + lo * w, lod.t0 + hi * w, n) for lo, hi, n in blocks]
    return out


def windows(span, data=None):
    yield T0, T0 + span + 1                       # the whole trace
    yield T0 - 1000, T0 + span // 3               # starting before the trace
    yield T0 + span // 3, T0 + span // 3 + 1      # one ns
    yield T0 + span // 5, T0 + 4 * span // 5
    yield T0 + span // 2, T0 + 3 * span          # ending after it
    for _ in range(4 if data is not None else 0):  # anywhere, any length
        a = data.draw(st.integers(-span // 10, span), label="start")
        yield T0 + a, T0 + a + data.draw(st.integers(1, span), label="length")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_sets(), st.sampled_from([2, 4]), st.sampled_from([10, 1000]), st.data())
def test_overlapping_events_equal_a_full_scan(events, factor, base, data):
    track, depth, ts, dur, depths, span = events
    lod = lod_mod.build(track, depth, ts, dur, T0, depths, base=base, factor=factor)
    for a, b in windows(span, data):
        for min_class in range(lod.levels + 2):
            got = lod.overlapping(ts, dur, a, b, min_class).tolist()
            assert got == ref_overlapping(ts, dur, lod.widths, a, b, min_class), (a - T0, b - T0, min_class)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_sets(), st.sampled_from([2, 4, 8]), st.sampled_from([10, 1000]), st.sampled_from([7, 40, 150]),
       st.data())
def test_busy_blocks_are_the_bins_the_short_events_touch(events, factor, base, width, data):
    track, depth, ts, dur, depths, span = events
    lod = lod_mod.build(track, depth, ts, dur, T0, depths, base=base, factor=factor)
    row = lod.row_start[track] + depth
    for a, b in windows(span, data):
        p = (b - a) / width
        level = lod.level_for(p)
        if level < 0:
            continue
        # the events of the classes above the level narrower than a pixel come as extras
        scanned = lod.overlapping(ts, dur, a, b, level + 1)
        narrow = scanned[np.maximum(dur[scanned], 0) < p]
        end = ts + np.maximum(dur, 0)
        r, s, e, c = lod.busy(level, a, b, p, dur, row[narrow], ts[narrow], end[narrow])
        got = list(zip(r.tolist(), s.tolist(), e.tolist(), c.tolist()))
        extra = list(zip(row[narrow].tolist(), ts[narrow].tolist(), end[narrow].tolist()))
        assert got == ref_busy(lod, level, row, ts, dur, a, b, p, extra), (a - T0, b - T0, level)


@settings(max_examples=60, deadline=None)
@given(event_sets())
def test_arrays_round_trip(events):
    track, depth, ts, dur, depths, _ = events
    lod = lod_mod.build(track, depth, ts, dur, T0, depths)
    arrays = lod.arrays()
    assert all(isinstance(v, np.ndarray) for v in arrays.values())
    back = lod_mod.from_arrays({k: v.copy() for k, v in arrays.items()})
    for k, v in back.arrays().items():
        assert np.array_equal(v, arrays[k]) and v.dtype == arrays[k].dtype, k
    assert arrays["lod_ev_id"].dtype == np.int32  # indices and counts kept in half the bytes
    with pytest.raises(ValueError):
        lod_mod.from_arrays({**arrays, "lod_run_lo": arrays["lod_run_lo"].astype(np.float64)})
    with pytest.raises(ValueError):
        lod_mod.from_arrays({**arrays, "lod_params": np.r_[99, arrays["lod_params"][1:]]})


def test_level_for_picks_the_widest_bin_within_a_pixel():
    lod = lod_mod.build(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([T0]), np.array([10**10]), T0,
                        np.zeros(1, np.int64), base=1000, factor=4)
    assert lod.level_for(999.9) == -1
    assert lod.level_for(1000) == 0 and lod.level_for(3999) == 0 and lod.level_for(4000) == 1
    assert lod.level_for(1e30) == lod.levels - 1
    assert lod.width(lod.levels - 1) * lod_mod.MIN_BINS >= 10**10


# -- through window(), on real traces ----------------------------------------------------------------
def _x(name, pid, tid, start_ns, dur_ns):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid,
            "ts": round(1_000_000 + start_ns / 1000, 3), "dur": round(dur_ns / 1000, 3)}


def _load(tmp_path, events, name="t.pt.trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return tb_profiler.load(str(path), cache=False)


def ref_window(trace, a, b, width, max_events):
    """The old full scan (plugin/timeline.py before the index), in loops: the events sent
    and, below a pixel, the blocks per (track, depth, pixel column) merged when at most
    a pixel apart."""
    idx = tl.timeline_index(trace)
    ev = trace.events
    t0 = tl.origin(trace)
    abs_a, abs_b = t0 + a, t0 + b
    p = (b - a) / width
    cand = [i for i in range(len(ev)) if ev["ts"][i] < abs_b and (
        idx.end[i] > abs_a or (idx.end[i] == abs_a and ev["ts"][i] == abs_a))]
    wide = [i for i in cand if ev["dur"][i] >= p]
    truncated = len(wide) > max_events
    if truncated:
        wide = sorted(sorted(wide, key=lambda i: -ev["dur"][i])[:max_events])
    narrow = [i for i in cand if i not in set(wide)]
    cols: dict = {}
    for i in narrow:
        col = min(max(int((max(ev["ts"][i], abs_a) - abs_a) / p), 0), width - 1)
        k = (int(idx.track[i]), int(idx.depth[i]), col)
        s, e, n = cols.get(k, (ev["ts"][i], idx.end[i], 0))
        cols[k] = (min(s, ev["ts"][i]), max(e, idx.end[i]), n + 1)
    busy = []
    for (tr, d, _), (s, e, n) in sorted(cols.items()):
        if busy and busy[-1]["track"] == tr and busy[-1]["depth"] == d and s - t0 - busy[-1]["_end"] <= p:
            busy[-1]["end_ns"] = max(busy[-1]["end_ns"], int(e) - t0)
            busy[-1]["_end"] = int(e) - t0
            busy[-1]["count"] += n
        else:
            busy.append({"track": tr, "depth": d, "start_ns": int(s) - t0, "end_ns": int(e) - t0, "count": n,
                         "_end": int(e) - t0})
    for x in busy:
        del x["_end"]
    return wide, busy, len(cand), truncated


@st.composite
def traces(draw):
    span = draw(st.sampled_from([400_000, 20_000_000]))
    n_threads = draw(st.integers(1, 3))
    events = [_x("everything", 1, 1, 0, span)]  # straddles every window
    for k in range(draw(st.integers(0, 40))):
        start = draw(st.integers(0, span))
        dur = draw(st.one_of(st.just(0), st.integers(1, 999), st.integers(1000, 100_000),
                             st.integers(100_000, span)))
        events.append(_x(f"e{k}", 1, draw(st.integers(1, n_threads)), start, dur))
    return events, span


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(traces(), st.sampled_from([100, 1500]), st.sampled_from([3, 20000]))
def test_window_sends_the_full_scans_events_at_every_zoom(tmp_path, case, width, max_events):
    events, span = case
    trace = _load(tmp_path, events)
    lod = tl.lod_index(trace)
    for a, b in [(0, span), (-50_000, span // 4), (span // 3, span // 3 + 700), (span // 2, span // 2 + 150_000),
                 (span // 4 + 3, span // 4 + 3 + 5_000_000), (span - 10, span + 10_000)]:
        w = tl.window(trace, a, b, width, max_events, 100)
        wide, busy, in_window, truncated = ref_window(trace, a, b, width, max_events)
        assert [e["i"] for e in w["events"]] == wide and w["truncated"] == truncated
        assert w["counts"]["in_window"] == len(w["events"]) + sum(x["count"] for x in w["busy"]) == in_window
        p = w["ns_per_px"]
        if lod.level_for(p) < 0:  # finer than the finest bin: exactly the old blocks
            assert w["busy"] == busy
        else:  # every short event's time inside the window lies in a block of its row
            _assert_covers(trace, w, a, b, wide)


def _assert_covers(trace, w, a, b, wide):
    idx = tl.timeline_index(trace)
    t0 = tl.origin(trace)
    ev = trace.events
    blocks: dict = {}
    for x in w["busy"]:
        assert x["start_ns"] < x["end_ns"] and x["count"] > 0
        blocks.setdefault((x["track"], x["depth"]), []).append((x["start_ns"], x["end_ns"]))
    for v in blocks.values():
        assert all(p[1] < q[0] for p, q in itertools.pairwise(v))  # sorted, disjoint, not touching
    sent = set(wide)
    for i in range(len(ev)):
        s, e = int(ev["ts"][i]) - t0, int(idx.end[i]) - t0
        if i in sent or not (s < b and (e > a or (e == a and s == a))):
            continue
        lo, hi = max(s, a), max(min(e, b), max(s, a) + 1)
        mine = blocks.get((int(idx.track[i]), int(idx.depth[i])), [])
        assert any(x <= lo and hi <= y for x, y in mine), (i, s, e, mine)


def test_straddling_and_zoomed_windows(tmp_path):
    """A step across the whole trace, a long op across the window's start, a short one
    ending inside it, a zero-length one at its start: each comes back, at coarse and fine
    zoom, as an event or inside a block."""
    events = [_x("step", 1, 1, 0, 10_000_000), _x("long", 1, 1, 1_000_000, 3_000_000),
              _x("short_across", 1, 1, 4_999_990, 20), _x("zero", 1, 2, 5_000_000, 0),
              _x("later", 1, 2, 9_000_000, 500)]
    events += [_x(f"tiny{k}", 1, 3, 100 * k, 50) for k in range(10_000)]  # 1 ms of tiny ops
    trace = _load(tmp_path, events)
    names = [trace.str(n) for n in trace.events["name"]]
    for a, b, width in [(5_000_000, 6_000_000, 1000), (5_000_000, 5_000_500, 1000), (0, 10_000_000, 100)]:
        w = tl.window(trace, a, b, width, 20000, 100)
        got = {names[e["i"]] for e in w["events"]}
        p = w["ns_per_px"]
        assert "step" in got
        assert ("long" in got) == (a < 4_000_000 and 3_000_000 >= p)
        wide, busy, _, _ = ref_window(trace, a, b, width, 20000)
        assert [e["i"] for e in w["events"]] == wide
        if tl.lod_index(trace).level_for(p) < 0:
            assert w["busy"] == busy
        else:
            _assert_covers(trace, w, a, b, wide)
    coarse = tl.window(trace, 0, 10_000_000, 100, 20000, 100)
    tiny = [x for x in coarse["busy"] if x["track"] == 2]
    assert tiny and sum(x["count"] for x in tiny) == 10_000  # 10,000 ops in one or two blocks
    assert len(tiny) <= 2 and tiny[0]["start_ns"] <= 0 and tiny[-1]["end_ns"] >= 999_950


def test_whole_trace_reply_is_bounded_whatever_the_event_count(tmp_path):
    """Bursts of tiny events on four threads: ten times the events, the same reply."""
    rng = np.random.default_rng(7)
    sizes = {}
    for n in (20_000, 200_000):
        starts = np.sort(rng.integers(0, 1_000_000_000, n))
        events = [_x("burst", 1, 1 + k % 4, int(s), 300) for k, s in enumerate(starts.tolist())]
        trace = _load(tmp_path, events, f"many{n}.pt.trace.json")
        w = tl.window(trace, None, None, 1500, 20000, 2000)
        rows = sum(t["max_depth"] + 1 for t in w["tracks"])
        assert len(w["busy"]) <= rows * 751
        assert w["counts"]["in_window"] == n
        sizes[n] = len(json.dumps(w))
    assert sizes[200_000] <= 250_000 and sizes[200_000] <= 1.2 * sizes[20_000] + 50_000


def test_a_reopened_trace_reads_its_stored_index(tmp_path, monkeypatch):
    """The index is kept beside the cache entry (analysis.stored): a reopen of the trace
    reads it instead of building it, and serves the same windows."""
    events = [_x(f"op{k}", 1, 1 + k % 3, 1000 * k, 700 + 37 * (k % 50)) for k in range(3000)]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    cache = tmp_path / "cache"
    trace = tb_profiler.load(str(path), cache_dir=cache, background=False)
    want = {ab: tl.window(trace, *ab, 800, 20000, 100) for ab in [(None, None), (100_000, 200_000), (5, 9000)]}
    from tb_profiler import cache_writer

    assert cache_writer.drain(60)  # the index is written by the process's one cache writer

    def no_build(*args, **kwargs):
        raise AssertionError("the index was built again")

    monkeypatch.setattr(tl, "lod_build", no_build)
    again = tb_profiler.load(str(path), cache_dir=cache)
    assert again.from_cache
    for ab, w in want.items():
        assert tl.window(again, *ab, 800, 20000, 100) == w


def test_queue_counters_and_flows_match_the_full_scans():
    """The bounded counters and flows give what analysis.queue.queue_bins and the scan of
    every flow give (the real V100 trace: kernels, a launch queue, launch flows)."""
    from datafiles import V100_TRACE

    from tb_profiler.analysis.queue import queue_bins

    trace = tb_profiler.load(V100_TRACE, cache=False)
    t0, t1 = trace.span
    rng = np.random.default_rng(3)
    wins = [(t0, t1), (t0 - 10, t0 + 5), (t1 - 1000, t1 + 1000)]
    for _ in range(30):
        n = int((t1 - t0) * 10 ** rng.uniform(-5, 0))
        s = int(rng.integers(t0, t1 - n))
        wins.append((s, s + n))
    for a, b in wins:
        for bins in (100, 1000):
            want = queue_bins(trace, a, b, bins)
            got = tl.window_queue_bins(trace, a, b, bins)
            assert [(d, s) for d, s, _ in got] == [(d, s) for d, s, _ in want]
            assert all(np.array_equal(x[2], y[2]) for x, y in zip(got, want))
        for max_flows in (0, 5, 2000, 10**6):
            wide = tl.lod_index(trace).overlapping(trace.events["ts"], trace.events["dur"], a, b)
            wide = wide[trace.events["dur"][wide] >= (b - a) / 1000][:500]
            assert tl.window_flows(trace, a, b, wide, max_flows) == _ref_flows(trace, a, b, wide, max_flows)


def _ref_flows(trace, abs_a, abs_b, wide, max_flows):
    f = tl.flow_pairs(trace)
    ts, end = trace.events["ts"], tl.timeline_index(trace).end
    stop = int(np.searchsorted(f.lo, abs_b, side="left"))
    src, dst = f.src[:stop], f.dst[:stop]
    inside = (flows_mod._overlaps(ts[src], end[src], abs_a, abs_b)
              | flows_mod._overlaps(ts[dst], end[dst], abs_a, abs_b))
    sel = np.flatnonzero(inside)
    total = len(sel)
    if total > max_flows:  # only flows with an end drawn, both ends first
        drawn = np.isin(f.src[sel], wide).astype(np.int64) + np.isin(f.dst[sel], wide)
        order = np.argsort(-drawn, kind="stable")
        order = order[drawn[order] > 0]
        sel = np.sort(sel[order[:max_flows]])
    return flows_mod._flow_dicts(trace, f, sel), total


def test_range_max_reads_any_range():
    rng = np.random.default_rng(5)
    for n in (1, 7, 8, 9, 64, 65, 1000, 5000):
        x = rng.integers(-50, 50, n)
        levels = [x]
        while len(levels[-1]) > 8:
            y = levels[-1]
            y = np.concatenate([y, np.full(-len(y) % 8, np.iinfo(np.int64).min)])
            levels.append(y.reshape(-1, 8).max(axis=1))
        s = rng.integers(0, n, 300)
        e = np.minimum(s + 1 + rng.integers(0, n, 300), n)
        assert tl.range_max(levels, s, e).tolist() == [int(x[i:j].max()) for i, j in zip(s, e)]
