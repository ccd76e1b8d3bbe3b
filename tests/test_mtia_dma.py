"""MTIA DMA requests are memory copies, not kernels (issue 17).

MTIA's command processor records its DMA transfers as ``mtia_ccp_events`` named
``dma_request``, beside the kernels it runs under the same category; their args say the
direction and the size.  ``trace.roles`` makes them copies (Role.MEMCPY), by category and
name (``roles.NAMED_COPIES``), so the step breakdown's Kernel share, the Kernel view and
the copy-bandwidth view (``analysis.memcpy``) all see copies.

The fixture follows HTA's MTIA test traces (facebookresearch/HolisticTraceAnalysis,
``tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz`` and
``tests/data/mtia_inference_trace/mtia_inference_rank_0.json.gz``), event for event:
the device row's pid is the device id (17, named "MTIA 17", deviceProperties
``ARTEMIS``), a DMA request is ``{"cat": "mtia_ccp_events", "name": "dma_request", "args":
{"correlation", "stream", "direction": "HOST_TO_DEVICE" | "DEVICE_TO_HOST", "size",
"k_work_ptr", "packet_ptr", "sqid"}}`` launched by an ``mtia_runtime`` call
``enqueueCommand memcpyHtoDAsync`` (``"mem size": "N bytes"``) that one copy split into
several requests sharing its correlation; some requests carry neither correlation nor
stream (mtia_rank_0's first ones).  Kernels are ``mtia_ccp_events`` like ``fc-dtype_Float``
launched by ``runFunction - job_prep_and_submit_for_execution``.  On HTA's
mtia_rank_0 the Kernel share of the step fell from 57.8 % to 54.8 % with this rule
(``tb-profiler summary``); that trace is not shipped, so the figures here are computed by
hand from the fixture.

Per 1000 us step: H2D copy of 1 MiB as two requests [+100, +140) 786432 B and [+140, +160)
262144 B; kernel [+300, +700); D2H request [+750, +800) 16384 B; an unlaunched D2H request
[+850, +860) 16 B.  Kernel 400 us (40 %), copies 120 us (12 %); before the rule, 520 us
(52 %) of "kernel".
"""
from __future__ import annotations

import numpy as np
import pytest
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.breakdown import average
from tb_profiler.analysis.memcpy import copy_direction, memcpy_bandwidth
from tb_profiler.analysis.queue import queue_series
from tb_profiler.trace.roles import NAMED_COPIES, Role, role_column

HOST, TID, DEV = 865, 1828, 17
T0, STEP, STEPS = 701_805_000_000, 1000, 3
H2D_PARTS = [(100, 40, 786432), (140, 20, 262144)]
D2H = (750, 50, 16384)
LOOSE = (850, 10, 16)
KERNEL = (300, 400)


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(T0 + ts, 3), "dur": dur,
            "args": args}


def _dma(ts, dur, size, direction, corr=None, stream=101, packet=4, **extra):
    args = {"stream": stream, "direction": direction, "size": size, "k_work_ptr": 3221934088 + ts,
            "packet_ptr": packet, "sqid": packet, **extra}
    if corr is not None:
        args = {"correlation": corr, **args}
    if stream is None:
        del args["stream"]
    return _x("mtia_ccp_events", "dma_request", DEV, 3536 if stream else 801, ts, dur, **args)


def mtia_trace(steps: int = STEPS) -> dict:
    ev = [{"ph": "M", "name": "process_name", "pid": DEV, "tid": 0, "args": {"name": f"MTIA {DEV}"}},
          {"ph": "M", "name": "thread_name", "pid": DEV, "tid": 3536, "args": {"name": "Stream 101"}},
          {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python3"}}]
    for k in range(steps):
        t = k * STEP
        corr = 20_200_000 + 10 * k
        ev += [_x("user_annotation", f"ProfilerStep#{k}", HOST, TID, t, STEP),
               _x("cpu_op", "aten::_to_copy", HOST, TID, t + 10, 50, **{"External id": corr}),
               _x("mtia_runtime", "enqueueCommand memcpyHtoDAsync", HOST, TID, t + 20, 0.451, correlation=corr,
                  device=DEV, stream_id=101, **{"mem size": "1048576 bytes"}),
               *[_dma(t + a, d, size, "HOST_TO_DEVICE", corr) for a, d, size in H2D_PARTS],
               _x("cpu_op", "aten::addmm", HOST, TID, t + 200, 60, **{"External id": corr + 1}),
               _x("mtia_runtime", "runFunction - job_prep_and_submit_for_execution", HOST, TID, t + 210, 30,
                  correlation=corr + 1, device=DEV, stream_id=101),
               _x("mtia_ccp_events", "fc-dtype_Float", DEV, 3536, t + KERNEL[0], KERNEL[1], correlation=corr + 1,
                  stream=101, column="0", row="0", packet_ptr=4),
               _x("cpu_op", "aten::_to_copy", HOST, TID, t + 720, 40, **{"External id": corr + 2}),
               _x("mtia_runtime", "enqueueCommand memcpyDtoHAsync", HOST, TID, t + 730, 0.571, correlation=corr + 2,
                  device=DEV, stream_id=101, **{"mem size": "16384 bytes"}),
               _dma(t + D2H[0], D2H[1], D2H[2], "DEVICE_TO_HOST", corr + 2),
               _dma(t + LOOSE[0], LOOSE[1], LOOSE[2], "DEVICE_TO_HOST", stream=None, packet=225)]
    return {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "ARTEMIS", "runtimeMajorVersion": 1,
                                                      "runtimeMinorVersion": 30}],
            "displayTimeUnit": "ms", "traceEvents": ev}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = write_trace(tmp_path_factory.mktemp("mtia") / "mtia.pt.trace.json.gz", mtia_trace())
    return tb_profiler.load(path, cache=False)


