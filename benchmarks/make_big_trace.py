#!/usr/bin/env python
"""Blow a real PyTorch profiler trace up to a target size, keeping it a valid Kineto trace.

    python benchmarks/make_big_trace.py SEED SIZE OUTPUT [--synth-gpu] [--copies K] [--gzip-level N] [--validate]

SEED    a trace written by torch.profiler / Kineto (*.json or *.json.gz; object or bare-array layout)
SIZE    bytes of JSON text wanted (before any gzip): 100M, 1G, 1.5G, 250MB, 123456 (K/M/G = 2**10/20/30)
OUTPUT  the trace to write; gzipped when the name ends in .gz

The seed's events are kept as their own text, byte for byte. Metadata events (ph "M") and the
trace-level ones (pid not a number: the "PyTorch Profiler (0)" span, "Iteration Start",
"Record Window End") are written once; every other event is written again in K copies, until
the output reaches SIZE (the last copy may pass it). Copy k moves, in the text of each event:

- ts and "external ts": + k * period (the body's time span + 1 ms, whole microseconds: the
  digits after the decimal point are kept, so no timestamp goes through a float);
- every id that links events: External id / external id, correlation, the flow "id" of
  s/f/t events, Python id / Python parent id, Sequence number, Ev Idx, Record function id,
  wait_on_cuda_event_record_corr_id: + k * (the largest id in the seed + 1), one offset for
  all of them, so every link inside a copy (op -> launch -> kernel, flow start -> end, Python
  parent -> child, forward -> backward) stays a link and no id is shared between copies
  (0 and negative values, which mean "none", are left alone);
- ProfilerStep#N: + k * (number of steps), so steps stay consecutive.

The trace-level span is stretched over all the copies and "Record Window End" moved after
them. Module ids and addresses are kept: copies call the same modules and reuse memory.

--synth-gpu (for a CPU trace) gives each leaf aten operator that would run on a GPU a
cudaLaunchKernel call (cuda_runtime, inside the operator), a kernel (pid 0, stream 7,
Kineto's kernel args: grid, block, registers, shared memory, blocks/warps per SM,
occupancy) that starts after the launch and after the previous kernel on the stream, an
ac2g flow from launch to kernel, the GPU's process/thread metadata and a deviceProperties
entry. A seed that already has device events is left as it is.

Memory: the seed is parsed once; each copy is made from the seed's text and one vector of
numbers (numpy), written and dropped, so a 1 GB output needs about what the seed needs
(a few hundred MB for a 35 MB seed), not the output's size.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

SEP = ",\n  "
GAP_US = 1000  # between copies

# Integer fields holding ids that link events. "id" counts only in flow events (s/f/t).
ID_KEYS = ("External id", "external id", "correlation", "Record function id", "Ev Idx", "Sequence number",
           "Python id", "Python parent id", "wait_on_cuda_event_record_corr_id", "id")
ZERO_IS_AN_ID = {"Ev Idx", "id"}  # elsewhere 0 means "none"
TIME_KEYS = ("ts", "external ts")
FLOW_PHASES = {"s", "f", "t"}

_KEYS = "|".join(re.escape(k) for k in TIME_KEYS + ID_KEYS)
# a key, then its integer (or the integer part of a decimal), optionally written as a string
SLOT_RE = re.compile(r'"(' + _KEYS + r')"\s*:\s*"?(-?\d+)(?=[.,\s}\]"])|"name"\s*:\s*"ProfilerStep#(\d+)"')
TS_TEXT_RE = re.compile(r'"(ts|dur)"\s*:\s*"?(-?)(\d+)(\.\d+)?(?=[,\s}\]"])')
KIND_TS, KIND_ID, KIND_STEP = 0, 1, 2

# Leaf aten ops that launch no kernel (views, metadata, allocation).
NO_KERNEL = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::view", "aten::_unsafe_view", "aten::reshape",
    "aten::as_strided", "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::select",
    "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::detach_", "aten::alias",
    "aten::resize_", "aten::set_", "aten::lift_fresh", "aten::item", "aten::_local_scalar_dense", "aten::size",
    "aten::stride", "aten::is_nonzero", "aten::result_type", "aten::_reshape_alias", "aten::numpy_T",
    "aten::unbind", "aten::split", "aten::chunk", "aten::narrow", "aten::flatten", "aten::contiguous",
    "aten::to", "aten::_to_copy", "aten::type_as", "aten::view_as", "aten::expand_as", "aten::requires_grad_",
    "aten::new_empty", "aten::new_empty_strided", "aten::scalar_tensor", "aten::record_stream",
    "aten::as_strided_", "aten::resolve_conj", "aten::resolve_neg", "aten::conj", "aten::_conj",
    "aten::view_as_real", "aten::view_as_complex", "aten::_has_compatible_shallow_copy_type", "aten::is_same_size",
}
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events"}

GPU_META = [
    ("process_name", 0, 0, '"name": "python"'),
    ("process_labels", 0, 0, '"labels": "GPU 0"'),
    ("process_sort_index", 0, 0, '"sort_index": 16777216'),
    ("thread_name", 0, 7, '"name": "stream 7 "'),
    ("thread_sort_index", 0, 7, '"sort_index": 7'),
]
GPU_DEVICE_PROPERTIES = """[
    {
      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }
  ]"""
NUM_SMS = 132


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 100M, 1G, 123456)")
    return int(float(m.group(1)) * (1 << (10 * " KMGT".index(m.group(2).upper() or " "))))


def read_text(path: Path) -> str:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", "surrogateescape")


# ------------------------------------------------------------------------------ the seed

class Seed:
    """The seed split into head text, events (own text + parsed dict) and tail text."""

    def __init__(self, text: str):
        start = len(text) - len(text.lstrip())
        if text[start:start + 1] == "[":  # legacy bare array
            open_at = start
        else:
            m = re.search(r'"traceEvents"\s*:\s*\[', text)
            if not m:
                raise ValueError("no traceEvents array in the seed")
            open_at = m.end() - 1
        self.head = text[:open_at + 1]
        dec = json.JSONDecoder()
        self.chunks: list[str] = []
        self.events: list[dict] = []
        i, n = open_at + 1, len(text)
        ws = " \t\r\n"
        while True:
            while i < n and text[i] in ws:
                i += 1
            if i >= n:
                raise ValueError("unterminated traceEvents array")
            if text[i] == "]":
                break
            ev, j = dec.raw_decode(text, i)
            if not isinstance(ev, dict):
                raise ValueError(f"an event that is not an object at character {i}")
            self.chunks.append(text[i:j])
            self.events.append(ev)
            i = j
            while i < n and text[i] in ws:
                i += 1
            if i < n and text[i] == ",":
                i += 1
            elif i >= n or text[i] != "]":
                raise ValueError(f"expected ',' or ']' at character {i}")
        self.tail = text[i:]
        self.bare_array = text[start:start + 1] == "["
        json.loads(self.head + self.tail)  # the rest of the document stays valid around the events

    @staticmethod
    def is_trace_level(ev: dict) -> bool:
        pid = ev.get("pid")
        if isinstance(pid, int):
            return False
        return not (isinstance(pid, str) and pid.strip().lstrip("-").isdigit())


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) or (isinstance(v, str) and v.strip()) else 0.0


def _fmt_us(ns: int) -> str:
    """ns as Kineto writes microseconds: three decimals, exact."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


