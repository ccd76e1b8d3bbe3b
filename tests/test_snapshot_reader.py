"""The memory-snapshot readers: the reference (restricted unpickler + flatten) against the
snapshot's own dicts, the native streaming reader against the reference (differential, over
real torch snapshots, hand-built ones pickled with protocols 2-5, shared and unshared frame
objects, and a small fuzz of damaged pickles), refusals of code-running pickles, the head sniff."""
from __future__ import annotations

import collections
import gzip
import pickle
import random

import pytest
import snapshot_fixtures as F

from tb_profiler.decode import snapshot_native as N
from tb_profiler.decode import snapshot_schema as S
from tb_profiler.decode.snapshot import read_snapshot
from tb_profiler.decode.snapshot_columns import check_layout, diff, equal, resolved
from tb_profiler.decode.snapshot_reference import read_snapshot_reference
from tb_profiler.errors import TraceFormatError
from tb_profiler.io.snapshot_head import is_snapshot_head

MISSING = int(S.MISSING)


def _frames(*names):
    return [{"filename": f"/src/{n}.py", "line": 10 + i, "name": n} for i, n in enumerate(names)]


def hand_built(shared: bool = True) -> dict:
    """A snapshot with every schema field, odd values (uint64 address, unknown action and
    state, missing keys, a float where an int belongs) and, when shared, frame lists and
    frame dicts shared between entries (memoized objects: BINGET in the pickle)."""
    fa, fb = _frames("train", "fwd"), _frames("train", "bwd")
    same = (lambda x: x) if shared else (lambda x: [dict(f) for f in x])
    blocks = [{"size": 1024, "requested_size": 1000, "state": "active_allocated", "frames": same(fa)},
              {"size": 512, "state": "inactive", "frames": []},
              {"size": 2048, "requested_size": 2048, "state": "weird_state", "frames": same(fb)}]
    segs = [{"device": 0, "address": (1 << 64) - 4096, "total_size": 3584, "allocated_size": 3072,
             "active_size": 3072, "requested_size": 3048, "stream": 0, "segment_type": "small",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": same(fa), "blocks": blocks},
            {"device": 1, "address": 1 << 40, "total_size": 2 << 20, "stream": 7, "segment_type": "large",
             "segment_pool_id": (1, 2), "is_expandable": True, "blocks": [{"size": 2 << 20, "state": "inactive"}]}]
    trace0 = [{"action": "segment_alloc", "addr": 1 << 40, "size": 2 << 20, "stream": 7, "time_us": 100,
               "frames": same(fa)},
              {"action": "alloc", "addr": (1 << 64) - 4096, "size": 1024, "stream": 0, "time_us": 101,
               "frames": same(fa), "compile_context": "N/A", "user_metadata": "step=1"},
              {"action": "oom", "size": 1 << 30, "device_free": 123, "stream": 0, "time_us": 102.5,
               "frames": same(fb)},
              {"action": "brand_new", "addr": 5, "size": -3, "stream": 1 << 70, "time_us": True}]
    return {"segments": segs, "device_traces": [trace0, [], [{"action": "free_completed", "addr": 9}]],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1},
            "external_annotations": [{"name": "a", "stage": "START", "time_us": 1}]}


