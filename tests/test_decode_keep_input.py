"""The decoder reading its input without writing it (keep_input, for a read-only map of a
plain trace file): the same columns, strings and top-level members as the in-place decode,
each args text found where it lies in the input, the same first error, for every split
between threads; and its progress counters. Run under AddressSanitizer by .ci/asan_tests.sh
(the input is a read-only buffer: a write would fault)."""
from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest
from datafiles import DECODE_CASES as CASES_DIR
from datafiles import read_bytes, real_traces, rel
from test_decode_parallel import assert_same_outcome

native = pytest.importorskip("tb_profiler._native")

SPLITS = ((1, 1 << 30), (2, 1 << 14), (8, 512))  # (threads, min_part bytes)


def _args_texts(blob, dense) -> list[bytes]:
    off = np.frombuffer(dense["args_off"], np.int64)
    n = np.frombuffer(dense["args_len"], np.int32)
    return [bytes(blob[a:a + k]) for a, k in zip(off.tolist(), n.tolist())]


def _outcome(data: bytes, threads: int, min_part: int, keep_input: bool):
    """What decode() gives, with each event's args text looked up in what it addresses."""
    buf = np.frombuffer(data, np.uint8) if keep_input else bytearray(data)
    try:
        r = native.decode(buf, threads=threads, min_part=min_part, keep_input=keep_input)
    except native.DecodeError as exc:
        return ("error", exc.args)
    blob = memoryview(buf)[:r["args_blob_len"]]
    dense = {k: bytes(v) for k, v in r["dense"].items() if k != "args_off"}
    return ("ok", dense, {k: (bytes(a), bytes(b)) for k, (a, b) in r["sparse"].items()}, r["strings"],
            r["toplevel"], _args_texts(blob, r["dense"]))


def _assert_kept_input_decodes_the_same(data: bytes, splits=SPLITS) -> None:
    want = _outcome(data, 1, 1 << 30, keep_input=False)
    for threads, min_part in splits:
        got = _outcome(data, threads, min_part, keep_input=True)
        assert_same_outcome(got, want, f"keep_input threads={threads} min_part={min_part}")


@pytest.mark.parametrize("path", real_traces(), ids=rel)
def test_real_traces(path):
    data = read_bytes(path)
    _assert_kept_input_decodes_the_same(data, SPLITS if len(data) < (8 << 20) else ((1, 1 << 30), (4, 1 << 20)))


@pytest.mark.parametrize("path", sorted(CASES_DIR.glob("*.json")), ids=lambda p: p.name)
def test_contract_cases(path):
    _assert_kept_input_decodes_the_same(path.read_bytes())


def _events(n: int, seed: int, pad: int = 0) -> list[dict]:
    rnd = random.Random(seed)
    return [{"ph": rnd.choice("XXXiCsf"), "cat": "cpu_op", "name": f"op{i % 17}", "pid": 1, "tid": i % 3,
             "ts": i, "dur": 2, "id": i, "args": {"External id": i, "s": "},{" * rnd.randrange(3), "p": "x" * pad,
                                                   "n": {"a": [1, {"b": "}, {"}]}}}
            for i in range(n)]


def test_repeated_args_and_errors_are_those_of_the_in_place_decode():
    good = json.dumps({"traceEvents": _events(300, seed=4)}, indent=1).encode()
    _assert_kept_input_decodes_the_same(good)
    twice = good.replace(b'"args": {', b'"args": {"first": 1}, "args": {', 5)  # the last "args" wins
    _assert_kept_input_decodes_the_same(twice)
    rnd = random.Random(8)
    for _ in range(60):
        at = rnd.randrange(len(good))
        bad = good[:at] + rnd.choice([b"", b"}", b"{", b",", b"\"", b"\xff", b"]"]) + good[at + 1:]
        _assert_kept_input_decodes_the_same(bad, ((1, 1 << 30), (4, 64)))


def test_a_read_only_input_is_never_written():
    data = json.dumps({"traceEvents": _events(2000, seed=1, pad=30), "meta": 1}).encode()
    ro = np.frombuffer(data, np.uint8)
    assert not ro.flags.writeable
    native.decode(ro, threads=4, min_part=1024, keep_input=True)
    assert bytes(ro) == data
    with pytest.raises((TypeError, BufferError, ValueError)):
        native.decode(ro, threads=1)  # the in-place decode needs a writable buffer


def test_progress_is_published_by_every_part():
    plain = [{"ph": "X", "name": f"op{i % 9}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"i": i}}
             for i in range(40000)]  # no decoy cuts: every helper part lands
    data = json.dumps({"traceEvents": plain}).encode()
    counter = np.zeros(native.PROGRESS_SLOTS, np.int64)
    seen: list[int] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.append(int(counter.sum()))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        native.decode(np.frombuffer(data, np.uint8), threads=4, min_part=1 << 16, keep_input=True, progress=counter)
    finally:
        done.set()
        watcher.join()
    total = int(counter.sum())
    assert 0.99 * len(data) <= total <= 1.2 * len(data)  # helpers whose guess was wrong may count twice
    assert (counter[1:] > 0).sum() >= 1
    assert any(0 < s < total for s in seen)


def test_progress_buffer_is_validated():
    data = b'{"traceEvents": []}'
    for bad in (np.zeros(native.PROGRESS_SLOTS - 1, np.int64), np.zeros(native.PROGRESS_SLOTS, np.int32),
                np.zeros(native.PROGRESS_SLOTS, np.int64)[::2], b"x" * 200):
        with pytest.raises((ValueError, TypeError, BufferError)):
            native.decode(bytearray(data), progress=bad)
