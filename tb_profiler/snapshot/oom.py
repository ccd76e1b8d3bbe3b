"""OOM triage: one report per ``oom`` entry of the history, advice only where numbers say so.

Why these rules (c10's CUDACachingAllocator): a request of at most 1 MiB is served from
the small pool's segments, a bigger one from the large pool's; a request fails when no
free block of its pool and stream is big enough and cudaMalloc cannot get more.

- free space inside the pool's segments >= the request while its largest free block is
  smaller: the memory is there but in pieces (fragmentation): expandable segments
  (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) grow one segment instead of
  cutting new ones, so freed neighbours join up;
- a request above 20 MB (max_split_size's floor), the large pool's free space a sizable part
  of it (>= 20 % of its reserved bytes) and scattered (its largest free block < half of it):
  ``max_split_size_mb`` keeps blocks bigger than it from being split by small requests;
- live allocations hold most of the reserved memory (>= 70 %) and the free memory (inside
  segments plus on the device) is below the request: nothing to reclaim, less must be live
  at once: a smaller batch, or activation checkpointing; the largest live stacks say what.
Each piece of advice quotes its numbers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tb_profiler.decode.snapshot_schema import MISSING
from tb_profiler.snapshot.replay import A_OOM

SMALL_REQUEST = 1 << 20   # kSmallSize: requests up to this go to the small pool
FRAGMENTED_SHARE = 0.2    # large-pool free bytes / large-pool reserved bytes
SCATTERED = 0.5           # 1 - largest free block / free bytes
LIVE_SHARE = 0.7          # live bytes / reserved bytes
LARGE_BUFFER = 20 << 20   # kLargeBuffer: max_split_size is never below it, so it only helps bigger requests

__all__ = ["advice", "reports"]


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def _setting(settings: Any, name: str) -> Any:
    """An allocator setting when it is on: True, or a positive number (max_split_size is
    SIZE_MAX, written as -1, when unset)."""
    v = settings.get(name) if isinstance(settings, dict) else None
    return v if v is True or (type(v) in (int, float) and v > 0) else None


def _pool_figures(segs, blocks, request: int) -> dict:
    """Free bytes and largest free block of the pool the request goes to (all segments
    when their pool type is not known), and the large pool's figures."""
    stype = segs["segment_type"].astype(object)
    inactive = blocks[blocks["state"] == "inactive"]
    seg_of = stype.to_numpy()[inactive["segment"].to_numpy()] if len(inactive) else np.zeros(0, object)
    pool = "small" if request <= SMALL_REQUEST else "large"
    known = bool(stype.isin(["small", "large"]).all()) and len(segs) > 0
    mine = (seg_of == pool) if known else np.ones(len(inactive), bool)
    large = seg_of == "large"
    sizes = inactive["size"].to_numpy()
    return {"pool": pool if known else None,
            "pool_free_bytes": int(sizes[mine].sum()), "pool_largest_free_block_bytes": int(sizes[mine].max(initial=0)),
            "large_free_bytes": int(sizes[large].sum()), "large_largest_free_block_bytes": int(sizes[large].max(initial=0)),
            "large_free_blocks": int(large.sum()),
            "large_reserved_bytes": int(segs["total_size"][stype == "large"].sum())}


