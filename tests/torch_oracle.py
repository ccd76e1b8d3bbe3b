"""Record small torch workloads and torch's own key_averages() of the same profile.

    python tests/torch_oracle.py OUTDIR [WORKLOAD ...]

For each workload, OUTDIR/<workload>/ gets the trace (written by tb_profiler's
``tensorboard_trace_handler``, or torch's python exporter for ``*_pyexport``) and
``keyavg.json``: torch's ``key_averages()`` rows (plain, by input shape, by stack) and
``.table()`` texts, all taken in the same ``on_trace_ready`` call that wrote the trace,
so both sides describe one profile. tests/test_torch_oracle.py compares ours with them.

The workloads are the shapes users profile (``with_stack=True``, ``record_shapes=True``,
``profile_memory=True``, as the README tells them): an MLP with ``record_function`` phases
and AdamW, a CNN fed by a DataLoader, a transformer block, ``torch.compile``, activation
checkpointing (both kinds), a custom ``autograd.Function``, bf16 autocast, a side thread,
a generate loop with ``torch.cat``, DDP and FSDP2 over gloo (two processes each), and the python
exporter.
"""
from __future__ import annotations

import json
import os
import sys
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import tb_profiler  # noqa: E402

SORTS = ("self_cpu_time_total", "cpu_time_total", "count", "cpu_memory_usage", "self_cpu_memory_usage", None)
STEPS = 2


def _rows(avg, by_shape: bool = False) -> list[dict]:
    return [{"key": e.key, "input_shapes": str(e.input_shapes) if by_shape else "", "stack": list(e.stack or []),
             "device": str(e.device_type) != "DeviceType.CPU", "user_annotation": bool(e.is_user_annotation),
             "is_async": bool(e.is_async), "count": e.count, "self_cpu_time_total": e.self_cpu_time_total,
             "cpu_time_total": e.cpu_time_total, "self_device_time_total": e.self_device_time_total,
             "device_time_total": e.device_time_total, "cpu_memory_usage": e.cpu_memory_usage,
             "self_cpu_memory_usage": e.self_cpu_memory_usage} for e in avg]


def _oracle(p) -> dict:
    """Everything the test compares, from the profiler object itself."""
    out = {"rows": _rows(p.key_averages()), "shape_rows": _rows(p.key_averages(group_by_input_shape=True), True),
           "stack_rows": _rows(p.key_averages(group_by_stack_n=5)), "tables": {}}
    for sort in SORTS:
        for limit in (10, -1):
            out["tables"][f"{sort}/{limit}"] = p.key_averages().table(sort_by=sort, row_limit=limit)
    out["tables"]["shape/self_cpu_time_total/-1"] = p.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=-1)
    return out


def capture(name: str, step, outdir: str, python_export: bool = False, steps: int = STEPS) -> None:
    """Profile ``steps`` active steps of ``step`` (after one warm-up) into outdir/name/."""
    folder = os.path.join(outdir, name)
    os.makedirs(folder, exist_ok=True)
    write = tb_profiler.tensorboard_trace_handler(folder, worker_name=name)

    def on_ready(p):
        if python_export:
            p.export_chrome_trace(os.path.join(folder, f"{name}.pt.trace.json"), use_python_export=True)
        else:
            write(p)
        with open(os.path.join(folder, "keyavg.json"), "w") as f:
            json.dump(_oracle(p), f)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, profile_memory=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1), on_trace_ready=on_ready) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()


