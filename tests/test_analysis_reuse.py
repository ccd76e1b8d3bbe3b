"""Whole-trace analyses derive their shared intermediates once per trace (issue 10, "Big
traces"), and the cheaper ways they now derive them give exactly what the straightforward
ones gave.

Two kinds of tests, none timed:
- counts: how often the body of a memoized intermediate (valid times, the name index, the
  call tree's levels, the overview, the operator and kernel tables) runs while the
  plugin's routes walk one trace: once;
- equality: each cheaper computation (a sort instead of np.unique's hash table, a radix
  sort checked against lexsort, a factorize that skips folds, memoized masks, subtree sums
  sharing one schedule) against a plain reference, on every real trace in tests/data and
  on random inputs.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
from datafiles import V100_TRACE, real_traces, rel

import tb_profiler
from tb_profiler.analysis import kernels as kernels_mod
from tb_profiler.analysis import links, nesting, range_stats, shared
from tb_profiler.analysis import operators as operators_mod
from tb_profiler.analysis import overview as overview_mod
from tb_profiler.analysis import recommendations as rec
from tb_profiler.analysis.keys import factorize, unique_ints
from tb_profiler.analysis.operators import call_tree
from tb_profiler.analysis.tensor_cores import (
    string_id_mask,
    tc_eligible,
    uses_tensor_cores,
)
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.plugin import views as V
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, Role, role_mask
from tb_profiler.trace.strings import map_string_ids

TRACES = real_traces()


def fresh(path=V100_TRACE):
    """A newly loaded trace: nothing memoized for it yet."""
    return tb_profiler.load(path, cache=False)


@contextmanager
def counting(*functions):
    """Count the runs of each function's own body (a memoized function's wrapped body, not
    its cache lookups) while the block runs: {function name: calls}."""
    codes = {getattr(f, "__wrapped__", f).__code__: getattr(f, "__qualname__", str(f)) for f in functions}
    counts = {name: 0 for name in codes.values()}

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield counts
    finally:
        sys.setprofile(old)


def walk_routes(t) -> None:
    """What a user's first visit of every whole-trace view asks of one trace."""
    V.overview(t, 1)
    V.operation_pie(t, "Operation", 10)
    V.operation_table(t, "Operation")
    V.operation_table(t, "OperationAndInputShape")
    V.kernel_pie(t, 10)
    V.kernel_table(t, "Kernel")
    V.kernel_tc(t)
    V.kernel_table(t, "KernelNameAndOp")
    V.memory_curve(t, None, None, 500)
    V.memory_stats(t, None, None, None)
    V.module(t)
    V.overview(t, 1)  # a second visit of the Overview


# -- counts: once per trace -------------------------------------------------------------------

def test_the_route_walk_derives_each_shared_intermediate_once():
    t = fresh()
    with counting(shared.valid_times, shared.device_work, shared.compute, shared.durations,
                  shared.name_index, shared.threads, links.host_parent, links.launching_op) as calls:
        walk_routes(t)
        range_stats.range_stats(t, *t.span)  # the trace view's nesting shares the threads
    assert calls == {"valid_times": 1, "device_work": 1, "compute": 1, "durations": 1, "name_index": 1,
                     "threads": 1, "host_parent": 1, "launching_op": 1}


def test_no_analysis_rescans_the_name_column_for_its_distinct_ids():
    """The analyses take the distinct used names from the memoized name index, not from a
    bincount of the whole name column per predicate (map_string_ids / string_id_mask over
    the column)."""
    from tb_profiler.trace import strings

    t = fresh()
    names = t.events["name"]
    seen = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is strings.used_ids.__code__ and frame.f_locals.get("ids") is names:
            f = frame.f_back  # who asks, past map_string_ids (the Trace model's own columns may)
            while f is not None and f.f_code.co_filename == strings.__file__:
                f = f.f_back
            if f is not None and "analysis" in f.f_code.co_filename:
                seen.append(f.f_code.co_name)

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        walk_routes(t)
    finally:
        sys.setprofile(old)
    assert seen == []


