"""The README's commands are what users and CI run: keep .ci/run identical to it."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ") and line.strip()]


def test_readme_has_two_commands():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert "samples/make_all.py" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert _readme_commands()[1] in lines, "README test command and .ci/run differ"


def test_ci_script_is_executable_bash():
    ci = ROOT / ".ci" / "run"
    assert ci.stat().st_mode & 0o111
    assert re.match(r"#!/usr/bin/env bash", ci.read_text())
