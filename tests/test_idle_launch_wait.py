"""Idle time while the host is still inside the launch call is host wait (issue 17).

``analysis.idle`` splits an idle stretch where the work that ends it was issued: the
launch call's return when the work started only after the call returned (until then the
host was still launching it), else the call's start (the work started inside its call:
a synchronous copy, a launch the device picked up mid-call).  Before, the split was
always the call's start, so a long launch call counted as "other" (work in flight
waiting on something else).  In HTA's MI250 trace (facebookresearch/HolisticTraceAnalysis
``tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz``) one 6543 us
``hipLaunchKernel`` whose kernel ran 5.5 us after the call returned held 72 % of the
stream's idle time as "other" (6.55 of 9.14 ms); it is host wait now (other: 0).

The fixture is written the way that trace writes ROCm events: host calls are
``cuda_runtime`` ``hipLaunchKernel`` / ``hipMemcpyWithStream`` with ``{"External id",
"kernel", "cid", "correlation", "stream": "0x0"}``; device work sits on pid 2 tid 0 with
``{"External id", "device": 2, "stream": 0, "correlation", "kind": "Dispatch Kernel" |
"HtoD"}``; a ``hipMemcpyWithStream`` call contains its copy (the copy starts 16 us into
the 60 us call); short launches take 5-12 us and their kernels start 4-12 us after the
call returns; one ``hipLaunchKernel`` lasts 6540 us.  Times in us after T0, one
10000 us ProfilerStep#1; figures in ns.
"""
from __future__ import annotations

import pytest
from kineto_fixtures import write_trace

import tb_profiler
from tb_profiler.analysis.idle import idle_time

T0 = 4_203_669_603_000
HOST, HOST_TID, DEV = 597913, 598009, 2


class _Rocm:
    def __init__(self, call="hipLaunchKernel"):
        self.ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": HOST, "tid": HOST_TID,
                    "ts": T0, "dur": 10_000, "args": {"External id": 1}}]
        self.corr = 116
        self.call = call

    def launch(self, call_at, call_dur, runs, name=None, copy=False):
        self.corr += 1
        name = name or ("hipMemcpyWithStream" if copy else self.call)
        args = {"External id": self.corr, "cid": 153 if copy else 107, "correlation": self.corr, "stream": "0x0"}
        if not copy:
            args["kernel"] = "void at::native::vectorized_elementwise_kernel<4>"
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": HOST, "tid": HOST_TID,
                        "ts": T0 + call_at, "dur": call_dur, "args": args})
        for start, dur in runs:
            cat, kname, kind = (("gpu_memcpy", "Memcpy HtoD (Host -> Device)", "HtoD") if copy else
                                ("kernel", "void at::native::vectorized_elementwise_kernel<4>", "Dispatch Kernel"))
            self.ev.append({"ph": "X", "cat": cat, "name": kname, "pid": DEV, "tid": 0, "ts": T0 + start,
                            "dur": dur, "args": {"External id": self.corr, "device": DEV, "stream": 0,
                                                 "correlation": self.corr, "kind": kind}})
        return self

    def idle(self, tmp_path):
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": DEV, "name": "AMD Instinct MI250X / MI250"}],
               "traceEvents": self.ev}
        return idle_time(tb_profiler.load(write_trace(tmp_path / "rocm.pt.trace.json", doc), cache=False))


def _gaps(r):
    g = r["gaps"][r["gaps"].stream == -1]
    return [((int(a) - T0 * 1000) / 1000, (int(b) - T0 * 1000) / 1000, k)
            for a, b, k in zip(g.start_ns, g.end_ns, g.kind)]


def _totals(r):
    row = r["devices"][(r["devices"].stream == -1) & (r["devices"].step == -1)].iloc[0]
    return {k: int(row[k]) for k in ("busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns", "gaps")}


def test_a_long_launch_call_is_host_wait(tmp_path):
    r = (_Rocm().launch(250, 60, [(266, 22)], copy=True)   # the copy runs inside its call: issued at 250
         .launch(560, 12, [(584, 7)])                      # issued at the call's return, 572
         .launch(740, 6, [(750, 7)])                       # issued at 746
         .launch(2200, 6540, [(8745, 5)])                  # the long call: issued at 8740
         .launch(8900, 5, [(8910, 4)])                     # issued at 8905
         .idle(tmp_path))
    assert _gaps(r) == [(0, 250, "host_wait"), (250, 266, "kernel_wait"),
                        (288, 572, "host_wait"), (572, 584, "kernel_wait"),
                        (591, 746, "host_wait"), (746, 750, "kernel_wait"),
                        (757, 8740, "host_wait"), (8740, 8745, "kernel_wait"),
                        (8750, 8905, "host_wait"), (8905, 8910, "kernel_wait"),
                        (8914, 10_000, "host_wait")]
    # before issue 17 (split at the calls' starts): host wait 3350 us, kernel wait 60 us and
    # other 6545 us, the long call's [2200, 8745) (66 % of the idle time)
    assert _totals(r) == {"busy_ns": 45_000, "idle_ns": 9_955_000, "host_wait_ns": 9_913_000,
                          "kernel_wait_ns": 42_000, "other_ns": 0, "gaps": 6}


def test_launch_began_while_the_device_was_busy(tmp_path):
    """The call for B starts while A still runs and returns after A ended: the device
    waits for the host until the call returns (before: all 35 us in flight, other)."""
    r = _Rocm().launch(0, 5, [(10, 90)]).launch(90, 40, [(135, 15)]).idle(tmp_path)
    assert _gaps(r)[:4] == [(0, 5, "host_wait"), (5, 10, "kernel_wait"), (100, 130, "host_wait"),
                            (130, 135, "kernel_wait")]


def test_work_inside_its_call_was_in_flight_from_the_call(tmp_path):
    """A synchronous call that waits for its own work (the copy starts 100 us into a
    200 us call): the device was not waiting for the host after the call began."""
    r = _Rocm().launch(0, 5, [(10, 90)]).launch(150, 200, [(250, 50)], copy=True).idle(tmp_path)
    assert _gaps(r) == [(0, 5, "host_wait"), (5, 10, "kernel_wait"), (100, 150, "host_wait"), (150, 250, "other"),
                        (300, 10_000, "host_wait")]


@pytest.mark.parametrize("call", ["hipGraphLaunch", "cudaGraphLaunch"])
def test_graph_kernels_inside_a_long_graph_launch(tmp_path, call):
    """Kernels of one graph launch [10, 60): the two that start inside the call were
    issued at its start (their gaps are in flight), the one after it at its return."""
    r = _Rocm(call).launch(10, 50, [(20, 10), (40, 5), (70, 10)]).idle(tmp_path)
    assert _gaps(r)[:6] == [(0, 10, "host_wait"), (10, 20, "kernel_wait"), (30, 40, "kernel_wait"),
                            (45, 60, "host_wait"), (60, 70, "kernel_wait"), (80, 10_000, "host_wait")]