def test_the_small_results_are_computed_once_per_trace_and_handed_out_as_copies():
    t = fresh()
    with counting(overview_mod._overview, operators_mod._operators, kernels_mod._kernels) as calls:
        walk_routes(t)
        first = t.overview()
        ops = t.operators("name")
        ker = t.kernels("name")
    # overview once; operators by name and by input shape; kernels by name and by op
    assert calls == {"_overview": 1, "_operators": 2, "_kernels": 2}
    # a caller changing its copy changes nobody else's
    first["steps"].loc[:, "dur_ns"] = -1
    first["summary"]["num_steps"] = -1
    ops.loc[:, "calls"] = -1
    ker.loc[:, "calls"] = -1
    again = t.overview()
    assert (again["steps"]["dur_ns"] > 0).all() and again["summary"]["num_steps"] > 0
    assert (t.operators("name")["calls"] > 0).all()
    assert (t.kernels("name")["calls"] > 0).all()
    rec_copy = V.overview(t, 1)
    rec_copy["steps"][0]["start_ns"] = -12345
    assert V.overview(t, 1)["steps"][0]["start_ns"] != -12345


def test_the_why_analyses_are_kept_per_trace_and_arguments():
    """The Overview's critical path, the idle, launch and queue sections: a second visit
    (or a second request) reads the kept result; other arguments compute again."""
    from tb_profiler.analysis import critical_path, idle, launch_stats, queue

    t = fresh()
    with counting(critical_path.critical_path, idle.idle_time, launch_stats.launch_stats,
                  queue.queue_length) as calls:
        for _ in range(2):
            V.critical_path(t, None)
            V.idle(t, 30_000)
            V.launches(t)
            V.queue(t, 1024)
        V.idle(t, 50_000)
    assert calls == {"critical_path": 1, "idle_time": 2, "launch_stats": 1, "queue_length": 1}
    mine = t.idle()
    mine["gaps"].loc[:, "dur_ns"] = -1
    assert (t.idle()["gaps"]["dur_ns"] >= 0).all()


def test_the_call_tree_finds_its_levels_once_for_all_its_subtree_sums():
    """One schedule (children before parents) serves all the tree's subtree sums. Its
    members come in row order, parents first (the events table is sorted by start,
    outermost first), so the schedule is the members backwards and needs no depth walk;
    only a tree not in that order would walk its depth, once."""
    from tb_profiler.analysis import operators

    t = fresh()
    links.launching_op(t)
    with counting(nesting.depth, operators._children_first, nesting.subtree_sum) as calls:
        call_tree(t)
    assert calls == {"depth": 0, "_children_first": 1, "subtree_sum": 2}  # device and tensor-core totals

    parent = np.array([-1, 0, 0, 1])  # member 3's parent is member 1: row order holds
    assert operators._children_first(parent)[0].tolist() == [3, 2, 1]
    shuffled = np.array([2, -1, 1, 2])  # member 0's parent is member 2, after it: the depth schedule
    with counting(nesting.depth) as calls:
        (order,) = operators._children_first(shuffled)
    assert calls == {"depth": 1}
    assert sorted(order.tolist()) == [0, 2, 3] and order.tolist().index(2) > order.tolist().index(0)


def test_idle_gaps_cut_time_without_np_unique(monkeypatch):
    """np.unique without inverse or counts goes through numpy 2's hash table, an order of
    magnitude slower than a sort on many distinct time points."""
    t = fresh()
    callers = []
    real = np.unique

    def spy(*args, **kwargs):
        callers.append(sys._getframe(1).f_code.co_name)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "unique", spy)
    gaps = rec.idle_gaps(t)
    assert gaps is not None and len(gaps[0])
    assert "idle_gaps" not in callers


