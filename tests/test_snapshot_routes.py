"""Memory snapshots in the server (issue 20): discovery lists the snapshots beside a run's
traces without unpickling anything (any other pickle is skipped with a reason), the
snapshot routes answer what the model answers (tb_profiler.snapshot.load_snapshot), a
hostile pickle is refused with an error naming it and never runs, a name outside the
logdir (or not discovered) is refused, and snapshot/operator finds the trace's operator
at a snapshot time by the trace's wall clock.

Data: tests/snapshot_fixtures.py (CUDA caching allocator-shaped snapshots, a real CPU
``_profile_to_snapshot``) and a Kineto trace written here whose baseTimeNanoseconds puts
its operators on the fixtures' clock (the format ``torch.profiler``'s
``export_chrome_trace`` writes: ``traceEvents`` of ph X cpu_op events, ts in µs from
``baseTimeNanoseconds``).
"""
from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path

import pytest
import snapshot_fixtures as fx
from werkzeug.test import Client

from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.io.discovery import NOT_SNAPSHOT, SNAPSHOT_NO_RUN, discover
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.snapshot import load_snapshot

P = "/data/plugin/pytorch_profiler/"
RUN = "job"
T0_NS = fx.T0_US * 1000  # the fixtures' clock (µs since the epoch) as the trace's base


class _Evil:
    """Whatever unpickles this runs a command that leaves a marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _trace(path: Path) -> None:
    """A Kineto trace on the fixtures' clock: aten::linear over [0, 1000) µs, aten::mm inside
    it over [100, 300), on one thread; no memory records."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 200}]
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": T0_NS, "traceEvents": ev}))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("snapshots")
    d = root / "log"
    run = d / RUN
    run.mkdir(parents=True)
    _trace(run / "w.pt.trace.json")
    fx.write(run / "basic.pickle", fx.cuda_basic())
    fx.write(run / "oom.pkl", fx.cuda_oom())
    fx.write(run / "cpu.pickle.gz", fx.cpu_profile())
    marker = root / "pwned"
    (run / "evil.pkl").write_bytes(pickle.dumps(_Evil(marker), protocol=4))  # not a snapshot's head
    (run / "evil_head.pickle").write_bytes(pickle.dumps({"segments": _Evil(marker), "device_traces": []}, protocol=4))
    (run / "kernel_annotations_rank0_x.pkl").write_bytes(pickle.dumps({}, protocol=4))  # read by graphs: not listed
    (d / "alone").mkdir()
    fx.write(d / "alone" / "lonely.pickle", fx.cuda_oom())        # no trace beside it
    fx.write(root / "outside.pickle", fx.cuda_basic())             # beside the logdir, not in it
    return d


@pytest.fixture(scope="module")
def client(logdir, tmp_path_factory):
    state = ProfilerState(str(logdir), reload_s=3600, cache_dir=str(tmp_path_factory.mktemp("cache")))
    app = ProfilerApp(state, standalone=True)
    state.start()
    assert state.wait_scanned(60)
    yield Client(app)
    state.stop()
    app.close()


def get(client, url: str, limit_s: float = 60):
    deadline = time.monotonic() + limit_s
    while True:
        r = client.get(P + url, environ_overrides={"HTTP_HOST": "localhost"})
        if r.status_code != 202 or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def ok(client, url: str) -> dict:
    r = get(client, url)
    assert r.status_code == 200, (url, r.status_code, r.get_data()[:400])
    return r.get_json()