# ------------------------------------------------------------------------------ --synth-gpu

def _is_compute_op(e: dict) -> bool:
    name = str(e.get("name", ""))
    return e.get("cat") in ("cpu_op", "Operator") and name.startswith("aten::") and name not in NO_KERNEL


def _launch_gaps(body: list[tuple[str, dict]]) -> list[tuple[dict, int, int]]:
    """(op, gap start ns, gap end ns) for each compute op none of whose children is a compute
    op: the widest stretch of the op with no child event in it, where a launch nests cleanly."""
    threads: dict[tuple[str, str], list[tuple[int, int, dict]]] = {}
    for _, e in body:
        if e.get("ph") == "X" and "ts" in e and "dur" in e:
            ts = round(_num(e["ts"]) * 1000)
            threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(
                (ts, ts + round(_num(e["dur"]) * 1000), e))
    out = []
    for events in threads.values():
        events.sort(key=lambda x: (x[0], -x[1]))
        children: dict[int, list[tuple[int, int, dict]]] = {}
        stack: list[tuple[int, int, dict]] = []
        for ev in events:
            while stack and stack[-1][1] <= ev[0]:
                stack.pop()
            if stack:
                children.setdefault(id(stack[-1][2]), []).append(ev)
            stack.append(ev)
        for ts, end, e in events:
            if not _is_compute_op(e) or end <= ts:
                continue
            kids = children.get(id(e), [])
            if any(_is_compute_op(k[2]) for k in kids):
                continue
            edges = [ts] + [x for k in kids for x in (k[0], k[1])] + [end]
            best = max(((edges[i], edges[i + 1]) for i in range(0, len(edges), 2)), key=lambda g: g[1] - g[0])
            if best[1] - best[0] >= 1000:  # room for a launch of at least half a microsecond
                out.append((e, best[0], best[1]))
    out.sort(key=lambda x: x[1])
    return out


