"""The test suite, the benchmarks and the samples need nothing outside the repository.

A clone has no project workspace around it: a file under tests/, benchmarks/, samples/ or
.ci/ that names a folder beside or above the repository root (the workspace's traces or
tools, an absolute path into it, a walk up past the root) works on the developers' machine
and fails everywhere else. Every such reference is an error here; test data lives in
tests/data/ (tests/datafiles.py names it).

The patterns below are written so that this file does not match them itself (a character
class or an escape breaks each literal), so this file is scanned like any other.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import datafiles

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tests", "benchmarks", "samples", ".ci")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", "node_modules"}
BINARY_SUFFIXES = {".gz", ".pyc", ".so", ".png", ".npz", ".bin"}

# name -> regex over one line. Depth-dependent walks up (parents[n], .parent chains, nested
# dirname) are checked in walks_out_of_root() against the file's own depth.
PATTERNS = {
    "workspace traces or tools folder": re.compile(r"shared[/\\](?:traces|tools)\b"),
    "relative path beside the repository": re.compile(r"\.\.[/\\]shared\b"),
    "absolute path into the workspace": re.compile(r"/wor[k]/"),
    "workspace folder joined as a path part": re.compile(r"/\s*[\"']shared[\"']|[\"']shared[\"']\s*,\s*[\"'](?:traces|tools)"),
    "environment override for outside traces": re.compile(r"SHARED_TRACE[S]"),
    "the repository root's parent": re.compile(r"\bROOT\.parents?\b|dirname\(\s*ROOT\s*\)"),
}
PARENTS_N = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[\s*(\d+)\s*\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent\b)+)")
DIRNAME_CHAIN = re.compile(r"((?:os\.path\.dirname\(\s*)+)(?:os\.path\.(?:abspath|realpath)\(\s*)?__file__")


def walks_out_of_root(line: str, depth: int) -> str | None:
    """Why `line`, in a file `depth` folders below the root, climbs above the root (or None).
    For tests/x.py (depth 1): parents[1], .parent.parent and two nested dirname() are the
    root; one more step is outside."""
    for m in PARENTS_N.finditer(line):
        if int(m.group(1)) > depth:
            return f"parents[{m.group(1)}] of a file {depth} folder(s) deep"
    for m in PARENT_CHAIN.finditer(line):
        if m.group(1).count(".parent") > depth + 1:
            return f"{m.group(1).count('.parent')} .parent steps from a file {depth} folder(s) deep"
    for m in DIRNAME_CHAIN.finditer(line):
        if m.group(1).count("dirname") > depth + 1:
            return f"{m.group(1).count('dirname')} nested dirname() from a file {depth} folder(s) deep"
    return None


def scanned_files(root: Path = ROOT) -> list[Path]:
    out = []
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(root).parts) \
                    and p.suffix not in BINARY_SUFFIXES:
                out.append(p)
    return out


def outside_references(root: Path = ROOT) -> tuple[list[Path], list[str]]:
    """(the text files scanned, one 'path:line: why: text' per reference found)."""
    files, found = [], []
    for p in scanned_files(root):
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        files.append(p)
        rel = p.relative_to(root)
        depth = len(rel.parts) - 1
        for n, line in enumerate(text.splitlines(), 1):
            whys = [name for name, rx in PATTERNS.items() if rx.search(line)]
            walk = walks_out_of_root(line, depth)
            if walk:
                whys.append(walk)
            found += [f"{rel}:{n}: {why}: {line.strip()[:160]}" for why in whys]
    return files, found


def test_nothing_refers_outside_the_repository():
    files, found = outside_references()
    rels = {str(p.relative_to(ROOT)) for p in files}
    # the scan really read the project's files (not an empty or wrong folder)
    assert len(files) >= 60, sorted(rels)
    for must in ("tests/conftest.py", "tests/datafiles.py", "tests/test_no_outside_paths.py",
                 "tests/test_decode_differential.py", "tests/data/README.md", "benchmarks/bigtrace.py",
                 "benchmarks/make_big_trace.py", "samples/make_all.py", ".ci/run"):
        assert must in rels, must
    for folder in ("tests", "benchmarks", "samples"):
        assert sum(r.startswith(folder + "/") and r.endswith(".py") for r in rels) >= 4, folder
    assert not found, "references outside the repository:\n" + "\n".join(found)


# Bad lines, spelled with "@" (removed before use) so that this file does not contain them.
BAD = [line.replace("@", "") for line in (
    'TRACES = Path("/wo@rk/sh@ared/traces")',
    'TRACES = ROOT / ".." / "sh@ared/tr@aces"',
    'MAKE_BIG = "..@/sh@ared/to@ols/make_big_trace.py"',
    'D = os.path.join(HERE, "sh@ared", "traces")',
    'D = HERE / "sh@ared" / "traces"',
    'T = Path(os.environ.get("TB_PROFILER_SHA@RED_TRACES", "x"))',
    'X = ROOT.@parent / "data"',
    'V = Path(__file__).resolve().@parents[2] / "data"',
    'V = Path(__file__).@parent.parent.parent / "data"',
    'V = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file@__))))',
)]
GOOD = [line.replace("@", "") for line in (
    'ROOT = Path(__file__).resolve().@parents[1]',
    'ROOT = Path(__file__).resolve().@parent.parent',
    'HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file@__)))',
    '"shared memory": 0, "registers per thread": 32',
    '"""Browser-test fixtures shared by the tests"""',
)]


def test_the_scan_finds_each_kind_of_reference(tmp_path):
    for i, line in enumerate(BAD):
        (tmp_path / "tests").mkdir(exist_ok=True)
        (tmp_path / "tests" / "test_x.py").write_text(f"import os\n{line}\n")
        files, found = outside_references(tmp_path)
        assert len(files) == 1 and found and found[0].startswith("tests/test_x.py:2:"), (i, line, found)
    for line in GOOD:
        (tmp_path / "tests" / "test_x.py").write_text(line + "\n")
        assert outside_references(tmp_path)[1] == [], line


def test_the_scan_fails_on_a_reference_put_back_in_a_real_file(tmp_path):
    """A copy of the real tests/ folder with one of its files given an outside path back."""
    import shutil

    shutil.copytree(ROOT / "tests", tmp_path / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "*.gz", "data"))
    assert outside_references(tmp_path)[1] == []
    victim = tmp_path / "tests" / "test_cli.py"
    victim.write_text(victim.read_text() + "\nV100 = Path(__file__).resolve().@parents[2] / 'x'\n".replace("@", ""))
    found = outside_references(tmp_path)[1]
    assert len(found) == 1 and found[0].startswith("tests/test_cli.py:"), found


def test_every_named_fixture_exists_and_every_trace_is_the_published_text():
    for p in datafiles.NAMED:
        assert p.is_file(), p
    for folder in (datafiles.V100_RUN, datafiles.V100_RUN_W4, datafiles.LEGACY, datafiles.TINY_H100,
                   datafiles.DECODE_CASES):
        assert folder.is_dir(), folder
    sums = {}
    for line in (datafiles.DATA / "SHA256SUMS").read_text().splitlines():
        if line and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            sums[name] = digest
    traces = datafiles.real_traces()
    assert len(traces) == 14 and sorted(datafiles.rel(p) for p in traces) == sorted(sums)
    for p in traces:
        assert p.name.endswith(".gz"), p  # stored gzipped
        assert hashlib.sha256(datafiles.read_bytes(p)).hexdigest() == sums[datafiles.rel(p)], p