def test_reference_flattens_every_field():
    c = read_snapshot_reference(pickle.dumps(hand_built(), protocol=4), "h.pickle")
    check_layout(c)
    r = resolved(c)
    assert c.n_devices == 3
    assert r["segments.address"] == [-4096, 1 << 40]
    assert r["segments.segment_type"] == ["small", "large"]
    assert r["segments.pool_b"] == [0, 2] and r["segments.is_expandable"] == [0, 1]
    assert r["segments.block_start"] == [0, 3] and r["segments.block_count"] == [3, 1]
    assert r["segments.allocated_size"] == [3072, MISSING]
    assert r["blocks.offset"] == [0, 1024, 1536, 0] and r["blocks.segment"] == [0, 0, 0, 1]
    assert r["blocks.requested_size"] == [1000, MISSING, 2048, MISSING]
    assert r["blocks.state"] == [0, 2, -1, 2] and r["blocks.state_text"] == [None, None, "weird_state", None]
    assert r["blocks.stack"][1] is None and r["blocks.stack"][0] == r["segments.stack"][0]
    assert r["blocks.stack"][0] == (("/src/train.py", 10, "train"), ("/src/fwd.py", 11, "fwd"))
    assert r["history.device"] == [0, 0, 0, 0, 2]
    assert r["history.action"] == [3, 0, 8, -1, 2] and r["history.action_text"][3] == "brand_new"
    assert r["history.time_us"] == [100, 101, MISSING, MISSING, MISSING]   # a float, a bool: not ints
    assert r["history.stream"][3] == MISSING and r["history.size"][3] == -3
    assert r["history.addr"][2] == MISSING and r["history.device_free"][2] == 123
    assert r["history.user_metadata"][1] == "step=1" and r["history.compile_context"][1] == "N/A"
    assert c.n_stacks == 2 and c.n_rows("frames") == 3   # train is shared by both stacks
    assert c.extras == {"allocator_settings": {"expandable_segments": False, "max_split_size": -1},
                        "external_annotations": [{"name": "a", "stage": "START", "time_us": 1}]}


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_reference_same_for_every_protocol_and_sharing(protocol):
    base = read_snapshot_reference(pickle.dumps(hand_built(False), protocol=4), "h")
    for shared in (True, False):
        c = read_snapshot_reference(pickle.dumps(hand_built(shared), protocol=protocol), "h")
        assert equal(c, base), diff(c, base)


class _Evil:
    def __reduce__(self):
        return (print, ("ran",))


@pytest.mark.parametrize("obj, opcode", [
    ({"segments": [_Evil()]}, "STACK_GLOBAL"),
    ({"segments": [collections.OrderedDict()]}, "STACK_GLOBAL"),
    ({"segments": [{1, 2}]}, "EMPTY_SET"),
    ({"segments": [frozenset()]}, "FROZENSET"),
    ({"segments": [bytearray(b"x")]}, "BYTEARRAY8"),
])
def test_refuses_anything_but_plain_data(obj, opcode, capsys):
    data = pickle.dumps(obj, protocol=5)
    with pytest.raises(TraceFormatError, match=f"s.pickle.*{opcode}.*at byte [0-9]+"):
        read_snapshot_reference(data, "s.pickle")
    if N.available():
        with pytest.raises(TraceFormatError, match=f"s.pickle.*{opcode}.*at byte [0-9]+"):
            N.read_snapshot_native(data, "s.pickle")
    assert "ran" not in capsys.readouterr().out


def test_refuses_protocol_0_and_non_snapshots():
    with pytest.raises(TraceFormatError, match="opcode"):
        read_snapshot_reference(pickle.dumps({"segments": []}, protocol=0), "p0.pickle")
    with pytest.raises(TraceFormatError, match="p.pickle.*a list, not a snapshot dict"):
        read_snapshot_reference(pickle.dumps([1, 2]), "p.pickle")
    with pytest.raises(TraceFormatError, match="'blocks' is a int"):
        read_snapshot_reference(pickle.dumps({"segments": [{"blocks": 3}]}), "p.pickle")


def test_is_snapshot_head():
    for p in (2, 3, 4, 5):
        assert is_snapshot_head(pickle.dumps(hand_built(), protocol=p)[:4096])
        assert is_snapshot_head(pickle.dumps({"device_traces": []}, protocol=p))
    assert not is_snapshot_head(pickle.dumps({"model": 1, "segments_x": 2}))
    assert not is_snapshot_head(pickle.dumps([{"segments": 1}]))
    assert not is_snapshot_head(b"\x80\x04")
    assert not is_snapshot_head(b'{"traceEvents": []}')


