"""Issue 11, "what a newcomer met": the analysis fixes, each pinned by a test that fails
without it.

- the DataLoader advice does not tell a loader that already runs worker processes to add
  them (it says what to try for that case instead);
- the host_sync advice counts aten::item, blocking copies and synchronizing runtime calls
  with their real host-side time, each synchronization once;
- the "average" breakdown row's parts add up exactly to its total.
"""
from __future__ import annotations

import numpy as np
import pytest
from datafiles import V100_RUN_W4, V100_TRACE, V100_W4_TRACE, real_traces, rel

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.overview import overview
from tb_profiler.analysis.recommendations import recommendations
from tb_profiler.trace import load
from test_analysis_overview import make, op  # the overview tests' trace builders

US = 1000  # ns per us




def by_id(trace):
    return {r["id"]: r for r in recommendations(trace)}


# -- 3. the average row adds up ------------------------------------------------------------------

@pytest.mark.parametrize("path", real_traces(), ids=rel)
def test_average_row_parts_sum_to_its_total_on_real_traces(path):
    frame = bd.breakdown(load(path, cache=False))
    assert len(frame) > 1
    parts = frame[bd.NS_COLUMNS].to_numpy(np.int64)
    total = frame["total_ns"].to_numpy(np.int64)
    assert (parts.sum(axis=1) == total).all()  # per-step rows and the average row
    steps = frame.iloc[:-1]
    n = len(steps)
    # The total is the mean step rounded; each part its exact mean rounded down or up.
    assert total[-1] == int(np.rint(steps["total_ns"].mean()))
    for c in bd.NS_COLUMNS:
        s = int(steps[c].sum())
        assert s // n <= int(frame[c].iloc[-1]) <= -(-s // n), c


def test_average_row_gives_the_rounding_remainder_to_the_largest_remainders(tmp_path):
    """Three steps of 100 us: kernel 10/10/11 ns-ish parts chosen so every mean has a third:
    rounding each part alone would give a row that misses its total by one ns."""
    ev = []
    # Per step (ns): kernel k, cpu_exec c, other = rest. Means: kernel 10.33, cpu 20.33,
    # other 69.33 -> rounded alone 10 + 20 + 69 = 99 of the total 100.
    for i, (k, c) in enumerate([(10, 20), (10, 21), (11, 20)]):
        t0 = 1000 * i
        ev += [op(f"ProfilerStep#{i}", t0 / 1000, 0.1, cat="user_annotation"),
               {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t0 / 1000, "dur": k / 1000,
                "args": {"device": 0, "stream": 7}},
               op("aten::add", (t0 + 50) / 1000, c / 1000)]
    frame = bd.breakdown(make(tmp_path, ev))
    steps = frame.iloc[:-1]
    assert steps["total_ns"].tolist() == [100, 100, 100]
    avg = frame.iloc[-1]
    assert int(avg["total_ns"]) == 100
    assert sum(int(avg[c]) for c in bd.NS_COLUMNS) == 100
    # Every remainder is 1/3: the one short ns goes to the highest-priority part (kernel).
    assert (int(avg["kernel_ns"]), int(avg["cpu_exec_ns"]), int(avg["other_ns"])) == (11, 20, 69)
    # The overview's headline numbers are that row.
    ov = overview(make(tmp_path, ev, name="u.pt.trace.json"))
    assert sum(ov["summary"]["average_ns"].values()) == ov["summary"]["step_time_avg_ns"] == 100


# -- 1. DataLoader advice for a loader with workers ---------------------------------------------

def _dataloader_trace(tmp_path, iterator, name="dl.pt.trace.json"):
    """Two 100 us steps; the DataLoader's __next__ takes 30 us of each."""
    ev = []
    for i in range(2):
        t0 = 100 * i
        ev += [op(f"ProfilerStep#{i}", t0, 100, cat="user_annotation"),
               op(f"enumerate(DataLoader)#{iterator}.__next__", t0 + 1, 30, cat="user_annotation"),
               op("aten::mm", t0 + 40, 50)]
    return make(tmp_path, ev, name=name)


def test_dataloader_with_workers_is_not_told_to_add_workers(tmp_path):
    r = by_id(_dataloader_trace(tmp_path, "_MultiProcessingDataLoaderIter"))["dataloader"]
    assert "num_workers on the DataLoader" not in r["text"]
    assert "already loads batches in worker processes" in r["text"]
    assert "more workers" in r["text"] and "prefetch_factor" in r["text"] and "pin_memory" in r["text"]
    assert "DataLoader takes 30.0% of the average step (30.0 us of 100.0 us)" in r["text"]
    assert r["evidence"]["multiprocess_workers"] is True and r["evidence"]["dataloader_ns"] == 30 * US


