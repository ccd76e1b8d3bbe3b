"""Memory-snapshot fixtures shaped as torch's CUDA caching allocator writes them.

No GPU here, so the CUDA fixtures come from a small replica of c10's
``CUDACachingAllocator`` (c10/cuda/CUDACachingAllocator.cpp): it applies the allocator's
rules (requests rounded to 512 B; requests <= 1 MB from the small pool's 2 MB segments,
< 10 MB from the large pool's 20 MB segments, larger ones cudaMalloc'd rounded to 2 MB;
best fit per stream and pool; blocks split when the rest is >= 512 B (small) / > 1 MB
(large); freed blocks merged with free neighbours; expandable segments grow by mapping
pages) and records each step as ``_record_memory_history`` does. ``_snapshot`` then builds
the dict as ``torch/csrc/cuda/Module.cpp``'s ``memorySnapshot`` does (its field names, key
order, int streams, tuple pool ids; frame lists shared between entries as torch's
symbolizer shares them). Because the same replica makes both the history and the final
segments, the history replayed (``torch.cuda._memory_viz.trace``, MemoryViz.js) ends in the
segments. ``cpu_profile`` is real torch output: ``_memory_viz._profile_to_snapshot`` of a
CPU ``profile_memory=True`` run. tests/data/snapshots/README.md says what each follows.
"""
from __future__ import annotations

import copy
import functools
import pickle
from pathlib import Path
from typing import Any

KB = 1024
MB = 1024 * KB
MIN_BLOCK = 512              # kMinBlockSize
SMALL_SIZE = MB              # kSmallSize: largest "small" request
SMALL_BUFFER = 2 * MB        # kSmallBuffer: small-pool segment
LARGE_BUFFER = 20 * MB       # kLargeBuffer: large-pool segment for requests < kMinLargeAlloc
MIN_LARGE_ALLOC = 10 * MB    # kMinLargeAlloc
ROUND_LARGE = 2 * MB         # kRoundLarge

T0_US = 1_750_000_000_000_000   # wall clock in microseconds, as c10's approximate clock writes it
STREAM_A = 0                    # the default stream
STREAM_B = 94_558_317_812_736   # cudaStream_t values are pointers
STREAM_C = 94_558_317_815_040
COMPILE_NA = "N/A"              # compile_context when none was recorded


