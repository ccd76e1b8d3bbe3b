#!/usr/bin/env python
"""torch's key_averages table from a trace file (ours) against torch's own, same profile.

    python benchmarks/bench_keyavg.py [--steps 20] [--repeat 3]

Profiles a small transformer training loop with torch 2.13 on the CPU (``with_stack=True``,
``record_shapes=True``, ``profile_memory=True``: Python frames make most of the events), and
in the ``on_trace_ready`` call that writes the trace times torch's
``prof.key_averages().table(sort_by="self_cpu_time_total")`` (the events are already
parsed by then: this is the aggregation and the text alone). Then, in a fresh process,
times ours from the file: ``load(cache=False)`` (decode) + ``table()``, and ``table()``
alone on the loaded trace. Prints each median and the ratios; checks the two texts are
equal (the benchmark measures the same answer).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_OURS = r"""
import json, sys, time
t0 = time.perf_counter()
from tb_profiler.trace import load
from tb_profiler.analysis.keyavg import table
imports = time.perf_counter() - t0
t0 = time.perf_counter()
trace = load(sys.argv[1], cache=False)
text = table(trace, sort_by="self_cpu_time_total", row_limit=-1)
cold = time.perf_counter() - t0
t0 = time.perf_counter()
trace2 = load(sys.argv[1], cache=False)
decode = time.perf_counter() - t0
t0 = time.perf_counter()
table(trace2, sort_by="self_cpu_time_total", row_limit=-1)
analysis = time.perf_counter() - t0
open(sys.argv[2], "w").write(text)
print(json.dumps({"cold": cold, "decode": decode, "analysis": analysis, "imports": imports}))
"""


def _profile(folder: str, steps: int) -> dict:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(ROOT / "tests"))
    from torch_oracle import TinyGPT

    torch.manual_seed(0)
    torch.set_num_threads(1)
    m, tokens = TinyGPT(), torch.randint(0, 100, (4, 32))
    opt = torch.optim.AdamW(m.parameters())
    out: dict = {}

    def ready(p):
        path = os.path.join(folder, "bench.pt.trace.json")
        p.export_chrome_trace(path)
        t0 = time.perf_counter()
        out["text"] = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)
        out["torch_s"] = time.perf_counter() - t0
        out["path"] = path
        out["events"] = len(p.events())

    sched = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_stack=True, profile_memory=True, schedule=sched, on_trace_ready=ready) as prof:
        for _ in range(steps + 1):
            F.cross_entropy(m(tokens).flatten(0, 1), tokens.flatten()).backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="bench-keyavg-")
    torch_s, ours = [], []
    for _ in range(args.repeat):
        prof = _profile(folder, args.steps)
        torch_s.append(prof["torch_s"])
        text_file = os.path.join(folder, "ours.txt")
        proc = subprocess.run([sys.executable, "-c", _OURS, prof["path"], text_file], capture_output=True,
                              text=True, check=True, cwd=str(ROOT))
        ours.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        same = Path(text_file).read_text() == prof["text"]
    size = os.path.getsize(prof["path"]) / 1e6
    med = {k: statistics.median(r[k] for r in ours) for k in ("cold", "decode", "analysis")}
    t = statistics.median(torch_s)
    print(f"trace: {size:.1f} MB, {prof['events']} events torch lists ({args.steps} steps); same text: {same}")
    print(f"torch  key_averages().table() on parsed events  {t * 1e3:9.1f} ms")
    print(f"ours   load + table (fresh process, cold)        {med['cold'] * 1e3:9.1f} ms   {t / med['cold']:6.1f}x torch")
    print(f"ours   of which decode                           {med['decode'] * 1e3:9.1f} ms")
    print(f"ours   table alone on the loaded trace           {med['analysis'] * 1e3:9.1f} ms   "
          f"{t / med['analysis']:6.1f}x torch")


if __name__ == "__main__":
    main()