def test_dataloader_without_workers_is_told_to_add_them(tmp_path):
    r = by_id(_dataloader_trace(tmp_path, "_SingleProcessDataLoaderIter"))["dataloader"]
    assert "Set num_workers on the DataLoader" in r["text"]
    assert r["evidence"]["multiprocess_workers"] is False


def test_dataloader_beside_a_single_process_loader_still_gets_the_num_workers_advice(tmp_path):
    ev = [op("ProfilerStep#0", 0, 100, cat="user_annotation"),
          op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 1, 10, cat="user_annotation"),
          op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 20, 20, cat="user_annotation")]
    r = by_id(make(tmp_path, ev))["dataloader"]
    assert "Set num_workers on the DataLoader" in r["text"] and r["evidence"]["multiprocess_workers"] is False


def test_dataloader_advice_on_the_real_v100_runs():
    """num_workers=0: told to set num_workers; num_workers=4: its DataLoader takes under 5%
    of the step, no DataLoader advice at all; both loaders are told apart by name."""
    from tb_profiler.analysis.recommendations import _dataloader_workers

    r0 = by_id(load(V100_TRACE, cache=False))["dataloader"]
    assert "Set num_workers on the DataLoader" in r0["text"] and r0["evidence"]["multiprocess_workers"] is False
    assert V100_W4_TRACE.parent == V100_RUN_W4
    w4 = load(V100_W4_TRACE, cache=False)
    assert _dataloader_workers(w4) is True
    assert "dataloader" not in by_id(w4)


def test_dataloader_advice_on_the_torch_sample_runs(sample_traces):
    """The CPU sample runs: cnn_dataloader_2workers loads in 2 worker processes, cnn_dataloader_0workers in the
    main one; where the DataLoader rule fires (CPU timings vary), neither is told the
    other's advice."""
    from tb_profiler.analysis.recommendations import _dataloader_workers

    runs = {"cnn_dataloader_0workers": False, "cnn_dataloader_2workers": True}
    checked = 0
    for path in sample_traces:
        if path.parent.name not in runs:
            continue
        want = runs[path.parent.name]
        t = load(path, cache=False)
        assert _dataloader_workers(t) is want, path
        checked += 1
        r = by_id(t).get("dataloader")
        if r is not None:
            assert r["evidence"]["multiprocess_workers"] is want
            assert ("Set num_workers on the DataLoader" in r["text"]) is not want
            assert ("already loads batches in worker processes" in r["text"]) is want
    assert checked == 4


# -- 2. host_sync counts item, .cpu() and blocking copies with their real cost -------------------

def test_host_sync_on_the_real_v100_trace_counts_the_blocking_copies_with_their_time():
    """Each step of the V100 run copies its batch to the GPU with aten::to > aten::copy_ >
    cudaMemcpyAsync (from pageable memory, ~2 ms) + cudaStreamSynchronize: the host waits
    the whole copy, not only the 85 us of the stream sync. Counted once per aten::to."""
    t = load(V100_TRACE, cache=False)
    e = by_id(t)["host_sync"]["evidence"]
    ev = t.events
    names = t.str(ev["name"])
    from tb_profiler.analysis.links import host_parent
    from tb_profiler.analysis.steps import step_of

    parent = host_parent(t)
    so = step_of(t)
    tos, sync_ns = set(), 0
    for i in np.flatnonzero((names == "cudaStreamSynchronize") & (so >= 0)):
        j = i
        while parent[j] >= 0 and names[parent[j]] in ("aten::copy_", "aten::to"):
            j = parent[j]
        assert names[j] == "aten::to"
        tos.add(int(j))
    sync_ns = sum(int(ev["dur"][j]) for j in tos)
    assert len(tos) == 12 and e["names"] == {"aten::to": 12} and e["syncs"] == 12 and e["per_step"] == 2.0
    assert e["sync_calls"] == 12 and e["sync_ops"] == 12
    assert e["sync_ns"] == sync_ns
    stream_syncs = int(ev["dur"][(names == "cudaStreamSynchronize") & (so >= 0)].sum())
    assert sync_ns > 20 * stream_syncs  # the copies, not only the syncs after them
    assert "2.2 ms per step" in by_id(t)["host_sync"]["text"]


SYNC_NAMES = {  # backend: (async copy, stream sync, device sync)
    "CUDA": ("cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize"),
    "ROCm": ("hipMemcpyAsync", "hipStreamSynchronize", "hipDeviceSynchronize"),
    "XPU": ("zeCommandListAppendMemoryCopy", "zeCommandListHostSynchronize", "urQueueFinish"),
    "MTIA": ("mtiaMemcpyAsync", "mtiaStreamSynchronize", "mtiaDeviceSynchronize"),
}


