"""Recommendations: what to try next, each with the numbers that triggered it.

Why numbers in the text: "DataLoader is slow" invites a shrug; "DataLoader takes 33.4% of
the average step (59.3 ms of 177.6 ms)" tells how much there is to win. Every rule
returns {id, severity, title, text, evidence}; evidence holds the same numbers as plain
ints/floats for the UI and tests.

torch-tb-profiler's rules: DataLoader > 5% of the step (told to add worker processes only
when it has none); DataParallel on several devices;
DDP over gloo on GPUs; communication > 10%; device utilization < 50%; tensor-core
eligible kernels with no tensor-core use (AMP); peak memory > 90% of the device.
New: kernels shorter than their launch (launch-bound), host-device synchronizations in
the steps (.item(), blocking copies, synchronizing calls, each once with its host time),
pageable host memory in copies, long device idle gaps while the host works.

Advice states only hardware facts of the device it names: a number format or a compiler
is suggested only where that device has it (``analysis.hardware``).
"""
from __future__ import annotations

import re

import numpy as np

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.advice_conv import slow_conv_rule
from tb_profiler.analysis.advice_text import fmt_bytes, fmt_ns, rec as _rec
from tb_profiler.analysis.gpu import (
    device_summary,
    kernel_tc_share,
    tc_eligible_kernel_share,
)
from tb_profiler.analysis.hardware import capability, compiles, tensor_core_formats
from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.keys import unique_ints
from tb_profiler.analysis.links import NO_ROW, launch, launches, nearest_ancestor
from tb_profiler.analysis.memcpy import copy_direction
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.memory import peak_rows
from tb_profiler.analysis.shared import device_work, frozen, name_map
from tb_profiler.analysis.steps import step_of, steps_frame, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import Role

DATALOADER_SHARE = 0.05
COMMUNICATION_SHARE = 0.10
LOW_UTILIZATION = 0.50
MEMORY_SHARE = 0.90
SHORT_KERNEL_SHARE = 0.50       # of launched kernels in the steps...
SHORT_KERNELS_PER_STEP = 10     # ...and at least this many per step
LAUNCH_SHARE = 0.10             # launch time not hidden by the kernels, of the steps
SYNC_WARNING_SHARE = 0.05
IDLE_GAP_NS = 100_000           # a device gap this long is no launch latency
IDLE_SHARE = 0.10              # host CPU/Python time in long gaps, of the steps

SYNC_CALL_RE = re.compile(r"(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|Memcpy2D|"
                           r"Memcpy3D|MemcpyToSymbol|MemcpyFromSymbol)\Z|cu(Ctx|Stream|Event)Synchronize\Z")
_SYNC_EVENT_NAMES = frozenset({"Event Sync", "Stream Sync", "Context Sync", "Device Sync"})
_SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})
_COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
# Host calls that block until the device catches up, beyond SYNC_CALL_RE's CUDA/HIP names
# (which the critical path shares): any backend's *Synchronize* (MTIA, Level Zero's
# zeCommandListHostSynchronize, Ascend's aclrtSynchronizeStream, Habana's
# synStreamSynchronize, versioned spellings such as cudaStreamSynchronize_v3020), the
# SYCL/Unified Runtime waits, the blocking (non-Async) copies of MTIA and Ascend and the
# driver API's cuMemcpy*. Events of Kineto's xpu_sync category are synchronizations too.
_HOST_SYNC_RE = re.compile(r"Synchroni[sz]e|\A(urQueueFinish|urEventWait|piQueueFinish|piEventsWait)\Z|"
                           r"\A(mtia|aclrt)Memcpy\Z|\AcuMemcpy(HtoD|DtoH|DtoD|DtoA|AtoH)?(_v2)?\Z")

_DL_WORKERS = "_MultiProcessingDataLoaderIter"
_DL_SINGLE = "_SingleProcessDataLoaderIter"

_DOCS = {
    "dataloader": "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
    "ddp": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead",
    "comm": "https://pytorch.org/docs/stable/ddp_comm_hooks.html",
    "amp": "https://pytorch.org/docs/stable/amp.html",
    "checkpoint": "https://pytorch.org/docs/stable/checkpoint.html",
    "graphs": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "pin": "https://pytorch.org/docs/stable/data.html#memory-pinning",
}


def recommendations(trace) -> list[dict]:
    """Every rule that fires, most severe first (warnings, then infos), rule order kept."""
    return [dict(r) for r in _recommendations(trace)]


