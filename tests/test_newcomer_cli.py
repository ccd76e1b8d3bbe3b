"""Issue 11, what a newcomer met on the command line and in discovery: a symbolic link loop
is called a loop everywhere, a missing logdir says so, the CLI never prints terminal control
sequences from traces or file names, and sizes in powers of 1024 say KiB/MiB/GiB."""
from __future__ import annotations

import json
import os

import pytest
from datafiles import V100X4, read_bytes

from tb_profiler.cli import _size, main
from tb_profiler.errors import TraceFormatError
from tb_profiler.io.discovery import discover
from tb_profiler.io.read import LINK_LOOP
from tb_profiler.trace import load


def test_a_link_loop_is_a_loop_in_discovery_info_and_load(tmp_path, capsys):
    run = tmp_path / "log" / "run"
    run.mkdir(parents=True)
    a, b = run / "a.pt.trace.json", run / "b.pt.trace.json"
    os.symlink(b, a)
    os.symlink(a, b)
    (run / "gone.pt.trace.json").symlink_to(run / "missing.json")
    reasons = {os.path.basename(s.path): s.reason for s in discover(tmp_path / "log").skipped}
    assert reasons["a.pt.trace.json"] == LINK_LOOP == reasons["b.pt.trace.json"]
    assert "broken" in reasons["gone.pt.trace.json"]  # a link to nothing is still called broken
    with pytest.raises(TraceFormatError, match="symbolic link loop"):
        load(a, cache=False)
    assert main(["info", str(a)]) != 0
    assert LINK_LOOP in capsys.readouterr().err


def test_a_missing_logdir_says_so(tmp_path):
    from tb_profiler.plugin.state import ProfilerState

    state = ProfilerState(str(tmp_path / "nowhere"), reload_s=60)
    state.scan()
    error = state.status()["scan_error"]
    assert "does not exist" in error and "<logdir>" not in error and str(tmp_path) not in error


def test_the_cli_escapes_control_characters_from_traces_and_file_names(tmp_path, capsys):
    evil = "op\x1b[2J\x1b]0;pwned\x07\u202eexe.txt"
    doc = json.loads(read_bytes(V100X4))
    for ev in doc["traceEvents"][:40]:
        if ev.get("ph") == "X":
            ev["name"] = evil
            ev["cat"] = "cpu_op"
    run = tmp_path / "log" / "run\x1b[31m"
    run.mkdir(parents=True)
    p = run / "worker\x1b[1m.1.pt.trace.json"
    p.write_text(json.dumps(doc))
    for argv in (["runs", str(tmp_path / "log")], ["info", str(p)], ["summary", str(p)]):
        main(argv)
        out = capsys.readouterr()
        for text in (out.out, out.err):
            assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, argv
        assert "\\x1b" in out.out + out.err, argv  # shown escaped, not dropped


def test_sizes_in_powers_of_1024_say_so():
    assert _size(512) == "512 B"
    assert _size(1536) == "1.5 KiB"
    assert _size(5 << 20) == "5.0 MiB"
    assert _size(3 << 30) == "3.0 GiB"
