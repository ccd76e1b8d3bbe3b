"""The peers the benchmarks compare against, each timed in a fresh process of its own venv.

    torch-tb-profiler 0.4.3   python -m venv /tmp/oldtb && /tmp/oldtb/bin/pip install torch-tb-profiler==0.4.3
    HTA 0.5.0                 python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0

($OLD_TB_PYTHON and $HTA_PYTHON name other interpreters.)  Each snippet imports its
package first and times only the work after the imports (ours: every tb_profiler.analysis
module and the API imported first; the old plugin: its parser and generator modules; HTA:
every module of the hta package), then prints one JSON line {"seconds": wall seconds}.

What each one does (``run(side, python, trace)``):
  old       RunProfileData.parse (read + json + process + analyze) + RunGenerator.generate_run_profile
  hta       TraceAnalysis(trace_dir) (its default parser: JSON backend, a fork pool of one
            process for one rank) + get_temporal_breakdown + get_gpu_kernel_breakdown +
            get_idle_time_breakdown, all with visualize=False; the trace folder is a temporary
            one holding a link to the trace (HTA reads every trace of a folder, one per rank)
  ours      tb_profiler.load(cache=False) + the expressions given over ``t`` (the Trace)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_PYTHON = os.environ.get("OLD_TB_PYTHON", "/tmp/oldtb/bin/python")
HTA_PYTHON = os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python")

# argv: trace
_OLD = r"""
import json, sys, tempfile, time
from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.run_generator import RunGenerator
t0 = time.perf_counter()
data = RunProfileData.parse("worker0", "1", sys.argv[1], tempfile.mkdtemp())
RunGenerator("worker0", "1", data).generate_run_profile()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

# argv: trace folder (one trace: rank 0)
_HTA = r"""
import importlib, json, logging, pkgutil, sys, time
import hta
for m in pkgutil.walk_packages(hta.__path__, "hta."):  # imports are not timed (nor are ours)
    try:
        importlib.import_module(m.name)
    except Exception:
        pass
from hta.trace_analysis import TraceAnalysis
logging.disable(logging.WARNING)
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
a.get_idle_time_breakdown(visualize=False)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

# argv: trace, repository root, the work (Python statements over t)
_OURS = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import importlib, pkgutil
import tb_profiler, tb_profiler.api, tb_profiler.analysis as A
for m in pkgutil.iter_modules(A.__path__):  # imports are not timed (nor are the peers')
    importlib.import_module("tb_profiler.analysis." + m.name)
t0 = time.perf_counter()
t = tb_profiler.load(sys.argv[1], cache=False)
exec(sys.argv[3])
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

# What ours computes against each peer.
# Every number of the Overview, the Kernel view (by name, by operator) and the idle analysis.
OURS_VIEWS = 't.overview(); t.kernels("name"); t.kernels("op"); t.idle()'
# HTA's three: temporal breakdown (the whole overview, whose step breakdown it is), kernel
# breakdown (the kernel table by name), idle breakdown.
OURS_HTA = 't.overview(); t.kernels("name"); t.idle()'


def child(code: str, python: str, *args: str, timeout: float = 1800) -> dict:
    """Run code in a fresh ``python``; the JSON object its last line of output holds."""
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=tempfile.gettempdir(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({python}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def old_seconds(trace: Path, python: str = OLD_PYTHON) -> float:
    return child(_OLD, python, str(trace))["seconds"]


def hta_seconds(trace: Path, python: str = HTA_PYTHON) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-hta-") as folder:
        os.symlink(Path(trace).resolve(), Path(folder) / Path(trace).name)
        return child(_HTA, python, folder)["seconds"]


def ours_seconds(trace: Path, work: str = OURS_VIEWS, python: str = sys.executable, root: Path = ROOT) -> float:
    """root: the checkout whose tb_profiler runs (default this one; another for a baseline)."""
    return child(_OURS, python, str(trace), str(root), work)["seconds"]
