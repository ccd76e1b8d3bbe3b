"""The snapshot model (tb_profiler.snapshot) against torch's own memory_viz functions.

Truth: ``torch.cuda._memory_viz``'s ``segsum`` (its printed totals, sizes printed exactly
by swapping its ``_format_size``; ``calc_active`` / ``_block_extra`` for the rest) and
``trace`` (its one line per history entry: +size per alloc, -size per free_completed),
called on the very dicts that were pickled. Inputs: tests/snapshot_fixtures.py (CUDA
caching allocator shaped snapshots, and a real ``_profile_to_snapshot`` of a CPU run),
plus replica runs snapshotted midway, to check the history replayed backwards.
"""
from __future__ import annotations

import copy
import json
import pickle
import re

import numpy as np
import pytest
import snapshot_fixtures as F
from torch.cuda import _memory_viz as mv

import tb_profiler
from tb_profiler.cli import main as cli_main
from tb_profiler.errors import TraceFormatError
from tb_profiler.snapshot import load_snapshot

NAMES = sorted(F.FIXTURES)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{name: (snapshot dict, path, Snapshot)} for every fixture, loaded through the cache."""
    root = tmp_path_factory.mktemp("snaps")
    out = {}
    for name in NAMES:
        d = F.FIXTURES[name]()
        path = F.write(root / f"{name}.pickle", d)
        out[name] = (d, path, load_snapshot(path, cache_dir=root / "cache"))
    return out


@pytest.fixture
def exact_sizes(monkeypatch):
    """memory_viz prints sizes rounded (``_format_size``): print them as exact integers."""
    monkeypatch.setattr(mv, "_format_size", lambda n: str(int(n)))


def _segsum_totals(d: dict) -> dict:
    text = mv.segsum(d)
    num = {k: int(re.search(rf"^{k}: (-?\d+)", text, re.MULTILINE).group(1))
           for k in ("segments", "total_reserved", "total_allocated", "total_free")}
    internal = sum(b["size"] - mv._block_extra(b)[1] for s in d["segments"] for b in s["blocks"]
                   if b["state"] == "active_allocated")
    return {"segments": num["segments"], "reserved_bytes": num["total_reserved"],
            "allocated_bytes": num["total_allocated"], "free_internal_bytes": internal,
            "free_external_bytes": num["total_free"] - internal,
            "active_bytes": sum(mv.calc_active(s) for s in d["segments"])}


@pytest.mark.parametrize("name", NAMES)
def test_summary_is_segsums_accounting(built, exact_sizes, name):
    d, _, snap = built[name]
    s = snap.summary()
    assert {k: s[k] for k in _segsum_totals(d)} == _segsum_totals(d)
    entries = sum(len(t) for t in d["device_traces"])
    assert s["history_entries"] == entries
    assert s["oom_count"] == sum(e["action"] == "oom" for t in d["device_traces"] for e in t)
    times = [e["time_us"] for t in d["device_traces"] for e in t if "time_us" in e]
    assert s["time_range_us"] == ([min(times), max(times)] if times else None)
    assert s["devices"] == sorted({i for i, t in enumerate(d["device_traces"]) if t} | {g["device"] for g in d["segments"]})
    # the totals of at() at the end are the same figures
    assert snap.at()["totals"] == {k: s[k] for k in snap.at()["totals"]}


def _trace_running(d: dict) -> dict[int, list[int]]:
    """Per device, the running count after each entry as _memory_viz.trace prints it:
    +size at each alloc line, -size at each free-completed line (one line per entry)."""
    d = copy.deepcopy(d)
    for seg in d["segments"]:  # trace's find_segment reads it; _profile_to_snapshot leaves it out
        seg.setdefault("allocated_size", seg["total_size"])
    out, dev, count = {}, None, 0
    text = re.sub(r"TOTAL MEM: -?\d+", "\n", mv.trace(d))  # it ends a device's lines without a newline
    for line in text.split("\n"):
        head = re.match(r"Device (\d+) -+$", line)
        if head:
            dev, count = int(head.group(1)), 0
            out[dev] = []
            continue
        if dev is None or re.match(r"^\d+ entries$", line):
            continue
        if not line:
            continue
        alloc = re.match(r"^\w+ = .*\[-?\d+:(\d+)\]$", line)
        freed = re.match(r"^# free completed for .* (\d+)$", line)
        count += int(alloc.group(1)) if alloc else -int(freed.group(1)) if freed else 0
        out[dev].append(count)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_history_replay_is_traces(built, exact_sizes, name):
    d, _, snap = built[name]
    running = _trace_running(d)
    assert running, name
    peaks = snap.summary()["peak_allocated_by_device"]
    for dev, counts in running.items():
        h = snap.device_history(dev)
        assert len(counts) == h.n == len(d["device_traces"][dev])
        np.testing.assert_array_equal(h.allocated - h.base_allocated, np.array(counts))
        assert peaks[str(dev)] == h.base_allocated + max(0, max(counts))
        # what was live before the history: the end state's active blocks no live alloc accounts for
        live_end = sum(b.get("requested_size", b["size"]) for s in d["segments"] if s["device"] == dev
                       for b in s["blocks"] if b["state"] in ("active_allocated", "active_pending_free"))
        assert int(h.allocated[-1]) == live_end
        tl = snap.timeline(device=dev, max_points=10_000)
        assert tl["peak"]["allocated_bytes"] == peaks[str(dev)] or h.peak()[0] == -1
        assert list(tl["points"]["allocated_bytes"]) == list(h.allocated)


@pytest.mark.parametrize("name", NAMES)
def test_at_end_is_the_snapshots_segments(built, name):
    d, _, snap = built[name]
    state = snap.at()
    segs, blocks = state["segments"], state["blocks"]
    assert list(segs["address"]) == [s["address"] for s in d["segments"]]
    assert list(segs["total_size"]) == [s["total_size"] for s in d["segments"]]
    assert list(segs["stream"]) == [s["stream"] for s in d["segments"]]
    want = [(i, b["size"], b["state"], b.get("requested_size", b["size"])) for i, s in enumerate(d["segments"])
            for b in s["blocks"]]
    assert list(zip(blocks["segment"], blocks["size"], blocks["state"], blocks["requested_size"])) == want
    one = d["segments"][0]
    per_device = snap.at(device=one["device"])["segments"]
    assert list(per_device["address"]) == [s["address"] for s in d["segments"] if s["device"] == one["device"]]


def _midway(expandable: bool) -> tuple[dict, dict, int]:
    """A replica run snapshotted midway and at its end: (mid dict, end dict, mid's last time)."""
    st = F.stacks()
    (d0,), _ = F._devices(1, expandable)
    a = [d0.malloc(n, F.STREAM_A, st["linear"]) for n in (6_000_000, 700_000, 12_000_000, 300_000, 3_000_000)]
    d0.free(a[1], st["free"])
    d0.free(a[2], st["free"])
    b = d0.malloc(2_500_000, F.STREAM_B, st["attn"])
    d0.free(b, st["free"], pending=True)
    mid = copy.deepcopy(F._snapshot([d0], expandable))
    t_mid = d0.history[-1]["time_us"]
    d0.complete(b, st["free"])
    d0.empty_cache(st["optim"])
    d0.free(a[0], st["free"])
    [d0.malloc(n, F.STREAM_A, st["grad"]) for n in (25_000_000, 400_000, 9_000_000)]
    d0.empty_cache(st["optim"])
    return mid, F._snapshot([d0], expandable), t_mid


@pytest.mark.parametrize("expandable", [False, True])
def test_at_midway_is_the_replicas_state_then(tmp_path, exact_sizes, expandable):
    mid, end, t_mid = _midway(expandable)
    snap = load_snapshot(F.write(tmp_path / "s.pickle", end), cache=False)
    state = snap.at(time_us=t_mid, device=0)
    segs, blocks = state["segments"], state["blocks"]
    want = sorted((s["address"], s["total_size"], s["stream"]) for s in mid["segments"])
    assert sorted(zip(segs["address"], segs["total_size"], segs["stream"])) == want
    live = blocks[blocks["state"] != "inactive"]
    want_live = sorted((bl["address"], bl["requested_size"], bl["state"]) for s in mid["segments"]
                       for bl in s["blocks"] if bl["state"] != "inactive")
    assert sorted(zip(live["address"], live["requested_size"], live["state"])) == want_live
    # torch's segsum accepts the state as a snapshot (its checks: blocks fill each segment) and agrees
    as_dict = {"segments": [{"address": int(r.address), "total_size": int(r.total_size), "stream": int(r.stream),
                             "blocks": [{"size": int(b.size), "state": b.state, "requested_size": int(b.requested_size),
                                         "frames": []} for b in blocks[blocks["segment"] == i].itertuples()]}
                            for i, r in enumerate(segs.itertuples())]}
    got = _segsum_totals(as_dict)
    assert {k: state["totals"][k] for k in ("reserved_bytes", "allocated_bytes")} == \
        {k: got[k] for k in ("reserved_bytes", "allocated_bytes")}
    h = snap.device_history(0)
    assert state["totals"]["reserved_bytes"] == h.reserved_at(snap._position(h, t_mid))
    # before the first entry nothing was reserved (the replica's history is complete)
    empty = snap.at(time_us=F.T0_US, device=0)
    assert empty["segments"].empty and empty["totals"]["reserved_bytes"] == 0


def test_oom_fragmentation_advice(built):
    d, _, snap = built["cuda_oom"]
    (r,) = snap.ooms()
    free_blocks = [b["size"] for s in d["segments"] for b in s["blocks"] if b["state"] == "inactive"]
    assert r["requested_bytes"] == F.OOM_REQUEST and r["device_free_bytes"] == F.OOM_DEVICE_FREE
    assert r["reserved_bytes"] == sum(s["total_size"] for s in d["segments"])
    assert r["free_in_segments_bytes"] == sum(free_blocks)
    assert r["largest_free_block_bytes"] == max(free_blocks) < F.OOM_REQUEST <= sum(free_blocks)
    assert r["allocated_bytes"] == snap.summary()["allocated_bytes"]
    text = " ".join(r["advice"])
    assert "expandable_segments:True" in text and f"{sum(free_blocks[1:]) / F.MB:,.1f} MiB" in text
    assert "max_split_size_mb" not in text      # a 10 MB request: max_split_size (>= 20 MB) cannot help
    assert "smaller batch" not in text          # most of the reserved memory is free
    assert r["live"]["bytes"].sum() == r["allocated_bytes"]


def test_oom_live_memory_advice(tmp_path):
    """Segments nearly full of live tensors and little free on the device: only 'less live'."""
    st = F.stacks()
    (d0,), _ = F._devices(1)
    for _ in range(8):  # two per 20 MB segment, the second taking the rest (1 MB rounding, no split)
        d0.malloc(19 * F.MB // 2, F.STREAM_A, st["attn"])
    d0.oom(10 * F.MB, F.STREAM_A, F.MB, st["grad"])
    snap = load_snapshot(F.write(tmp_path / "o.pickle", F._snapshot([d0])), cache=False)
    (r,) = snap.ooms()
    assert r["free_in_segments_bytes"] == 0 and r["allocated_bytes"] == 8 * 19 * F.MB // 2
    assert r["reserved_bytes"] == 4 * F.LARGE_BUFFER
    (advice,) = r["advice"]
    assert "smaller batch" in advice and "activation checkpointing" in advice and "(95%)" in advice
    assert "attention" in advice                # the largest live stack, quoted


@pytest.mark.parametrize("name", NAMES)
def test_live_at_peak_adds_up_to_the_peak(built, name):
    d, _, snap = built[name]
    dev = snap.default_device()
    h = snap.device_history(dev)
    live = snap.live_at_peak(device=dev, top=1000)
    assert live["bytes"].sum() == h.peak()[1]
    assert list(live["bytes"]) == sorted(live["bytes"], reverse=True)
    sid = int(live["stack"][live["stack"] >= 0].iloc[0])
    frames = snap.stack(sid)
    assert frames and all(set(f) == {"filename", "line", "name"} for f in frames)
    recorded = [e["frames"] for t in d["device_traces"] for e in t if e.get("frames")]
    assert frames in recorded
    if h.has_time:
        assert snap.live_at(h.time_of(h.peak()[0]), device=dev, top=1000).equals(live)


def test_timeline_window_and_buckets(built):
    _, _, snap = built["cuda_basic"]
    h = snap.device_history(0)
    full = snap.timeline(device=0)
    assert full["time_axis"] == "time_us" and full["allocations_total"] == int(h.in_timeline.sum())
    small = snap.timeline(device=0, max_points=5)
    assert len(small["points"]) <= 5 and small["points"]["allocated_bytes"].max() == full["peak"]["allocated_bytes"]
    t0, t1 = int(h.time_us[10]), int(h.time_us[20])
    win = snap.timeline(device=0, start_us=t0, end_us=t1)
    assert list(win["points"]["entry"]) == list(range(10, 21))
    allocs = win["allocations"]
    assert list(allocs["size"]) == sorted(allocs["size"], reverse=True)
    live_in = (h.start <= 20) & (h.end > 10) & h.in_timeline
    assert win["allocations_total"] == int(live_in.sum()) < full["allocations_total"]
    cpu = built["cpu_profile"][2].timeline()
    assert cpu["time_axis"] == "entry" and cpu["peak"]["allocated_bytes"] == built["cpu_profile"][2].summary()[
        "peak_allocated_bytes"]


def test_warm_open_reads_the_cache_not_the_pickle(built, monkeypatch):
    _, path, cold = built["cuda_basic"]
    assert cold.cache_path
    from tb_profiler.decode import snapshot as reader

    def refuse(*_a, **_k):
        raise AssertionError("the pickle was read again")

    monkeypatch.setattr(reader, "read_snapshot", refuse)
    from tb_profiler.snapshot import model

    monkeypatch.setattr(model, "device_history", refuse)  # the replay comes from the entry too
    warm = load_snapshot(path, cache_dir=cold.cache_path.rsplit("/", 1)[0])
    assert warm.cache_path == cold.cache_path
    assert warm.summary() == cold.summary()
    assert warm.at(time_us=int(warm.device_history(0).time_us[12]), device=0)["totals"] == \
        cold.at(time_us=int(cold.device_history(0).time_us[12]), device=0)["totals"]
    assert isinstance(warm.history["addr"], np.ndarray) and not warm.history["addr"].flags.owndata
    assert tb_profiler.load_snapshot is load_snapshot


def test_hostile_pickle_is_refused_naming_the_file(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps({"segments": [Boom()]}, protocol=4))
    with pytest.raises(TraceFormatError, match="bad.pickle"):
        load_snapshot(bad, cache=False)


def test_cli(built, capsys, tmp_path):
    _, path, _ = built["cuda_oom"]
    assert cli_main(["snapshot", str(path), "--json", "--no-cache", "--top", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["oom_count"] == 1 and len(doc["ooms"]) == 1 and doc["ooms"][0]["advice"]
    assert len(doc["live_at_peak"][0]["live"]) == 2
    assert cli_main(["snapshot", str(path), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "OOM on device 0" in text and "advice: Fragmentation" in text and "live at the peak" in text
    junk = tmp_path / "junk.pickle"
    junk.write_bytes(b"not a pickle")
    assert cli_main(["snapshot", str(junk), "--no-cache"]) == 1
    assert "junk.pickle" in capsys.readouterr().err


@pytest.mark.parametrize("k", [0, 1, 3, 7, 50])
def test_largest_first_is_a_stable_sort_of_all(k):
    """The O(n) top-k the timeline's allocation list uses keeps a stable sort's order (ties
    by position), whatever k is against the number of ids."""
    from tb_profiler.snapshot.model import largest_first

    rng = np.random.default_rng(k)
    ids = np.sort(rng.choice(1000, size=40, replace=False))
    sizes = rng.choice([512, 1024, 4096, 2 << 20], size=40)  # many ties
    want = ids[np.argsort(-sizes, kind="stable")][:k]
    assert largest_first(ids, sizes, k).tolist() == want.tolist()


def test_entries_by_device_counts_the_history(built):
    snap = built["cuda_basic"][2]
    dev = np.asarray(snap.history["device"])
    want = {int(d): int((dev == d).sum()) for d in np.unique(dev)}
    assert snap.entries_by_device() == want
    assert snap.default_device() == max(want, key=lambda d: (want[d], -d))


def test_wrapped_history_is_the_whole_historys_tail(built):
    """A ring that wrapped (cuda_wrapped: cuda_basic's last WRAP_KEEP entries of device 0)
    replays to the same bytes, entry for entry, as the whole history does over those entries:
    what was live before it is taken from the segments, not assumed empty."""
    whole = built["cuda_basic"][2].device_history(0)
    wrapped = built["cuda_wrapped"][2].device_history(0)
    assert wrapped.n == F.WRAP_KEEP < whole.n
    tail = slice(whole.n - F.WRAP_KEEP, whole.n)
    np.testing.assert_array_equal(wrapped.allocated, whole.allocated[tail])
    np.testing.assert_array_equal(wrapped.time_us, whole.time_us[tail])
    # the 12.5 MB block freed early was allocated before the history: no start, and the free's
    # stack stands for it (MemoryViz.js draws such a block from its free event's frames)
    first_free = int(np.flatnonzero((wrapped.start == -1) & (wrapped.size == 12_500_000))[0])
    frames = built["cuda_wrapped"][2].stack(int(wrapped.stack[first_free]))
    assert [f["name"] for f in frames] == [f["name"] for f in F.stacks()["free"]]
    assert built["cuda_wrapped"][2].summary()["peak_allocated_by_device"]["0"] == int(whole.allocated[tail].max())
