"""Idle time per device and stream (analysis.idle): exact ns on handmade Kineto traces.

Each trace is small enough to classify every idle stretch by hand (times below in us
after T0, as written in the trace; expected figures in ns): a stretch [A, B) ended by
work whose launch call ran from c to r was issued at i = r when the work started after
the call returned (B >= r), else at i = c; it is host wait on [A, i) and, from max(A, i),
kernel wait when that in-flight part is shorter than the threshold, else other.
(Issue 17 moved i from c to r for work that starts after its call: the host is still
launching while inside the call; so the 5 us launch calls below count as host wait, where
they counted as in flight before. tests/test_idle_launch_wait.py tests that rule itself.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from datafiles import V100_TRACE
from kineto_fixtures import BACKENDS, STEPS, device_trace, write_trace

import tb_profiler
from tb_profiler.analysis.idle import GAP_COLUMNS, IDLE_COLUMNS, idle_time
from tb_profiler.analysis.steps import steps
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

T0 = 1_000_000  # us
T0_NS = T0 * 1000
HOST = 4242
SUMS = ["window_ns", "busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns", "gaps"]


class _Builder:
    """Kineto events of one backend: steps, launch calls and the device work they launch."""

    def __init__(self, backend: str = "CUDA"):
        self.b = BACKENDS[backend]
        self.backend = backend
        self.events: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python3"}}]
        self.corr = 100

    def _x(self, cat, name, pid, tid, ts, dur, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts,
                            "dur": dur, **({"args": args} if args else {})})

    def step(self, n: int, start: float, dur: float):
        self._x("user_annotation", f"ProfilerStep#{n}", HOST, HOST, start, dur)

    def cpu_op(self, start: float, dur: float):
        self._x("cpu_op", "aten::mm", HOST, HOST, start, dur)

    def work(self, call: float | None, runs: list[tuple[float, float]], *, stream: int = 7, device: int = 0,
             copy: bool = False, call_name: str | None = None, call_dur: float = 5):
        """A launch call at ``call`` (None: no call in the trace) and the device work it
        launched, [(start, dur)] (several: a graph launch)."""
        self.corr += 1
        b = self.b
        if call is not None:
            name = call_name or (b.copy_call if copy else b.launch)
            self._x(b.runtime_cat, name, HOST, HOST, call, call_dur, correlation=self.corr)
        for start, dur in runs:
            args = {"stream": stream, "correlation": self.corr}
            if b.device_arg:
                args["device"] = device
            cat, name = (b.copy_cat, "Memcpy DtoH (Device -> Pageable)") if copy else (b.compute_cat, b.kernel)
            self._x(cat, name, device, stream, start, dur, **args)

    def load(self, tmp_path):
        doc = {"schemaVersion": 1, "traceEvents": self.events,
               "deviceProperties": [{"id": 0, "name": self.b.device_name}]}
        return tb_profiler.load(write_trace(tmp_path / f"{self.backend}_idle.pt.trace.json", doc), cache=False)


def _row(frame: pd.DataFrame, device=0, stream=-1, step=-1) -> dict:
    sel = frame[(frame.device == device) & (frame.stream == stream) & (frame.step == step)]
    assert len(sel) == 1, sel
    return {k: int(v) for k, v in sel.iloc[0][IDLE_COLUMNS].items()}


def _gaps(result, device=0, stream=-1) -> list[tuple]:
    g = result["gaps"]
    g = g[(g.device == device) & (g.stream == stream)]
    return [(int(s) - T0_NS, int(e) - T0_NS, k, int(st)) for s, e, k, st in
            zip(g.start_ns, g.end_ns, g.kind, g.step)]


def _check_invariants(result):
    """busy + idle = window, kinds sum to idle, totals = sum of steps, gaps frame = table."""
    gaps = result["gaps"]
    assert list(gaps.columns) == GAP_COLUMNS
    assert (gaps.dur_ns == gaps.end_ns - gaps.start_ns).all() and (gaps.dur_ns > 0).all()
    assert (np.diff(gaps.start_ns.to_numpy()) >= 0).all()
    for frame in (result["devices"], result["streams"]):
        assert list(frame.columns) == IDLE_COLUMNS
        assert all(frame[c].dtype == np.int64 for c in IDLE_COLUMNS)
        assert (frame.busy_ns + frame.idle_ns == frame.window_ns).all()
        assert (frame.host_wait_ns + frame.kernel_wait_ns + frame.other_ns == frame.idle_ns).all()
        assert (frame.busy_ns >= 0).all() and (frame.idle_ns >= 0).all()
        per_step = frame[frame.step != -1].groupby(["device", "stream"])[SUMS].sum()
        totals = frame[frame.step == -1].set_index(["device", "stream"])[SUMS]
        pd.testing.assert_frame_equal(per_step.sort_index(), totals.sort_index(), check_names=False)
        # every figure of the table is the sum of its gaps
        steps_only = frame[frame.step != -1].set_index(["device", "stream", "step"])
        by_kind = gaps.pivot_table(index=["device", "stream", "step"], columns="kind", values="dur_ns",
                                   aggfunc="sum", fill_value=0)
        for kind in ("host_wait", "kernel_wait", "other"):
            col = by_kind[kind] if kind in by_kind else pd.Series(0, index=by_kind.index)
            got = col.reindex(steps_only.index, fill_value=0)
            assert (got.to_numpy() == steps_only[f"{kind}_ns"].to_numpy()).all(), kind
        # device-level and stream-level gaps of one timeline never overlap
        for _, g in gaps.groupby(["device", "stream"]):
            assert (g.start_ns.to_numpy()[1:] >= g.end_ns.to_numpy()[:-1]).all()


# -- one stream: host wait, kernel wait, other, custom threshold ----------------------------

@pytest.fixture(scope="module")
def one_stream(tmp_path_factory):
    b = _Builder()
    b.step(0, 0, 1000)
    b.work(10, [(20, 80)])                    # leading [0, 20): host [0, 15) (call 10-15), in flight [15, 20)
    b.work(30, [(110.5, 89.5)])               # [100, 110.5): issued at 35, before: kernel wait
    b.work(250, [(262.25, 37.75)])            # [200, 262.25): host [200, 255) + kernel wait 7.25 us
    # [300, 400): other: the copy ran inside its 200 us call (synchronous), issued at the call's start
    b.work(280, [(400, 50)], copy=True, call_name="cudaMemcpy", call_dur=200)
    b.work(None, [])                          # nothing after 450: host wait to the step's end
    return b.load(tmp_path_factory.mktemp("one"))


def test_host_kernel_and_other_waits_exact(one_stream):
    r = idle_time(one_stream)
    _check_invariants(r)
    assert r["threshold_ns"] == 30_000 and r["notes"] == []
    expected = {"window_ns": 1_000_000, "busy_ns": 257_250, "idle_ns": 742_750, "host_wait_ns": 620_000,
                "kernel_wait_ns": 22_750, "other_ns": 100_000, "gaps": 5}
    for step in (0, -1):
        assert _row(r["devices"], step=step) == {"device": 0, "stream": -1, "step": step, **expected}
        assert _row(r["streams"], stream=7, step=step) == {"device": 0, "stream": 7, "step": step, **expected}
    pieces = [(0, 15_000, "host_wait", 0), (15_000, 20_000, "kernel_wait", 0),
              (100_000, 110_500, "kernel_wait", 0), (200_000, 255_000, "host_wait", 0),
              (255_000, 262_250, "kernel_wait", 0), (300_000, 400_000, "other", 0),
              (450_000, 1_000_000, "host_wait", 0)]
    assert _gaps(r) == pieces
    assert _gaps(r, stream=7) == pieces


def test_custom_threshold(one_stream):
    # in-flight parts: 5_000, 10_500, 7_250 (and the 100_000 wait on the copy)
    r = idle_time(one_stream, kernel_wait_ns=5_000)   # strictly shorter than: none
    _check_invariants(r)
    assert r["threshold_ns"] == 5_000
    row = _row(r["devices"])
    assert (row["host_wait_ns"], row["kernel_wait_ns"], row["other_ns"]) == (620_000, 0, 122_750)
    row = _row(idle_time(one_stream, kernel_wait_ns=10_500)["devices"])
    assert (row["host_wait_ns"], row["kernel_wait_ns"], row["other_ns"]) == (620_000, 12_250, 110_500)
    row = _row(idle_time(one_stream, kernel_wait_ns=100_001)["devices"])
    assert (row["host_wait_ns"], row["kernel_wait_ns"], row["other_ns"]) == (620_000, 122_750, 0)
    with pytest.raises(ValueError):
        idle_time(one_stream, kernel_wait_ns=-1)
    with pytest.raises(ValueError):
        idle_time(one_stream, kernel_wait_ns=1.5)


# -- two streams (and a second device): idle together counted once at device level -------------

def test_streams_idle_together_count_once_per_device(tmp_path):
    b = _Builder()
    b.step(0, 0, 1000)
    b.work(10, [(20, 180)], stream=7)          # K1 [20, 200)
    b.work(12, [(100, 200)], stream=8)         # K3 [100, 300)
    b.work(15, [(300, 100)], stream=7)         # K2 [300, 400): waited 100 us for stream 8, in flight
    b.work(480, [(500, 100)], stream=8)        # K4 [500, 600)
    b.work(50, [(60, 100)], stream=7, device=1)
    r = idle_time(b.load(tmp_path))
    _check_invariants(r)
    # device 0 busy on [20, 400) + [500, 600); both streams idle on [0, 20), [400, 500), [600, 1000)
    assert _row(r["devices"]) == {"device": 0, "stream": -1, "step": -1, "window_ns": 1_000_000,
                                  "busy_ns": 480_000, "idle_ns": 520_000, "host_wait_ns": 500_000,
                                  "kernel_wait_ns": 20_000, "other_ns": 0, "gaps": 3}
    assert _gaps(r) == [(0, 15_000, "host_wait", 0), (15_000, 20_000, "kernel_wait", 0),
                        (400_000, 485_000, "host_wait", 0), (485_000, 500_000, "kernel_wait", 0),
                        (600_000, 1_000_000, "host_wait", 0)]
    assert _row(r["streams"], stream=7) == {"device": 0, "stream": 7, "step": -1, "window_ns": 1_000_000,
                                            "busy_ns": 280_000, "idle_ns": 720_000, "host_wait_ns": 615_000,
                                            "kernel_wait_ns": 5_000, "other_ns": 100_000, "gaps": 3}
    assert _row(r["streams"], stream=8) == {"device": 0, "stream": 8, "step": -1, "window_ns": 1_000_000,
                                            "busy_ns": 300_000, "idle_ns": 700_000, "host_wait_ns": 602_000,
                                            "kernel_wait_ns": 15_000, "other_ns": 83_000, "gaps": 3}
    assert _gaps(r, stream=8) == [(0, 17_000, "host_wait", 0), (17_000, 100_000, "other", 0),
                                  (300_000, 485_000, "host_wait", 0), (485_000, 500_000, "kernel_wait", 0),
                                  (600_000, 1_000_000, "host_wait", 0)]
    streams_idle = r["streams"].query("device == 0 and step == -1").idle_ns.sum()
    assert streams_idle == 1_420_000 > _row(r["devices"])["idle_ns"]
    # the other device on its own
    assert _row(r["devices"], device=1) == {"device": 1, "stream": -1, "step": -1, "window_ns": 1_000_000,
                                            "busy_ns": 100_000, "idle_ns": 900_000, "host_wait_ns": 895_000,
                                            "kernel_wait_ns": 5_000, "other_ns": 0, "gaps": 2}
    assert list(r["devices"].device) == [0, 0, 1, 1]
    assert list(zip(r["streams"].device, r["streams"].stream)) == [(0, 7)] * 2 + [(0, 8)] * 2 + [(1, 7)] * 2


# -- steps: per-step split, a stretch crossing a step boundary, step -1 totals -----------------

def test_per_step_split_and_totals(tmp_path):
    b = _Builder()
    b.step(3, 0, 500)
    b.step(4, 500, 500)
    b.work(10, [(20, 430)])      # K1 [20, 450)
    b.work(400, [(455, 25)])     # K2 [455, 480): issued at 405, kernel wait [450, 455)
    b.work(620, [(640, 60)])     # K3 [640, 700): stretch [480, 640) crosses the step boundary at 500
    b.work(900, [(905, 45)])     # K4 [905, 950)
    t = b.load(tmp_path)
    assert steps(t)[["step", "start_ns", "end_ns"]].values.tolist() == [
        [3, T0_NS, T0_NS + 500_000], [4, T0_NS + 500_000, T0_NS + 1_000_000]]
    r = idle_time(t)
    _check_invariants(r)
    dev = r["devices"]
    assert list(dev.step) == [3, 4, -1]
    assert _row(dev, step=3) == {"device": 0, "stream": -1, "step": 3, "window_ns": 500_000, "busy_ns": 455_000,
                                 "idle_ns": 45_000, "host_wait_ns": 35_000, "kernel_wait_ns": 10_000,
                                 "other_ns": 0, "gaps": 3}
    assert _row(dev, step=4) == {"device": 0, "stream": -1, "step": 4, "window_ns": 500_000, "busy_ns": 105_000,
                                 "idle_ns": 395_000, "host_wait_ns": 380_000, "kernel_wait_ns": 15_000,
                                 "other_ns": 0, "gaps": 3}
    assert _row(dev, step=-1) == {"device": 0, "stream": -1, "step": -1, "window_ns": 1_000_000,
                                  "busy_ns": 560_000, "idle_ns": 440_000, "host_wait_ns": 415_000,
                                  "kernel_wait_ns": 25_000, "other_ns": 0, "gaps": 6}
    # K4 starts as its call (900-905) returns: [700, 905) is all host wait
    assert _gaps(r) == [(0, 15_000, "host_wait", 3), (15_000, 20_000, "kernel_wait", 3),
                        (450_000, 455_000, "kernel_wait", 3), (480_000, 500_000, "host_wait", 3),
                        (500_000, 625_000, "host_wait", 4), (625_000, 640_000, "kernel_wait", 4),
                        (700_000, 905_000, "host_wait", 4), (950_000, 1_000_000, "host_wait", 4)]


def test_graph_launch_kernels_wait_on_nothing_but_each_other(tmp_path):
    b = _Builder()
    b.step(0, 0, 1000)
    b.work(10, [(20, 30), (52, 28), (85, 115)], call_name="cudaGraphLaunch")  # one call, three kernels
    r = idle_time(b.load(tmp_path))
    _check_invariants(r)
    assert _gaps(r) == [(0, 15_000, "host_wait", 0), (15_000, 20_000, "kernel_wait", 0),
                        (50_000, 52_000, "kernel_wait", 0), (80_000, 85_000, "kernel_wait", 0),
                        (200_000, 1_000_000, "host_wait", 0)]


def test_work_without_launch_call_and_without_steps(tmp_path):
    """No host events at all: one step 0 over the trace (steps.py); no launch calls:
    nothing can be called host wait, each gap is classed by its length."""
    b = _Builder()
    b.work(None, [(0, 100)])
    b.work(None, [(110, 90)])
    b.work(None, [(300, 100)])
    r = idle_time(b.load(tmp_path))
    _check_invariants(r)
    assert _row(r["devices"], step=0) == {"device": 0, "stream": -1, "step": 0, "window_ns": 400_000,
                                          "busy_ns": 290_000, "idle_ns": 110_000, "host_wait_ns": 0,
                                          "kernel_wait_ns": 10_000, "other_ns": 100_000, "gaps": 2}
    assert any("no ProfilerStep#N" in n for n in r["notes"])
    assert any("launch call is not in the trace" in n for n in r["notes"])


# -- every backend the fixtures know ----------------------------------------------------------

@pytest.fixture(scope="module")
def backend_traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("idle_backends")
    return {name: tb_profiler.load(write_trace(folder / f"{name.replace(' ', '_')}.pt.trace.json",
                                               device_trace(name)), cache=False) for name in BACKENDS}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_backend(backend_traces, name):
    """kineto_fixtures' step: compute [+200, +750) launched by a call at +150 (20 us: it
    returns at +170), copy [+800, +850) launched at +510 (returns at +520), 1000 us steps.
    Idle: [+0, +170) host wait (the host is launching until +170), [+170, +200) in flight
    30 us and [+750, +800) in flight 50 us (other: not shorter than 30 us), [+850, +1000)
    host wait."""
    r = idle_time(backend_traces[name])
    _check_invariants(r)
    dev = r["devices"]
    assert list(dev.step) == [0, 1, 2, -1]
    if BACKENDS[name].runtime_cat is None:
        # CUPTI range profiler: no launch calls, no copies: nothing is host wait but the
        # time after the last kernel, each 450 us stretch in flight, other
        per_step = [(450_000, 0, 0, 450_000, 2), (450_000, 0, 0, 450_000, 2), (450_000, 250_000, 0, 200_000, 2)]
        busy = 550_000
        assert any("launch call is not in the trace" in n for n in r["notes"])
    else:
        per_step = [(400_000, 320_000, 0, 80_000, 3)] * STEPS
        busy = 600_000
        assert r["notes"] == []
    for k, (idle, hw, kw, other, gaps) in enumerate(per_step):
        assert _row(dev, step=k) == {"device": 0, "stream": -1, "step": k, "window_ns": 1_000_000,
                                     "busy_ns": busy, "idle_ns": idle, "host_wait_ns": hw,
                                     "kernel_wait_ns": kw, "other_ns": other, "gaps": gaps}
        assert _row(r["streams"], stream=7, step=k) == {**_row(dev, step=k), "stream": 7}
    if BACKENDS[name].runtime_cat is not None:
        # a 60 us threshold makes both in-flight waits (30 and 50 us) launch latency
        row = _row(idle_time(backend_traces[name], kernel_wait_ns=60_000)["devices"])
        assert (row["host_wait_ns"], row["kernel_wait_ns"], row["other_ns"]) == (960_000, 240_000, 0)


@pytest.mark.parametrize("name", ["ROCm", "MTIA", "XPU", "PrivateUse1"])
def test_backends_classify_like_cuda(tmp_path, name):
    """The handmade one-stream trace written as each backend writes it (hipLaunchKernel,
    mtiaLaunchKernel, ...): the same figures as on CUDA."""
    b = _Builder(name)
    b.step(0, 0, 1000)
    b.work(10, [(20, 80)])
    b.work(30, [(110.5, 89.5)])
    b.work(250, [(262.25, 37.75)])
    b.work(280, [(400, 50)], copy=True, call_dur=200)
    r = idle_time(b.load(tmp_path))
    _check_invariants(r)
    assert _row(r["devices"]) == {"device": 0, "stream": -1, "step": -1, "window_ns": 1_000_000,
                                  "busy_ns": 257_250, "idle_ns": 742_750, "host_wait_ns": 620_000,
                                  "kernel_wait_ns": 22_750, "other_ns": 100_000, "gaps": 5}


# -- no device work -----------------------------------------------------------------------------

def test_cpu_only_trace_is_empty_with_a_note(tmp_path):
    b = _Builder()
    b.step(0, 0, 1000)
    b.cpu_op(10, 100)
    r = idle_time(b.load(tmp_path))
    assert r["threshold_ns"] == 30_000
    assert r["notes"] and "no device work" in r["notes"][0]
    for key, cols in (("devices", IDLE_COLUMNS), ("streams", IDLE_COLUMNS), ("gaps", GAP_COLUMNS)):
        assert r[key].empty and list(r[key].columns) == cols
    assert r["devices"].window_ns.dtype == np.int64


# -- the real V100 trace ------------------------------------------------------------------------

def _union_covered(starts, ends, lo, hi) -> int:
    """Covered length of [lo, hi) by the intervals: a plain sort-and-sweep, independent of
    analysis.intervals."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(starts.tolist(), ends.tolist())):
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def test_v100_trace():
    t = tb_profiler.load(V100_TRACE, cache=False)
    r = idle_time(t)
    _check_invariants(r)
    st = steps(t)
    dev = r["devices"]
    assert list(dev.step) == st.step.tolist() + [-1]
    ev = t.events
    work = role_mask(t.roles, DEVICE_WORK) & (t.event_devices == 0) & (ev["dur"] > 0)
    s, e = ev["ts"][work], ev["ts"][work] + ev["dur"][work]
    for step, lo, hi in zip(st.step, st.start_ns, st.end_ns):
        row = _row(dev, step=int(step))
        assert row["window_ns"] == hi - lo
        assert row["idle_ns"] == (hi - lo) - _union_covered(s, e, int(lo), int(hi))
        assert row["host_wait_ns"] > 0 and row["kernel_wait_ns"] > 0
    total = _row(dev)
    assert total["window_ns"] == int(st.dur_ns.sum())
    # one stream: the stream-level figures are the device's
    assert _row(r["streams"], stream=7) == {**total, "stream": 7}
    # every device-level gap lies outside all device work
    g = r["gaps"][r["gaps"].stream == -1]
    order = np.argsort(s)
    reach = np.maximum.accumulate(e[order])
    i = np.searchsorted(s[order], g.end_ns.to_numpy(), side="left") - 1   # last work starting before the gap ends
    assert (reach[i[i >= 0]] <= g.start_ns.to_numpy()[i >= 0]).all()