@pytest.fixture(scope="module")
def real_snapshots() -> dict:
    """torch's own snapshots: a CPU profile through _profile_to_snapshot (real), and the
    fixtures shaped as the CUDA caching allocator writes them."""
    return {name: make() for name, make in F.FIXTURES.items()}


def test_read_snapshot_plain_and_gz(tmp_path, real_snapshots):
    snap = real_snapshots["cpu_profile"]
    plain = F.write(tmp_path / "s.pickle", snap)
    zipped = tmp_path / "s.pickle.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_snapshot(plain), read_snapshot(zipped)
    assert equal(a, b) and a.n_rows("history") == sum(len(t) for t in snap["device_traces"]) > 0
    with pytest.raises(TraceFormatError, match="bad.pickle"):
        (tmp_path / "bad.pickle").write_bytes(plain.read_bytes()[:100])
        read_snapshot(tmp_path / "bad.pickle")


def test_reference_matches_the_dicts(real_snapshots):
    for name, snap in real_snapshots.items():
        c = read_snapshot_reference(pickle.dumps(snap), name)
        check_layout(c)
        r = resolved(c)
        entries = [e for t in snap["device_traces"] for e in t]
        assert r["history.size"] == [e.get("size", MISSING) for e in entries], name
        assert r["history.stack"] == [tuple((f["filename"], f["line"], f["name"]) for f in e.get("frames", [])) or None
                                      for e in entries], name
        blocks = [b for s in snap["segments"] for b in s["blocks"]]
        assert r["blocks.size"] == [b["size"] for b in blocks], name
        assert r["segments.total_size"] == [s["total_size"] for s in snap["segments"]], name


# -- the native streaming reader against the reference ------------------------------------------

native = pytest.mark.skipif(not N.available(), reason="tb_profiler._native is not built")


def _both(data: bytes, path: str = "d.pickle"):
    """(reference result or its error, strict native result or its error)."""
    out = []
    for read in (read_snapshot_reference, lambda d, p: N.read_snapshot_native(d, p, fallback=False)):
        try:
            out.append(read(data, path))
        except TraceFormatError as e:
            out.append(e)
    return out


def _assert_same(data: bytes, strict: bool = True):
    ref, nat = _both(data)
    assert not isinstance(ref, Exception), ref
    if not strict and isinstance(nat, N.NativeUnsupported):
        nat = N.read_snapshot_native(data, "d.pickle")
    assert not isinstance(nat, Exception), nat
    check_layout(nat)
    assert equal(ref, nat), diff(ref, nat)


@native
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_native_equals_reference_on_real_snapshots(real_snapshots, protocol):
    for snap in real_snapshots.values():
        _assert_same(pickle.dumps(snap, protocol=protocol))


@native
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("shared", [True, False])
def test_native_equals_reference_on_hand_built(protocol, shared):
    _assert_same(pickle.dumps(hand_built(shared), protocol=protocol))


def _batched(n_entries: int, n_frames: int) -> dict:
    """Lists at pickle's batch edges (1000 items a SETITEMS / APPENDS), a recursive stack
    (one frame dict twice in a list), single-item and empty lists and dicts."""
    f = {"filename": "r.py", "line": 1, "name": "rec"}
    deep = [{"filename": "d.py", "line": i, "name": "d"} for i in range(n_frames)]
    entries = [{"action": "alloc", "addr": i, "size": 512 * i, "frames": deep if i == 0 else [f, f] if i % 2 else []}
               for i in range(n_entries)]
    return {"segments": [{"blocks": [{"size": 1}]}, {"blocks": []}, {}],
            "device_traces": [[], entries, [{"action": "oom"}], [{}]],
            "allocator_settings": {"one": 1}, "external_annotations": []}


