"""Results derived from a trace kept beside its cache entry (analysis.stored): computed once,
read back by a reopen in a new process, rebuilt when stale or damaged, never without a cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from datafiles import V100X4, read_bytes

from tb_profiler.analysis import stored
from tb_profiler.trace import load

ROOT = Path(__file__).resolve().parents[1]
CALLS: list[str] = []


def _dump(value):
    return {"ends": value["ends"]}, {"count": value["count"]}


def _load(arrays, meta):
    return {"ends": arrays["ends"], "count": meta["count"]}


@stored.per_trace_stored("test-ends", 1, _dump, _load)
def ends(trace):
    CALLS.append(trace.source)
    ev = trace.events
    return {"ends": ev["ts"] + ev["dur"], "count": int(len(ev))}


def _trace_file(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(read_bytes(V100X4))
    return p


def _wait_parts():
    from tb_profiler import cache_writer

    assert cache_writer.drain(60)  # parts are written by the process's one cache writer


def test_computed_once_then_read_from_the_cache(tmp_path):
    p = _trace_file(tmp_path)
    CALLS.clear()
    t = load(p, cache_dir=tmp_path / "c")
    first = ends(t)
    assert ends(t) is first and len(CALLS) == 1  # memoized
    _wait_parts()
    where = stored.part_entry(t, ends.part)
    assert where is not None and os.path.exists(where[0])
    again = load(p, cache_dir=tmp_path / "c")
    got = ends(again)
    assert len(CALLS) == 1  # read, not computed
    assert np.array_equal(got["ends"], first["ends"]) and got["count"] == first["count"] == len(t.events)


def test_a_new_process_reads_it(tmp_path):
    p = _trace_file(tmp_path)
    t = load(p, cache_dir=tmp_path / "c")
    expected = ends(t)["ends"].tolist()
    _wait_parts()
    child = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(ROOT / 'tests')!r}]
        import test_stored as m
        from tb_profiler.trace import load
        t = load({str(p)!r}, cache_dir={str(tmp_path / 'c')!r})
        out = m.ends(t)
        print(json.dumps({{"calls": len(m.CALLS), "ends": out["ends"].tolist()}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["calls"] == 0 and got["ends"] == expected


def test_changed_trace_or_damaged_part_is_computed_again(tmp_path):
    p = _trace_file(tmp_path)
    t = load(p, cache_dir=tmp_path / "c")
    ends(t)
    _wait_parts()
    part_file = stored.part_entry(t, ends.part)[0]
    data = bytearray(open(part_file, "rb").read())
    data[-100] ^= 0xFF  # inside the stored array
    open(part_file, "wb").write(data)
    CALLS.clear()
    again = load(p, cache_dir=tmp_path / "c")
    assert np.array_equal(ends(again)["ends"], again.events["ts"] + again.events["dur"])
    assert len(CALLS) == 1  # the damage was found: computed again (and stored again)
    _wait_parts()
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new version of the trace
    newer = load(p, cache_dir=tmp_path / "c")
    CALLS.clear()
    ends(newer)
    assert len(CALLS) == 1


def test_without_a_cache_nothing_is_written(tmp_path):
    p = _trace_file(tmp_path)
    t = load(p, cache=False)
    assert t.cache_ref is None and stored.part_entry(t, ends.part) is None
    CALLS.clear()
    ends(t)
    assert len(CALLS) == 1


def test_a_costly_route_is_answered_from_the_cache_by_a_new_server(tmp_path, monkeypatch):
    """The plugin keeps the JSON of a single-trace route that took STORE_AFTER_S or more
    beside the trace's entry; a server started later answers from it without computing."""
    from werkzeug.test import Client

    from tb_profiler.plugin import app as app_mod
    from tb_profiler.plugin import views
    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    run = tmp_path / "log" / "run"
    run.mkdir(parents=True)
    (run / "worker0.1.pt.trace.json").write_bytes(read_bytes(V100X4))
    monkeypatch.setattr(app_mod, "STORE_AFTER_S", 0.0)  # every route counts as costly here
    url = "/data/plugin/pytorch_profiler/overview?run=run&worker=worker0&span=1"

    def serve():
        state = ProfilerState(str(tmp_path / "log"), reload_s=0.2, cache_dir=str(tmp_path / "c"))
        app = ProfilerApp(state, standalone=True)
        state.start()
        client = Client(app)
        for _ in range(200):
            r = client.get(url)
            if r.status_code == 200:
                return app, r.get_data()
            __import__("time").sleep(0.1)
        raise AssertionError(r.status_code)

    app, first = serve()
    app.state.stop()
    app.close()
    _wait_parts()
    monkeypatch.setattr(views, "overview", lambda *a, **k: (_ for _ in ()).throw(AssertionError("computed")))
    app, again = serve()
    try:
        assert again == first
    finally:
        app.state.stop()
        app.close()


def test_the_trace_view_index_is_kept_and_read_back(tmp_path):
    from tb_profiler.plugin import timeline

    p = _trace_file(tmp_path)
    t = load(p, cache_dir=tmp_path / "c")
    want = timeline.window(t, None, None, 800, 5000, 100)
    _wait_parts()
    for fn in (timeline.timeline_index, timeline.lod_index):
        assert os.path.exists(stored.part_entry(t, fn.part)[0])
    again = load(p, cache_dir=tmp_path / "c")
    calls = []
    real = timeline.lod_build
    timeline.lod_build = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        assert timeline.window(again, None, None, 800, 5000, 100) == want
    finally:
        timeline.lod_build = real
    assert calls == []  # read, not built


def test_the_server_builds_the_trace_view_index_after_a_load(tmp_path):
    import time

    from tb_profiler.plugin import timeline
    from tb_profiler.plugin.state import ProfilerState

    run = tmp_path / "log" / "run"
    run.mkdir(parents=True)
    (run / "worker0.1.pt.trace.json").write_bytes(read_bytes(V100X4))
    state = ProfilerState(str(tmp_path / "log"), reload_s=0.2, cache_dir=str(tmp_path / "c")).start()
    try:
        deadline = time.monotonic() + 30
        while not state.entries() and time.monotonic() < deadline:
            time.sleep(0.05)
        trace = state.trace(state.entries()[0])  # loaded; nobody asks for the trace view
        part = stored.part_entry(trace, timeline.lod_index.part)[0]
        while not os.path.exists(part) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(part)
    finally:
        state.stop()
