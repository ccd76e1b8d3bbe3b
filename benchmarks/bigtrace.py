"""The benchmarks' input: a real trace blown up to a target size, made once and reused.

Every benchmark measures on the same files (./bench-output/), so their figures describe
the same trace. The default seed is the ResNet50/V100 trace kept in tests/data/ (named by
tests/datafiles.py); benchmarks/make_big_trace.py does the blowing up.
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))  # tests/datafiles.py: the in-repo real traces
from datafiles import V100, V100_TRACE  # noqa: E402

import make_big_trace  # noqa: E402  (benchmarks/, this file's folder)

DEFAULT_SEED = V100_TRACE
V100_TRACES = sorted(V100.glob("*/*.pt.trace.json*"))  # two runs x two spans
OUT_DIR = ROOT / "bench-output"
GENERATOR = "g2"  # bump when make_big_trace.py writes different files for the same arguments


def build_trace(seed: Path = DEFAULT_SEED, size: str = "100M", out_dir: Path = OUT_DIR,
                synth_gpu: bool = False, gz: bool = True) -> tuple[Path, Path | None]:
    """The JSON trace and a .gz of it for (seed, size, synth_gpu), built atomically once
    (gz=False: no .gz, None in its place; gzipping 10 GB takes minutes)."""
    seed = Path(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{seed.name.split('.')[0]}-{seed.stat().st_size}-{size}{'-gpu' if synth_gpu else ''}-{GENERATOR}"
    path, gz_path = out_dir / f"{stem}.json", out_dir / f"{stem}.json.gz"
    if not path.exists():
        print("building", path.name, "...", file=sys.stderr)
        # make_big_trace writes a temporary name and renames it when complete
        make_big_trace.build(seed, make_big_trace.parse_size(size), path, synth=synth_gpu, quiet=True)
    if not gz:
        return path, None
    if not gz_path.exists():
        tmp = gz_path.with_suffix(".tmp")
        with open(path, "rb") as f, gzip.open(tmp, "wb", compresslevel=6) as g:
            while chunk := f.read(1 << 24):
                g.write(chunk)
        tmp.rename(gz_path)
    return path, gz_path
