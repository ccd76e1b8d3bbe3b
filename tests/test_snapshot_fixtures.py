"""The snapshot fixtures hold to torch's shape and the caching allocator's rules.

Every later snapshot test trusts these fixtures, so they are checked against torch itself
(``_memory_viz.segsum`` / ``trace`` accept them) and against the allocator's invariants: the
history replayed from empty ends exactly in the final segments and blocks.
"""
from __future__ import annotations

import gzip
import json
import pickle

import pytest
from torch.cuda import _memory_viz

import snapshot_fixtures as sf

CUDA = ("cuda_basic", "cuda_oom", "cuda_expandable")


@pytest.fixture(scope="module")
def snaps() -> dict:
    return {name: fn() for name, fn in sf.FIXTURES.items()}


@pytest.mark.parametrize("name", list(sf.FIXTURES))
def test_torch_segsum_accepts(snaps, name):
    out = _memory_viz.segsum(snaps[name])   # raises "Segment size mismatch" / accounting errors
    assert f"segments: {len(snaps[name]['segments'])}" in out


@pytest.mark.parametrize("name", (*CUDA, "cuda_wrapped"))
def test_torch_trace_accepts(snaps, name):
    out = _memory_viz.trace(snaps[name])
    for i, entries in enumerate(snaps[name]["device_traces"]):
        assert (f"Device {i} ----" in out) == bool(entries)


def test_torch_trace_rejects_its_own_profile_snapshot(snaps):
    """torch 2.13's trace() reads segments' allocated_size, which _profile_to_snapshot never
    writes: readers must not rely on it (documented in tests/data/snapshots/README.md)."""
    with pytest.raises(KeyError, match="allocated_size"):
        _memory_viz.trace(snaps["cpu_profile"])


def _replay(snap: dict, device: int) -> tuple[dict, dict]:
    """Replay one device's history from empty, as MemoryViz.js does: live allocations
    (alloc .. free_completed) and mapped ranges (segment_alloc/map .. segment_free/unmap)."""
    live: dict[int, int] = {}
    mapped: dict[int, int] = {}
    for e in snap["device_traces"][device]:
        a = e["action"]
        if a == "alloc":
            assert e["addr"] not in live
            live[e["addr"]] = e["size"]
        elif a == "free_completed":
            assert live.pop(e["addr"]) == e["size"]
        elif a == "free_requested":
            assert live[e["addr"]] == e["size"]
        elif a in ("segment_alloc", "segment_map"):
            end = next((s for s, n in mapped.items() if s + n == e["addr"]), None)
            if end is None:
                mapped[e["addr"]] = e["size"]
            else:
                mapped[end] += e["size"]
        elif a == "segment_free":
            assert mapped.pop(e["addr"]) == e["size"]
        elif a == "segment_unmap":
            start = next(s for s, n in mapped.items() if s <= e["addr"] and e["addr"] + e["size"] == s + n)
            mapped[start] -= e["size"]
            if mapped[start] == 0:
                del mapped[start]
    return live, mapped


@pytest.mark.parametrize("name", CUDA)
def test_history_replayed_ends_in_segments(snaps, name):
    snap = snaps[name]
    for dev in range(len(snap["device_traces"])):
        live, mapped = _replay(snap, dev)
        segs = [s for s in snap["segments"] if s["device"] == dev]
        assert mapped == {s["address"]: s["total_size"] for s in segs}
        blocks = {b["address"]: b["requested_size"] for s in segs for b in s["blocks"]
                  if b["state"] != "inactive"}
        assert live == blocks and live


@pytest.mark.parametrize("name", CUDA)
def test_allocator_rules(snaps, name):
    for seg in snaps[name]["segments"]:
        blocks = seg["blocks"]
        assert sum(b["size"] for b in blocks) == seg["total_size"]
        addr = seg["address"]
        for b in blocks:
            assert b["address"] == addr and b["size"] % sf.MIN_BLOCK == 0
            addr += b["size"]
            if b["state"] != "inactive":
                assert b["requested_size"] <= b["size"] < b["requested_size"] + sf.MIN_BLOCK
        assert all(not (x["state"] == y["state"] == "inactive") for x, y in zip(blocks, blocks[1:]))
        active = [b for b in blocks if b["state"] != "inactive"]
        assert seg["allocated_size"] == sum(b["size"] for b in active if b["state"] == "active_allocated")
        assert seg["active_size"] == sum(b["size"] for b in active)
        assert seg["requested_size"] == sum(b["requested_size"] for b in active)
        assert isinstance(seg["segment_pool_id"], tuple) and isinstance(seg["stream"], int)
        if seg["is_expandable"]:
            page = sf.SMALL_BUFFER if seg["segment_type"] == "small" else sf.LARGE_BUFFER
            assert seg["total_size"] % page == 0
        elif seg["segment_type"] == "small":
            assert seg["total_size"] == sf.SMALL_BUFFER
            assert all(b["size"] <= sf.SMALL_SIZE for b in active)
        else:
            assert seg["total_size"] == sf.LARGE_BUFFER or seg["total_size"] % sf.ROUND_LARGE == 0
            assert all(b["size"] > sf.SMALL_SIZE for b in active)