def test_memoized_masks_are_read_only():
    t = fresh()
    for arr in (shared.valid_times(t), shared.device_work(t), shared.compute(t), shared.durations(t),
                *shared.name_index(t)):
        with pytest.raises(ValueError):
            arr[:1] = 0


# -- equality: the cheaper ways against plain references -------------------------------------

@pytest.fixture(scope="module", params=TRACES, ids=rel)
def trace(request):
    return fresh(request.param)


def test_shared_masks_equal_their_expressions(trace):
    ev = trace.events
    code, first = shared.threads(trace)
    want = _factorize_reference(ev["pid"], ev["tid"], ev["pid_str"], ev["tid_str"])
    assert np.array_equal(code, want[0]) and np.array_equal(first, want[1])
    ts, dur = ev["ts"], ev["dur"]
    valid = (ts != MISSING_INT) & (dur != MISSING_INT) & (dur >= 0)
    assert np.array_equal(shared.valid_times(trace), valid)
    assert np.array_equal(shared.device_work(trace), role_mask(trace.roles, DEVICE_WORK) & valid)
    assert np.array_equal(shared.compute(trace), (trace.roles == Role.COMPUTE) & valid)
    assert np.array_equal(shared.durations(trace), np.where(dur == MISSING_INT, 0, dur))


def test_name_maps_equal_map_string_ids_and_string_id_mask(trace):
    names = trace.events["name"]
    for fn in (lambda s: s.startswith("aten::"), lambda s: "gemm" in s.lower(), lambda s: len(s) % 3 == 0):
        assert np.array_equal(shared.name_map(trace, fn), map_string_ids(names, trace.strings, fn, bool, False))
    lengths = shared.name_map(trace, len, np.int64, -1)
    assert np.array_equal(lengths, map_string_ids(names, trace.strings, len, np.int64, -1))
    for predicate in (tc_eligible, uses_tensor_cores):
        assert np.array_equal(shared.name_mask(trace, predicate), string_id_mask(names, trace.strings, predicate))


def test_name_maps_over_some_events_equal_the_whole_map_masked(trace):
    """``among``: the marked rows get what the whole map gives them, every other row the
    default, for marks of every density (none, a few rows, a kind, every row)."""
    names = trace.events["name"]
    rng = np.random.default_rng(7)
    marks = [np.zeros(len(names), bool), np.ones(len(names), bool), rng.random(len(names)) < 0.001,
             trace.roles == Role.RUNTIME, trace.events["kind"] == Kind.CPU_OP]
    for among in marks:
        for fn, dtype, default in ((lambda s: s.startswith("aten::"), bool, False), (len, np.int64, -1)):
            whole = map_string_ids(names, trace.strings, fn, dtype, default)
            got = shared.name_map(trace, fn, dtype, default, among=among)
            assert got.dtype == whole.dtype and np.array_equal(got, np.where(among, whole, default))
        for predicate in (tc_eligible, uses_tensor_cores):
            got = shared.name_mask(trace, predicate, among=among)
            assert got.dtype == bool and np.array_equal(got, string_id_mask(names, trace.strings, predicate) & among)


def test_role_and_kind_masks_equal_a_lookup_table(trace):
    """role_mask / kind_mask (comparisons for a few codes, take for more) equal the lookup
    table they replace, for every number of wanted codes."""
    from tb_profiler.trace.categories import KIND_NAMES, kind_mask

    rng = np.random.default_rng(3)
    for codes, n_codes, mask in ((trace.roles, len(Role), role_mask), (trace.events["kind"], len(KIND_NAMES), kind_mask)):
        for k in range(0, 9):
            wanted = rng.choice(n_codes, size=min(k, n_codes), replace=False).tolist()
            lut = np.zeros(n_codes, dtype=bool)
            lut[wanted] = True
            assert np.array_equal(mask(codes, wanted), lut[codes.astype(np.int64)]), (mask.__name__, wanted)


