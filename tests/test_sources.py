"""Source-root resolution of stack frames (analysis/sources.py): the recorded roots, the
user's (--source-root, TB_PROFILER_SOURCE_ROOTS), then the folders above the trace; the
first root holding the file wins; `..` cannot climb out of a root; one lookup per file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tb_profiler.analysis import sources
from tb_profiler.analysis.operators import operator_stacks
from tb_profiler.analysis.sources import ENV_VAR, SOURCE_ROOTS_KEY, SourceResolver, folder_roots, recorded_roots
from tb_profiler.analysis.stacks import stack_frames, trace_frame
from tb_profiler.trace import load


@pytest.fixture(autouse=True)
def _no_user_roots(monkeypatch):
    """Each test starts without command-line or environment roots."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(sources, "_user_roots", ())


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n")
    return path


def _pyf(name: str, ts: int, dur: int) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _op(name: str, ts: int, dur: int, **args) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _trace(folder: Path, frames: list[str], roots=None, extra: list[dict] | None = None):
    """A trace at folder/log/run/w.1.pt.trace.json: one aten::mm under the nested
    python_function frames (outermost first), with ``roots`` recorded when given."""
    events = [_pyf(f, i, 100 - 2 * i) for i, f in enumerate(frames)] + [_op("aten::mm", 50, 1)] + (extra or [])
    doc = {"traceEvents": events}
    if roots is not None:
        doc[SOURCE_ROOTS_KEY] = roots
    path = folder / "log" / "run" / "w.1.pt.trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return load(str(path), cache=False)


def _mm_frames(trace) -> list[dict]:
    rows = operator_stacks(trace, "aten::mm")
    assert len(rows) == 1
    return rows.frames[0]


def test_relative_file_found_under_a_recorded_root(tmp_path):
    model = _touch(tmp_path / "src" / "pkg" / "model.py")
    t = _trace(tmp_path, ["pkg/model.py(45): forward"], roots=[str(tmp_path / "elsewhere"), str(tmp_path / "src")])
    assert _mm_frames(t) == [{"file": "pkg/model.py", "line": 45, "func": "forward", "path": str(model)}]


def test_recorded_roots_come_first_then_user_then_folders(tmp_path, monkeypatch):
    recorded = _touch(tmp_path / "rec" / "m.py")
    user = _touch(tmp_path / "user" / "m.py")
    _touch(tmp_path / "m.py")  # tmp_path is above the trace: the last resort
    frames = ["m.py(3): f"]
    assert _mm_frames(_trace(tmp_path / "a", frames, roots=[str(tmp_path / "rec")]))[0]["path"] == str(recorded)
    sources.set_user_roots([str(tmp_path / "user")])
    assert _mm_frames(_trace(tmp_path / "b", frames, roots=[str(tmp_path / "rec")]))[0]["path"] == str(recorded)
    assert _mm_frames(_trace(tmp_path / "c", frames))[0]["path"] == str(user)
    monkeypatch.setattr(sources, "_user_roots", ())
    assert _mm_frames(_trace(tmp_path / "d", frames))[0]["path"] == str(tmp_path / "m.py")


def test_found_under_source_root_option(tmp_path):
    from tb_profiler.cli import _parser
    from tb_profiler.plugin.serve import make_app

    model = _touch(tmp_path / "checkout" / "train.py")
    args = _parser().parse_args(["serve", str(tmp_path), "--source-root", str(tmp_path / "nothing"),
                                 "--source-root", str(tmp_path / "checkout")])
    app = make_app(str(tmp_path), source_roots=args.source_root, start=False)
    try:
        t = _trace(tmp_path / "x", ["train.py(10): main"])
        assert _mm_frames(t)[0]["path"] == str(model)
    finally:
        app.close()


def test_source_root_option_must_be_a_folder(tmp_path, capsys):
    from tb_profiler.cli import main

    assert main(["serve", str(tmp_path), "--source-root", str(tmp_path / "missing")]) == 1
    assert "--source-root" in capsys.readouterr().err