@native
@pytest.mark.parametrize("n_entries, n_frames", [(999, 1), (1000, 1000), (1001, 1001), (2001, 0)])
def test_native_batches_recursion_and_single_items(n_entries, n_frames):
    for protocol in (2, 4, 5):
        _assert_same(pickle.dumps(_batched(n_entries, n_frames), protocol=protocol))


# hand-written pickles: the text opcodes kept (INT, PUT, GET), DUP, POP, POP_MARK, big ints
_CRAFTED = [
    (b"\x80\x02}p0\n(X\x08\x00\x00\x00segments]p1\n}(X\x04\x00\x00\x00sizeI77\nX\x06\x00\x00\x00deviceI01\nu"
     b"aX\x0d\x00\x00\x00device_traces]g1\n0u."),
    (b"\x80\x04}(\x8c\x08segments](}(\x8c\x07address\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00"
     b"\x8c\x06stream\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01\x8c\x0atotal_size\x8a\x01\xffu}2e"
     b"(K\x01K\x021\x8c\x0bignored_key\x8c\x03abcu."),
]


@native
@pytest.mark.parametrize("data", _CRAFTED)
def test_native_equals_reference_on_crafted_opcodes(data):
    ref, nat = _both(data)
    if isinstance(nat, N.NativeUnsupported):   # a DUP'd segment: the reference reads it
        nat = N.read_snapshot_native(data, "d.pickle")
    assert not isinstance(ref, Exception) and not isinstance(nat, Exception), (ref, nat)
    assert equal(ref, nat), diff(ref, nat)


@native
def test_native_hands_other_layouts_to_the_reference():
    e = {"action": "alloc", "addr": 1, "size": 2}
    shared_entry = {"device_traces": [[e, e]], "segments": []}
    data = pickle.dumps(shared_entry)
    with pytest.raises(N.NativeUnsupported, match="d.pickle.*shared.*at byte"):
        N.read_snapshot_native(data, "d.pickle", fallback=False)
    _assert_same(data, strict=False)
    assert N.read_snapshot_native(data, "d.pickle").n_rows("history") == 2


def _mutants(seeds: list[bytes], n: int, rng: random.Random):
    for _ in range(n):
        d = bytearray(rng.choice(seeds))
        if rng.random() < 0.2:
            yield bytes(d[:rng.randrange(len(d))])
            continue
        for _ in range(rng.randint(1, 3)):
            i, m = rng.randrange(len(d)), rng.random()
            if m < 0.5:
                d[i] = rng.randrange(256)
            elif m < 0.7:
                del d[i]
            elif m < 0.85:
                d.insert(i, rng.randrange(256))
            else:
                j = rng.randrange(len(d))
                d[i:i] = d[j:j + rng.randint(1, 20)]
        yield bytes(d)


@native
def test_native_fuzz_equal_or_both_refuse():
    """Damaged pickles: never a crash; the strict native reader either equals the reference,
    or refuses what the reference refuses, or (only where the reference reads it) says the
    layout is not one it follows -- and then the wrapper's fallback gives the reference's result."""
    seeds = [pickle.dumps(hand_built(s), protocol=p) for s in (True, False) for p in (2, 4, 5)]
    seeds.append(pickle.dumps(_batched(5, 3), protocol=4))
    counts = collections.Counter()
    for data in _mutants(seeds, 400, random.Random(20)):
        ref, nat = _both(data)
        if isinstance(ref, Exception):
            assert isinstance(nat, TraceFormatError), "the native reader read what the reference refuses"
            counts["both refuse"] += 1
        elif isinstance(nat, N.NativeUnsupported):
            assert equal(N.read_snapshot_native(data, "d.pickle"), ref)
            counts["fallback"] += 1
        else:
            assert not isinstance(nat, Exception), nat
            assert equal(ref, nat), diff(ref, nat)
            counts["equal"] += 1
    assert counts["equal"] >= 10 and counts["both refuse"] >= 100, counts


