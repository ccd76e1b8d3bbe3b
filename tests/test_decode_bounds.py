"""The decoder keeps at most STRING_MAX bytes of any string (issue 18: one 500 MB event
name must not cost 500 MB, nor a reply of it): a longer one is kept as its first bytes,
cut at a character boundary, and " [... cut: first K of N bytes]" (N its full length).
Two strings that agree on what is kept and on their length are one string; any other two
stay two.  The same holds when the events array is decoded in parts (the parts' tables
are merged by interning again: a cut string must not be cut twice).  Also the native
subtree sum (``_native.subtree_add``) that sums a chain nested far deeper than numpy's
one-add-per-level could.  Run under AddressSanitizer by .ci/asan_tests.sh.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tb_profiler.decode import STRING_MAX, decode_bytes
from tb_profiler.trace.strings import cut_length

native = pytest.importorskip("tb_profiler._native")


def _events(*names: str, args: dict | None = None) -> bytes:
    evs = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1 + i, "dur": 1,
            **({"args": args} if args else {})} for i, n in enumerate(names)]
    return json.dumps({"traceEvents": evs}, ensure_ascii=False).encode()


def _name_of(d, row: int) -> str:
    return d.strings[int(d.dense["name"][row])]


def test_a_long_name_is_kept_cut_with_its_full_length():
    long = "x" * (3 * STRING_MAX)
    d = decode_bytes(_events(long, "aten::mm"))
    name = _name_of(d, 0)
    assert len(name.encode()) <= STRING_MAX
    assert name.startswith("x" * 1000) and cut_length(name) == 3 * STRING_MAX
    assert name.endswith(f" [... cut: first {STRING_MAX - 64} of {3 * STRING_MAX} bytes]")
    assert _name_of(d, 1) == "aten::mm" and cut_length("aten::mm") is None
    assert max(len(s.encode()) for s in d.strings) <= STRING_MAX


def test_a_string_at_the_limit_is_kept_whole():
    exact = "y" * STRING_MAX
    d = decode_bytes(_events(exact))
    assert _name_of(d, 0) == exact and cut_length(_name_of(d, 0)) is None


@pytest.mark.parametrize("char", ["é", "€", "𝄞"])  # 2, 3 and 4 bytes in UTF-8
def test_the_cut_falls_on_a_character_boundary(char):
    long = char * (STRING_MAX // len(char.encode()) + 10)
    name = _name_of(decode_bytes(_events(long)), 0)
    kept = name[:name.index(" [... cut:")]
    assert set(kept) == {char}  # whole characters only (the decoder made valid UTF-8 of it)
    assert STRING_MAX - 64 - len(char.encode()) < len(kept.encode()) <= STRING_MAX - 64
    assert cut_length(name) == len(long.encode())


def test_long_strings_are_told_apart_by_what_is_kept_and_their_length():
    a = "a" * (2 * STRING_MAX)
    b = "a" * (2 * STRING_MAX + 1)          # same prefix, another length: another string
    c = "b" + "a" * (2 * STRING_MAX - 1)    # same length, another prefix: another string
    d = decode_bytes(_events(a, b, c, a))
    ids = d.dense["name"].tolist()
    assert ids[0] == ids[3] and len({ids[0], ids[1], ids[2]}) == 3
    assert [cut_length(_name_of(d, i)) for i in range(3)] == [2 * STRING_MAX, 2 * STRING_MAX + 1, 2 * STRING_MAX]


def test_args_texts_are_cut_the_same_way():
    long = "z" * (2 * STRING_MAX)
    d = decode_bytes(_events("op", args={"Call stack": long, "Input Dims": [[1] * (STRING_MAX // 2)]}))
    stack = d.strings[int(d.sparse["call_stack"][1][0])]
    dims = d.strings[int(d.sparse["input_dims"][1][0])]
    assert cut_length(stack) == 2 * STRING_MAX and len(stack.encode()) <= STRING_MAX
    assert cut_length(dims) == len(json.dumps([[1] * (STRING_MAX // 2)]))  # the raw JSON text as written, cut
    assert dims.startswith("[[1, 1, 1") and len(dims.encode()) <= STRING_MAX


@pytest.mark.parametrize("threads,min_part", [(2, 1 << 16), (4, 4096)])
def test_parts_decode_long_strings_as_one_pass_does(threads, min_part):
    names = [("n%d" % (i % 3)) * (STRING_MAX // 2 + 7 * i) for i in range(12)] + ["short"] * 50
    data = _events(*names)
    one = native.decode(bytearray(data), threads=1, min_part=1 << 30)
    split = native.decode(bytearray(data), threads=threads, min_part=min_part)
    assert split["strings"] == one["strings"]
    assert bytes(split["dense"]["name"]) == bytes(one["dense"]["name"])
    assert max(len(s.encode()) for s in one["strings"]) <= STRING_MAX


def test_subtree_add_sums_a_chain_deeper_than_any_level_loop():
    n = 300_000
    parent = np.arange(-1, n - 1, dtype=np.int64)        # i's parent is i - 1: depth n
    order = np.arange(n - 1, 0, -1, dtype=np.int64)      # deepest first, roots left out
    total = np.ones(n, dtype=np.int64)
    native.subtree_add(order, parent, total)
    assert np.array_equal(total, np.arange(n, 0, -1))


def test_subtree_add_refuses_indexes_out_of_range():
    total = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="out of range"):
        native.subtree_add(np.array([5], dtype=np.int64), np.array([-1, 0, 1], dtype=np.int64), total)
    with pytest.raises(ValueError, match="out of range"):
        native.subtree_add(np.array([1], dtype=np.int64), np.array([-1, 7, 1], dtype=np.int64), total)
    with pytest.raises(ValueError, match="same length"):
        native.subtree_add(np.array([1], dtype=np.int64), np.array([-1, 0], dtype=np.int64), total)
