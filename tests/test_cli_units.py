"""The CLI speaks the UI's units (issue 21, "one definition per label"): a time of day is
µs from the trace's start, as the plugin's routes and the Trace view give it, not the
profiler's clock; shares are percentages; sizes are KiB/MiB/GiB. ``why --json`` holds
the same numbers as the plugin's idle route for the same trace."""
from __future__ import annotations

import contextlib
import io
import json

import tb_profiler
from datafiles import V100_TRACE
from tb_profiler.cli import main
from tb_profiler.plugin import views


def _run(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_why_gaps_start_where_the_ui_says():
    doc = json.loads(_run(["why", str(V100_TRACE), "--only", "idle", "--json"]))["traces"][0]
    route = views.idle(tb_profiler.load(str(V100_TRACE)), kernel_wait_ns=doc["idle"]["threshold_ns"])
    gaps = doc["idle"]["gaps"]
    by_start = {(g["start_ns"], g["dur_ns"]) for g in route["gaps"]}
    assert gaps and all((g["start_ns"], g["dur_ns"]) in by_start for g in gaps)
    assert all(0 <= g["start_ns"] < 2_000_000_000 for g in gaps)  # from the trace's start, not the epoch

    text = _run(["why", str(V100_TRACE), "--only", "idle,launches"])
    first = max(gaps, key=lambda g: g["dur_ns"])
    assert f"{first['start_ns'] / 1e3:,.3f} µs" in text
    share = json.loads(_run(["why", str(V100_TRACE), "--only", "launches", "--json"]))
    ops = share["traces"][0]["launches"]["operators"]
    assert f"{100 * ops[0]['overhead_share']:.1f}%" in text
    assert str(ops[0]["overhead_share"]) not in text  # the fraction itself is not printed


def test_commands_that_need_no_dataframe_do_not_import_pandas(tmp_path):
    """`tb-profiler runs`, `cache info` and `--help` answer without pandas (0.2 s of every
    call that imported it): checked in a fresh interpreter, where sys.modules tells."""
    import subprocess
    import sys

    from datafiles import V100

    probe = ("import sys, contextlib, io; from tb_profiler.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try: main(sys.argv[1:])\n"
             "    except SystemExit: pass\n"
             "print('pandas' in sys.modules)")
    for argv in (["runs", str(V100)], ["cache", "info", "--cache-dir", str(tmp_path)], ["--help"]):
        out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
        assert out.stdout.strip().splitlines()[-1] == "False", (argv, out.stdout, out.stderr)
    # the probe can fail: a command that builds DataFrames does import it
    out = subprocess.run([sys.executable, "-c", probe, "summary", str(V100_TRACE)], capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "True"