def _old_idle_gaps(trace):
    """recommendations.idle_gaps as it was: the cut points by np.unique."""
    from tb_profiler.analysis.intervals import covered_in, merge_intervals
    from tb_profiler.analysis.steps import steps

    ev = trace.events
    st = steps(trace)
    work = role_mask(trace.roles, DEVICE_WORK) & shared.valid_times(trace)
    if st.empty or not work.any():
        return None
    ms, me = merge_intervals(ev["ts"][work], ev["ts"][work] + ev["dur"][work])
    lo, hi = st["start_ns"].to_numpy(), st["end_ns"].to_numpy()
    cuts = np.unique(np.concatenate([lo, hi, ms, me]))
    seg_s, seg_e = cuts[:-1], cuts[1:]
    idx = np.searchsorted(lo, seg_s, side="right") - 1
    free = ~(covered_in(ms, me, seg_s, seg_e) > 0) & (idx >= 0) & (seg_e <= hi[np.maximum(idx, 0)])
    gs, ge, gi = seg_s[free], seg_e[free], idx[free]
    if len(gs):
        join = np.r_[False, (gs[1:] == ge[:-1]) & (gi[1:] == gi[:-1])]
        first = np.flatnonzero(~join)
        last = np.append(first[1:] - 1, len(gs) - 1)
        gs, ge, gi = gs[first], ge[last], gi[first]
    long = (ge - gs) >= rec.IDLE_GAP_NS
    return gs[long], ge[long], gi[long]


def test_idle_gaps_equal_the_np_unique_version(trace):
    new, old = rec.idle_gaps(trace), _old_idle_gaps(trace)
    assert (new is None) == (old is None)
    if new is not None:
        for a, b in zip(new, old):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def _subtree_reference(values, parent, rows):
    """Each tree member's value plus all its descendants': every member adds its value to
    each of its ancestors, one ancestor level per round (another way than level sums)."""
    total = values.astype(np.int64, copy=True)
    cur, add = parent[rows], values[rows].astype(np.int64)
    while True:
        keep = cur >= 0
        if not keep.any():
            return total
        cur, add = cur[keep], add[keep]
        np.add.at(total, cur, add)
        cur = parent[cur]


def test_call_tree_subtree_sums_equal_a_reference(trace):
    tree = call_tree(trace)
    live = np.flatnonzero(tree.node & ~tree.merged)
    assert np.array_equal(tree.device_total, _subtree_reference(tree.device_self, tree.parent, live))
    assert np.array_equal(tree.tc_total, _subtree_reference(tree.tc_self, tree.parent, live))


def test_nesting_order_equals_lexsort_on_real_host_events(trace):
    ev = trace.events
    host = np.flatnonzero(~links.device_mask(trace) & (ev["kind"] != Kind.TRACE))
    group, _ = factorize(ev["pid"][host], ev["tid"][host], ev["pid_str"][host], ev["tid_str"][host])
    ts, end = ev["ts"][host], ev["ts"][host] + ev["dur"][host]
    assert np.array_equal(nesting.nesting_order(group, ts, -end), np.lexsort((-end, ts, group)))
    rev = np.arange(len(host))[::-1]  # not in time order: the lexsort fallback
    assert np.array_equal(nesting.nesting_order(group[rev], ts[rev], -end[rev]),
                          np.lexsort((-end[rev], ts[rev], group[rev])))


def test_unique_ints_equals_np_unique():
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 1000):
        for hi in (1, 3, 10**15):
            x = rng.integers(-hi, hi, n)
            assert np.array_equal(unique_ints(x), np.unique(x)) and unique_ints(x).dtype == np.unique(x).dtype
    x = np.array([[3, 1], [1, 2]], dtype=np.int32)
    assert np.array_equal(unique_ints(x), np.unique(x)) and unique_ints(x).dtype == np.int32


