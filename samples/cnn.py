"""A small ResNet-style CNN trained with SGD on synthetic images, profiled on CPU.

Two runs, one per DataLoader setting, because the input pipeline is what the
overview's "DataLoader" share and the recommendations look at:
``cnn_dataloader_0workers`` (loading in the training process) and ``cnn_dataloader_2workers``
(two loader processes).

    python samples/cnn.py LOGDIR [--workers 0 2] [--gzip]
"""
from __future__ import annotations

import argparse
import os

import _common  # noqa: F401  (sys.path, seeds, profiler)
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCH = 8


class SyntheticImages(Dataset):
    """Deterministic 3x32x32 images and labels, generated per index (no files)."""

    def __init__(self, n: int, classes: int = 10):
        self.n, self.classes = n, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % self.classes


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch norm and a shortcut."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def run(logdir: str, num_workers: int, use_gzip: bool = False) -> list[str]:
    """Train ``_common.STEPS`` steps under the profiler into ``logdir/cnn_dataloader_{n}workers``."""
    _common.setup(seed=0)
    run_dir = os.path.join(logdir, f"cnn_dataloader_{num_workers}workers")
    model = TinyResNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(SyntheticImages(BATCH * _common.STEPS), batch_size=BATCH, shuffle=False,
                        num_workers=num_workers)
    model.train()
    with _common.profiler(run_dir, worker_name=f"cnn_dataloader_{num_workers}workers", use_gzip=use_gzip) as prof:
        for images, labels in loader:
            loss = loss_fn(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    return _common.written(run_dir)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--gzip", action="store_true")
    args = ap.parse_args(argv)
    for n in args.workers:
        for path in run(args.logdir, n, args.gzip):
            print(path)


if __name__ == "__main__":
    main()