def test_basic_has_what_it_promises(snaps):
    snap = snaps["cuda_basic"]
    states = {b["state"] for s in snap["segments"] for b in s["blocks"]}
    assert states == {"active_allocated", "active_pending_free", "inactive"}
    assert len({s["stream"] for s in snap["segments"] if s["device"] == 0}) == 3
    assert {s["segment_pool_id"] for s in snap["segments"]} == {(0, 0), (1, 0)}
    assert {s["device"] for s in snap["segments"]} == {0, 1}
    actions = {e["action"] for e in snap["device_traces"][0]}
    assert {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
            "snapshot"} <= actions
    assert "frames" not in next(e for e in snap["device_traces"][0] if e["action"] == "snapshot")
    assert {e["user_metadata"] for e in snap["device_traces"][0]} == {"", "phase=forward", "phase=backward"}
    assert len(snap["external_annotations"]) == 2


def test_oom_is_fragmentation(snaps):
    snap = snaps["cuda_oom"]
    (oom,) = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
    assert "addr" not in oom and oom["device_free"] == sf.OOM_DEVICE_FREE < oom["size"]
    free = [b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "inactive"]
    assert sum(free) >= oom["size"] > max(free)
    assert snap["device_traces"][0][-1] is oom


def test_expandable_maps_and_unmaps(snaps):
    snap = snaps["cuda_expandable"]
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert "segment_alloc" not in actions and {"segment_map", "segment_unmap"} <= set(actions)
    assert all(s["is_expandable"] for s in snap["segments"])
    assert snap["allocator_settings"]["expandable_segments"] is True


def test_cpu_profile_is_torch_output(snaps):
    snap = snaps["cpu_profile"]
    assert len(snap["device_traces"]) == 1 and snap["segments"][0]["device"] == 0   # the CPU, last
    entries = snap["device_traces"][0]
    assert {e["action"] for e in entries} == {"alloc", "free_requested", "free_completed"}
    assert all("time_us" not in e for e in entries)
    assert any(f["name"].startswith("nn.Module: Linear") for e in entries for f in e["frames"])


def test_frames_are_shared_objects(snaps):
    """torch's symbolizer makes one list per captured context (an alloc entry shares it with
    its block) and one dict per distinct frame: pickle memoizes both."""
    snap = snaps["cuda_basic"]
    entries = snap["device_traces"][0]
    allocs = {id(e["frames"]) for e in entries if e["action"] == "alloc"}
    blocks = {id(b["frames"]) for s in snap["segments"] if s["device"] == 0
              for b in s["blocks"] if b["state"] != "inactive"}
    assert blocks <= allocs and len(allocs) == sum(e["action"] == "alloc" for e in entries)
    frames = [f for e in entries for f in e.get("frames", [])]
    assert len({id(f) for f in frames}) < len(frames) / 5
    unshared = json.loads(json.dumps(snaps["cuda_basic"]))
    assert len(pickle.dumps(snaps["cuda_basic"])) < 0.7 * len(pickle.dumps(unshared))


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("suffix", [".pickle", ".pickle.gz"])
def test_write_round_trips(tmp_path, snaps, protocol, suffix):
    path = sf.write(tmp_path / f"s{suffix}", snaps["cuda_oom"], protocol=protocol)
    data = path.read_bytes()
    data = gzip.decompress(data) if suffix.endswith(".gz") else data
    assert data[:2] == bytes([0x80, protocol])
    assert pickle.loads(data) == snaps["cuda_oom"]


def _unframed(data: bytes) -> bytes:
    """The opcodes of a protocol-4 pickle with its FRAME headers taken out."""
    import struct
    body, i = bytearray(data[:2]), 2
    while i < len(data) and data[i] == 0x95:
        n = struct.unpack("<Q", data[i + 1:i + 9])[0]
        body += data[i + 9:i + 9 + n]
        i += 9 + n
    assert i == len(data)
    return bytes(body)


@pytest.mark.parametrize("mode", ["torch", "shared", "inline"])
def test_make_snapshot_streams_what_pickle_writes(tmp_path, mode):
    """benchmarks/make_snapshot.py's streamed file loads as its dict builder's snapshot, and
    its opcodes are CPython's pickle.dumps of that dict byte for byte (frames aside)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import make_snapshot as ms
    kw = dict(devices=2, streams=2, slots_per_stream=12, n_stacks=60, frames_mode=mode, body_steps=20)
    path = tmp_path / "s.pickle"
    ms.write(path, ms.make_plan(**kw))
    data = path.read_bytes()
    want = ms.build(ms.make_plan(**kw))
    assert pickle.loads(data) == want
    assert _unframed(data) == _unframed(pickle.dumps(want, protocol=4))
    assert _memory_viz.segsum(want) and _memory_viz.trace(want)
    for dev in range(2):
        live, mapped = _replay(want, dev)
        segs = [s for s in want["segments"] if s["device"] == dev]
        assert mapped == {s["address"]: s["total_size"] for s in segs}
        assert live == {b["address"]: b["requested_size"] for s in segs for b in s["blocks"]
                        if b["state"] != "inactive"}