def test_found_under_env_var_roots(tmp_path, monkeypatch):
    model = _touch(tmp_path / "b" / "nested" / "net.py")
    monkeypatch.setenv(ENV_VAR, os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")]))
    t = _trace(tmp_path / "x", ["nested/net.py(7): forward"])
    assert _mm_frames(t)[0]["path"] == str(model)


def test_found_in_a_folder_above_the_logdir(tmp_path):
    # the samples' layout: project/samples/cnn.py, project/log/run/trace
    cnn = _touch(tmp_path / "samples" / "cnn.py")
    t = _trace(tmp_path, ["samples/cnn.py(51): forward"])
    assert _mm_frames(t)[0]["path"] == str(cnn)
    assert folder_roots(str(tmp_path / "log" / "run" / "w.json"))[:3] == [
        str(tmp_path / "log" / "run"), str(tmp_path / "log"), str(tmp_path)]
    assert folder_roots("s3://bucket/log/run/w.json") == [] and folder_roots("<bytes>") == []


def test_not_found_keeps_the_recorded_text(tmp_path):
    t = _trace(tmp_path, ["ghost.py(1): f", "<frozen os>(674): __getitem__"], roots=[str(tmp_path)])
    assert _mm_frames(t) == [{"file": "<frozen os>", "line": 674, "func": "__getitem__"},
                             {"file": "ghost.py", "line": 1, "func": "f"}]


def test_dotdot_cannot_escape_a_root(tmp_path):
    secret = _touch(tmp_path / "secret.py")
    root = tmp_path / "root"
    _touch(root / "sub" / "ok.py")
    r = SourceResolver([str(root)])
    for name in ("../secret.py", "sub/../../secret.py", "./../secret.py", "sub/../../" + secret.name):
        assert r.resolve(name) is None, name
    assert r.resolve("sub/../sub/ok.py") == str(root / "sub" / "ok.py")  # normalized, still inside
    # through a whole trace too, with the escape target existing
    t = _trace(tmp_path / "t", ["../secret.py(1): leak"], roots=[str(root)])
    assert "path" not in _mm_frames(t)[0]


def test_dangling_symlink_is_not_a_file(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    os.symlink(tmp_path / "nowhere.py", first / "m.py")
    real = _touch(second / "m.py")
    assert SourceResolver([str(first), str(second)]).resolve("m.py") == str(real)
    assert SourceResolver([str(first)]).resolve("m.py") is None


def test_untrusted_recorded_roots_are_filtered(tmp_path):
    good = str(tmp_path)
    assert recorded_roots({SOURCE_ROOTS_KEY: "not a list"}) == []
    assert recorded_roots({SOURCE_ROOTS_KEY: [good, 3, None, {"a": 1}]}) == [good]
    assert len(recorded_roots({SOURCE_ROOTS_KEY: [good] * 10_000})) == sources.MAX_ROOTS
    r = SourceResolver(["relative/dir", "", "/with\0nul", "/" + "x" * 5000, good, good + "/"])
    assert r.roots == (good,)
    assert r.resolve("a\0b.py") is None and r.resolve("x" * 5000) is None and r.resolve(None) is None


def test_absolute_names_resolve_when_they_exist(tmp_path):
    f = _touch(tmp_path / "abs.py")
    r = SourceResolver([])
    assert r.resolve(str(f)) == str(f)
    assert r.resolve(str(tmp_path / "x" / ".." / "abs.py")) == str(f)
    assert r.resolve(str(tmp_path / "missing.py")) is None


def test_one_lookup_per_unique_file(tmp_path, monkeypatch):
    """300 events over 3 distinct files (many lines each) cost one existence check per
    (file, root) tried, not one per event or per frame."""
    _touch(tmp_path / "src" / "a.py")
    _touch(tmp_path / "src" / "b.py")
    calls: list[str] = []
    real = sources._exists
    monkeypatch.setattr(sources, "_exists", lambda p: (calls.append(p), real(p))[1])
    extra = []
    for i in range(100):
        ts = 1000 + 10 * i
        extra += [_pyf(f"a.py({i + 1}): f{i}", ts, 9), _pyf(f"b.py({i + 1}): g", ts + 1, 7),
                  _pyf(f"missing.py({i + 2}): h", ts + 2, 5), _op("aten::add", ts + 3, 1)]
    t = _trace(tmp_path, ["a.py(1): main"], roots=[str(tmp_path / "none"), str(tmp_path / "src")], extra=extra)
    rows = operator_stacks(t, "aten::add")
    frames = [f for fs in rows.frames for f in fs]
    assert len(rows) == 100 and len(frames) == 300
    assert {f["file"]: f.get("path") for f in frames} == {
        "a.py": str(tmp_path / "src" / "a.py"), "b.py": str(tmp_path / "src" / "b.py"), "missing.py": None}
    # a.py, b.py: "none" then "src"; missing.py: every root (2 recorded + the folders above)
    n_folders = len(folder_roots(t.source))
    assert len(calls) == 2 + 2 + 2 + n_folders, calls
    assert len(set(calls)) == len(calls)
    stack_frames(t, 0)  # asking again resolves nothing again
    assert len(calls) == 2 + 2 + 2 + n_folders


def test_legacy_call_stack_and_single_frames_resolve(tmp_path):
    f = _touch(tmp_path / "src" / "model.py")
    stack = "model.py(20): forward;train.py(10): <module>"
    t = _trace(tmp_path, [], roots=[str(tmp_path / "src")], extra=[_op("aten::conv2d", 200, 5, **{"Call stack": stack})])
    frames = operator_stacks(t, "aten::conv2d").frames[0]
    assert frames == [{"file": "model.py", "line": 20, "func": "forward", "path": str(f)},
                      {"file": "train.py", "line": 10, "func": "<module>"}]
    assert trace_frame(t, "model.py(1): <module>") == {"file": "model.py", "line": 1, "func": "<module>",
                                                       "path": str(f)}
