"""The native decoder split between threads gives exactly what one pass gives.

The events array is cut at guessed event starts (a '{' after "},"); a guess is trusted
only when the walk before it lands on it (native/decoder_parallel.c, "parallel events"). Here every
real and sample trace, hand-made traces full of wrong guesses (cuts inside strings, inside
args objects, inside nested arrays of objects), malformed inputs (the first error must be
the one a single pass meets: same message, same offset) and random mutations decode with
tiny parts (so there are many cuts) and must equal the single pass byte for byte: the
columns, the string table in the same order, the args blob and the top-level members.
Run under AddressSanitizer by .ci/asan_tests.sh.
"""
from __future__ import annotations

import json
import random

import pytest
from datafiles import DECODE_CASES as CASES_DIR
from datafiles import read_bytes, real_traces, rel

native = pytest.importorskip("tb_profiler._native")

SPLITS = ((2, 1 << 16), (4, 4096), (16, 256))  # (threads, min_part bytes): few to many cuts


def _outcome(data: bytes, threads: int, min_part: int):
    """Everything decode() returns, as plain bytes/lists, or the error's (message, offset)."""
    buf = bytearray(data)
    try:
        r = native.decode(buf, threads=threads, min_part=min_part)
    except native.DecodeError as exc:
        return ("error", exc.args)
    return ("ok", {k: bytes(v) for k, v in r["dense"].items()},
            {k: (bytes(a), bytes(b)) for k, (a, b) in r["sparse"].items()},
            r["strings"], r["toplevel"], bytes(buf[:r["args_blob_len"]]))


def assert_same_outcome(got: tuple, want: tuple, label: str) -> None:
    """Two _outcome()s are equal; else name the first difference, not two huge reprs."""
    if got != want:
        if got[0] != want[0] or got[0] == "error":
            raise AssertionError(f"{label}: {got[:2]} != {want[:2]}")
        for i, part in enumerate(("dense", "sparse", "strings", "toplevel", "args"), start=1):
            assert got[i] == want[i], f"{label}: {part} differs"


def _assert_same_for_every_split(data: bytes, splits=SPLITS) -> None:
    one = _outcome(data, 1, 1 << 30)
    for threads, min_part in splits:
        assert_same_outcome(_outcome(data, threads, min_part), one, f"threads={threads} min_part={min_part}")


@pytest.mark.parametrize("path", real_traces(), ids=rel)
def test_real_traces_decode_the_same_split(path):
    data = read_bytes(path)
    splits = SPLITS if len(data) < (8 << 20) else ((2, 1 << 20), (8, 1 << 18))  # bounded work
    _assert_same_for_every_split(data, splits)


def test_sample_traces_decode_the_same_split(sample_traces):
    for path in sample_traces:
        _assert_same_for_every_split(read_bytes(path), ((2, 1 << 14), (8, 2048)))


@pytest.mark.parametrize("path", sorted(CASES_DIR.glob("*.json")), ids=lambda p: p.name)
def test_contract_cases_decode_the_same_split(path):
    _assert_same_for_every_split(path.read_bytes(), ((2, 16), (16, 1)))


def _decoy_events(n: int, seed: int) -> list[dict]:
    """Events whose text is full of "}, {" where no event starts: in strings, in args
    objects, in arrays of objects; some with repeated args and counters."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        ev = {"ph": rnd.choice("XXXiC"), "cat": rnd.choice(["cpu_op", "kernel", "python_function"]),
              "name": rnd.choice(["aten::mm", "}, {\"ph\": \"X\"", "a},{b", f"op{i % 7}", "\u00e9}, {"]),
              "pid": rnd.choice([1, 2, "Spans"]), "tid": rnd.randrange(4), "ts": i * 10 + rnd.random(), "dur": 5}
        args = {"External id": i, "Input Dims": [[1, 2], []], "nested": [{"a": 1}, {"b": [{"c": "}, {"}]}],
                "Call stack": "a.py(1): f;b.py(2): g", "s": "x" * rnd.randrange(50)}
        if ev["ph"] == "C":
            args = {"mem": rnd.randrange(100), "other": "}, {"}
        ev["args"] = args
        out.append(ev)
    return out


@pytest.mark.parametrize("indent", [None, 1, 2])
@pytest.mark.parametrize("layout", ["object", "array"])
def test_wrong_guesses_are_never_trusted(indent, layout):
    events = _decoy_events(400, seed=7)
    doc = {"schemaVersion": 1, "traceEvents": events, "traceName": "}, {"} if layout == "object" else events
    data = json.dumps(doc, indent=indent, ensure_ascii=False).encode()
    _assert_same_for_every_split(data, ((2, 64), (8, 32), (16, 1)))


def test_errors_are_the_first_one_a_single_pass_meets():
    events = _decoy_events(300, seed=11)
    good = json.dumps({"traceEvents": events}, indent=1).encode()
    rnd = random.Random(3)
    for _ in range(60):  # damage late in the array, where a helper part decodes
        at = rnd.randrange(len(good) // 2, len(good))
        bad = good[:at] + rnd.choice([b"", b"}", b"{", b",", b"\"", b"\xff", b"]"]) + good[at + 1:]
        _assert_same_for_every_split(bad, ((2, 64), (8, 16)))
    for cut in range(len(good) - 400, len(good), 37):  # truncated near the end
        _assert_same_for_every_split(good[:cut], ((2, 64), (8, 16)))


def test_random_mutations_decode_the_same_split():
    base = json.dumps({"traceEvents": _decoy_events(120, seed=5), "x": [1, 2]}, indent=1).encode()
    rnd = random.Random(12)
    alphabet = b'{}[],:"\\ \n0123456789.eE-+tfnul"xa\xc3\xa9'
    for _ in range(150):
        data = bytearray(base)
        for _ in range(rnd.randrange(1, 4)):
            at = rnd.randrange(len(data))
            op = rnd.randrange(3)
            if op == 0:
                data[at] = rnd.choice(alphabet)
            elif op == 1:
                del data[at:at + rnd.randrange(1, 20)]
            else:
                data[at:at] = bytes(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 5)))
        _assert_same_for_every_split(bytes(data), ((2, 32), (8, 8)))


def test_second_trace_events_array_replaces_the_first():
    first = json.dumps(_decoy_events(50, seed=1))
    second = json.dumps(_decoy_events(80, seed=2))
    data = f'{{"traceEvents": {first}, "traceName": "t", "traceEvents": {second}}}'.encode()
    _assert_same_for_every_split(data, ((2, 32), (8, 8)))


def test_threads_and_min_part_are_validated():
    with pytest.raises(ValueError):
        native.decode(bytearray(b"[]"), threads=2, min_part=0)
    assert native.decode(bytearray(b"[]"), threads=0)["dense"]["ts"] is not None  # 0 or 1: one pass
