"""The one place tests (and benchmarks) find their data files: everything lives in this
repository, under tests/data/ (real traces, see tests/data/README.md for their origin) and
tests/decode_cases/ (hand-made decoder cases). Nothing is read from outside the checkout,
and no test is skipped for a missing file: a missing fixture is a failure
(test_no_outside_paths.py checks that every path named here exists).

Every real trace is gzipped (the decoder and ``tb_profiler.load`` inflate it); a test that
needs the plain JSON text reads it with ``read_bytes`` or writes a plain copy into its own
tmp folder with ``plain_copy``.
"""
from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
DECODE_CASES = TESTS / "decode_cases"

# Real traces written by others (layout and file names as they were published: run folders,
# worker and span names matter to the tests).
TRACES = DATA / "traces"

V100 = TRACES / "kineto-resnet50-v100"            # ResNet50 on a V100, PyTorch 1.9 era, 2 runs x 2 spans
V100_RUN = V100 / "resnet50_num_workers_0"
V100_RUN_W4 = V100 / "resnet50_num_workers_4"
V100_TRACE = V100_RUN / "worker0.1623143089861.pt.trace.json.gz"      # span 1
V100_TRACE_B = V100_RUN / "worker0.1623143566756.pt.trace.json.gz"    # span 2
V100_W4_TRACE = V100_RUN_W4 / "worker0.1623212756351.pt.trace.json.gz"

LEGACY = TRACES / "legacy-formats"                 # bare array, PyTorch 1.8 API, legacy autograd
LEGACY_BARE_ARRAY = LEGACY / "2021-01-13_eebfef30" / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz"
LEGACY_PROFILER_API = (LEGACY / "2021-01-24_02522842" / "resnet50_profiler_api_num_workers_0" /
                       "worker0.pt.trace.json.gz")
LEGACY_AUTOGRAD_API = (LEGACY / "2021-01-24_02522842" / "resnet50_autograd_api_num_workers_0" /
                       "worker0.pt.trace.json.gz")

TINY_H100 = TRACES / "tiny-h100"                   # modern H100 traces and a 4xV100 one
H100_AFTER_FIX = TINY_H100 / "after_fix_trace.json.gz"
H100_BEFORE_FIX = TINY_H100 / "before_fix_trace.json.gz"
V100X4 = TINY_H100 / "v100x4_gpu_metrics_input.json.gz"

TENSORLIST_OPS = TRACES / "tensorlist_ops.pt.trace.json.gz"   # nested Input Dims of TensorList ops

# HTA's (facebookresearch/HolisticTraceAnalysis, MIT) trace_compare test pair, outside TRACES:
# sampled traces (device events whose runtime calls were dropped), see tests/data/README.md.
HTA = DATA / "hta"
HTA_COMPARE_BASE = HTA / "trace_compare" / "base" / "base.json.gz"
HTA_COMPARE_TEST = HTA / "trace_compare" / "test" / "test.json.gz"

# The small plain-JSON-when-published traces (gzipped here), e.g. as fuzz or decoder seeds.
SMALL_TRACES = (H100_AFTER_FIX, H100_BEFORE_FIX, V100X4, TENSORLIST_OPS)

NAMED = (V100_TRACE, V100_TRACE_B, V100_W4_TRACE, LEGACY_BARE_ARRAY, LEGACY_PROFILER_API,
         LEGACY_AUTOGRAD_API, *SMALL_TRACES, HTA_COMPARE_BASE, HTA_COMPARE_TEST)


def real_traces() -> list[Path]:
    """Every real trace file, sorted (14)."""
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def rel(path: Path) -> str:
    """A real trace's path relative to TRACES (test ids, keys of per-file facts)."""
    return str(path.relative_to(TRACES))


def plain_rel(path: Path) -> str:
    """``rel`` without the .gz suffix: the name the trace was published under."""
    r = rel(path)
    return r[:-3] if r.endswith(".gz") else r


def read_bytes(path: Path) -> bytes:
    """The file's JSON text, inflated when gzipped."""
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def plain_name(path: Path) -> str:
    """The file's name without its .gz suffix."""
    name = Path(path).name
    return name[:-3] if name.endswith(".gz") else name


def plain_copy(path: Path, dst: Path) -> Path:
    """Writes the plain (inflated) JSON of ``path`` to ``dst``: a file path, or a folder in
    which it keeps the name without .gz. Returns the path written."""
    dst = Path(dst)
    if dst.is_dir():
        dst = dst / plain_name(path)
    dst.write_bytes(read_bytes(path))
    return dst



def plain_trace_copies(paths, folder: Path) -> list[Path]:
    """Writes each trace as plain JSON into ``folder`` (created), named ``*.pt.trace.json`` so that
    run discovery picks it up (``after_fix_trace.json.gz`` -> ``after_fix_trace.pt.trace.json``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in paths:
        name = plain_name(path)
        if not name.endswith(".pt.trace.json"):
            name = name[:-len(".json")] + ".pt.trace.json"
        out.append(plain_copy(path, folder / name))
    return out


def benchmark_module(name: str):
    """A script of benchmarks/ (make_many_ranks, make_big_trace) imported as a module, once
    per session under its own name (its dataclasses, and pickling to the processes it
    starts, need the name)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS.parent / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
