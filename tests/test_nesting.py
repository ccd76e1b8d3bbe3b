"""Interval nesting (tb_profiler.analysis.nesting) on hand-made call stacks."""
from __future__ import annotations

import numpy as np

from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.nesting import depth, parents


def test_parents_of_a_call_stack_in_any_order():
    #  thread 1: A [0,100) holds B [10,50) holds C [20,30); D [60,90) in A; thread 2: E [0,100)
    start = np.array([60, 20, 0, 10, 0])
    end = np.array([90, 30, 100, 50, 100])
    tid = np.array([1, 1, 1, 1, 2])
    p = parents(tid, start, end)
    # rows: 0=D 1=C 2=A 3=B 4=E
    assert p.tolist() == [2, 3, -1, 2, -1]
    assert depth(p).tolist() == [1, 2, 0, 1, 0]


def test_partial_overlap_is_not_a_child_and_edge_events_lie_after():
    start = np.array([0, 50, 100, 100])
    end = np.array([100, 150, 100, 120])
    p = parents(np.zeros(4, np.int64), start, end)
    # [50,150) overlaps [0,100) only partly: a root. [100,120) is inside [50,150); the
    # zero-length event at 100 is on [0,100)'s closing edge but [100,120)'s opening edge.
    assert p.tolist() == [-1, -1, 3, 1]
    # On a closing edge only, it lies after: not a child.
    assert parents(np.zeros(2, np.int64), np.array([0, 100]), np.array([100, 100])).tolist() == [-1, -1]


def test_equal_intervals_nest_in_input_order_and_zero_length_child():
    start = np.array([5, 5, 5])
    end = np.array([9, 9, 5])
    p = parents(np.zeros(3, np.int64), start, end)
    assert p.tolist() == [-1, 0, 1]


def test_factorize_and_empty_input():
    pid = np.array([7, 7, 8, 7])
    tid = np.array([1, 2, 1, 1])
    g, first = factorize(pid, tid)
    assert g.tolist() == [0, 1, 2, 0] and first.tolist() == [0, 1, 2]
    g, first = factorize(np.array([], np.int64))
    assert g.tolist() == [] and first.tolist() == []
    empty = np.array([], np.int64)
    assert parents(empty, empty, empty).tolist() == []
    assert depth(np.array([], np.int64)).tolist() == []


def test_deep_chain_depth():
    n = 1000
    start = np.arange(n)
    end = 2 * n - np.arange(n)
    p = parents(np.zeros(n, np.int64), start, end)
    assert p.tolist() == [-1] + list(range(n - 1))
    assert depth(p).tolist() == list(range(n))