def synth_gpu(body: list[tuple[str, dict]], first_id: int, seed: int = 0) -> tuple[list[tuple[str, dict]], int]:
    """Kineto-formatted launch / kernel / ac2g flow events for the aten ops of `body` that do
    the work (no aten op that does work below them). Returns (events, how many kernels)."""
    rng = np.random.default_rng(seed)
    chosen = _launch_gaps(body)
    out = []
    corr = first_id
    stream_free = -(1 << 62)
    for e, gap_lo, gap_hi in chosen:
        dur_ns = round(_num(e["dur"]) * 1000)
        ext = (e.get("args") or {}).get("External id")
        # the launch: 2-8 us as the CUDA runtime takes, inside a gap between the op's children
        ldur = int(min((gap_hi - gap_lo) * 0.6, rng.integers(2000, 8000)))
        lts = gap_lo + (gap_hi - gap_lo - ldur) // 2
        # the kernel: after the launch plus a few us of latency, after the stream's previous kernel
        kts = max(lts + ldur + int(rng.integers(3000, 12000)), stream_free + 1000)
        name = e["name"][len("aten::"):]
        heavy = any(s in name for s in ("conv", "mm", "matmul", "linear", "bmm", "addmm"))
        # a GPU is faster than the CPU op that launched the work: kernels mostly keep up
        kdur = int(max(1000, dur_ns * (rng.uniform(0.2, 0.9) if heavy else rng.uniform(0.05, 0.5))))
        kdur = min(kdur, 20_000_000)
        stream_free = kts + kdur
        if heavy:
            kname = ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
                     "segment_k_off_kernel__5x_cublas")
            grid, block, regs, smem = int(rng.choice([66, 132, 264, 528])), 384, 168, 213_248
        else:
            kname = (f"void at::native::vectorized_elementwise_kernel<4, at::native::{name}_kernel_cuda"
                     f"<float>, at::detail::Array<char*, 2> >(int, at::native::{name}_kernel_cuda<float>, "
                     f"at::detail::Array<char*, 2>)")
            grid, block, regs, smem = int(rng.choice([1, 4, 64, 512, 1024, 4096])), 128, 26, 0
        blocks_per_sm = grid / NUM_SMS
        warps_per_sm = grid * block / 32 / NUM_SMS
        occupancy = int(min(100, round(100 * min(warps_per_sm, 64) / 64)))
        pid, tid = json.dumps(e["pid"]), json.dumps(e["tid"])
        ext_arg = f'"External id": {ext}, ' if isinstance(ext, int) else ""
        launch = (f'{{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, "tid": {tid},\n'
                  f'    "ts": {_fmt_us(lts)}, "dur": {_fmt_us(ldur)},\n'
                  f'    "args": {{\n      {ext_arg}"cbid": 211, "correlation": {corr}\n    }}\n  }}')
        kernel = (f'{{\n    "ph": "X", "cat": "kernel", "name": {json.dumps(kname)}, "pid": 0, "tid": 7,\n'
                  f'    "ts": {_fmt_us(kts)}, "dur": {_fmt_us(kdur)},\n'
                  f'    "args": {{\n      {ext_arg}"queued": 0, "device": 0, "context": 1,\n'
                  f'      "stream": 7, "correlation": {corr},\n'
                  f'      "registers per thread": {regs}, "shared memory": {smem}, '
                  f'"blocks per SM": {blocks_per_sm:.6f}, "warps per SM": {warps_per_sm:.6f},\n'
                  f'      "grid": [{grid}, 1, 1], "block": [{block}, 1, 1], "est. achieved occupancy %": {occupancy}\n'
                  f'    }}\n  }}')
        start = (f'{{\n    "ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {_fmt_us(lts)},\n'
                 f'    "cat": "ac2g", "name": "ac2g"\n  }}')
        end = (f'{{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {_fmt_us(kts)},\n'
               f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}')
        for text in (launch, kernel, start, end):
            out.append((text, json.loads(text)))
        corr += 1
    return out, len(chosen)


