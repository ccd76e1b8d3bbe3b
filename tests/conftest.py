"""Shared fixtures: real torch 2.13 CPU traces, generated once per test session.

``sample_logdir`` runs ``samples/make_all.py`` (about 10 s on 2 cores) into a
session temp folder; ``sample_traces`` lists the trace files in it. Set
``TB_PROFILER_SAMPLE_LOGDIR`` to a logdir already written by make_all.py to
reuse it across sessions while iterating. Tests using them are skipped when
torch is not installed.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("tb_profiler") is None:  # a checkout that is not pip-installed
    sys.path.insert(0, str(ROOT))

SAMPLE_RUNS = ("cnn_dataloader_0workers", "cnn_dataloader_2workers", "ddp_gloo_2ranks", "transformer_memory_snapshot")
_USER_CACHE_ENV = "TB_PROFILER_CACHE_DIR"


def pytest_configure(config) -> None:
    """Every cache a test writes without naming a folder goes to a temporary one, removed at
    the end: a test run never fills (or reads stale entries from) the user's cache, even
    when the user's shell points $TB_PROFILER_CACHE_DIR at it. Servers and subprocesses the
    tests start inherit it."""
    config._tbp_saved_cache = os.environ.get(_USER_CACHE_ENV)
    config._tbp_cache = tempfile.mkdtemp(prefix="tbp-test-cache-")
    os.environ[_USER_CACHE_ENV] = config._tbp_cache


def pytest_unconfigure(config) -> None:
    shutil.rmtree(getattr(config, "_tbp_cache", ""), ignore_errors=True)
    saved = getattr(config, "_tbp_saved_cache", None)
    if saved is None:
        os.environ.pop(_USER_CACHE_ENV, None)
    else:
        os.environ[_USER_CACHE_ENV] = saved


def _trace_files(logdir: Path) -> list[Path]:
    return sorted(p for p in logdir.rglob("*.pt.trace.json*") if not p.name.startswith("."))


@pytest.fixture(scope="session")
def sample_logdir(tmp_path_factory) -> Path:
    """A logdir holding the four sample runs (see samples/make_all.py)."""
    reuse = os.environ.get("TB_PROFILER_SAMPLE_LOGDIR")
    if reuse and all((Path(reuse) / r).is_dir() for r in SAMPLE_RUNS):
        return Path(reuse)
    pytest.importorskip("torch")
    logdir = tmp_path_factory.mktemp("sample_logdir")
    proc = subprocess.run([sys.executable, str(ROOT / "samples" / "make_all.py"), str(logdir)],
                          capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    if proc.returncode != 0:
        pytest.fail(f"samples/make_all.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return logdir


@pytest.fixture(scope="session")
def sample_traces(sample_logdir) -> list[Path]:
    """Every trace file in ``sample_logdir`` (10: 4 runs, 5 workers, 2 spans each)."""
    return _trace_files(sample_logdir)


# The browser tests' fixtures (Chromium, `tb-profiler serve`, TensorBoard), one of each per session.
pytest_plugins = ["browser_support"]
