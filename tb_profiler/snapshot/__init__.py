"""Memory snapshots (``torch.cuda.memory._snapshot()`` / ``_dump_snapshot``): the model.

    load_snapshot(path, *, cache=True, cache_dir=None) -> Snapshot
    Snapshot.summary(), timeline(), at(), live_at(), live_at_peak(), ooms(), stack()

The reader (tb_profiler.decode.snapshot) turns the pickle into columns; this package
answers questions over them (replay: the history; state: segments and blocks at a
point; oom: OOM triage; cache: the on-disk cache).  ``tb-profiler snapshot`` prints it
(tb_profiler/cli/snapshot.py); this package never imports the CLI.
"""
from __future__ import annotations

from tb_profiler.snapshot.cache import load_snapshot
from tb_profiler.snapshot.model import Snapshot

__all__ = ["Snapshot", "load_snapshot"]