def gpu_metadata(ts_text: str) -> list[tuple[str, dict]]:
    out = []
    for name, pid, tid, args in GPU_META:
        text = (f'{{\n    "name": "{name}", "ph": "M", "ts": {ts_text}, "pid": {pid}, "tid": {tid},\n'
                f'    "args": {{\n      {args}\n    }}\n  }}')
        out.append((text, json.loads(text)))
    return out


def with_device_properties(head: str) -> str:
    m = re.search(r'"deviceProperties"\s*:\s*\[\s*\]', head)
    if m:
        return head[:m.start()] + '"deviceProperties": ' + GPU_DEVICE_PROPERTIES + head[m.end():]
    if '"deviceProperties"' in head:
        return head  # the seed names its devices already
    brace = head.index("{")
    return head[:brace + 1] + '\n  "deviceProperties": ' + GPU_DEVICE_PROPERTIES + "," + head[brace + 1:]


# ------------------------------------------------------------------------------ the copies

class Body:
    """The events copied K times: one text with its numeric slots cut out, and per slot the
    seed's value and how much it moves per copy (period_us for times, the id offset for
    ids, the number of steps for ProfilerStep#N)."""

    def __init__(self, events: list[tuple[str, dict]], period_us: int):
        text = SEP.join(c for c, _ in events)
        starts = np.cumsum([0] + [len(c) + len(SEP) for c, _ in events[:-1]])
        is_flow = np.array([e.get("ph") in FLOW_PHASES for _, e in events], dtype=bool)
        cuts, base, kind = [], [], []
        for m in SLOT_RE.finditer(text):
            if m.group(3) is not None:  # ProfilerStep#N
                cuts.append(m.span(3)), base.append(int(m.group(3))), kind.append(KIND_STEP)
                continue
            key, value = m.group(1), int(m.group(2))
            if key in TIME_KEYS:
                k = KIND_TS
            else:
                if key == "id" and not is_flow[np.searchsorted(starts, m.start(), "right") - 1]:
                    continue
                if value < 0 or (value == 0 and key not in ZERO_IS_AN_ID):
                    continue
                k = KIND_ID
            cuts.append(m.span(2)), base.append(value), kind.append(k)
        self.base = np.array(base, dtype=np.int64)
        kinds = np.array(kind, dtype=np.int64)
        ids, step_numbers = self.base[kinds == KIND_ID], self.base[kinds == KIND_STEP]
        self.id_offset = int(ids.max()) + 1 if len(ids) else 0
        self.n_steps = int(step_numbers.max() - step_numbers.min() + 1) if len(step_numbers) else 0
        self.period_us = period_us
        self.step = np.array([period_us, self.id_offset, self.n_steps], dtype=np.int64)[kinds]
        bounds = [0, *[x for ab in cuts for x in ab], len(text)]
        self.parts = [text[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2)]
        self.n_events = len(events)
        self.n_slots = len(base)

    def copy(self, k: int) -> str:
        values = (self.base + k * self.step).tolist()
        out = [""] * (2 * len(self.parts) - 1)
        out[0::2] = self.parts
        out[1::2] = map(str, values)
        return "".join(out)


def _shift_text(chunk: str, key: str, delta_us: int) -> str:
    """`key` ("ts" or "dur") of one event's text + delta_us, decimals kept."""
    def repl(m):
        if m.group(1) != key:
            return m.group(0)
        value = int(m.group(2) + m.group(3)) + delta_us
        return m.group(0)[:m.start(2) - m.start(0)] + str(value) + (m.group(4) or "")
    return TS_TEXT_RE.sub(repl, chunk)


