"""The benchmarks' input: a real trace blown up to a target size, made once and reused.

Every benchmark measures on the same files (./bench-output/), so their figures describe
the same trace.
"""
from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SEED = (ROOT.parent / "shared/traces/kineto-resnet50-v100/resnet50_num_workers_0/"
                "worker0.1623143089861.pt.trace.json.gz")
MAKE_BIG = ROOT.parent / "shared/tools/make_big_trace.py"
OUT_DIR = ROOT / "bench-output"


def build_trace(seed: Path = DEFAULT_SEED, size: str = "100M", out_dir: Path = OUT_DIR,
                synth_gpu: bool = False) -> tuple[Path, Path]:
    """The JSON trace and a .gz of it for (seed, size, synth_gpu), built atomically once."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{seed.name.split('.')[0]}-{seed.stat().st_size}-{size}{'-gpu' if synth_gpu else ''}"
    path, gz = out_dir / f"{stem}.json", out_dir / f"{stem}.json.gz"
    if not path.exists():
        print("building", path.name, "...", file=sys.stderr)
        tmp = path.with_suffix(".building")
        cmd = [sys.executable, str(MAKE_BIG), str(seed), size, str(tmp)] + (["--synth-gpu"] if synth_gpu else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        tmp.rename(path)
    if not gz.exists():
        tmp = gz.with_suffix(".tmp")
        with open(path, "rb") as f, gzip.open(tmp, "wb", compresslevel=6) as g:
            while chunk := f.read(1 << 24):
                g.write(chunk)
        tmp.rename(gz)
    return path, gz