# -- models ------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))

    def forward(self, x):
        h = self.ln(x)
        x = x + self.att(h, h, h, need_weights=False)[0]
        return x + self.ff(x)


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 100)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class ScaledSin(torch.autograd.Function):
    """A custom autograd.Function: its backward is Python that torch's tree keeps apart."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin() * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 2


# -- workloads: each returns the function one step runs -------------------------------------
def mlp_phases():
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, opt = torch.randn(4, 8), torch.optim.AdamW(m.parameters(), lr=0.1)

    def step():
        with record_function("forward"):
            loss = m(x).sum()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad()
    return step


def cnn_dataloader():
    m, dl = CNN(), torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))), batch_size=8)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    batches = iter(())

    def step():
        nonlocal batches
        batch = next(batches, None)
        if batch is None:
            batches = iter(dl)
            batch = next(batches)
        F.cross_entropy(m(batch[0]), batch[1]).backward()
        opt.step()
        opt.zero_grad()
    return step


def gpt_train():
    m, tokens = TinyGPT(), torch.randint(0, 100, (2, 16))
    opt = torch.optim.AdamW(m.parameters())

    def step():
        F.cross_entropy(m(tokens).flatten(0, 1), tokens.flatten()).backward()
        opt.step()
        opt.zero_grad()
    return step


def gpt_compiled():
    m, tokens = TinyGPT(), torch.randint(0, 100, (2, 16))
    cm = torch.compile(m)
    cm(tokens).sum().backward()  # compile outside the profile

    def step():
        cm(tokens).sum().backward()
    return step


def _checkpointed(reentrant: bool):
    from torch.utils.checkpoint import checkpoint

    m, tokens = TinyGPT(), torch.randint(0, 100, (2, 16))

    def step():
        h = m.emb(tokens)
        for block in m.blocks:
            h = checkpoint(block, h, use_reentrant=reentrant)
        m.head(h).sum().backward()
    return step


def checkpoint_plain():
    return _checkpointed(False)


def checkpoint_reentrant():
    return _checkpointed(True)


def autograd_function():
    x = torch.randn(64, 64, requires_grad=True)

    def step():
        ScaledSin.apply(x @ x).sum().backward()
    return step


def bf16_autocast():
    m, tokens = TinyGPT(), torch.randint(0, 100, (2, 16))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = m(tokens).float().sum()
        loss.backward()
    return step


def side_thread():
    m, tokens = TinyGPT(), torch.randint(0, 100, (2, 16))

    def side():
        with torch.no_grad():
            m(tokens)

    def step():
        t = threading.Thread(target=side)
        t.start()
        m(tokens).sum().backward()
        t.join()
    return step


def generate():
    m, prompt = TinyGPT().eval(), torch.randint(0, 100, (1, 4))

    def step():
        with torch.no_grad():
            seq = prompt
            for _ in range(4):
                seq = torch.cat([seq, m(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    return step


WORKLOADS = {f.__name__: f for f in (mlp_phases, cnn_dataloader, gpt_train, gpt_compiled, checkpoint_plain,
                                      checkpoint_reentrant, autograd_function, bf16_autocast, side_thread, generate)}
PYEXPORT = "mlp_phases_pyexport"
DDP, FSDP = "ddp_gloo_2ranks", "fsdp2_gloo"


def _distributed_rank(rank: int, outdir: str, port: int, kind: str) -> None:
    """One rank of a 2-process job over gloo: DDP, or FSDP2 (fully_shard per layer)."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
    if kind == DDP:
        from torch.nn.parallel import DistributedDataParallel

        m = DistributedDataParallel(m)
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(m)
    opt, x = torch.optim.SGD(m.parameters(), lr=0.1), torch.randn(8, 32)

    def step():
        m(x).sum().backward()
        opt.step()
        opt.zero_grad()
    capture(f"{kind}_rank{rank}", step, outdir)
    dist.destroy_process_group()


def main(argv: list[str]) -> None:
    outdir, names = argv[0], argv[1:] or [*WORKLOADS, PYEXPORT, DDP, FSDP]
    torch.set_num_threads(1)
    for name in names:
        torch.manual_seed(0)
        if name == PYEXPORT:
            capture(name, mlp_phases(), outdir, python_export=True)
        elif name in (DDP, FSDP):
            import socket

            import torch.multiprocessing as mp

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            mp.spawn(_distributed_rank, args=(outdir, port, name), nprocs=2)
        else:
            capture(name, WORKLOADS[name](), outdir)
        print(name, "done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