@native
def test_native_error_names_file_offset_and_problem():
    data = pickle.dumps(hand_built(), protocol=4)
    with pytest.raises(TraceFormatError, match=r"cut.pickle: .*truncated.* at byte \d+"):
        N.read_snapshot_native(data[:len(data) // 2], "cut.pickle")
    bad = data.replace(b"train", b"tr\xffin", 1)
    with pytest.raises(TraceFormatError, match=r"u.pickle: .*UTF-8 at byte \d+"):
        N.read_snapshot_native(bad, "u.pickle")
    with pytest.raises(TraceFormatError, match="u.pickle"):
        read_snapshot_reference(bad, "u.pickle")


@native
@pytest.mark.skipif(not N.can_map(), reason="no mmap here")
def test_native_mapped_file_equals_buffer(tmp_path, real_snapshots):
    """A plain file is mapped, not copied, and its pages are let go behind the read (here every
    4 KB, so memo references to strings far behind fault their pages in again): the same
    columns and the same errors as from the bytes."""
    datas = [pickle.dumps(s, protocol=p) for s in real_snapshots.values() for p in (2, 4)]
    datas.append(pickle.dumps(_batched(1500, 40), protocol=4))
    assert max(len(d) for d in datas) > 64 << 10
    for i, data in enumerate(datas):
        path = tmp_path / f"m{i}.pickle"
        path.write_bytes(data)
        want = N.read_snapshot_native(data, str(path))
        assert equal(N.read_snapshot_native_file(str(path), release_step=4096), want)
        assert equal(N.read_snapshot_native_file(str(path)), want)
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(datas[-1][:len(datas[-1]) // 2])
    with pytest.raises(TraceFormatError) as mapped:
        N.read_snapshot_native_file(str(cut), release_step=4096)
    with pytest.raises(TraceFormatError) as copied:
        N.read_snapshot_native(cut.read_bytes(), str(cut))
    assert str(mapped.value) == str(copied.value) and "truncated" in str(mapped.value)
    (tmp_path / "empty.pickle").write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty.pickle.*truncated"):
        read_snapshot(tmp_path / "empty.pickle")
    with pytest.raises(FileNotFoundError):
        read_snapshot(tmp_path / "missing.pickle")
    with pytest.raises(TraceFormatError, match="cannot read"):
        N.read_snapshot_native_file(str(tmp_path))


def test_a_mapped_file_cut_short_under_the_reader_is_an_error_not_a_crash(tmp_path):
    """A file truncated while it is mapped raises SIGBUS on the first page past its new end:
    without a guard that kills the process (a server reading a snapshot a job is rewriting).
    The reader's SIGBUS handler turns it into the read's error, naming the file and offset.
    Deterministic here: the test maps the file itself and truncates it before the read."""
    import mmap
    import os

    snap = F.cuda_basic()
    # distinct entry dicts (the streaming reader does not keep shared entries), a few MB
    big = {"segments": snap["segments"], "device_traces": [[dict(e) for e in snap["device_traces"][0] * 400]]}
    path = tmp_path / "cut_under.pickle"
    path.write_bytes(pickle.dumps(big, protocol=4))
    size = path.stat().st_size
    assert size > 64 << 10
    want = N.read_snapshot_native(path.read_bytes(), str(path), fallback=False)
    fd = os.open(path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        assert equal(N.read_snapshot_native(memoryview(mm), str(path), fallback=False), want)  # whole: as bytes
        os.ftruncate(fd, 8192)
        with pytest.raises(TraceFormatError) as cut:
            N.read_snapshot_native(memoryview(mm), str(path), fallback=False)
        msg = str(cut.value)
        assert "cut_under.pickle" in msg and "cut short" in msg and "8192" in msg, msg
        # the reader works on after it (the handler left no read half-done behind)
        assert equal(N.read_snapshot_native(pickle.dumps(big, protocol=4), str(path), fallback=False), want)
        del cut, mm  # (the error's traceback holds a view of the map: it goes with them)
    finally:
        os.close(fd)