@per_trace
def _recommendations(trace) -> list[dict]:
    found = []
    for rule in RULES:  # a dozen rules, not events
        found.extend(r for r in [rule(trace)] if r)
    order = {"warning": 0, "info": 1}
    return sorted(found, key=lambda r: order.get(r["severity"], 2))


def _share_rule(trace, category: str, threshold: float):
    """(share, part_ns, total_ns) of the average step for a breakdown category, or None."""
    avg = bd.average(trace)
    if not avg or not avg["total"]:
        return None
    share = avg[category] / avg["total"]
    return (share, avg[category], avg["total"]) if share > threshold else None


def _names(trace, predicate, dtype=bool, default=False, among: np.ndarray | None = None) -> np.ndarray:
    """predicate over the names of the events ``among`` marks (all events by default),
    once per distinct name; default for every other event."""
    return name_map(trace, predicate, dtype, default, among=among)


@per_trace
def _in_steps(trace) -> np.ndarray:
    """Per event: inside a step (read-only: several rules share it)."""
    return frozen(step_of(trace) >= 0)


@per_trace
def _total_step_ns(trace) -> int:
    """The steps' time together (four rules divide by it)."""
    return int(steps_frame(trace)["dur_ns"].to_numpy().sum())


# -- torch-tb-profiler's rules ---------------------------------------------------------------

def dataloader_rule(trace):
    """DataLoader time over DATALOADER_SHARE of the average step. A loader that already
    loads in worker processes (``enumerate(DataLoader)#_MultiProcessingDataLoaderIter``)
    is not told to add them: its workers do not keep up, and the advice says what helps
    then. Where the steps show a single-process loader (``_SingleProcessDataLoaderIter``,
    also beside a multi-process one) or neither name, the advice is to set num_workers."""
    hit = _share_rule(trace, "dataloader", DATALOADER_SHARE)
    if not hit:
        return None
    share, part, total = hit
    workers = _dataloader_workers(trace)
    head = f"DataLoader takes {100 * share:.1f}% of the average step ({fmt_ns(part)} of {fmt_ns(total)})"
    if workers:
        text = (f"{head} although it already loads batches in worker processes: the workers do not keep up "
                "with the model. Try more workers (num_workers, up to the CPU cores free), a larger "
                "prefetch_factor, persistent_workers=True, pin_memory=True, or cheaper per-sample "
                "transforms (decode and augment less, or on the device).")
    else:
        text = (f"{head}. Set num_workers on the DataLoader to load batches in worker processes while the "
                "model runs.")
    return _rec("dataloader", "warning", "Input data loading is slow", text,
                {"dataloader_ns": part, "step_ns": total, "share_pct": 100 * share,
                 "multiprocess_workers": workers}, _DOCS["dataloader"])


def _dataloader_workers(trace) -> bool:
    """Whether the steps' DataLoader loads in worker processes: its events name only
    _MultiProcessingDataLoaderIter (a _SingleProcessDataLoaderIter beside it, or an
    iterator of neither name, says no)."""
    m = bd.category_masks(trace)["dataloader"] & _in_steps(trace)
    names = {str(n) for n in trace.str(unique_ints(trace.events["name"][m]))}
    return bool(names) and all(_DL_WORKERS in n for n in names) and not any(_DL_SINGLE in n for n in names)


def dataparallel_rule(trace):
    used = _names(trace, lambda s: s == "DataParallel.forward").any()
    devices = device_summary(trace)
    if not used or len(devices) < 2:
        return None
    return _rec("dataparallel", "warning", "DataParallel on several devices",
                f"The model runs under DataParallel across {len(devices)} devices. DistributedDataParallel "
                "(one process per device) is faster: no per-step scatter of the model and no GIL contention.",
                {"devices": len(devices)}, _DOCS["ddp"])


def nccl_rule(trace):
    if trace.device_kinds[:1] != ("CUDA",) or not _names(trace, lambda s: s == "DistributedDataParallel.forward").any():
        return None
    comm = bd.category_masks(trace)["communication"]
    names = trace.str(trace.events["name"][comm])
    gloo = int(sum(1 for n in set(names.tolist()) if n and n.lower().startswith("gloo")))
    nccl = any(n and "nccl" in n.lower() for n in set(names.tolist()))
    if not gloo or nccl:
        return None
    return _rec("nccl_backend", "info", "DDP uses gloo on GPUs",
                "DistributedDataParallel communicates with gloo on GPUs; the nccl backend is much faster there.",
                {"gloo_ops": gloo})


