"""Two-process DistributedDataParallel over gloo on one machine, profiled on CPU.

The distributed view needs real multi-rank traces: each rank's trace carries
``distributedInfo`` (backend, rank, world size) and the gloo collectives
(DDP's gradient all_reduce from its reducer thread, and the
main thread's all_reduce of the logged loss). Workers are named
``rank0`` / ``rank1``; run ``ddp_gloo_2ranks``.

    python samples/ddp.py LOGDIR [--gzip]
"""
from __future__ import annotations

import os
import shutil
import socket
import sys

import _common  # noqa: F401  (sys.path, seeds, profiler)
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
BATCH = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, run_dir: str, port: int, use_gzip: bool) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    _common.setup(seed=0)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        g = torch.Generator().manual_seed(100 + rank)  # each rank its own shard
        xs = torch.randn(_common.STEPS, BATCH, 64, generator=g)
        ys = torch.randint(0, 10, (_common.STEPS, BATCH), generator=g)
        with _common.profiler(run_dir, worker_name=f"rank{rank}", use_gzip=use_gzip) as prof:
            for x, y in zip(xs, ys):
                loss = loss_fn(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                # The mean loss across ranks, as training scripts log it: a
                # collective issued from the main thread (c10d::allreduce_).
                mean_loss = loss.detach().clone()
                dist.all_reduce(mean_loss)
                mean_loss /= WORLD
                prof.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(logdir: str, use_gzip: bool = False, attempts: int = 3) -> list[str]:
    """Spawn two gloo ranks writing into ``logdir/ddp_gloo_2ranks``.

    Why attempts: with torch 2.13 on CPU a gloo rank now and then dies of SIGSEGV (about one
    run in twelve on the 2-core CI machine, after its traces are written); the job is then
    run again from scratch rather than failing the samples (and the tests built on them).
    """
    run_dir = os.path.join(logdir, "ddp_gloo_2ranks")
    for attempt in range(1, attempts + 1):
        try:
            mp.spawn(_worker, args=(run_dir, free_port(), use_gzip), nprocs=WORLD, join=True)
            break
        except mp.ProcessExitedException as exc:
            if attempt == attempts:
                raise
            print(f"ddp sample: {exc}; running the job again ({attempt + 1}/{attempts})", file=sys.stderr)
            shutil.rmtree(run_dir, ignore_errors=True)
    return _common.written(run_dir)


if __name__ == "__main__":
    _common.main(run, __doc__)
