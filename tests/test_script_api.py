"""The Python API from a plain script: summaries built by worker processes never run the
caller's ``__main__`` again (issue 17).

Before, a script without an ``if __name__ == "__main__":`` guard that called
``load_run(d).distributed()`` was re-executed by each of multiprocessing's children (they
import ``__main__`` by path), printed RuntimeError tracebacks and got 0 ranks.  Here the
same script body runs as a file without the guard, as a file with it, from ``python -``
(stdin, a ``__main__`` without a file), from ``python -c`` and in IPython's interactive
namespace (as a notebook's kernel runs a cell): each gives the same answer, and its top
level ran exactly once (it appends a line to a file each time it runs)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BODY = """\
import json, os
import tb_profiler
with open(os.environ["RAN_FILE"], "a") as f:
    f.write("ran\\n")
"""
CALL = """\
d = tb_profiler.load_run(os.environ["RUN_DIR"]).distributed(jobs=2)
print("ANSWER " + json.dumps({"ranks": len(d["ranks"]), "rank_rows": d["ranks"].to_json(),
                              "steps": d["steps"].to_json(), "notes": d["notes"]}))
"""
GUARDED = BODY + "def main():\n" + "".join(f"    {line}\n" for line in CALL.splitlines()) + \
    'if __name__ == "__main__":\n    main()\n'


def _run(tmp_path: Path, run_dir: Path, form: str) -> tuple[dict, int, str]:
    """(the answer printed, how many times the top level ran, stderr) of one form."""
    ran = tmp_path / f"ran-{form}.txt"
    env = dict(os.environ, RAN_FILE=str(ran), RUN_DIR=str(run_dir),
               TB_PROFILER_CACHE_DIR=str(tmp_path / f"cache-{form}"))  # built by the pool each time
    script = tmp_path / f"{form}.py"
    script.write_text(GUARDED if form == "guarded" else BODY + CALL)
    args, stdin = {"file": ([str(script)], None), "guarded": ([str(script)], None),
                   "stdin": (["-"], script.read_text()), "dash_c": (["-c", script.read_text()], None),
                   # IPython's interactive namespace, as a notebook's kernel runs cells
                   "ipython": (["-m", "IPython", "--quick", "--no-banner", "--colors=NoColor", "-c",
                                script.read_text()], None)}[form]
    proc = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, f"{form}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    answers = [line[len("ANSWER "):] for line in proc.stdout.splitlines() if line.startswith("ANSWER ")]
    assert len(answers) == 1, f"{form}: {proc.stdout[-2000:]}"
    return json.loads(answers[0]), len(ran.read_text().splitlines()), proc.stderr


@pytest.fixture(scope="module")
def answers(sample_logdir, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("script_api")
    forms = ["file", "guarded", "stdin", "dash_c"] + (["ipython"] if importlib.util.find_spec("IPython") else [])
    return {form: _run(tmp, sample_logdir / "ddp_gloo_2ranks", form) for form in forms}


def _answer(answers: dict, form: str) -> tuple:
    if form not in answers:
        pytest.skip(f"{form}: not installed here")
    return answers[form]


@pytest.mark.parametrize("form", ["file", "guarded", "stdin", "dash_c", "ipython"])
def test_the_script_runs_once_and_sees_every_rank(answers, form):
    answer, runs, stderr = _answer(answers, form)
    assert runs == 1, f"{form}: the script's top level ran {runs} times"
    assert answer["ranks"] == 2
    assert "Traceback" not in stderr and "bootstrapping phase" not in stderr, stderr[-3000:]


@pytest.mark.parametrize("form", ["file", "stdin", "dash_c", "ipython"])
def test_every_form_gives_the_guarded_scripts_answer(answers, form):
    assert _answer(answers, form)[0] == answers["guarded"][0]
