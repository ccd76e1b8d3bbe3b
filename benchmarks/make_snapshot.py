"""Write a large CUDA allocator snapshot (default 2 GB) without holding it in memory.

The issue's benchmark needs snapshots of several GB, more than ``pickle.dump`` of a dict
could build on this machine, so this tool streams pickle protocol 4 opcodes straight to the
file, 64 KiB FRAMEs as CPython's pickler writes them, memo indices kept as its memo keeps
them. Content follows ``torch.cuda.memory._snapshot()``: 1-4 devices, several streams,
weights that stay live plus training steps that allocate activations in order and free
them in reverse, deep stacks from a pool of a few thousand, an ``oom`` at the end; the
history replayed ends in the segments (tests/snapshot_fixtures.py holds the same rules).

Frames (``--frames``): ``torch`` (default) as ``py_symbolize`` builds them: a new list per
context (shared by an alloc entry and its block) of shared frame dicts; ``shared``: one list
object per distinct stack; ``inline``: nothing shared (every list and frame dict written out).

The parts that set up memo entries (segments, each device's first step, the last step, the
OOM) go through ``MiniPickler`` over real dicts; the steps in between are encoded with numpy,
a row of bytes per entry. ``build(plan)`` makes the same snapshot as a dict: ``--check``
writes a small one and compares ``pickle.load`` of it with ``build``.

    python benchmarks/make_snapshot.py /tmp/snap.pickle --size 2G --devices 2
"""
from __future__ import annotations

import argparse
import pickle
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snapshot_encode as enc  # noqa: E402

MB = 1024 * 1024
SMALL_SIZE, SMALL_BUFFER, LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE = MB, 2 * MB, 20 * MB, 10 * MB, 2 * MB
T0_US = 1_750_000_000_000_000
STREAMS = (0, 94_558_317_812_736, 94_558_317_815_040, 94_558_317_817_344)
STEP_CHUNK = 16          # steps encoded per numpy batch
KEYS = {k: k for k in ("action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata",
                       "frames", "device_free")}
ACTIONS = {a: a for a in ("alloc", "free_requested", "free_completed", "segment_alloc", "oom")}
EMPTY_STR = ""