def _sync_trace(tmp_path, backend):
    """kineto_fixtures' 3-step trace of ``backend`` and, per step (us from its start):
    - 620 aten::item (40) > aten::_local_scalar_dense (38) > async copy (6, a DtoH into
      pageable memory) + stream sync (20): one sync of 40 us;
    - 700 aten::to (50) > aten::_to_copy (48) > aten::copy_ (46) > async copy (5) + stream
      sync (30), a DtoH (.cpu()): one sync of 50 us;
    - 900 device sync (15) on its own: one sync of 15 us;
    - 960 aten::to (10) > aten::copy_ (8) > async copy (3) of a DtoH into pinned memory
      with no sync (non_blocking=True): not one.
    So 3 syncs and 105 us per step; 2 stream syncs + 1 device sync are sync calls."""
    from kineto_fixtures import (
        BACKENDS,
        DEVICE_PID,
        HOST_PID,
        HOST_TID,
        STEP_US,
        STEPS,
        T0_US,
        device_trace,
    )

    b = BACKENDS[backend]
    copy, ssync, dsync = SYNC_NAMES[backend]
    doc = device_trace(backend)

    def host(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts, "dur": dur,
                "args": args}

    def memcpy(name, ts, dur, corr):
        args = {"stream": 7, "correlation": corr, "bytes": 4}
        if b.device_arg:
            args["device"] = DEVICE_PID
        return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": DEVICE_PID, "tid": 7, "ts": ts, "dur": dur,
                "args": args}

    rt = b.runtime_cat
    for k in range(STEPS):
        t = T0_US + k * STEP_US
        c = 5000 + 10 * k
        doc["traceEvents"] += [
            host("cpu_op", "aten::item", t + 620, 40), host("cpu_op", "aten::_local_scalar_dense", t + 621, 38),
            host(rt, copy, t + 622, 6, correlation=c), memcpy("Memcpy DtoH (Device -> Pageable)", t + 851, 1, c),
            host(rt, ssync, t + 630, 20, correlation=c + 1),
            host("cpu_op", "aten::to", t + 700, 50), host("cpu_op", "aten::_to_copy", t + 701, 48),
            host("cpu_op", "aten::copy_", t + 702, 46), host(rt, copy, t + 705, 5, correlation=c + 2),
            memcpy("Memcpy DtoH (Device -> Pageable)", t + 853, 1, c + 2),
            host(rt, ssync, t + 712, 30, correlation=c + 3),
            host(rt, dsync, t + 900, 15, correlation=c + 4),
            host("cpu_op", "aten::to", t + 960, 10), host("cpu_op", "aten::copy_", t + 961, 8),
            host(rt, copy, t + 962, 3, correlation=c + 5), memcpy("Memcpy DtoH (Device -> Pinned)", t + 970, 1, c + 5),
        ]
    from kineto_fixtures import write_trace
    return load(write_trace(tmp_path / f"{backend}.pt.trace.json", doc), cache=False)


@pytest.mark.parametrize("backend", sorted(SYNC_NAMES))
def test_host_sync_counts_item_cpu_copies_and_sync_calls_once_with_their_time(tmp_path, backend):
    t = _sync_trace(tmp_path, backend)
    r = by_id(t)["host_sync"]
    e = r["evidence"]
    dsync = SYNC_NAMES[backend][2]
    assert e["names"] == {"aten::item": 3, "aten::to": 3, dsync: 3}
    assert (e["syncs"], e["sync_ops"], e["sync_calls"]) == (9, 6, 9)
    assert e["per_step"] == 3.0 and e["sync_ns"] == 3 * 105 * US
    assert e["share_pct"] == pytest.approx(10.5) and r["severity"] == "warning"
    assert "3.0 times per step" in r["text"] and "105.0 us per step (10.5% of the step)" in r["text"]


def test_host_sync_without_the_operators_counts_the_calls(tmp_path):
    """A device sync record with no call in the trace stands for it; a call with a record
    counts once; a bare cudaStreamSynchronize_v3020 (versioned name) counts."""
    from tb_profiler.analysis.recommendations import host_syncs

    ev = [op("ProfilerStep#0", 0, 1000, cat="user_annotation"),
          op("cudaLaunchKernel", 10, 5, cat="cuda_runtime", correlation=1),
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 100,
           "args": {"device": 0, "stream": 7, "correlation": 1}},
          op("cudaStreamSynchronize_v3020", 200, 40, cat="cuda_runtime", correlation=2),
          op("cudaEventSynchronize", 300, 25, cat="cuda_runtime", correlation=3),
          {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 300, "dur": 25,
           "args": {"device": 0, "stream": 7, "correlation": 3}}]
    t = make(tmp_path, ev, deviceProperties=[{"id": 0, "name": "V100", "totalGlobalMem": 1 << 34}])
    e = by_id(t)["host_sync"]["evidence"]
    assert e["names"] == {"cudaStreamSynchronize_v3020": 1, "cudaEventSynchronize": 1}
    assert e["sync_ns"] == 65 * US and e["syncs"] == 2
    assert int(host_syncs(t)["counted"].sum()) == 2
