"""Write every sample run into one logdir: the real torch 2.13 CPU traces the tests use.

    python samples/make_all.py LOGDIR [--gzip] [--only cnn_dataloader_0workers ...]

Writes LOGDIR/cnn_dataloader_0workers, cnn_dataloader_2workers, transformer_memory_snapshot,
ddp_gloo_2ranks (each named for what it shows; two spans per worker each) and prints each file written with its size. Runs in one process
(torch imported once); the DDP sample spawns its two ranks.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cnn  # noqa: E402
import ddp  # noqa: E402
import transformer  # noqa: E402

RUNS = {
    "cnn_dataloader_0workers": lambda logdir, gz: cnn.run(logdir, 0, gz),
    "cnn_dataloader_2workers": lambda logdir, gz: cnn.run(logdir, 2, gz),
    "transformer_memory_snapshot": transformer.run,
    "ddp_gloo_2ranks": ddp.run,
}


def make_all(logdir: str, use_gzip: bool = False, only=None) -> dict[str, list[str]]:
    """Run the samples; return {run name: [files written]}.

    A run folder left by an earlier make_all is replaced, not added to: rerunning the
    README command must show the same runs and spans, not twice as many.
    """
    os.makedirs(logdir, exist_ok=True)
    out = {}
    for name, fn in RUNS.items():
        if only and name not in only:
            continue
        shutil.rmtree(os.path.join(logdir, name), ignore_errors=True)
        t0 = time.perf_counter()
        out[name] = fn(logdir, use_gzip)
        print(f"{name}: {len(out[name])} files in {time.perf_counter() - t0:.1f} s", flush=True)
        for path in out[name]:
            print(f"  {path}  {os.path.getsize(path) / 1e6:.2f} MB", flush=True)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir")
    ap.add_argument("--gzip", action="store_true", help="write .pt.trace.json.gz")
    ap.add_argument("--only", nargs="+", choices=sorted(RUNS), help="a subset of the runs")
    args = ap.parse_args(argv)
    make_all(args.logdir, args.gzip, args.only)


if __name__ == "__main__":
    main()
