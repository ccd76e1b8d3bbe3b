"""Copy bandwidth from Kineto's own ``memory bandwidth (GB/s)`` arg (issue 17).

Kineto (libkineto ``CuptiActivity.h`` ``addBandwidthTypedMetadata``; the rocprof and
XPUPTI activities alike) writes ``bytes / duration`` with the duration in exact ns on
every memcpy/memset it records, before the trace rounds ``dur`` to us (whole us in
PyTorch <= 1.13 era traces).  ``analysis.memcpy`` takes that figure as the copy's GB/s,
and bytes / figure as its exact time in the per-direction sums; a copy without it keeps
bytes / dur.

The fixture's copies are those of HTA's A100 trace
``tests/data/negative_queue_length_values_check/rank0.json.gz``
(facebookresearch/HolisticTraceAnalysis), byte for byte in their args: ``"dur": 12`` for a
147456 B copy whose arg says 11.405940594059405 GB/s (12.928 us: bytes / dur reads 7.7 %
fast), ``"dur": 10`` for 13.963636363636363 GB/s (10.56 us), ``"dur": 3969`` for 45842432 B
at 11.547825841625336 GB/s (3969.789 us), ``"dur": 219`` for 2742804 B at 12.489090048083929
GB/s (219.616 us); over that trace's 1390 copies bytes / dur had an 8.8 % median error.
Added by hand: a 4 B copy that lasted 640 ns, written ``"dur": 0`` (no bandwidth from the
trace's own numbers at all), and a copy from an older trace without the arg.
"""
from __future__ import annotations

import numpy as np
import pytest
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.memcpy import memcpy_bandwidth

T0 = 1_683_564_901_977_193
H2D = "Memcpy HtoD (Pinned -> Device)"
# (ts offset us, dur us, bytes, "memory bandwidth (GB/s)" or None, exact ns)
COPIES = [(0, 12, 147456, 11.405940594059405, 12_928), (38, 10, 147456, 13.963636363636363, 10_560),
          (84, 3969, 45842432, 11.547825841625336, 3_969_789), (4059, 219, 2742804, 12.489090048083929, 219_616),
          (4300, 0, 4, 0.00625, 640), (4400, 100, 1_000_000, None, 100_000)]


def _copy(i, ts, dur, nbytes, gbps):
    corr = 868739 + 26 * i
    args = {"External id": corr, "device": 0, "context": 1, "stream": 25, "correlation": corr, "bytes": nbytes}
    if gbps is not None:
        args["memory bandwidth (GB/s)"] = gbps
    return {"ph": "X", "cat": "gpu_memcpy", "name": H2D, "pid": 0, "tid": 25, "ts": T0 + ts, "dur": dur, "args": args}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    ev = [_copy(i, *c[:4]) for i, c in enumerate(COPIES)]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8}],
           "traceEvents": ev}
    t = tb_profiler.load(write_trace(tmp_path_factory.mktemp("bw") / "bw.pt.trace.json", doc), cache=False)
    return memcpy_bandwidth(t, bins=4)


def test_each_copy_takes_kinetos_figure(out):
    c = out["copies"]
    assert c["dur_ns"].tolist() == [d * 1000 for _, d, *_ in COPIES]  # durations stay as written
    assert c["bytes"].tolist() == [b for _, _, b, *_ in COPIES]
    want = [g if g is not None else b / (d * 1000) for _, d, b, g, _ in COPIES]
    np.testing.assert_array_equal(c["gbps"].to_numpy(), want)
    # the figure is bytes over the exact duration (what Kineto measured)
    np.testing.assert_allclose(c["bytes"] / c["gbps"], [x for *_, x in COPIES], rtol=1e-12)
    # what bytes / dur said before: 7.7 % and 5.6 % fast on the small copies, nothing for the 0 us one
    np.testing.assert_allclose(147456 / 12_000 / c["gbps"].iloc[0], 12.928 / 12)
    assert "5 of 6 copies carry Kineto's 'memory bandwidth (GB/s)'" in out["notes"][0] and len(out["notes"]) == 1


def test_direction_sums_use_the_exact_time(out):
    (row,) = out["directions"].to_dict("records")
    exact = sum(x for *_, x in COPIES)
    assert row["copies"] == 6 and row["bytes"] == sum(b for _, _, b, *_ in COPIES)
    assert row["time_ns"] == pytest.approx(exact, rel=1e-12)
    assert row["gbps"] == pytest.approx(row["bytes"] / exact, rel=1e-12)
    assert row["gbps_min"] == 0.00625 and row["gbps_max"] == 13.963636363636363


def test_one_copy_alone_reads_the_same_in_both_tables(tmp_path):
    t = tb_profiler.load(write_trace(tmp_path / "one.pt.trace.json", {"traceEvents": [_copy(0, *COPIES[0][:4])]}),
                         cache=False)
    out = memcpy_bandwidth(t)
    assert out["directions"]["gbps"].iloc[0] == pytest.approx(out["copies"]["gbps"].iloc[0], rel=1e-12)
    assert out["directions"]["time_ns"].iloc[0] == pytest.approx(12_928, rel=1e-12)


def test_over_time_keeps_the_written_durations(out):
    """The bandwidth over time spreads each copy over its span on the timeline (the
    written ts and dur), so the bins still add up to the bytes moved."""
    edges = np.array(out["over_time"]["edges"], dtype=np.int64)  # ns since the epoch: int64, not float
    assert edges[0] == T0 * 1000 and edges[-1] == (T0 + 4500) * 1000
    moved = np.sum(np.array(out["over_time"]["H2D"]) * np.diff(edges))
    assert moved == pytest.approx(sum(b for _, _, b, *_ in COPIES), rel=1e-9)