def communication_rule(trace):
    hit = _share_rule(trace, "communication", COMMUNICATION_SHARE)
    if not hit:
        return None
    share, part, total = hit
    return _rec("communication", "warning", "Communication takes a large share of the step",
                f"Communication takes {100 * share:.1f}% of the average step ({fmt_ns(part)} of {fmt_ns(total)}) "
                "without overlapping computation. Try gradient compression (DDP communication hooks), gradient "
                "accumulation or a larger batch.",
                {"communication_ns": part, "step_ns": total, "share_pct": 100 * share}, _DOCS["comm"])


def utilization_rule(trace):
    dev = device_summary(trace)
    if dev.empty:
        return None
    util = dev["utilization_pct"].to_numpy(dtype=float, na_value=np.nan)
    hit = np.flatnonzero((util < 100 * LOW_UTILIZATION) & (dev["kernels"].to_numpy() > 0))
    if not len(hit):
        return None
    low = list(dev.iloc[hit].itertuples())  # one row per device
    word = trace.device_word or "Device"
    parts = [f"{word} {int(r.device)}: {r.utilization_pct:.1f}% ({fmt_ns(r.busy_ns)} busy of {fmt_ns(r.window_ns)})"
             for r in low]
    return _rec("low_utilization", "warning", f"Low {word} utilization",
                f"Kernels keep the {word} busy for only part of the steps: {'; '.join(parts)}. A larger batch "
                "gives each kernel more work (it may change convergence); see the breakdown for what the "
                "device waits on.",
                {"devices": {int(r.device): {"utilization_pct": float(r.utilization_pct), "busy_ns": int(r.busy_ns),
                                             "window_ns": int(r.window_ns)} for r in low}})


def amp_rule(trace):
    """Tensor-core eligible kernel time with no tensor-core kernel, on a CUDA device that
    has tensor cores: the advice names that device and only the formats it runs there
    (float16 on 7.x; bfloat16 and TF32 from 8.0)."""
    d = capability(trace)
    if d is None:
        return None
    formats = tensor_core_formats(d.compute_major, d.compute_minor or 0)
    used = kernel_tc_share(trace)
    eligible = tc_eligible_kernel_share(trace)
    if not formats or used is None or used > 0 or eligible <= 0:
        return None
    name = d.name or f"{trace.device_word or 'GPU'} {d.id}"
    if "TF32" in formats:
        how = ("Automatic Mixed Precision (torch.autocast with float16 or bfloat16) would use them, and so "
               "would TF32 for float32 matrix multiplies (torch.set_float32_matmul_precision(\"high\")).")
    else:
        how = "Automatic Mixed Precision (torch.autocast with dtype=torch.float16) would use them."
    return _rec("amp", "warning", "Tensor cores unused",
                f"{100 * eligible:.0f}% of kernel time is launched by operators that can run on tensor cores "
                f"(convolutions, matrix multiplies), yet no kernel used them. The {name} (compute capability "
                f"{d.compute_capability}) runs {_words(formats)} on its tensor cores: {how}",
                {"eligible_kernel_share_pct": 100 * eligible, "tensor_core_kernel_share_pct": 100 * used,
                 "device": d.id, "device_name": d.name, "compute_capability": d.compute_capability,
                 "tensor_core_formats": formats},
                _DOCS["amp"])