def round_size(n: int) -> int:
    """c10 round_size (no roundup_power2_divisions): at least 512, a multiple of 512."""
    return MIN_BLOCK if n < MIN_BLOCK else MIN_BLOCK * ((n + MIN_BLOCK - 1) // MIN_BLOCK)


def allocation_size(size: int) -> int:
    """c10 get_allocation_size: how much cudaMalloc is asked for a rounded request."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


def frame(filename: str, line: int, name: str) -> dict:
    """A frame dict in py_symbolize's key order (name, filename, line)."""
    return {"name": name, "filename": filename, "line": line}


_TORCH = "/usr/lib/python3.11/site-packages/torch"


def stacks() -> dict[str, list[dict]]:
    """A few distinct stacks, innermost first; each list is ONE object reused by every entry."""
    train = frame("/home/user/train.py", 88, "<module>")
    step = frame("/home/user/train.py", 61, "train_step")
    fwd = frame("/home/user/model.py", 40, "forward")
    call = frame(f"{_TORCH}/nn/modules/module.py", 1784, "_call_impl")
    lin = frame(f"{_TORCH}/nn/modules/linear.py", 134, "forward")
    cpp = frame("??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc")
    return {
        "linear": [cpp, lin, call, fwd, call, step, train],
        "attn": [cpp, frame("/home/user/model.py", 52, "attention"), fwd, call, step, train],
        "grad": [cpp, frame(f"{_TORCH}/autograd/graph.py", 829, "_engine_run_backward"),
                 frame(f"{_TORCH}/_tensor.py", 647, "backward"), step, train],
        "optim": [cpp, frame(f"{_TORCH}/optim/adam.py", 413, "_single_tensor_adam"),
                  frame(f"{_TORCH}/optim/optimizer.py", 493, "wrapper"), step, train],
        "data": [frame("/home/user/data.py", 17, "collate"), frame("/home/user/train.py", 58, "train_step"),
                 step, train],
        "free": [frame(f"{_TORCH}/_tensor.py", 1120, "__del__"), step, train],
    }


class Device:
    """One device's caching allocator replica: segments of blocks, and the history it records."""

    def __init__(self, index: int, base: int, clock: list[int], expandable: bool = False):
        self.index = index
        self.next_addr = base
        self.clock = clock
        self.expandable = expandable
        self.segments: list[dict] = []   # address, total_size, stream, small, pool, expandable, frames, blocks
        self.history: list[dict] = []
        self.recording = True
        self.metadata = ""               # torch.cuda.memory._set_memory_metadata

    # -- history -----------------------------------------------------------------------------
    def record(self, action: str, addr: int | None, size: int, stream: int, frames: list | None,
               device_free: int | None = None) -> None:
        """One TraceEntry as Module.cpp writes it (oom: device_free instead of addr)."""
        self.clock[0] += 7
        if not self.recording:
            return
        e: dict[str, Any] = {"action": action}
        if action == "oom":
            e["device_free"] = device_free
        else:
            e["addr"] = addr
        e.update(size=size, stream=stream, time_us=self.clock[0], compile_context=COMPILE_NA,
                 user_metadata=self.metadata)
        if frames is not None:
            e["frames"] = frames
        self.history.append(e)

    # -- allocator ---------------------------------------------------------------------------
    def _find(self, size: int, stream: int, small: bool, pool: tuple) -> tuple[dict, int] | None:
        """Best fit: the smallest free block (then lowest address) of the same stream and pool."""
        best = None
        for seg in self.segments:
            if seg["stream"] != stream or seg["small"] != small or seg["pool"] != pool:
                continue
            addr = seg["address"]
            for i, b in enumerate(seg["blocks"]):
                if b["state"] == "inactive" and b["size"] >= size:
                    key = (b["size"], addr)
                    if best is None or key < best[0]:
                        best = (key, seg, i)
                addr += b["size"]
        return None if best is None else (best[1], best[2])

    def _new_segment(self, size: int, stream: int, small: bool, pool: tuple, frames: list) -> dict:
        alloc = allocation_size(size)
        seg = {"address": self.next_addr, "total_size": alloc, "stream": stream, "small": small,
               "pool": pool, "expandable": False, "frames": frames,
               "blocks": [_free_block(alloc)]}
        self.next_addr += ROUND_LARGE * ((alloc + ROUND_LARGE - 1) // ROUND_LARGE) + ROUND_LARGE
        self.segments.append(seg)
        self.record("segment_alloc", seg["address"], alloc, stream, frames)
        return seg

    def _grow_expandable(self, size: int, stream: int, small: bool, frames: list) -> tuple[dict, int]:
        """Map pages at the end of the stream's expandable segment (2 MB small, 20 MB large)."""
        page = SMALL_BUFFER if small else LARGE_BUFFER
        seg = next((s for s in self.segments if s["expandable"] and s["stream"] == stream
                    and s["small"] == small), None)
        if seg is None:
            seg = {"address": self.next_addr, "total_size": 0, "stream": stream, "small": small,
                   "pool": (0, 0), "expandable": True, "frames": frames, "blocks": []}
            self.next_addr += 1 << 34   # a VA range reserved up front
            self.segments.append(seg)
        tail = seg["blocks"][-1] if seg["blocks"] and seg["blocks"][-1]["state"] == "inactive" else None
        have = tail["size"] if tail else 0
        grow = page * ((size - have + page - 1) // page)
        self.record("segment_map", seg["address"] + seg["total_size"], grow, stream, frames)
        seg["total_size"] += grow
        if tail:
            tail["size"] += grow
        else:
            seg["blocks"].append(_free_block(grow))
        return seg, len(seg["blocks"]) - 1

    def malloc(self, requested: int, stream: int, frames: list, pool: tuple = (0, 0)) -> int:
        """Allocate as c10 does; returns the block's address. Records segment_alloc/map and alloc."""
        frames = list(frames)   # one context: shared by segment_alloc, alloc and the block
        size = round_size(requested)
        small = size <= SMALL_SIZE
        found = self._find(size, stream, small, pool)
        if found is None and self.expandable and pool == (0, 0):
            found = self._grow_expandable(size, stream, small, frames)
        if found is None:
            seg = self._new_segment(size, stream, small, pool, frames)
            found = (seg, 0)
        seg, i = found
        b = seg["blocks"][i]
        rest = b["size"] - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            seg["blocks"].insert(i + 1, _free_block(rest))
            b["size"] = size
        b.update(requested_size=requested, state="active_allocated", frames=frames)
        addr = _block_addr(seg, i)
        self.record("alloc", addr, requested, stream, frames)
        return addr

    def _locate(self, addr: int) -> tuple[dict, int]:
        for seg in self.segments:
            if seg["address"] <= addr < seg["address"] + seg["total_size"]:
                for i in range(len(seg["blocks"])):
                    if _block_addr(seg, i) == addr:
                        return seg, i
        raise KeyError(addr)

    def free(self, addr: int, frames: list, pending: bool = False) -> None:
        """free_requested, then (unless another stream still uses it) free_completed and merge."""
        seg, i = self._locate(addr)
        b = seg["blocks"][i]
        self.record("free_requested", addr, b["requested_size"], seg["stream"], list(frames))
        if pending:
            b["state"] = "active_pending_free"
        else:
            self.complete(addr, frames)

    def complete(self, addr: int, frames: list) -> None:
        """The block's uses on other streams are done: free_completed, merged with free neighbours."""
        seg, i = self._locate(addr)
        b = seg["blocks"][i]
        self.record("free_completed", addr, b["requested_size"], seg["stream"], list(frames))
        blocks = seg["blocks"]
        blocks[i] = _free_block(b["size"])
        if i + 1 < len(blocks) and blocks[i + 1]["state"] == "inactive":
            blocks[i]["size"] += blocks.pop(i + 1)["size"]
        if i > 0 and blocks[i - 1]["state"] == "inactive":
            blocks[i - 1]["size"] += blocks.pop(i)["size"]

    def empty_cache(self, frames: list) -> None:
        """Release every segment that is one free block (segment_free; expandable: segment_unmap)."""
        for seg in list(self.segments):
            blocks = seg["blocks"]
            if seg["expandable"]:
                self._unmap_tail(seg, frames)
            elif len(blocks) == 1 and blocks[0]["state"] == "inactive":
                self.record("segment_free", seg["address"], seg["total_size"], seg["stream"], frames)
                self.segments.remove(seg)

    def _unmap_tail(self, seg: dict, frames: list) -> None:
        """Unmap the whole pages of the free tail of an expandable segment (segment_unmap)."""
        blocks = seg["blocks"]
        if not blocks or blocks[-1]["state"] != "inactive":
            return
        page = SMALL_BUFFER if seg["small"] else LARGE_BUFFER
        start = seg["total_size"] - blocks[-1]["size"]
        unmap = seg["total_size"] - page * ((start + page - 1) // page)
        if unmap <= 0:
            return
        seg["total_size"] -= unmap
        blocks[-1]["size"] -= unmap
        if blocks[-1]["size"] == 0:
            blocks.pop()
        self.record("segment_unmap", seg["address"] + seg["total_size"], unmap, seg["stream"], frames)
        if not blocks:
            self.segments.remove(seg)

    def oom(self, requested: int, stream: int, device_free: int, frames: list) -> None:
        """cudaMalloc failed after the cache was released: the `oom` entry (size: the rounded request)."""
        self.empty_cache(frames)
        self.record("oom", None, round_size(requested), stream, frames, device_free=device_free)


def _free_block(size: int) -> dict:
    return {"size": size, "requested_size": 0, "state": "inactive", "frames": _EMPTY}


_EMPTY: list = []   # Module.cpp's empty_frames: one list object shared by every frame-less dict


def _block_addr(seg: dict, i: int) -> int:
    return seg["address"] + sum(b["size"] for b in seg["blocks"][:i])


def _segment_dict(dev: Device, seg: dict) -> dict:
    """A segment as memorySnapshot writes it (frames last when gathered from a context)."""
    blocks, addr = [], seg["address"]
    alloc_size = active_size = requested = 0
    for b in seg["blocks"]:
        blocks.append({"address": addr, "size": b["size"], "requested_size": b["requested_size"],
                       "state": b["state"], "frames": b["frames"]})
        addr += b["size"]
        if b["state"] == "active_allocated":
            alloc_size += b["size"]
        if b["state"] != "inactive":
            active_size += b["size"]
            requested += b["requested_size"]
    d = {"device": dev.index, "address": seg["address"], "total_size": seg["total_size"],
         "allocated_size": alloc_size, "active_size": active_size, "requested_size": requested,
         "stream": seg["stream"], "segment_type": "small" if seg["small"] else "large",
         "segment_pool_id": seg["pool"], "is_expandable": seg["expandable"]}
    if not seg["frames"]:
        d["frames"] = _EMPTY
    d["blocks"] = blocks
    if seg["frames"]:
        d["frames"] = seg["frames"]
    return d


def allocator_settings(expandable: bool = False) -> dict:
    """CUDAAllocatorConfig as memorySnapshot reports it (max_split_size: SIZE_MAX as int64)."""
    conf = "expandable_segments:True" if expandable else ""
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": expandable, "pinned_num_register_threads": 1,
            "release_lock_on_malloc": False, "pinned_use_host_register": False,
            "roundup_power2_divisions": {}}


def _snapshot(devices: list[Device], expandable: bool = False, annotations: list | None = None) -> dict:
    segments = [_segment_dict(d, s) for d in devices
                for s in sorted(d.segments, key=lambda s: s["address"])]
    return {"segments": segments, "device_traces": [d.history for d in devices],
            "allocator_settings": allocator_settings(expandable),
            "external_annotations": annotations or []}


def _devices(n: int, expandable: bool = False) -> tuple[list[Device], list[int]]:
    clock = [T0_US]
    return [Device(i, 0x7F00_0000_0000 + i * (1 << 40), clock, expandable) for i in range(n)], clock


# -- the fixtures ---------------------------------------------------------------------------------

def cuda_basic() -> dict:
    """Two devices, three streams on device 0: split small and large blocks, frees that merge,
    a >= 10 MB allocation released by empty_cache, a private (graph) pool, a free still pending
    on another stream (active_pending_free), a `snapshot` entry and user metadata."""
    st = stacks()
    (d0, d1), clock = _devices(2)
    weights = [d0.malloc(n, STREAM_A, st["linear"]) for n in (4_194_304, 3_999_777, 2_359_296 + 100)]
    acts = [d0.malloc(300_000 + 1000 * i, STREAM_A, st["data"]) for i in range(6)]
    d0.metadata = "phase=forward"
    attn = [d0.malloc(n, STREAM_B, st["attn"]) for n in (700_001, 1_500_000, 6_000_000, 130)]
    big = d0.malloc(12_500_000, STREAM_A, st["linear"])
    for a in acts[1:4]:
        d0.free(a, st["free"])                      # 1..3 merge into one free block
    d0.free(attn[1], st["free"])
    d0.record("snapshot", 0, 0, STREAM_A, None)
    d0.metadata = "phase=backward"
    grads = [d0.malloc(n, STREAM_A, st["grad"]) for n in (4_194_304, 3_999_777, 900_000)]
    d0.free(big, st["free"])
    d0.empty_cache(st["optim"])                     # the 14 MB segment goes back: segment_free
    graph = d0.malloc(2_000_000, STREAM_C, st["linear"], pool=(1, 0))
    side = d0.malloc(65_536 + 3, STREAM_C, st["attn"])
    d0.free(side, st["free"], pending=True)         # still used by another stream at the end
    late = d0.malloc(5_000_000, STREAM_C, st["optim"])
    d0.free(late, st["free"], pending=True)
    d0.complete(late, st["free"])                   # ... this one's event completed
    d0.metadata = ""
    d0.free(grads[2], st["free"])
    d1.malloc(9_000_000, STREAM_A, st["linear"])
    x = d1.malloc(1024, STREAM_A, st["data"])
    d1.malloc(513, STREAM_A, st["data"])
    d1.free(x, st["free"])
    del weights, graph
    start, end = T0_US + 10, clock[0] + 1
    ann = [{"name": "ProfilerStep#1", "stage": "START", "device": 0, "time_us": start},
           {"name": "ProfilerStep#1", "stage": "END", "device": 0, "time_us": end}]
    return _snapshot([d0, d1], annotations=ann)


WRAP_KEEP = 25  # device 0's ring in cuda_wrapped holds the last 25 of cuda_basic's 45 entries


def cuda_wrapped() -> dict:
    """cuda_basic recorded with ``_record_memory_history(max_entries=25)`` on device 0: the
    allocator's ring buffer (c10/cuda/CUDACachingAllocator.cpp, RingBuffer: the oldest entries
    are overwritten, ``_snapshot`` returns the rest oldest first) kept only the last 25. The
    history then opens on a free_completed whose free_requested is gone, frees of blocks
    allocated before it, and a segment_free of a segment it never saw mapped; the segments
    (the allocator's state at the end) are whole."""
    snap = cuda_basic()
    snap["device_traces"][0] = snap["device_traces"][0][-WRAP_KEEP:]
    return snap


OOM_REQUEST = 10 * MB
OOM_DEVICE_FREE = 6 * MB


def cuda_oom() -> dict:
    """Fragmentation then an OOM: five 20 MB segments each hold 8 MB live between an 8 MB and
    a 4.7 MB hole, so 65 MB is free inside segments while no free block fits the 10 MB request
    and cudaMalloc (6 MB free on the device) fails: the `oom` entry carries device_free."""
    st = stacks()
    (d0,), _ = _devices(1)
    d0.malloc(700_000, STREAM_A, st["data"])
    pairs = [(d0.malloc(7_999_900, STREAM_A, st["linear"]), d0.malloc(7_999_900, STREAM_A, st["attn"]))
             for _ in range(5)]
    for first, _ in pairs:
        d0.free(first, st["free"])
    tmp = d0.malloc(30 * MB, STREAM_A, st["grad"])   # its own segment, released before the OOM
    d0.free(tmp, st["free"])
    d0.oom(OOM_REQUEST, STREAM_A, OOM_DEVICE_FREE, st["grad"])
    return _snapshot([d0])


def cuda_expandable() -> dict:
    """expandable_segments:True: one segment per stream and pool grows by mapping 20 MB (large)
    or 2 MB (small) pages (segment_map) and shrinks by unmapping its free tail (segment_unmap)."""
    st = stacks()
    (d0,), _ = _devices(1, expandable=True)
    big = [d0.malloc(6_000_000 + i, STREAM_A, st["linear"]) for i in range(5)]   # maps 20 MB twice
    small = [d0.malloc(400_000, STREAM_A, st["data"]) for _ in range(6)]           # 2 MB pages
    side = d0.malloc(3_000_000, STREAM_B, st["attn"])
    d0.free(big[4], st["free"])
    d0.free(big[3], st["free"])
    for a in small[3:]:
        d0.free(a, st["free"])
    d0.free(side, st["free"])
    d0.empty_cache(st["optim"])
    d0.malloc(1_000_000, STREAM_B, st["attn"])
    return _snapshot([d0], expandable=True)


def profile_snapshot(prof: Any) -> dict:
    """torch's own conversion of a CPU profile_memory run (the CPU is the last device)."""
    from torch.cuda import _memory_viz
    return _memory_viz._profile_to_snapshot(prof)


def cpu_profile() -> dict:
    """A fresh copy of the recorded CPU snapshot (recorded once per process: ~5 s)."""
    return copy.deepcopy(_cpu_profile_recorded())


@functools.lru_cache(maxsize=1)
def _cpu_profile_recorded() -> dict:
    """A real snapshot: a small MLP's training steps profiled on the CPU with
    profile_memory=True, record_shapes=True, with_stack=True, turned into a snapshot by
    torch.cuda._memory_viz._profile_to_snapshot."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return profile_snapshot(prof)


FIXTURES = {"cuda_basic": cuda_basic, "cuda_oom": cuda_oom, "cuda_expandable": cuda_expandable,
            "cuda_wrapped": cuda_wrapped, "cpu_profile": cpu_profile}


def write(path: str | Path, snap: dict, protocol: int = 4) -> Path:
    """Pickle as _dump_snapshot does (pickle.dump; protocol 4 is Python 3.8-3.13's default,
    5 is 3.14's); a path ending in .gz is gzipped."""
    path = Path(path)
    data = pickle.dumps(snap, protocol=protocol)
    if path.suffix == ".gz":
        import gzip
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path
