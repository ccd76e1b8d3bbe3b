"""Shared profiler setup for the sample scripts.

Every sample profiles with the options the analyses need (shapes, memory,
stacks) and a repeating schedule, so each worker writes two spans through
tb_profiler's own writer. Seeds and thread counts are fixed so traces are
small and their structure is the same from run to run.
"""
from __future__ import annotations

import os
import sys

# Run from a checkout without installing: make `import tb_profiler` work.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import torch  # noqa: E402

from tb_profiler import tensorboard_trace_handler  # noqa: E402

WAIT, WARMUP, ACTIVE, REPEAT = 1, 1, 2, 2
# Steps the training loop must run so that every cycle completes.
STEPS = (WAIT + WARMUP + ACTIVE) * REPEAT


def setup(seed: int = 0, threads: int = 1) -> None:
    """Fixed seed and one intra-op thread: reproducible, and polite on 2 cores."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


def with_snapshot(handler):
    """``handler`` (an on_trace_ready) that also pickles the cycle's memory as an allocator
    snapshot beside the trace (``{trace name}.memory_snapshot.pickle``): torch's own
    ``torch.cuda._memory_viz._profile_to_snapshot(prof)``, the format of
    ``torch.cuda.memory._dump_snapshot`` with the CPU as its last device. The Memory view's
    Snapshot section reads it (issue 20). A run on a GPU would record the allocator itself
    (``torch.cuda.memory._record_memory_history()``); on this CPU build that is the way to
    one."""
    import pickle

    from torch.cuda import _memory_viz

    def on_trace_ready(prof) -> str:
        path = handler(prof)
        stem = path.split(".pt.trace.json")[0]
        with open(f"{stem}.memory_snapshot.pickle", "wb") as f:
            pickle.dump(_memory_viz._profile_to_snapshot(prof), f, protocol=4)
        return path

    return on_trace_ready


def profiler(run_dir: str, worker_name: str | None = None, use_gzip: bool = False, snapshot: bool = False):
    """A ``torch.profiler.profile`` writing one trace per cycle into ``run_dir`` (and with
    ``snapshot``, the cycle's memory as an allocator snapshot beside it: with_snapshot)."""
    handler = tensorboard_trace_handler(run_dir, worker_name=worker_name, use_gzip=use_gzip)
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=REPEAT),
        on_trace_ready=with_snapshot(handler) if snapshot else handler,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    )


def written(run_dir: str) -> list[str]:
    """The trace files in ``run_dir``, for printing what a sample wrote."""
    if not os.path.isdir(run_dir):
        return []
    return sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir) if ".pt.trace.json" in f)


def main(run, doc: str, argv=None) -> None:
    """The command line of a one-run sample: ``python samples/X.py LOGDIR [--gzip]``."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir")
    ap.add_argument("--gzip", action="store_true", help="write .pt.trace.json.gz")
    args = ap.parse_args(argv)
    for path in run(args.logdir, args.gzip):
        print(path)