def _rows(t, name):
    return np.flatnonzero(t.str(t.events["name"]) == name)


def test_dma_requests_are_copies(trace):
    dma, kernel = _rows(trace, "dma_request"), _rows(trace, "fc-dtype_Float")
    assert len(dma) == 4 * STEPS and len(kernel) == STEPS
    assert (trace.roles[dma] == Role.MEMCPY).all() and (trace.roles[kernel] == Role.COMPUTE).all()
    assert trace.role_counts[Role.COMPUTE] == STEPS and trace.role_counts[Role.MEMCPY] == 4 * STEPS
    # by kind alone (the rule before issue 17) every mtia_ccp_events was compute
    assert (role_column(trace.events["kind"])[dma] == Role.COMPUTE).all()
    assert trace.device_kinds[:1] == ("MTIA",) and trace.has_device_work


def test_kernel_share_counts_only_kernels(trace):
    avg = average(trace)
    assert avg["kernel"] == KERNEL[1] * 1000
    assert avg["memcpy"] == (sum(d for _, d, _ in H2D_PARTS) + D2H[1] + LOOSE[1]) * 1000 == 120_000
    assert avg["total"] == STEP * 1000
    ov = trace.overview()
    assert ov["summary"]["average_pct"]["kernel"] == pytest.approx(40.0)
    assert ov["summary"]["average_pct"]["memcpy"] == pytest.approx(12.0)


def test_kernel_view_lists_no_dma(trace):
    k = trace.kernels("name")
    assert list(k["name"]) == ["fc-dtype_Float"]
    assert int(k["calls"].iloc[0]) == STEPS and int(k["total_ns"].iloc[0]) == STEPS * KERNEL[1] * 1000


def test_copy_bandwidth_view_has_the_dma(trace):
    out = memcpy_bandwidth(trace, bins=10)
    c = out["copies"]
    assert len(c) == 4 * STEPS and out["notes"] == []
    first = c.iloc[:4]
    assert first["direction"].tolist() == ["H2D", "H2D", "D2H", "D2H"]
    assert first["bytes"].tolist() == [786432, 262144, 16384, 16]
    assert first["dur_ns"].tolist() == [40_000, 20_000, 50_000, 10_000]
    np.testing.assert_allclose(first["gbps"], [786432 / 40_000, 262144 / 20_000, 16384 / 50_000, 16 / 10_000])
    assert set(c["stream"]) == {101, 801}  # no stream arg: the row's tid, as Kineto writes device rows
    assert c["operator"].tolist()[:3] == ["aten::_to_copy"] * 3 and c["operator"].isna().iloc[3]  # not launched
    d = out["directions"].set_index("direction")
    assert int(d.loc["H2D", "copies"]) == 2 * STEPS and int(d.loc["H2D", "bytes"]) == STEPS * (1 << 20)
    assert d.loc["H2D", "gbps"] == pytest.approx((1 << 20) / 60_000)
    assert int(d.loc["D2H", "bytes"]) == STEPS * (16384 + 16)
    assert sorted(k for k in out["over_time"] if k != "edges") == ["D2H", "H2D"]


def test_one_copy_split_into_requests_is_one_queue_entry(trace):
    t, length = queue_series(trace)[(DEV, 101)]
    us = [(int(a) // 1000 - T0, int(n)) for a, n in zip(t, length)][:5]
    # the H2D enqueue (+20) stays queued until its last request ends (+160); the kernel's call
    # joins at +210 and leaves at +700; the D2H at +730 until +800
    assert us == [(20, 1), (160, 0), (210, 1), (700, 0), (730, 1)]


def test_direction_words_as_mtia_writes_them():
    assert copy_direction("HOST_TO_DEVICE")[0] == "H2D"
    assert copy_direction("DEVICE_TO_HOST")[0] == "D2H"
    assert copy_direction("DEVICE_TO_DEVICE")[0] == "D2D"
    assert copy_direction("SIDEWAYS")[0] == "other"


def test_the_rule_is_category_and_name(tmp_path):
    """dma_request under another category, and other names under mtia_ccp_events, keep
    their role; a request without a size is a copy of unknown bytes."""
    ev = [_x("kernel", "dma_request", 0, 7, 0, 10, device=0, stream=7),
          _x("mtia_ccp_events", "dma_request_done", DEV, 3536, 20, 10, stream=101),
          _dma(40, 10, 1024, "HOST_TO_DEVICE"),
          {**_dma(60, 10, 0, "HOST_TO_DEVICE"), "args": {"stream": 101, "direction": "HOST_TO_DEVICE"}}]
    t = tb_profiler.load(write_trace(tmp_path / "names.pt.trace.json", {"traceEvents": ev}), cache=False)
    assert t.roles.tolist() == [Role.COMPUTE, Role.COMPUTE, Role.MEMCPY, Role.MEMCPY]
    out = memcpy_bandwidth(t)
    assert out["copies"]["bytes"].tolist() == [1024, -1] and np.isnan(out["copies"]["gbps"].iloc[1])
    assert "1 of 2 copies have no size" in out["notes"][0]
    assert [(r.kind.label, r.name) for r in NAMED_COPIES] == [("mtia_ccp_events", "dma_request")]