def build(seed_path: Path, target: int, out_path: Path, synth: bool = False, copies: int | None = None,
          gzip_level: int = 6, quiet: bool = False) -> dict:
    t0 = time.monotonic()
    seed = Seed(read_text(seed_path))
    meta, late, early, body = [], [], [], []
    first_body = next((i for i, e in enumerate(seed.events)
                       if e.get("ph") != "M" and not Seed.is_trace_level(e)), None)
    if first_body is None:
        raise ValueError("the seed has no events to copy (only metadata and trace-level events)")
    for i, (c, e) in enumerate(zip(seed.chunks, seed.events)):
        if e.get("ph") == "M":
            meta.append((c, e))
        elif Seed.is_trace_level(e):
            (early if i < first_body and e.get("ph") != "X" else late).append((c, e))
        else:
            body.append((c, e))

    head = seed.head
    notes = []
    n_kernels = 0
    if synth:
        if any(e.get("cat") in DEVICE_CATS for _, e in body):
            notes.append("--synth-gpu: the seed has device events already; none added")
        else:
            top = 0
            for _, e in body:
                for d in (e, e.get("args") or {}):
                    for key in ID_KEYS:
                        v = d.get(key)
                        if isinstance(v, int) and not isinstance(v, bool):
                            top = max(top, v)
            gpu, n_kernels = synth_gpu(body, top + 1)
            body += gpu
            first_ts = min((_num(e["ts"]) for _, e in body if "ts" in e), default=0.0)
            meta += gpu_metadata(_fmt_us(round(first_ts * 1000)))
            if not seed.bare_array:
                head = with_device_properties(head)

    # what moves per copy
    t_lo = min(_num(e["ts"]) for _, e in body if "ts" in e)
    t_hi = max(_num(e["ts"]) + _num(e.get("dur", 0)) for _, e in body if "ts" in e)
    period = int(math.ceil(t_hi - t_lo)) + GAP_US
    copy_body = Body(body, period)
    for c, e in body:  # every timestamp must have been found as a slot (no exponent spellings)
        if "ts" in e and not re.search(r'"ts"\s*:\s*"?-?\d+(?=[.,\s}\]"])', c):
            raise ValueError(f"a ts spelled in a way this tool cannot shift: {c[:200]!r}")

    mid = (t_lo + t_hi) / 2
    t0_written = time.monotonic()
    tmp = out_path.with_name(out_path.name + ".tmp")
    raw = open(tmp, "wb", buffering=1 << 22)
    sink = raw
    if out_path.name.endswith(".gz"):
        sink = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=gzip_level, mtime=0)
    written = 0

    def put(s: str) -> None:
        nonlocal written
        b = s.encode("utf-8", "surrogateescape")
        sink.write(b)
        written += len(b)

    def late_text(k_last: int) -> list[str]:
        out = []
        for c, e in late:
            if e.get("ph") == "X":
                c = _shift_text(c, "dur", k_last * period)  # the trace-level span covers every copy
            elif _num(e.get("ts", 0)) >= mid:
                c = _shift_text(c, "ts", k_last * period)  # e.g. Record Window End: after the last copy
            out.append(c)
        return out

    try:
        put(head)
        lead = [c for c, _ in meta] + [c for c, _ in early]
        put("\n  " + SEP.join(lead) + (SEP if lead else ""))
        late_size = sum(len(x.encode()) + len(SEP) for x in late_text(0)) + len(seed.tail.encode()) + 4
        k = 0
        while True:
            put(copy_body.copy(k))
            k += 1
            if copies is not None:
                if k >= copies:
                    break
            elif written + late_size >= target:
                break
            put(SEP)
        tail_events = late_text(k - 1)
        put((SEP + SEP.join(tail_events) if tail_events else "") + "\n")
        put(seed.tail)
    except BaseException:
        raw.close()
        tmp.unlink(missing_ok=True)
        raise
    if sink is not raw:
        sink.close()
    raw.close()
    os.replace(tmp, out_path)
    info = {"output": str(out_path), "seed": str(seed_path), "copies": k,
            "events": len(meta) + len(early) + len(late) + k * copy_body.n_events,
            "events_per_copy": copy_body.n_events, "slots_per_copy": copy_body.n_slots,
            "period_us": period, "id_offset": copy_body.id_offset, "steps_per_copy": copy_body.n_steps,
            "synthetic_kernels_per_copy": n_kernels, "json_bytes": written, "file_bytes": out_path.stat().st_size,
            "seconds": round(time.monotonic() - t0, 2), "write_seconds": round(time.monotonic() - t0_written, 2),
            "notes": notes}
    if not quiet:
        print(json.dumps(info))
    return info