def _factorize_reference(*keys):
    """keys.factorize the plain way: every key folded in turn, constant ones included, a
    missing value (None, NaN) a value of its own (pandas codes it -1: moved to 0, before the
    others, so it never aliases another key's code)."""
    n = len(keys[0]) if keys else 0
    code = np.zeros(n, dtype=np.int64)
    groups = 1 if n else 0
    for key in keys:
        inv, uniq = pd.factorize(np.asarray(key), sort=False)
        code, combined = pd.factorize(code * (len(uniq) + 1) + inv + 1, sort=False)
        groups = len(combined)
    code = code.astype(np.int64, copy=False)
    top = np.maximum.accumulate(code) if n else code
    first = np.flatnonzero(np.r_[True, top[1:] > top[:-1]]) if n else np.zeros(0, np.int64)
    return code, first[:groups]


def test_factorize_equals_the_fold_of_every_key():
    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.integers(0, 25))
        keys = []
        for _ in range(int(rng.integers(1, 4))):
            kind = int(rng.integers(0, 4))
            if kind == 0:
                keys.append(np.full(n, 7))
            elif kind == 1:
                keys.append(rng.integers(0, 3, n))
            elif kind == 2:  # None is a missing value to pandas (code -1)
                keys.append(np.array([None if v == 0 else f"s{v}" for v in rng.integers(0, 3, n)], dtype=object))
            else:
                v = rng.integers(0, 3, n).astype(float)
                v[v == 0] = np.nan
                keys.append(v)
        got, want = factorize(*keys), _factorize_reference(*keys)
        assert np.array_equal(got[0], want[0]) and got[0].dtype == want[0].dtype
        assert np.array_equal(got[1], want[1])


def test_factorize_never_groups_a_missing_value_with_another_key():
    """(1, None) and (0, "s1") are two groups: pandas codes None -1, and folding 1 * 1 + -1
    gave the same code as 0 * 1 + 0 before missing values had a code of their own."""
    code, first = factorize(np.array([1, 0]), np.array([None, "s1"], dtype=object))
    assert code.tolist() == [0, 1] and first.tolist() == [0, 1]
    code, _ = factorize(np.array([1, 0, 1]), np.array([np.nan, 2.0, np.nan]))
    assert code.tolist() == [0, 1, 0]


def test_factorize_of_real_thread_keys_equals_the_reference(trace):
    ev = trace.events
    cols = [ev[c] for c in ("pid", "tid", "pid_str", "tid_str")]
    got, want = factorize(*cols), _factorize_reference(*cols)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_nesting_order_equals_lexsort_on_random_events():
    rng = np.random.default_rng(3)
    big = np.iinfo(np.int64).min
    for _ in range(500):
        n = int(rng.integers(0, 40))
        g, s, e = (rng.integers(0, k, n).astype(np.int64) for k in (3, 5, 5))
        if rng.random() < 0.6:  # in time order, longest first, as a trace's events
            o = np.lexsort((-e, s))
            g, s, e = g[o], s[o], e[o]
        if n and rng.random() < 0.2:
            e[int(rng.integers(0, n))] = big  # -big wraps: the order must still be lexsort's
        assert np.array_equal(nesting.nesting_order(g, s, -e), np.lexsort((-e, s, g)))


def test_subtree_sum_with_a_shared_schedule_equals_one_without():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        parent = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)], dtype=np.int64)
        perm = rng.permutation(n)  # any order of nodes
        inv = np.empty(n, np.int64)
        inv[perm] = np.arange(n)
        parent = np.where(parent[perm] >= 0, inv[np.maximum(parent[perm], 0)], -1)
        chunks = nesting.level_chunks(parent)
        for _ in range(3):
            values = rng.integers(0, 1000, n)
            want = _subtree_reference(values, parent, np.arange(n))
            assert np.array_equal(nesting.subtree_sum(values, parent, chunks=chunks), want)
            assert np.array_equal(nesting.subtree_sum(values, parent), want)
