"""Real ``--json`` answers of every tb-profiler verb that prints one (tests/schema_docs.py's
CLI_SCHEMAS names their schemas), over the same files the routes are asked of: the V100 run
(GPU), the CPU sample, the two ranks of ddp_gloo_2ranks, the compiled fixture, the memory
snapshots, and the server's cache folder after it served them.

Why a module of its own: tests/schema_docs.py holds the routes' answers and would pass the
size of a module one reads at once with these too. Each verb runs in this process
(tb_profiler.cli.main), with $TB_PROFILER_CACHE_DIR pointed at the temporary cache, so
regenerating the schemas never writes to the user's cache.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def _cache_env(folder: Path) -> Iterator[None]:
    """$TB_PROFILER_CACHE_DIR set to ``folder`` inside, restored after."""
    saved = os.environ.get("TB_PROFILER_CACHE_DIR")
    os.environ["TB_PROFILER_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TB_PROFILER_CACHE_DIR", None)
        else:
            os.environ["TB_PROFILER_CACHE_DIR"] = saved


def cli_json(argv: list[str], code: int = 0) -> Any:
    """What ``tb-profiler ARGV`` prints on stdout, parsed; asserts its exit code (stderr,
    the progress and the problems it names, is dropped)."""
    from tb_profiler.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        got = main(argv)
    assert got == code, (argv, got)
    return json.loads(out.getvalue())


def _trace(run: Path, span: int = 0) -> str:
    """The path of a run folder's span-th trace file (by name)."""
    return str(sorted(p for p in run.iterdir() if ".pt.trace.json" in p.name)[span])


def cli_answers(logdir: Path, root: Path, cache: Path) -> dict[str, list]:
    """{schema name: [answers]} of the verbs' --json output; ``cache`` is the folder the
    server filled (cache info and trim read it, clear empties a copy of it)."""
    v100, cpu, ddp = logdir / "v100", logdir / "cnn_dataloader_0workers", logdir / "ddp_gloo_2ranks"
    mixed = root / "cli" / "mixed"  # a run of one good file and one that cannot be read
    mixed.mkdir(parents=True)
    shutil.copy(_trace(cpu), mixed / "good.1.pt.trace.json")
    (mixed / "bad.1.pt.trace.json").write_text('{"traceEvents": [')
    gpu_trace, cpu_trace = _trace(v100), _trace(cpu)

    def each(verb: str, *paths: str, extra: tuple[str, ...] = ()) -> list:
        return [cli_json([verb, p, *extra, "--json"]) for p in paths]

    with _cache_env(cache):
        out = {
            "cli_runs": [cli_json(["runs", str(logdir), "--json"])],
            # one file: its document; a folder (or several paths): a list of them
            "cli_info": each("info", gpu_trace, str(logdir / "trust" / "worker0.1.pt.trace.json.gz"))
            + each("info", str(cpu), str(ddp)),
            "cli_summary": each("summary", gpu_trace, cpu_trace, str(ddp), extra=("--top", "5")),
            "cli_summarize": [cli_json(["summarize", str(ddp), "--jobs", "1", *span, "--json"])
                              for span in ((), ("--span", "1"))]
            + [cli_json(["summarize", str(mixed), "--jobs", "1", "--json"], code=1)],
            "why": each("why", gpu_trace, cpu_trace),
            "cli_compiled": each("compiled", _trace(logdir / "compiled"), gpu_trace),
            "cli_diff": [cli_json(["diff", gpu_trace, _trace(v100, 1), "--json"]),
                         cli_json(["diff", str(ddp), str(ddp), "--span", "1", "--json"]),
                         cli_json(["diff", cpu_trace, gpu_trace, "--json"])],
            "cli_snapshot": each("snapshot", str(v100 / "oom.pickle"), str(v100 / "basic.pickle"),
                                 extra=("--top", "3")),
        }
    small = _small_cache(cache, root / "cache-small")
    out["cli_cache"] = [cli_json(["cache", "info", "--cache-dir", str(c), "--json"]) for c in (cache, small)]
    out["cli_cache_clear"] = [cli_json(["cache", action, *flags, "--cache-dir", str(small), "--json"])
                              for action, flags in (("trim", ()), ("clear", ("--orphans",)), ("clear", ()))]
    return out


def _small_cache(cache: Path, folder: Path) -> Path:
    """A cache folder of one real entry (a copy of one in ``cache``) and one file that is
    not an entry (its source unknown: an orphan), for cache info, trim and clear."""
    folder.mkdir()
    entry = min(cache.glob("*.tbpc"), key=lambda p: p.stat().st_size)
    shutil.copy(entry, folder / entry.name)
    (folder / f"{'0' * 16}.tbpc").write_bytes(b"not a cache entry")
    return folder