def _words(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def memory_rule(trace):
    hot = [r for r in peak_rows(trace) if _nearly_full(r)]  # one row per device
    if not hot:
        return None
    r = hot[0]
    share = float(r["peak_allocated"]) / float(r["total_memory"])
    return _rec("memory_peak", "warning", "Device memory nearly full",
                f"Peak allocated memory on {r['device']} is {fmt_bytes(r['peak_allocated'])}, {100 * share:.1f}% of "
                f"its {fmt_bytes(r['total_memory'])}. Gradient checkpointing or mixed precision frees room for a "
                "larger batch.",
                {"device": str(r["device"]), "peak_allocated_bytes": int(r["peak_allocated"]),
                 "total_memory_bytes": int(r["total_memory"]), "share_pct": 100 * share}, _DOCS["checkpoint"])


def _nearly_full(row: dict) -> bool:
    """A device (not the CPU) whose peak allocation passes MEMORY_SHARE of its known size."""
    total = row["total_memory"]
    if total is None or row["device"] == "CPU" or not float(total) > 0:  # 0 or NaN bytes: no size known
        return False
    return float(row["peak_allocated"]) > MEMORY_SHARE * float(total)


# -- new rules ----------------------------------------------------------------------------------

def launch_bound_rule(trace):
    """Launches whose device work runs shorter than the runtime call that issued it: the
    device drains its queue faster than the host fills it. Fires when most launches in the
    steps are such and the launch time they do not hide is a real share of the step.

    A launch counts once: a graph launch issues many kernels under one correlation id, and
    its device work is all of them together. The time not hidden is the union of each
    short launch's tail (the part of the call beyond its device work), so it never exceeds
    the steps it lies in. Advice to use CUDA graphs is not given to steps that already
    launch most of their kernels through graphs."""
    ev = trace.events
    lau = launches(trace)
    inside = step_of(trace, lau.call) >= 0
    call, work, kernels, graph = lau.call[inside], lau.work_ns[inside], lau.kernels[inside], lau.graph[inside]
    n_steps = len(steps_frame(trace))
    total = _total_step_ns(trace)
    if not len(call) or not n_steps or not total:
        return None
    call_ns = np.where(ev["dur"][call] == MISSING_INT, 0, ev["dur"][call])
    short = work < call_ns
    n_short = int(short.sum())
    share = n_short / len(call)
    tail_end = ev["ts"][call[short]] + call_ns[short]
    unhidden = _covered_in_steps(trace, tail_end - (call_ns - work)[short], tail_end)
    if share < SHORT_KERNEL_SHARE or unhidden < LAUNCH_SHARE * total:
        return None
    graph_share = float(kernels[graph].sum() / kernels.sum())
    med_k, med_l = float(np.median(work)), float(np.median(call_ns))
    word = trace.device_word or "device"
    if graph_share >= 0.5:
        advice = (f"The steps already launch {100 * graph_share:.0f}% of their kernels through graph launches: "
                  "capture the remaining eager launches in the graph, fuse small operations, or give each "
                  "kernel more work (larger batches).")
    else:
        advice = (f"{_batchers(trace)} launch many kernels at once; fusing small operations or larger batches "
                  "also help.")
    n_graph = int(graph.sum())
    what = f" ({n_graph} of them graph launches)" if n_graph else ""
    return _rec("launch_bound", "warning", "Launch-bound: kernels shorter than their launch",
                f"{100 * share:.1f}% of the launches in the steps ({n_short} of {len(call)}{what}, "
                f"{n_short / n_steps:.0f} per step) launch less device work than the runtime call takes (median "
                f"device work {fmt_ns(med_k)}, median launch {fmt_ns(med_l)}); their launches outlast it by "
                f"{fmt_ns(unhidden / n_steps)} per step ({100 * unhidden / total:.1f}% of the step), time the "
                f"{word} may wait for the CPU. {advice}",
                {"short_launches": n_short, "launches": len(call), "graph_launches": n_graph,
                 "kernels": int(kernels.sum()), "graph_kernel_share_pct": 100 * graph_share,
                 "share_pct": 100 * share, "per_step": n_short / n_steps, "median_work_ns": med_k,
                 "median_launch_ns": med_l, "unhidden_launch_ns": unhidden,
                 "unhidden_share_pct": 100 * unhidden / total},
                None if graph_share >= 0.5 else _DOCS["graphs"])


def _graph_word(trace) -> str | None:
    """"CUDA graphs" / "HIP graphs" where the backend has graphs to capture, else None."""
    return {"CUDA": "CUDA graphs", "ROCm": "HIP graphs"}.get(trace.device_kinds[0] if trace.device_kinds else "")


def _batchers(trace, compile_text: str = "torch.compile (mode=\"reduce-overhead\")") -> str:
    """What launches many kernels at once on this device: its backend's graphs and/or
    torch.compile, the latter only where its GPU backend runs (``compiles``)."""
    parts = [w for w in (_graph_word(trace), compile_text if compiles(trace) else None) if w]
    return " or ".join(parts)


def _covered_in_steps(trace, starts: np.ndarray, ends: np.ndarray) -> int:
    """ns of the union of [starts, ends) inside the steps: a time counted once however many
    events (threads, streams) share it, so a share of the steps stays <= 100%."""
    st = steps_frame(trace)
    if st.empty or not len(starts):
        return 0
    ms, me = merge_intervals(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    return int(covered_in(ms, me, st["start_ns"].to_numpy(), st["end_ns"].to_numpy()).sum())


def sync_rule(trace):
    """Host-device synchronizations inside the steps: the host stops until the device
    drains, so it cannot queue work ahead. What counts (``host_syncs``): aten::item /
    aten::_local_scalar_dense, copies the host waits for (aten::to / aten::_to_copy /
    aten::copy_ holding a synchronizing call, or a device-to-host copy into pageable
    memory), and synchronizing runtime calls on their own (cudaDeviceSynchronize,
    cudaStreamSynchronize, cudaEventSynchronize, a blocking cudaMemcpy, their HIP, XPU,
    MTIA, ... spellings). Each is counted once, at its outermost event: an aten::item
    holding a cudaMemcpyAsync and a cudaStreamSynchronize is one synchronization, timed
    by the aten::item. The time is the host time of those events inside the steps, each
    ns once."""
    n_steps = len(steps_frame(trace))
    if not n_steps or not trace.device_kinds:  # CPU only: .item() waits for nothing
        return None
    ev = trace.events
    sync = host_syncs(trace)
    rows = np.flatnonzero(sync["counted"])
    n = len(rows)
    if not n:
        return None
    ends = ev["ts"][rows] + np.maximum(ev["dur"][rows], 0)
    wait = _covered_in_steps(trace, ev["ts"][rows], ends)
    total = _total_step_ns(trace)
    share = wait / total if total else 0.0
    counts = _count_names(trace, sync["counted"])
    listed = ", ".join(f"{name} x{c}" for name, c in counts[:4])
    n_ops = int((sync["counted"] & sync["ops"]).sum())
    return _rec("host_sync", "warning" if share >= SYNC_WARNING_SHARE else "info",
                "Host-device synchronization inside the steps",
                f"The steps synchronize the host with the device {n / n_steps:.1f} times per step ({listed}); "
                f"the host waits in them {fmt_ns(wait / n_steps)} per step ({100 * share:.1f}% of the step). "
                "Each one stops the CPU from queueing work ahead: avoid .item(), .cpu(), printing tensors "
                "and blocking copies in the loop, or do them every N steps.",
                {"syncs": n, "sync_calls": int(sync["calls_in_steps"]), "sync_ops": n_ops, "per_step": n / n_steps,
                 "sync_ns": wait, "share_pct": 100 * share, "names": dict(counts)},
                link=next(({"q": name} for name, _ in counts if name.startswith("aten::")), None))


@per_trace
def host_syncs(trace) -> dict:
    """The host-device synchronizations of a trace, as masks over events.

    What synchronizes:
    - aten::item and aten::_local_scalar_dense (reading a device scalar);
    - aten::to / aten::_to_copy / aten::copy_ that hold a synchronizing runtime call, or
      that issued a device-to-host copy into pageable (not pinned) memory: ``.cpu()`` and
      blocking copies (a non-blocking copy into pinned memory is not one);
    - synchronizing runtime calls: SYNC_CALL_RE's CUDA/HIP names (device, stream and event
      synchronize, blocking cudaMemcpy*), any backend's *Synchronize*, the SYCL/UR waits,
      blocking mtia/aclrt copies, events of the xpu_sync category, and the call a device
      sync record ("Event Sync", ...) correlates with;
    - a device sync record whose call the trace lacks stands for that call.

    Returns {"counted": the outermost of those (none of them encloses it on its thread)
    inside the steps, with valid times; "ops": operators among them; "calls_in_steps":
    synchronizing runtime calls in the steps, also those inside a counted operator}."""
    ev = trace.events
    roles = trace.roles
    ok = valid_times(trace)
    ops = ev["kind"] == Kind.CPU_OP
    runtime = roles == Role.RUNTIME
    calls = runtime & ok & (_names(trace, lambda s: bool(SYNC_CALL_RE.match(s) or _HOST_SYNC_RE.search(s)),
                                   among=runtime) | (ev["kind"] == Kind.XPU_SYNC))
    sync_kind = ev["kind"] == Kind.CUDA_SYNC
    records = ok & sync_kind & _names(trace, lambda s: s in _SYNC_EVENT_NAMES, among=sync_kind)
    rt = launch(trace)
    has_call = records & (rt >= 0)
    calls[rt[has_call]] |= ok[rt[has_call]]           # the call a sync record says was one
    records &= rt < 0                                  # one sync, two records: the call counts
    # Copies the host waits for: copy operators holding a synchronizing call, or issuing a
    # device-to-host copy into pageable memory; then every copy operator around those.
    copy_ops = ok & ops & _names(trace, lambda s: s in _COPY_OPS, among=ops)
    blocking = np.zeros(len(ev), dtype=bool)
    held = nearest_ancestor(trace, np.flatnonzero(calls), copy_ops, include_self=False)
    blocking[held[held >= 0]] = True
    copies = roles == Role.MEMCPY
    d2h = copies & (rt >= 0) & _names(trace, _pageable_d2h, among=copies)
    issued = nearest_ancestor(trace, rt[d2h], copy_ops, include_self=False)
    blocking[issued[issued >= 0]] = True
    rows = np.flatnonzero(blocking)
    while len(rows):  # up the nesting: aten::to > aten::_to_copy > aten::copy_
        up = nearest_ancestor(trace, rows, copy_ops, include_self=False)
        up = up[(up >= 0)]
        rows = up[~blocking[up]]
        blocking[rows] = True
    items = ok & ops & _names(trace, lambda s: s in _SYNC_OPS, among=ops)
    points = calls | records | items | blocking
    inside = nearest_ancestor(trace, np.flatnonzero(points), points, include_self=False) != NO_ROW
    outer = points.copy()
    outer[np.flatnonzero(points)[inside]] = False
    in_steps = _in_steps(trace)
    return {"counted": outer & in_steps, "ops": items | blocking, "calls_in_steps": int((calls & in_steps).sum())}


def _pageable_d2h(name: str) -> bool:
    """A device-to-host copy into memory that is not pinned (the host waits for it)."""
    direction, _src, dst = copy_direction(name)
    return direction == "D2H" and (dst or "").lower() != "pinned"


def _count_names(trace, mask: np.ndarray) -> list[tuple[str, int]]:
    ids, counts = np.unique(trace.events["name"][mask], return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [(str(trace.str(int(ids[i]))), int(counts[i])) for i in order]


def pageable_rule(trace):
    """Copies from or to pageable host memory: the driver stages them through a pinned
    buffer and the host waits for them."""
    ev = trace.events
    copies = trace.roles == Role.MEMCPY
    m = copies & valid_times(trace) & _in_steps(trace) & _names(trace, lambda s: "pageable" in s.lower(), among=copies)
    n = int(m.sum())
    n_steps = len(steps_frame(trace))
    if not n or not n_steps:
        return None
    dur = _covered_in_steps(trace, ev["ts"][m], ev["ts"][m] + ev["dur"][m])  # copies on several streams: once
    b = ev["copy_bytes"][m]
    nbytes = int(b[b > 0].sum())
    total = _total_step_ns(trace)
    share = dur / total if total else 0.0
    return _rec("pageable_memcpy", "info", "Copies use pageable host memory",
                f"{n} copies in the steps ({n / n_steps:.1f} per step, {fmt_bytes(nbytes / n_steps)} per step) move data "
                f"between the device and pageable host memory, {fmt_ns(dur / n_steps)} per step ({100 * share:.1f}% of "
                "the step), and block the host. DataLoader(pin_memory=True) with .to(device, non_blocking=True) "
                "makes them asynchronous.",
                {"copies": n, "per_step": n / n_steps, "bytes": nbytes, "copy_ns": dur, "share_pct": 100 * share},
                _DOCS["pin"])


def idle_rule(trace):
    """Long stretches of the steps where no device work runs while the host is in CPU
    operators or in Python outside any operator (data loading, runtime calls and
    communication in those gaps have their own rules)."""
    gaps = idle_gaps(trace)
    if gaps is None or not len(gaps[0]):
        return None
    gs, ge, step_idx = gaps
    st = steps_frame(trace)
    total = _total_step_ns(trace)
    host = _gap_breakdown(trace, gs, ge)
    python = host["cpu_exec"] + host["other"]
    share = python / total if total else 0.0
    if share < IDLE_SHARE:
        return None
    n_steps = len(st)
    longest = int(np.argmax(ge - gs))
    op = _host_op_during(trace, int(gs[longest]), int(ge[longest]))
    word = trace.device_word or "device"
    idle = int((ge - gs).sum())
    during = f", during {op}" if op else ", outside any operator (Python code)"
    return _rec("device_idle", "warning", f"{word} idle while the host runs Python",
                f"The {word} sits idle in {len(gs)} gaps of {fmt_ns(IDLE_GAP_NS)} or more, {fmt_ns(idle / n_steps)} "
                f"per step; for {fmt_ns(python / n_steps)} of it per step ({100 * share:.1f}% of the step) the host "
                f"runs CPU operators ({fmt_ns(host['cpu_exec'] / n_steps)}) or Python outside operators "
                f"({fmt_ns(host['other'] / n_steps)}) instead of feeding it. The longest gap is "
                f"{fmt_ns(ge[longest] - gs[longest])} in step {st['name'].iloc[step_idx[longest]]}{during}. Move "
                f"that work off the critical path, or let {_batchers(trace, 'torch.compile')} cut host overhead.",
                {"gaps": len(gs), "idle_ns": idle, "host_python_ns": int(python), "share_pct": 100 * share,
                 "gap_breakdown_ns": {k: int(v) for k, v in host.items()},
                 "longest_gap_ns": int(ge[longest] - gs[longest]), "longest_gap_start_ns": int(gs[longest]),
                 "longest_gap_op": op})


def _gap_breakdown(trace, gs, ge) -> dict[str, int]:
    """What the host does inside the gaps, by breakdown category (each ns once)."""
    out = {}
    prev = 0
    for cat, (ms, me) in zip(bd.CATEGORIES[:-1], bd.cumulative_unions(trace)):
        cov = int(covered_in(ms, me, gs, ge).sum())
        out[cat] = cov - prev
        prev = cov
    out["other"] = int((ge - gs).sum()) - prev
    return out


@per_trace
def idle_gaps(trace):
    """(start, end, step index) of every device gap >= IDLE_GAP_NS inside a step, with
    all devices counted together; None without device work or steps."""
    ev = trace.events
    st = steps_frame(trace)
    work = device_work(trace)
    if st.empty or not work.any():
        return None
    ms, me = merge_intervals(ev["ts"][work], ev["ts"][work] + ev["dur"][work])
    lo = st["start_ns"].to_numpy()
    hi = st["end_ns"].to_numpy()
    # Gaps are the complement of the busy union, cut at step edges: split time at every
    # edge, keep the pieces that are neither busy nor outside a step, join neighbours.
    cuts = unique_ints(np.concatenate([lo, hi, ms, me]))
    seg_s, seg_e = cuts[:-1], cuts[1:]
    # No busy edge lies inside a piece: a piece is busy where its start is.
    busy = np.searchsorted(ms, seg_s, side="right") - 1
    mid_busy = ((busy >= 0) & (seg_s < me[np.maximum(busy, 0)]) if len(ms)  # zero-length work only: none busy
                else np.zeros(len(seg_s), dtype=bool))
    idx = np.searchsorted(lo, seg_s, side="right") - 1
    in_step = (idx >= 0) & (seg_e <= hi[np.maximum(idx, 0)])
    free = ~mid_busy & in_step
    gs, ge, gi = seg_s[free], seg_e[free], idx[free]
    # Join neighbouring free segments of the same step (cut only by step edges).
    if len(gs):
        join = np.empty(len(gs), dtype=bool)
        join[0] = False
        join[1:] = (gs[1:] == ge[:-1]) & (gi[1:] == gi[:-1])
        first = np.flatnonzero(~join)
        last = np.append(first[1:] - 1, len(gs) - 1)
        gs, ge, gi = gs[first], ge[last], gi[first]
    long = (ge - gs) >= IDLE_GAP_NS
    return gs[long], ge[long], gi[long]


def _host_op_during(trace, lo: int, hi: int) -> str | None:
    """Name of the outermost CPU Exec event (operator or annotation, not the step) that
    covers most of [lo, hi)."""
    ev = trace.events
    op = np.flatnonzero(bd.category_masks(trace)["cpu_exec"])
    if not len(op):
        return None
    s = ev["ts"][op]
    e = s + ev["dur"][op]
    overlap = np.minimum(e, hi) - np.maximum(s, lo)
    if overlap.max() <= 0:
        return None
    best = np.lexsort((-ev["dur"][op], -overlap))[0]
    return str(trace.str(int(ev["name"][op[best]])))


RULES = (dataloader_rule, dataparallel_rule, nccl_rule, communication_rule, utilization_rule, amp_rule,
         memory_rule, launch_bound_rule, sync_rule, pageable_rule, idle_rule, slow_conv_rule)
