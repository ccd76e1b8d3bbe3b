"""The stages' import rules (issue 22): pyproject.toml's [tool.importlinter] contracts hold,
they say what the pipeline needs them to say, and a forbidden import really breaks them.

Why a test beside CI's `lint-imports`: the contracts are only as good as what they name,
so the layer order and the forbidden pairs the data flow requires are checked here, and
one import against them (written into a copy of the package) must make lint-imports fail.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter reads pyproject.toml with tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"
# The one import every contract may ignore: the compiled extension, which grimp cannot see
# (it reads as an import of the package root); decode/extension.py is its only importer.
EXTENSION_IMPORT = "tb_profiler.decode.extension -> tb_profiler"


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)["tool"]["importlinter"]
    assert config["root_package"] == "tb_profiler"
    return config["contracts"]


def _lint(cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT, "--no-logo", "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _forbids(source: str, target: str) -> bool:
    """Whether a forbidden contract keeps source (a stage of tb_profiler) from importing target
    (a stage, or an outside package such as pandas)."""
    target = target if target == "pandas" else f"tb_profiler.{target}"
    return any(c["type"] == "forbidden" and f"tb_profiler.{source}" in c["source_modules"]
               and target in c["forbidden_modules"] for c in _contracts())


def test_the_contracts_hold():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout


def test_the_layers_follow_the_data_flow():
    layers = [c for c in _contracts() if c["type"] == "layers"]
    assert len(layers) == 1 and layers[0]["containers"] == ["tb_profiler"] and layers[0]["exhaustive"]
    order = []  # top first: each layer's modules
    for layer in layers[0]["layers"]:
        order.append({m.strip() for m in layer.replace("|", ":").split(":")})
    rank = {m: i for i, mods in enumerate(order) for m in mods}
    top_down = ["cli", "plugin", "api", "summary", "analysis", "trace", "cache", "decode", "io", "errors"]
    assert [rank[m] for m in top_down] == sorted(rank[m] for m in top_down), order
    assert len({rank[m] for m in top_down}) == len(top_down), "each of these stages is a layer of its own"
    assert rank["snapshot"] == rank["trace"]
    assert rank["writer"] > rank["analysis"] and rank["cache_limit"] > rank["cache"]


@pytest.mark.parametrize("source, target", [
    ("analysis", "plugin"), ("analysis", "cli"), ("analysis", "api"), ("analysis", "summary"),
    ("trace", "analysis"), ("trace", "summary"), ("trace", "api"), ("trace", "plugin"), ("trace", "cli"),
    ("decode", "trace"), ("decode", "cache"), ("decode", "analysis"), ("decode", "plugin"),
    ("io", "trace"), ("io", "cache"), ("io", "analysis"), ("io", "cli"),
    ("writer", "decode"), ("writer", "trace"), ("writer", "analysis"), ("writer", "plugin"), ("writer", "pandas"),
])
def test_forbidden_pairs_are_named(source, target):
    assert _forbids(source, target), f"no forbidden contract keeps {source} from importing {target}"


def test_no_import_cycles_is_a_contract():
    acyclic = [c for c in _contracts() if c["type"] == "acyclic_siblings"]
    assert acyclic and acyclic[0]["ancestors"] == ["tb_profiler"] and "skip_descendants" not in acyclic[0]


def test_only_the_extension_import_is_ignored():
    """An ignored import is a hole in a contract: the only one allowed is the extension's."""
    for contract in _contracts():
        assert set(contract.get("ignore_imports", [])) <= {EXTENSION_IMPORT}, contract["name"]
    importers = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tb_profiler").rglob("*.py")
                 if "import _native" in p.read_text()]
    assert importers == ["tb_profiler/decode/extension.py"], importers


LAYERS, CYCLES = "The stages are layers", "No import cycles"


@pytest.mark.parametrize("module, line, contract", [
    ("trace/_probe.py", "from tb_profiler.analysis import kernels\n", "trace is data"),
    ("analysis/_probe.py", "def later():\n    from tb_profiler.plugin import views\n", "analysis never imports"),
    ("io/_probe.py", "import tb_profiler.cache\n", "decode and io never import"),
    ("writer.py", "def later():\n    import pandas\n", "writer (imported by training scripts)"),
    ("cache_limit.py", "def later():\n    from tb_profiler import cache\n", LAYERS),
    ("analysis/_probe.py", "from tb_profiler.analysis import memory\n", CYCLES),
])
def test_a_forbidden_import_breaks_the_contracts(tmp_path, module, line, contract):
    """A copy of the package with one import the rules forbid (one inside a function
    counts as well) makes lint-imports fail, naming the contract it breaks."""
    shutil.copytree(ROOT / "tb_profiler", tmp_path / "tb_profiler",
                    ignore=shutil.ignore_patterns("__pycache__", "static", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if contract == CYCLES:  # analysis.memory -> analysis._probe, closing the loop _probe -> memory
        memory = tmp_path / "tb_profiler" / "analysis" / "memory.py"
        memory.write_text(memory.read_text() + "\n\ndef _probe():\n    from tb_profiler.analysis import _probe\n")
    target = tmp_path / "tb_profiler" / module
    target.write_text((target.read_text() if target.exists() else "") + "\n" + line)
    done = _lint(tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path)})
    out = done.stdout + done.stderr
    broken = [ln for ln in out.splitlines() if " BROKEN" in ln]
    assert done.returncode != 0 and any(ln.startswith(contract) for ln in broken), out
