"""The memory-snapshot reader's output contract: which columns an allocator snapshot becomes.

A snapshot is what ``torch.cuda.memory._snapshot()`` returns and ``_dump_snapshot(path)``
pickles: plain dicts and lists (``segments``, ``device_traces``, ``allocator_settings``,
``external_annotations``; torch 2.13's ``torch/cuda/_memory_viz.py`` is the reference
reader). Snapshots reach several GB, so, as for traces, the reader turns the pickle into
flat numpy columns and a string table in one pass, never a Python object per entry; every
later step (the Snapshot model, the routes, the views) reads these columns only.

This file is the single source of truth for both readers: the reference reader
(``decode.snapshot_reference``: a restricted Unpickler, small files and tests) and the
streaming native one; a differential test holds them equal.

Conventions
-----------
- Strings (file names, function names, segment types, compile contexts, user metadata) are
  interned once into ``strings``; columns hold int32 ids, -1 for absent.
- Integers are int64; ``MISSING`` (INT64_MIN) where a field is absent or not an integer
  (an address at or above 2**63 keeps its uint64 bit pattern as int64).
- ``action`` and ``state`` are int8 codes into ``ACTIONS`` / ``BLOCK_STATES``; a value not
  in the tuple is -1 and its text is interned into ``action_text`` / ``state_text``.
- A ``frames`` list becomes a stack id: identical frame lists share one id (innermost
  first, as torch lists them); ``stack`` is -1 where an entry has no frames (or an empty
  list). Frames are rows of FRAMES; stacks are CSR (``stack_offsets``, ``stack_frames``).
- ``time_us`` as written (torch: microseconds of the wall clock); MISSING when absent.
- Rows keep the pickle's order: history rows device by device (``device`` = index into
  ``device_traces``), entries in order; segments in order; each segment's blocks
  contiguous (``block_start``, ``block_count``) with ``offset`` = the sum of the sizes of the
  blocks before it in the segment (a block's address is the segment's plus its offset).
"""
from __future__ import annotations

import numpy as np

MISSING = np.iinfo(np.int64).min

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom")
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")

# table -> {column: dtype}; the key each column comes from is named in the comment
HISTORY: dict[str, str] = {
    "device": "int32",            # index of the entry's list in device_traces
    "action": "int8",             # "action" -> ACTIONS index, -1: see action_text
    "action_text": "int32",       # string id of an action not in ACTIONS, else -1
    "addr": "int64",              # "addr"
    "size": "int64",              # "size"
    "stream": "int64",            # "stream"
    "time_us": "int64",           # "time_us"
    "stack": "int32",             # "frames" -> stack id
    "device_free": "int64",       # "device_free" (oom entries)
    "compile_context": "int32",   # "compile_context" string id
    "user_metadata": "int32",     # "user_metadata" string id
}
SEGMENTS: dict[str, str] = {
    "device": "int32",            # "device"
    "address": "int64",           # "address"
    "total_size": "int64",        # "total_size"
    "allocated_size": "int64",    # "allocated_size"
    "active_size": "int64",       # "active_size"
    "requested_size": "int64",    # "requested_size"
    "stream": "int64",            # "stream"
    "segment_type": "int32",      # "segment_type" string id ("small" / "large")
    "pool_a": "int64",            # "segment_pool_id"[0]
    "pool_b": "int64",            # "segment_pool_id"[1]
    "is_expandable": "int8",      # "is_expandable": 1 / 0, -1 absent
    "stack": "int32",             # "frames" -> stack id
    "block_start": "int64",       # first row of its blocks in BLOCKS
    "block_count": "int32",       # how many
}
BLOCKS: dict[str, str] = {
    "segment": "int32",           # row in SEGMENTS
    "offset": "int64",            # sum of the sizes of the blocks before it in its segment
    "size": "int64",              # "size"
    "requested_size": "int64",    # "requested_size" (MISSING when absent: _memory_viz reads size then)
    "state": "int8",              # "state" -> BLOCK_STATES index, -1: see state_text
    "state_text": "int32",        # string id of a state not in BLOCK_STATES, else -1
    "stack": "int32",             # "frames" -> stack id
}
FRAMES: dict[str, str] = {
    "filename": "int32",          # "filename" string id
    "line": "int64",              # "line"
    "name": "int32",              # "name" string id
}
TABLES = {"history": HISTORY, "segments": SEGMENTS, "blocks": BLOCKS, "frames": FRAMES}

# What is kept as small plain Python values (bounded: at most EXTRA_LIMIT items each)
EXTRAS = ("allocator_settings", "external_annotations")
EXTRA_LIMIT = 10_000

__all__ = ["ACTIONS", "BLOCK_STATES", "BLOCKS", "EXTRAS", "EXTRA_LIMIT", "FRAMES", "HISTORY", "MISSING",
           "SEGMENTS", "TABLES"]