def test_discovery_lists_snapshots_and_never_unpickles(logdir, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("discovery unpickled a file")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    found = discover(logdir)
    run = found.run(RUN)
    assert [s.rel for s in run.snapshots] == ["basic.pickle", "cpu.pickle.gz", "evil_head.pickle", "oom.pkl"]
    skipped = {Path(s.path).name: s.reason for s in found.skipped}
    assert skipped == {"evil.pkl": NOT_SNAPSHOT, "lonely.pickle": SNAPSHOT_NO_RUN}
    assert not (logdir.parent / "pwned").exists()


def test_snapshots_route_and_the_memory_view(client):
    names = [s["snapshot"] for s in ok(client, f"snapshots?run={RUN}")["snapshots"]]
    assert names == ["basic.pickle", "cpu.pickle.gz", "evil_head.pickle", "oom.pkl"]
    assert "Memory" in ok(client, f"views?run={RUN}")  # the trace has no memory records; its snapshots do


@pytest.mark.parametrize("name", ["basic.pickle", "oom.pkl", "cpu.pickle.gz"])
def test_routes_answer_what_the_model_answers(client, logdir, name):
    snap = load_snapshot(logdir / RUN / name, cache=False)
    q = f"run={RUN}&snapshot={name}"
    summary = ok(client, f"snapshot/summary?{q}")
    assert summary == {"snapshot": name, **to_jsonable(snap.summary())}

    dev = snap.summary()["devices"][0]
    tl = ok(client, f"snapshot/timeline?{q}&device={dev}&max_points=50")
    want = snap.timeline(device=dev, max_points=50)
    assert tl["points"] == to_jsonable(want["points"])
    assert tl["peak"] == to_jsonable(want["peak"])
    assert tl["allocations_total"] == want["allocations_total"] == len(tl["allocations"]) > 0
    assert [a["size"] for a in tl["allocations"]] == want["allocations"]["size"].tolist()
    assert all(a["addr"].startswith("0x") for a in tl["allocations"])
    assert {str(s) for s in want["allocations"]["stack"].tolist() if s >= 0} == set(tl["stacks"])
    assert all(f == snap.stack(int(s))[:len(f)] for s, f in tl["stacks"].items())

    at_end = ok(client, f"snapshot/at?{q}&device={dev}")
    state = snap.at(device=dev)
    assert at_end["totals"] == to_jsonable(state["totals"])
    assert at_end["segments_total"] == len(state["segments"]) == len(at_end["segments"])
    assert sum(s["total_size"] for s in at_end["segments"]) == state["totals"]["reserved_bytes"]
    assert sum(p["reserved_bytes"] for p in at_end["pools"]) == state["totals"]["reserved_bytes"]
    assert sum(p["free_external_bytes"] for p in at_end["pools"]) == state["totals"]["free_external_bytes"]
    mid = want["points"]["time_us"].iloc[len(want["points"]) // 2]
    at_mid = ok(client, f"snapshot/at?{q}&device={dev}&time_us={mid}")
    assert at_mid["totals"] == to_jsonable(snap.at(time_us=int(mid), device=dev)["totals"])

    live = ok(client, f"snapshot/live?{q}&device={dev}&top=5")
    assert live["at_peak"] and live["rows"] == to_jsonable(snap.live_at_peak(device=dev, top=5))
    live_mid = ok(client, f"snapshot/live?{q}&device={dev}&time_us={mid}")
    assert live_mid["rows"] == to_jsonable(snap.live_at(int(mid), device=dev))

    ooms = ok(client, f"snapshot/ooms?{q}")
    model = snap.ooms()
    assert ooms["total"] == len(model) == summary["oom_count"]
    for got, exp in zip(ooms["ooms"], model):
        assert got["requested_bytes"] == exp["requested_bytes"] and got["advice"] == exp["advice"]
        assert got["largest_free_block_bytes"] == exp["largest_free_block_bytes"]
        assert got["live"] == to_jsonable(exp["live"])
    if name == "oom.pkl":
        assert ooms["ooms"][0]["requested_bytes"] == fx.OOM_REQUEST and ooms["ooms"][0]["advice"]


def test_a_hostile_pickle_is_refused_and_never_runs(client, logdir):
    for _ in range(2):  # the second answer comes from the remembered failure
        r = get(client, f"snapshot/summary?run={RUN}&snapshot=evil_head.pickle")
        assert r.status_code == 400
        err = r.get_json()["error"]
        assert "evil_head.pickle" in err and str(logdir) not in err
    r = get(client, f"snapshot/timeline?run={RUN}&snapshot=evil.pkl")  # skipped by discovery
    assert r.status_code == 404 and "no memory snapshot 'evil.pkl'" in r.get_json()["error"]
    assert not (logdir.parent / "pwned").exists()


@pytest.mark.parametrize("name", ["../outside.pickle", "../../outside.pickle", "/etc/passwd", "%s/outside.pickle",
                                  "../alone/lonely.pickle", "kernel_annotations_rank0_x.pkl", "w.pt.trace.json"])
def test_a_name_discovery_did_not_list_is_refused(client, logdir, name):
    name = name.replace("%s", str(logdir.parent))
    r = get(client, f"snapshot/summary?run={RUN}&snapshot={name}")
    assert r.status_code == 404, r.get_data()[:300]
    assert "has no memory snapshot" in r.get_json()["error"]
    assert get(client, "snapshot/summary?run=nope&snapshot=basic.pickle").status_code == 404
    assert get(client, f"snapshot/summary?run={RUN}").status_code == 400  # snapshot is required


def test_operator_at_a_snapshot_time(client):
    base = f"snapshot/operator?run={RUN}&time_us="
    inner = ok(client, base + str(fx.T0_US + 150))
    assert inner["covers"] and inner["operator"]["name"] == "aten::mm"
    assert inner["operator"]["start_ns"] == 100_000 and inner["operator"]["dur_ns"] == 200_000
    outer = ok(client, base + str(fx.T0_US + 50))
    assert outer["operator"]["name"] == "aten::linear"
    later = ok(client, base + str(fx.T0_US + 5000))
    assert not later["covers"] and later["operator"] is None
    assert get(client, f"snapshot/operator?run={RUN}").status_code == 400


def test_kept_snapshots_count_against_the_memory_cap(logdir, tmp_path):
    """--memory-mb holds the snapshots the routes keep with the traces: status counts their
    bytes (Snapshot.nbytes), and under a cap smaller than two snapshots only the newest stays."""
    def serve(memory_bytes):
        state = ProfilerState(str(logdir), reload_s=3600, cache_dir=str(tmp_path / "cache"),
                              memory_bytes=memory_bytes)
        app = ProfilerApp(state, standalone=True)
        state.start()
        assert state.wait_scanned(60)
        return state, app, Client(app)

    sizes = {n: load_snapshot(logdir / RUN / n, cache_dir=tmp_path / "cache").nbytes() for n in ("basic.pickle", "oom.pkl")}
    assert all(s > 0 for s in sizes.values())
    for cap, kept in ((1 << 30, 2), (max(sizes.values()) + 1, 1)):
        state, app, client = serve(cap)
        try:
            for name in ("basic.pickle", "oom.pkl"):
                ok(client, f"snapshot/summary?run={RUN}&snapshot={name}")
            mem = ok(client, "status")["memory"]
            assert mem["snapshots_in_memory"] == kept
            want = sizes["oom.pkl"] + (sizes["basic.pickle"] if kept == 2 else 0)
            assert mem["snapshot_bytes"] == want   # both opened from the same cache entries
            assert mem["used_bytes"] >= mem["snapshot_bytes"]
        finally:
            state.stop()
            app.close()