def round_size(n: int) -> int:
    return 512 if n < 512 else 512 * ((n + 511) // 512)


@dataclass
class Plan:
    """Everything the snapshot is made of, drawn from one seed."""
    devices: int = 2
    streams: int = 3
    slots_per_stream: int = 100
    n_stacks: int = 2000
    frames_mode: str = "torch"
    seed: int = 0
    body_steps: int = 10
    frames: list = field(default_factory=list)      # frame dicts (shared objects)
    stacks: list = field(default_factory=list)      # per stack: list of frame indices
    stack_lists: list = field(default_factory=list)  # per stack: one list object ("shared" mode)
    layouts: list = field(default_factory=list)     # per device: Layout

    @property
    def steps(self) -> int:
        return self.body_steps + 2     # first step (slow), body, last full step counted in body


@dataclass
class Layout:
    """One device: its segments and where each weight and activation slot lives."""
    segments: list       # dicts: address, total_size, stream, small, blocks [(slot or weight key, size)]
    weight_addr: np.ndarray
    weight_req: np.ndarray
    weight_size: np.ndarray
    slot_addr: np.ndarray
    slot_size: np.ndarray
    slot_stream: np.ndarray
    seg_first: dict      # key ("w", i) / ("s", j) -> segment index it opened


def make_pool(plan: Plan, rng: np.random.Generator) -> None:
    """A few thousand distinct stacks, 8-48 frames deep, over a shared pool of frames."""
    n_frames = 3 * plan.n_stacks
    files = [f"/home/user/project/pkg/module_{i % 300}.py" for i in range(n_frames)]
    plan.frames = [{"name": f"fn_{i}_" + "x" * (i % 17), "filename": files[i], "line": int(10 + i % 900)}
                   for i in range(n_frames)]
    outer = [0, 1, 2, 3]     # the training loop every stack ends in
    plan.stacks = [list(rng.choice(np.arange(4, n_frames), int(rng.integers(4, 44)), replace=False)) + outer
                   for _ in range(plan.n_stacks)]
    plan.stack_lists = [[plan.frames[f] for f in s] for s in plan.stacks]


def _pack(sizes: np.ndarray, streams: np.ndarray, keys: list, base: int, segments: list,
          addrs: np.ndarray, block_sizes: np.ndarray, seg_first: dict) -> int:
    """Place requests in order as a cache that never frees would (c10 rules: small pool
    2 MB segments, large 20 MB, >= 10 MB its own; split only when the rest is >= 512 B small,
    > 1 MB large, else the block keeps the rest). Small loop: weights and slots, not entries."""
    open_seg: dict = {}
    for i, (req, stream, key) in enumerate(zip(sizes.tolist(), streams.tolist(), keys)):
        size = round_size(req)
        small = size <= SMALL_SIZE
        seg = open_seg.get((stream, small))
        if seg is None or seg["free"] < size:
            total = SMALL_BUFFER if small else (LARGE_BUFFER if size < MIN_LARGE_ALLOC
                                                else ROUND_LARGE * -(-size // ROUND_LARGE))
            seg = {"address": base, "total_size": total, "stream": stream, "small": small, "blocks": [],
                   "free": total}
            base += total + ROUND_LARGE
            seg_first[key] = len(segments)
            segments.append(seg)
            open_seg[(stream, small)] = seg
        rest = seg["free"] - size
        if not ((rest >= 512) if small else (rest > SMALL_SIZE)):
            size, rest = seg["free"], 0
        addrs[i] = seg["address"] + seg["total_size"] - seg["free"]
        block_sizes[i] = size
        seg["blocks"].append([key, size])
        seg["free"] = rest
    return base


def make_layout(plan: Plan, dev: int, rng: np.random.Generator) -> Layout:
    w_req = np.exp(rng.uniform(np.log(512), np.log(8 * MB), plan.n_stacks)).astype(np.int64)
    n_slots = plan.streams * plan.slots_per_stream
    s_req = np.exp(rng.uniform(np.log(512), np.log(12 * MB), n_slots)).astype(np.int64)
    s_size = np.array([round_size(int(x)) for x in s_req], dtype=np.int64)
    s_stream = np.repeat(np.array(STREAMS[:plan.streams], dtype=np.int64), plan.slots_per_stream)
    segments: list = []
    seg_first: dict = {}
    w_addr, w_size = np.zeros_like(w_req), np.zeros_like(w_req)
    base = 0x7F00_0000_0000 + dev * (1 << 40)
    base = _pack(w_req, np.zeros_like(w_req), [("w", i) for i in range(len(w_req))], base, segments,
                 w_addr, w_size, seg_first)
    s_addr, s_block = np.zeros_like(s_size), np.zeros_like(s_size)
    _pack(s_size, s_stream, [("s", j) for j in range(n_slots)], base, segments, s_addr, s_block, seg_first)
    return Layout(segments, w_addr, w_req, w_size, s_addr, s_block, s_stream, seg_first)


def make_plan(size: int = 0, **kw: Any) -> Plan:
    """A plan whose file is about `size` bytes (0: keep kw's body_steps)."""
    plan = Plan(**kw)
    rng = np.random.default_rng(plan.seed)
    make_pool(plan, rng)
    plan.layouts = [make_layout(plan, d, rng) for d in range(plan.devices)]
    if size:
        per_step = enc.estimate_step_bytes(plan)
        fixed = 250 * plan.n_stacks * plan.devices + 3 * per_step * plan.devices
        plan.body_steps = max(1, int((size - fixed) / (per_step * plan.devices)))
    return plan


# -- the history, as numpy arrays ------------------------------------------------------------------

def step_events(plan: Plan, dev: int, first: int, last: int) -> dict[str, np.ndarray]:
    """Entries of steps [first, last): each allocates every slot in order, then frees them in
    reverse (free_requested, free_completed). Drawn from (seed, dev, first): the builder and
    the encoder get the same arrays."""
    lay = plan.layouts[dev]
    k = len(lay.slot_addr)
    n_steps = last - first
    rng = np.random.default_rng([plan.seed, dev, first])
    order = np.concatenate([np.arange(k), np.repeat(np.arange(k)[::-1], 2)])
    slot = np.tile(order, n_steps)
    action = np.tile(np.concatenate([np.zeros(k, np.int8), np.tile(np.array([1, 2], np.int8), k)]), n_steps)
    alloc_req = lay.slot_size[None, :] - rng.integers(0, 512, (n_steps, k))
    alloc_req = np.maximum(alloc_req, 1)
    req_rows = np.concatenate([alloc_req, np.repeat(alloc_req[:, ::-1], 2, axis=1)], axis=1)
    per = 3 * k
    incr = rng.integers(1, 20, n_steps * per)
    step_of = np.repeat(np.arange(first, last), per)
    within = np.cumsum(incr.reshape(n_steps, per), axis=1).ravel()
    return {"action": action, "addr": lay.slot_addr[slot], "size": req_rows.ravel(),
            "stream": lay.slot_stream[slot], "time_us": T0_US + dev * 3 + step_of * (per * 20 + 1000) + within,
            "stack": rng.integers(0, plan.n_stacks, n_steps * per)}


def _frames_obj(plan: Plan, stack: int) -> list:
    """The frames object of one context in the plan's mode."""
    if plan.frames_mode == "shared":
        return plan.stack_lists[stack]
    if plan.frames_mode == "torch":
        return list(plan.stack_lists[stack])
    return [{"name": _fresh(f["name"]), "filename": _fresh(f["filename"]), "line": f["line"]}
            for f in plan.stack_lists[stack]]


def _fresh(s: str) -> str:
    """An equal str that is another object (pickle then writes it again, as when not shared)."""
    return (s + "!")[:-1]


def entry(plan: Plan, action: str, addr: int, size: int, stream: int, t: int, frames: Any) -> dict:
    e = {KEYS["action"]: ACTIONS[action]}
    e[KEYS["device_free" if action == "oom" else "addr"]] = addr
    e.update({KEYS["size"]: size, KEYS["stream"]: stream, KEYS["time_us"]: t,
              KEYS["compile_context"]: _fresh("N/A"), KEYS["user_metadata"]: EMPTY_STR, KEYS["frames"]: frames})
    return e


def events_to_dicts(plan: Plan, ev: dict[str, np.ndarray]) -> Iterator[dict]:
    names = ("alloc", "free_requested", "free_completed")
    cols = [ev[c].tolist() for c in ("action", "addr", "size", "stream", "time_us", "stack")]
    for a, addr, size, stream, t, st in zip(*cols):
        yield entry(plan, names[a], addr, size, stream, t, _frames_obj(plan, st))


# -- the parts built as dicts (also what build() returns) -----------------------------------------

@dataclass
class DeviceParts:
    prefix: list      # segment_alloc + weight allocs + the first step (dicts)
    tail: list        # the last step's allocs (live at the end) + the OOM (last device)
    segments: list    # segment dicts


def device_parts(plan: Plan, dev: int) -> DeviceParts:
    """The slow parts of one device: the prefix (every weight and the first step, where
    segments are cudaMalloc'd) and the tail (half the slots allocated again, live at the end)."""
    lay = plan.layouts[dev]
    prefix: list = []
    ctx_of: dict = {}
    t = T0_US - 10_000_000 + dev * 3
    for i in range(len(lay.weight_addr)):
        ctx = _frames_obj(plan, i)
        ctx_of[("w", i)] = (ctx, int(lay.weight_req[i]))
        t += 5
        if ("w", i) in lay.seg_first:
            seg = lay.segments[lay.seg_first[("w", i)]]
            seg["ctx"] = ctx
            prefix.append(entry(plan, "segment_alloc", seg["address"], seg["total_size"], 0, t, ctx))
        prefix.append(entry(plan, "alloc", int(lay.weight_addr[i]), int(lay.weight_req[i]), 0, t, ctx))
    first = list(events_to_dicts(plan, step_events(plan, dev, 0, 1)))
    for j in range(len(lay.slot_addr)):
        if ("s", j) in lay.seg_first:   # the first step's alloc of slot j opened a segment
            e = first[j]
            seg = lay.segments[lay.seg_first[("s", j)]]
            seg["ctx"] = e["frames"]
            e_seg = entry(plan, "segment_alloc", seg["address"], seg["total_size"], e["stream"],
                          e["time_us"], e["frames"])
            first[j] = [e_seg, e]
    for x in first:
        prefix.extend(x if isinstance(x, list) else [x])
    last = plan.steps - 1
    ev = step_events(plan, dev, last, last + 1)
    half = len(lay.slot_addr) // 2
    tail = list(events_to_dicts(plan, {c: v[:half] for c, v in ev.items()}))
    for j, e in enumerate(tail):
        ctx_of[("s", j)] = (e["frames"], e["size"])
    if dev == plan.devices - 1:
        t_end = tail[-1]["time_us"] + 50
        tail.append(entry(plan, "oom", 3 * MB, 64 * MB, 0, t_end, _frames_obj(plan, 0)))
    return DeviceParts(prefix, tail, [_segment_dict(plan, dev, s, ctx_of) for s in lay.segments])


def _segment_dict(plan: Plan, dev: int, seg: dict, ctx_of: dict) -> dict:
    blocks, addr, merged = [], seg["address"], []
    for key, size in seg["blocks"] + ([[None, seg["free"]]] if seg["free"] else []):
        live = key in ctx_of
        if not live and merged and merged[-1][0] is None:
            merged[-1][1] += size
        else:
            merged.append([key if live else None, size])
    alloc = req = 0
    for key, size in merged:
        ctx, r = ctx_of[key] if key is not None else (enc.EMPTY_FRAMES, 0)
        blocks.append({"address": addr, "size": size, "requested_size": r,
                       "state": "active_allocated" if key is not None else "inactive", "frames": ctx})
        addr += size
        if key is not None:
            alloc += size
            req += r
    return {"device": dev, "address": seg["address"], "total_size": seg["total_size"], "allocated_size": alloc,
            "active_size": alloc, "requested_size": req, "stream": seg["stream"],
            "segment_type": "small" if seg["small"] else "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "blocks": blocks, "frames": seg["ctx"]}


SETTINGS = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1, "release_lock_on_malloc": False,
            "pinned_use_host_register": False, "roundup_power2_divisions": {}}


def build(plan: Plan) -> dict:
    """The whole snapshot as a dict (small plans only): what the streamed file must load as."""
    parts = [device_parts(plan, d) for d in range(plan.devices)]
    traces = []
    for d, p in enumerate(parts):
        body = [e for a in range(1, plan.steps - 1, STEP_CHUNK)
                for e in events_to_dicts(plan, step_events(plan, d, a, min(a + STEP_CHUNK, plan.steps - 1)))]
        traces.append(p.prefix + body + p.tail)
    return {"segments": [s for p in parts for s in p.segments], "device_traces": traces,
            "allocator_settings": SETTINGS, "external_annotations": []}


def write(path: str | Path, plan: Plan) -> int:
    """Stream the plan's snapshot to `path`; returns its size in bytes."""
    parts = [device_parts(plan, d) for d in range(plan.devices)]
    with open(path, "wb") as f:
        w = enc.Writer(f)
        p = enc.MiniPickler(w)
        w.raw(b"\x80\x04")
        p.begin_dict()
        p.save("segments")
        p.save([s for part in parts for s in part.segments])
        p.save("device_traces")
        outer = enc.ListWriter(p, plan.devices)
        for d, part in enumerate(parts):
            outer.before()
            n = len(part.prefix) + 3 * len(plan.layouts[d].slot_addr) * (plan.steps - 2) + len(part.tail)
            lst = enc.ListWriter(p, n)
            for e in part.prefix:
                lst.item(e)
            for a in range(1, plan.steps - 1, STEP_CHUNK):
                enc.encode_entries(plan, p, lst, step_events(plan, d, a, min(a + STEP_CHUNK, plan.steps - 1)))
            for e in part.tail:
                lst.item(e)
            lst.end()
            outer.after()
        outer.end()
        p.save("allocator_settings")
        p.save(SETTINGS)
        p.save("external_annotations")
        p.save([])
        p.end_dict()
        w.raw_stop()
    return Path(path).stat().st_size


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def check(tmp: Path) -> None:
    """Small plans in every frames mode: the streamed file loads equal to build()."""
    for mode in ("torch", "shared", "inline"):
        plan = make_plan(devices=2, streams=2, slots_per_stream=40, n_stacks=300, frames_mode=mode, body_steps=40)
        path = tmp / f"check_{mode}.pickle"
        write(path, plan)
        with open(path, "rb") as f:
            got = pickle.load(f)
        want = build(make_plan(devices=2, streams=2, slots_per_stream=40, n_stacks=300, frames_mode=mode,
                               body_steps=40))
        assert got == want, f"{mode}: the streamed pickle differs from build()"
        print(f"check {mode}: {path.stat().st_size:,} bytes, {sum(map(len, got['device_traces'])):,} entries ok")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--size", default="2G", help="about this many bytes (K/M/G suffix)")
    ap.add_argument("--devices", type=int, default=2, choices=(1, 2, 3, 4))
    ap.add_argument("--streams", type=int, default=3, choices=(1, 2, 3, 4))
    ap.add_argument("--stacks", type=int, default=2000)
    ap.add_argument("--frames", default="torch", choices=("torch", "shared", "inline"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="verify small files against build() (path: a folder)")
    a = ap.parse_args(argv)
    if a.check:
        a.path.mkdir(parents=True, exist_ok=True)
        check(a.path)
        return
    t = time.perf_counter()
    plan = make_plan(parse_size(a.size), devices=a.devices, streams=a.streams, n_stacks=a.stacks,
                     frames_mode=a.frames, seed=a.seed)
    n = write(a.path, plan)
    print(f"{a.path}: {n:,} bytes, {plan.devices} devices x {plan.steps} steps "
          f"({3 * len(plan.layouts[0].slot_addr)} entries a step), {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