# ------------------------------------------------------------------------------ --validate

def trace_stats(path: Path) -> dict:
    """What the copies must multiply, read with json (as much memory as a json.loads of the
    file: for small outputs)."""
    doc = json.loads(read_text(path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    steps = sorted(int(e["name"].split("#")[1]) for e in events
                   if e.get("cat") in ("user_annotation", "cpu_op", "Operator") and
                   str(e.get("name", "")).startswith("ProfilerStep#"))
    ext = [e["args"]["External id"] for e in events if e.get("cat") in ("cpu_op", "Operator", "user_annotation")
           and isinstance((e.get("args") or {}).get("External id"), int) and e["args"]["External id"] > 0]
    flows: dict[tuple, list[int]] = {}
    for e in events:
        if e.get("ph") in ("s", "f"):
            flows.setdefault((e.get("cat"), e["id"]), [0, 0])[e["ph"] == "f"] += 1
    launches = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "Runtime")
                and isinstance((e.get("args") or {}).get("correlation"), int)}
    kernels = [e["args"].get("correlation") for e in events if e.get("cat") in ("kernel", "Kernel")]
    return {"events": len(events), "steps": steps, "external_id_repeats": len(ext) - len(set(ext)),
            "flows_paired": sum(1 for s, f in flows.values() if s and f),
            "flows_unpaired": sum(1 for s, f in flows.values() if not (s and f)),
            "kernels": len(kernels), "kernels_without_launch": sum(c not in launches for c in kernels),
            "kernel_correlation_repeats": len(kernels) - len(set(kernels)),
            "ts": [_num(e["ts"]) for e in events if "ts" in e and e.get("ph") != "M"]}


def validate(path: Path, seed: Path, info: dict) -> dict:
    """The output is JSON, and has exactly `copies` times the seed's steps, kernels, flows and
    links: ids are fresh in every copy (no new repeats), no link lost or made."""
    out, one, k = trace_stats(path), trace_stats(seed), info["copies"]
    synth = info["synthetic_kernels_per_copy"]
    assert out["events"] == info["events"], (out["events"], info["events"])
    if one["steps"]:
        n = max(one["steps"]) - min(one["steps"]) + 1
        assert out["steps"] == list(range(min(one["steps"]), min(one["steps"]) + k * n)) or \
            sorted(set(out["steps"])) == list(range(min(one["steps"]), min(one["steps"]) + k * n)), "steps"
    for key in ("external_id_repeats", "flows_unpaired", "kernels_without_launch", "kernel_correlation_repeats"):
        assert out[key] == k * one[key], (key, out[key], k, one[key])
    assert out["kernels"] == k * (one["kernels"] + synth), ("kernels", out["kernels"], one["kernels"], synth)
    assert out["flows_paired"] == k * (one["flows_paired"] + synth), ("flows", out["flows_paired"])
    span = max(out["ts"]) - min(out["ts"])
    assert span >= (k - 1) * info["period_us"], "copies overlap in time"
    result = {"validated": str(path), "events": out["events"], "copies": k,
              "steps": f"{out['steps'][0]}..{out['steps'][-1]}" if out["steps"] else None,
              "kernels": out["kernels"], "flows": out["flows_paired"], "span_us": round(span, 3)}
    print(json.dumps(result))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seed", type=Path, help="real trace (.json or .json.gz)")
    ap.add_argument("size", type=parse_size, help="JSON bytes wanted: 100M, 1G, ...")
    ap.add_argument("output", type=Path, help="trace to write (.gz: gzipped)")
    ap.add_argument("--synth-gpu", action="store_true", help="add kernels, launches and ac2g flows to a CPU trace")
    ap.add_argument("--copies", type=int, default=None, help="exactly this many copies (SIZE is then ignored)")
    ap.add_argument("--gzip-level", type=int, default=6)
    ap.add_argument("--validate", action="store_true",
                    help="re-read the output and the seed with json and check the copies (small outputs)")
    args = ap.parse_args(argv)
    try:
        info = build(args.seed, args.size, args.output, args.synth_gpu, args.copies, args.gzip_level)
    except (OSError, ValueError) as exc:
        print(f"make_big_trace: {exc}", file=sys.stderr)
        return 1
    if args.validate:
        validate(args.output, args.seed, info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