def advice(r: dict, figures: dict, settings: Any, any_expandable: bool, live) -> list[str]:
    """The advice the report's numbers support (module docstring), each with its numbers."""
    out = []
    req, free, largest = r["requested_bytes"], figures["pool_free_bytes"], figures["pool_largest_free_block_bytes"]
    where = f"the {figures['pool']} pool's segments" if figures["pool"] else "the segments"
    if free >= req > largest:
        text = (f"Fragmentation: {where} hold {_mib(free)} free, more than the {_mib(req)} requested, "
                f"but their largest free block is {_mib(largest)}.")
        if _setting(settings, "expandable_segments") or any_expandable:
            out.append(text + " Expandable segments are already on: free memory earlier (del tensors, "
                              "torch.cuda.empty_cache() between phases) or allocate the big tensors first.")
        else:
            out.append(text + " Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so a segment grows "
                              "instead of new ones being cut, and freed neighbours join up.")
    lf, lr, ll = figures["large_free_bytes"], figures["large_reserved_bytes"], figures["large_largest_free_block_bytes"]
    if (req > LARGE_BUFFER and lr > 0 and lf >= FRAGMENTED_SHARE * lr and figures["large_free_blocks"] >= 2 and ll < SCATTERED * lf
            and not _setting(settings, "max_split_size")):
        out.append(f"Large-pool fragmentation: {_mib(lf)} of its {_mib(lr)} reserved ({lf / lr:.0%}) is free, in "
                   f"{figures['large_free_blocks']} blocks, the largest {_mib(ll)} ({1 - ll / lf:.0%} scattered). "
                   f"Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<MB> (at least 20, below the {_mib(req)} request) "
                   "so blocks bigger than that are not split by smaller requests.")
    alloc, res = r["allocated_bytes"], r["reserved_bytes"]
    dev_free = r["device_free_bytes"] or 0
    total_free = r["free_in_segments_bytes"] + dev_free
    if res > 0 and alloc >= LIVE_SHARE * res and total_free < req:
        text = (f"Live allocations hold {_mib(alloc)} of the {_mib(res)} reserved ({alloc / res:.0%}), and the free "
                f"memory ({_mib(r['free_in_segments_bytes'])} inside segments + {_mib(dev_free)} on the device) is "
                f"below the {_mib(req)} requested: less must be live at once: a smaller batch, or activation "
                "checkpointing (torch.utils.checkpoint) for the layers whose activations dominate.")
        if live is not None and len(live):
            top = live.iloc[0]
            lines = [f for f in str(top["frames"]).split("\n") if f]
            first = next((f for f in lines if ".py:" in f), lines[0] if lines else "no stack")  # Python first
            text += f" The largest live stack holds {_mib(int(top['bytes']))} in {int(top['count'])} allocations ({first})."
        out.append(text)
    return out


def reports(snap) -> list[dict]:
    """One report per oom entry: time_us, device, requested / device free / reserved /
    allocated / free in segments / largest free block (bytes), live (as live_at), advice."""
    hist = snap.history
    rows = np.flatnonzero(hist["action"] == A_OOM)
    settings = snap.extras.get("allocator_settings") if isinstance(snap.extras, dict) else None
    out = []
    for row in rows.tolist():  # a loop over the OOM entries (a handful), not over the history
        d = int(hist["device"][row])
        h = snap.device_history(d)
        p = int(np.searchsorted(h.rows, row))
        state = snap.state_at_entry(d, p)
        segs, blocks = state["segments"], state["blocks"]
        inactive = blocks["size"][blocks["state"] == "inactive"].to_numpy()
        size, dfree = int(hist["size"][row]), int(hist["device_free"][row])
        r = {"time_us": h.time_of(p), "entry": p, "device": d, "requested_bytes": size,
             "device_free_bytes": None if dfree == MISSING else dfree,
             "reserved_bytes": h.reserved_at(p), "allocated_bytes": h.allocated_at(p),
             "free_in_segments_bytes": int(inactive.sum()), "largest_free_block_bytes": int(inactive.max(initial=0)),
             "stream": None if hist["stream"][row] == MISSING else int(hist["stream"][row])}
        figures = _pool_figures(segs, blocks, size)
        live = snap.live_at_entry(d, p)
        r.update({k: figures[k] for k in ("pool", "pool_free_bytes", "pool_largest_free_block_bytes")})
        r["live"] = live
        r["advice"] = advice(r, figures, settings, bool(segs["is_expandable"].any()), live)
        out.append(r)
    return out
