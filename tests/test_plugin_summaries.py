"""Runs of many ranks in the plugin (issue 8): the run-level routes (views, distributed/*)
read the files' summaries only, never every rank's trace at once.

The runs are written by benchmarks/make_many_ranks.py from the real 2-rank gloo sample
(16 or 4 ranks, sample size) or by hand (point-to-point traffic), and served by the app in
process (werkzeug's test client) with the trace LRU capped so low that it holds one trace.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from werkzeug.test import Client

import tb_profiler
import tb_profiler.analysis.diff as diff_mod
import tb_profiler.analysis.distributed as dist_mod
import tb_profiler.summary.pool as pool_mod
from tb_profiler.analysis.jsonable import to_jsonable
from tb_profiler.plugin import app as app_mod
from tb_profiler.plugin import state as state_mod
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState, trace_nbytes
from datafiles import benchmark_module

P = "/data/plugin/pytorch_profiler/"
mmr = benchmark_module("make_many_ranks")

RUN_ROUTES = ["views", "distributed/overlap", "distributed/waittime", "distributed/commops", "distributed/gpuinfo",
              "distributed/ranks", "distributed/instances", "distributed/matrix"]


# -- helpers ----------------------------------------------------------------------------------
def get(client, route, expect=200):
    r = client.get(P + route)
    assert r.status_code == expect, (route, r.status_code, r.get_data()[:500])
    return json.loads(r.get_data())


def settle(client, route, timeout=60.0):
    """A route's answer once it stops answering 202 (summaries or traces on their way)."""
    end = time.monotonic() + timeout
    while True:
        r = client.get(P + route)
        if r.status_code != 202:
            assert r.status_code == 200, (route, r.status_code, r.get_data()[:500])
            return json.loads(r.get_data())
        assert time.monotonic() < end, f"{route} still 202 after {timeout} s: {r.get_data()[:300]}"
        time.sleep(0.1)


def rank_paths(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pt.trace.json"), key=lambda p: int(p.name[4:p.name.index(".")]))


@pytest.fixture(scope="module")
def many(sample_logdir, tmp_path_factory) -> Path:
    """A logdir with one run of 16 ranks made from the real gloo pair (clock jitter 5 µs)."""
    logdir = tmp_path_factory.mktemp("many")
    mmr.generate(logdir / "r16", 16, 0, source=sample_logdir / "ddp_gloo_2ranks", jitter_us=5, seed=3)
    return logdir


@pytest.fixture(scope="module")
def stored(many, tmp_path_factory) -> Path:
    """A cache folder holding the 16 ranks' summaries (as `tb-profiler summarize` leaves it)."""
    cache = tmp_path_factory.mktemp("stored-cache")
    outcomes = pool_mod.summarize_files([str(p) for p in rank_paths(many / "r16")], jobs=1, cache_dir=cache)
    assert not [o for o in outcomes if isinstance(o, Exception)]
    return cache


@pytest.fixture
def serve(tmp_path):
    made = []

    def _serve(logdir, **kw):
        kw.setdefault("reload_s", 0.2)
        kw.setdefault("cache_dir", str(tmp_path / "cache"))
        kw.setdefault("jobs", 1)
        state = ProfilerState(str(logdir), **kw)
        app = ProfilerApp(state, standalone=True)
        made.append(app)
        state.start()
        return app, Client(app)

    yield _serve
    for app in made:
        app.state.stop()
        app.close()


def one_trace_bytes(path: Path) -> int:
    """What one rank's trace counts in the server's LRU: read from its cache entry, as the
    server holds it (a small plain trace decoded without a cache keeps its args text in memory)."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        tb_profiler.load(path, cache_dir=cache, background=False)
        return trace_nbytes(tb_profiler.load(path, cache_dir=cache))


# -- the run-level routes read summaries only -----------------------------------------------------
def test_run_routes_read_stored_summaries_only(many, stored, serve, monkeypatch):
    """With summaries stored and an LRU that holds one trace, views and every distributed
    route answer without loading a single trace and without building a summary; a
    trace/ranks window then loads just its two ranks, never more than the cap."""
    def no_build(*a, **kw):
        raise AssertionError("a stored summary was built again")

    monkeypatch.setattr(pool_mod, "summarize_files", no_build)
    cap = int(one_trace_bytes(rank_paths(many / "r16")[0]) * 1.5)
    _app, c = serve(many, memory_bytes=cap, cache_dir=str(stored))
    for route in RUN_ROUTES:
        doc = settle(c, f"{route}?run=r16")
        if route != "views":
            assert len(doc["info"]["ranks"]) == 16 and doc["info"]["excluded"] == [], route
    assert get(c, "views?run=r16") == ["Overview", "Operator", "Trace", "Memory", "Module", "Distributed"]
    status = get(c, "status")
    assert status["memory"]["traces_loaded"] == 0 and status["memory"]["traces_in_memory"] == 0
    assert status["memory"]["summaries_in_memory"] == 16
    run = status["runs"][0]
    assert run["summarized_in_background"] and run["loaded_files"] == 0
    assert run["summaries"] == {"summarized": 16, "total": 16, "failed": 0,
                                "summarized_bytes": run["total_bytes"], "total_bytes": run["total_bytes"]}
    assert {f["summary"] for spans in run["workers"].values() for f in spans} == {"ready"}
    wait_for_quiet(c)
    assert get(c, "status")["memory"]["traces_loaded"] == 0  # nothing parsed in the background either

    merged = settle(c, "trace/ranks?run=r16&workers=rank3,rank12&width=300&max_events=200")
    assert [w["worker"] for w in merged["workers"]] == ["rank3", "rank12"]
    memory = get(c, "status")["memory"]
    # its two ranks only (each at most twice: the cap holds one, so the first is evicted by the second)
    assert 2 <= memory["traces_loaded"] <= 4 and memory["peak_bytes"] <= cap and memory["traces_in_memory"] == 1


def wait_for_quiet(c, timeout=30.0):
    end = time.monotonic() + timeout
    while get(c, "status")["loading"]:
        assert time.monotonic() < end, "still loading"
        time.sleep(0.1)


def test_the_cross_rank_analysis_is_computed_once_for_every_route(many, stored, serve, monkeypatch):
    calls = []
    real = dist_mod.distributed_from_summaries

    def counted(summaries):
        calls.append(len(summaries))
        return real(summaries)

    monkeypatch.setattr(dist_mod, "distributed_from_summaries", counted)
    _app, c = serve(many, cache_dir=str(stored))
    for route in RUN_ROUTES[1:] + ["distributed/instances?sort=bytes&limit=2", "trace/ranks?width=200"]:
        settle(c, f"{route}{'&' if '?' in route else '?'}run=r16")
    assert calls == [16]


def test_cold_run_answers_202_with_summary_progress_then_200(many, serve, monkeypatch):
    """No stored summary: the distributed routes answer 202 with how many ranks are
    summarized while the process pool builds them (two processes here), then 200; the
    ranks' traces are never parsed into the server's memory."""
    release = threading.Event()
    real = pool_mod.summarize_files

    def held(paths, **kw):
        release.wait(30)
        return real(paths, **kw)

    monkeypatch.setattr(pool_mod, "summarize_files", held)
    monkeypatch.setattr(app_mod, "LOAD_WAIT_S", 0.3)
    app, c = serve(many, jobs=2)
    try:
        r = c.get(P + "distributed/overlap?run=r16")
        assert r.status_code == 202
        body = json.loads(r.get_data())
        assert body["loading"] and body["summarizing"] and body["run"] == "r16"
        assert body["total"] == 16 and 0 <= body["summarized"] < 16 and body["retry_after_ms"] > 0
        assert body["total_bytes"] > body["summarized_bytes"] >= 0
        status = get(c, "status")
        assert status["loading"] and status["runs"][0]["state"] == "loading"
        assert "building" in {f["summary"] for spans in status["runs"][0]["workers"].values() for f in spans}
        assert get(c, "views?run=r16", expect=202)["summarizing"]
    finally:
        release.set()
    assert len(settle(c, "distributed/overlap?run=r16")["ranks"]) == 16
    wait_for_quiet(c)
    status = get(c, "status")
    assert status["memory"]["traces_loaded"] == 0 and status["runs"][0]["loaded_files"] == 0
    assert status["loaded_bytes"] == status["total_bytes"]
    cache = Path(app.state.cache_dir)  # the summaries are stored; no rank's decoded columns are written
    assert len(list((cache / "summaries").glob("*.tbpc"))) == 16 and not list(cache.glob("*.tbpc"))


def test_the_run_asked_for_is_summarized_first(many, tmp_path, serve, monkeypatch):
    """Two runs of several ranks: a request for the second one puts it ahead of the first."""
    logdir = tmp_path / "two"
    for name in ("a_first", "b_asked"):
        shutil.copytree(many / "r16", logdir / name)
    order = []
    real = pool_mod.summarize_files

    def noted(paths, **kw):
        order.append(Path(paths[0]).parent.name)
        return real(paths, **kw)

    monkeypatch.setattr(pool_mod, "summarize_files", noted)
    monkeypatch.setattr(state_mod, "MAX_CHUNK", 8)
    _app, c = serve(logdir, jobs=1)  # chunks of 8 files: a_first's two, then b_asked's two, unless asked
    settle(c, "distributed/waittime?run=b_asked")
    wait_for_quiet(c)
    assert sorted(order) == ["a_first", "a_first", "b_asked", "b_asked"]
    assert order.index("b_asked") <= 1 and order[-1] == "a_first"  # at most a_first's running chunk first


# -- the same numbers as the traces give -------------------------------------------------------------
def test_old_routes_equal_distributed_of_the_traces(sample_logdir, tmp_path, serve):
    """overlap / waittime / commops / gpuinfo of the real gloo sample run, from summaries,
    are exactly distributed(traces) of its traces loaded here."""
    shutil.copytree(sample_logdir / "ddp_gloo_2ranks", tmp_path / "log" / "ddp_gloo_2ranks")
    traces = [tb_profiler.load(p, cache=False) for p in sorted((tmp_path / "log" / "ddp_gloo_2ranks").glob("*.json"))]
    latest = {}
    for t in traces:  # each worker's latest span, as the routes' default
        latest[Path(str(t.source)).name.split(".")[0]] = t
    want = to_jsonable(dist_mod.distributed([latest[w] for w in sorted(latest)]))
    _app, c = serve(tmp_path / "log")
    overlap = settle(c, "distributed/overlap?run=ddp_gloo_2ranks")
    wait = settle(c, "distributed/waittime?run=ddp_gloo_2ranks")
    commops = settle(c, "distributed/commops?run=ddp_gloo_2ranks")
    gpuinfo = settle(c, "distributed/gpuinfo?run=ddp_gloo_2ranks")
    clock = {r["rank"]: r for r in want["clock"]}
    for got, keys in ((overlap, app_mod.views._OVERLAP), (wait, app_mod.views._WAIT)):
        assert got["ranks"] == [{**{k: r[k] for k in keys if k in r}, "clock_offset_ns": clock[r["rank"]]["clock_offset_ns"],
                                 "clock_method": clock[r["rank"]]["clock_method"]} for r in want["ranks"]]
        assert got["steps"] == [{k: r[k] for k in keys if k in r} for r in want["steps"]]
        assert got["notes"] == want["notes"] and got["info"] == {**want["info"], "excluded": []}
    assert commops["rows"] == want["collectives"]
    assert [(w["worker"], w["rank"], w["devices"]) for w in gpuinfo["workers"]] == \
        [(w, latest[w].distributed_info["rank"], []) for w in sorted(latest)]


# -- a broken rank ----------------------------------------------------------------------------------
def test_a_broken_rank_is_listed_failed_and_the_run_opens(many, tmp_path, serve):
    run = tmp_path / "log" / "r4"
    run.mkdir(parents=True)
    for p in rank_paths(many / "r16")[:4]:
        shutil.copy(p, run / p.name)
    broken = rank_paths(run)[2]
    broken.write_text(broken.read_text()[:5000])  # cut off mid-file
    _app, c = serve(tmp_path / "log")
    overlap = settle(c, "distributed/overlap?run=r4")
    assert [r["worker"] for r in overlap["ranks"]] == ["rank0", "rank1", "rank3"]
    (excluded,) = overlap["info"]["excluded"]
    assert excluded["worker"] == "rank2" and excluded["rank"] is None
    assert broken.name in excluded["reason"] and str(tmp_path) not in excluded["reason"]
    assert any(broken.name in n for n in overlap["notes"])
    assert "Distributed" in settle(c, "views?run=r4")
    status = get(c, "status")
    (f,) = status["runs"][0]["workers"]["rank2"]
    assert f["summary"] == "failed" and broken.name in f["summary_error"] and f["state"] == "failed"
    assert [s["path"] for s in get(c, "skipped")["skipped"]] == [f"r4/{broken.name}"]
    assert get(c, "workers?run=r4") == ["rank0", "rank1", "rank3"]
    for route in RUN_ROUTES[1:]:
        settle(c, f"{route}?run=r4")


def test_diff_of_two_runs_of_many_workers_reads_summaries_only(many, stored, tmp_path, serve):
    """A diff whose sides are whole runs (worker=All) is computed from the workers'
    summaries: no trace is loaded, and it equals analysis.diff over the traces; a worker
    that cannot be summarized is left out by name, never hiding the rest."""
    logdir = tmp_path / "log"
    for name, picks in (("a", rank_paths(many / "r16")[:4]), ("b", rank_paths(many / "r16")[4:10])):
        (logdir / name).mkdir(parents=True)
        for p in picks:
            shutil.copy(p, logdir / name / p.name)
    _app, c = serve(logdir)
    got = settle(c, "diff?run=a&exp_run=b")
    diffnode = settle(c, "diffnode?run=a&exp_run=b&path=")
    assert get(c, "status")["memory"]["traces_loaded"] == 0
    expected = to_jsonable(diff_mod.diff([tb_profiler.load(p, cache=False) for p in rank_paths(logdir / "a")],
                                         [tb_profiler.load(p, cache=False) for p in rank_paths(logdir / "b")]))
    assert got == expected and got["summary"]["traces_a"] == 4 and got["summary"]["traces_b"] == 6
    assert diffnode["path"] == ""

    broken = rank_paths(logdir / "b")[1]
    cut = broken.with_name("cut.tmp")  # replaced at once: a rescan never sees it empty (left out of the run)
    cut.write_text(broken.read_text()[:5000])  # cut off mid-file: b has 5 readable workers
    cut.replace(broken)
    deadline = time.monotonic() + 30
    while (doc := settle(c, "diff?run=a&exp_run=b"))["summary"]["traces_b"] != 5:
        assert time.monotonic() < deadline, doc["summary"]
        time.sleep(0.2)
    assert any(broken.name in n and "left out" in n for n in doc["notes"])
    assert get(c, "status")["memory"]["traces_loaded"] == 0


# -- the new routes ----------------------------------------------------------------------------------
def test_ranks_route(many, stored, serve):
    _app, c = serve(many, cache_dir=str(stored))
    doc = settle(c, "distributed/ranks?run=r16")
    assert [r["rank"] for r in doc["ranks"]] == list(range(16))
    row = doc["ranks"][0]
    assert set(row) == {"rank", "worker", "steps", "step_ns", "computation_ns", "communication_ns", "overlap_ns",
                        "other_ns", "wait_ns", "transfer_ns", "clock_offset_ns", "clock_method", "outlier",
                        "outlier_reason"}
    by_rank = {r["rank"]: r for r in doc["ranks"]}
    step = [by_rank[r]["step_ns"] for r in doc["order"]]
    assert sorted(doc["order"]) == list(range(16)) and step == sorted(step, reverse=True)  # slowest first
    overlap = {r["rank"]: r for r in settle(c, "distributed/overlap?run=r16")["ranks"]}
    assert row["step_ns"] == round(overlap[0]["step_ns"] / overlap[0]["steps"])  # means per step
    m = doc["step_matrix"]
    assert m["ranks"] == list(range(16)) and len(m["step_ns"]) == 16 and not m["truncated"]
    assert all(len(r) == len(m["steps"]) for r in m["step_ns"]) and m["steps"] == sorted(m["steps"])
    assert sum(m["step_ns"][0]) == overlap[0]["step_ns"]
    assert all(isinstance(r["outlier"], bool) for r in doc["ranks"])


def test_instances_route_sorts_pages_and_bounds(many, stored, serve):
    _app, c = serve(many, cache_dir=str(stored))
    whole = settle(c, "distributed/instances?run=r16&limit=5000")
    total = whole["total"]
    assert total == len(whole["rows"]) > 2 and not whole["truncated"] and whole["sort"] == "skew"
    skews = [r["skew_ns"] for r in whole["rows"]]
    assert skews == sorted(skews, reverse=True)
    assert min(r["first_arrival_ns"] for r in whole["rows"]) == 0 and int(whole["origin_ns"]) > 0
    assert all(r["ranks"] == 16 for r in whole["rows"])
    page = settle(c, "distributed/instances?run=r16&limit=2&offset=1")
    assert page["rows"] == whole["rows"][1:3] and page["truncated"] == (total > 3) and page["total"] == total
    for sort, key in (("duration", "mean_duration_ns"), ("bytes", "bytes")):
        rows = settle(c, f"distributed/instances?run=r16&sort={sort}")["rows"]
        values = [r[key] for r in rows]
        assert values == sorted(values, reverse=True), sort
    assert len(settle(c, "distributed/instances?run=r16")["rows"]) == min(total, 200)


BAD = [("distributed/instances?run=r16&sort=name", 400), ("distributed/instances?run=r16&limit=0", 400),
       ("distributed/instances?run=r16&limit=5001", 400), ("distributed/instances?run=r16&offset=-1", 400),
       ("distributed/instances?run=r16&limit=x", 400), ("distributed/ranks", 400), ("distributed/ranks?run=no", 404),
       ("distributed/matrix?run=r16&span=0", 400), ("distributed/matrix?run=r16&span=9", 404),
       ("trace/ranks?run=r16&workers=" + ",".join(f"rank{i}" for i in range(9)), 400),
       ("trace/ranks?run=r16&workers=rank1,rank1", 400), ("trace/ranks?run=r16&workers=rank1,,rank2", 400),
       ("trace/ranks?run=r16&workers=rank99", 404), ("trace/ranks?run=r16&width=5", 400),
       ("trace/ranks?run=r16&start_ns=10&end_ns=5", 400), ("trace/ranks?run=r16&max_events=1", 400),
       ("trace/ranks?run=r16&max_flows=-1", 400)]


@pytest.mark.parametrize("route,status", BAD, ids=[b[0] for b in BAD])
def test_new_routes_answer_400_or_404_on_bad_parameters(many, stored, serve, route, status):
    _app, c = serve(many, cache_dir=str(stored))
    doc = get(c, route, expect=status)
    assert set(doc) == {"error"} and doc["error"]


def _rank_with_p2p(folder: Path, rank: int, calls: list[tuple[str, str, int, int]]) -> None:
    """One handmade gloo rank of 4: a step of 1 ms, an all_reduce of every rank (Seq 1 of
    group "3") and its point-to-point calls (family, process group, elements, Seq)."""
    def comm(name, pg, n, seq, at):
        return [{"ph": "X", "cat": "user_annotation", "name": f"gloo:{name}", "pid": 1, "tid": 2, "ts": at,
                 "dur": 50, "args": {}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": at, "dur": 50,
                 "args": {"Collective name": name, "In msg nelems": n, "Out msg nelems": n, "dtype": "Float",
                          "Group size": 4 if pg == "3" else 2, "Process Group Name": pg, "Seq": seq}}]
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    ev += comm("allreduce", "3", 10, 1, 100)
    for i, (family, pg, n, seq) in enumerate(calls):
        ev += comm(family, pg, n, seq, 200 + 100 * i)
    pgs = [{"pg_name": "1", "pg_desc": "pp0", "pg_size": 2, "ranks": [0, 1]},
           {"pg_name": "2", "pg_desc": "pp1", "pg_size": 2, "ranks": [2, 3]},
           {"pg_name": "3", "pg_desc": "default_pg", "pg_size": 4, "ranks": [0, 1, 2, 3]}]
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 4, "pg_config": pgs},
           "traceEvents": ev}
    (folder / f"rank{rank}.1.pt.trace.json").write_text(json.dumps(doc))


def test_matrix_route_attributes_two_member_groups_only(many, stored, tmp_path, serve):
    run = tmp_path / "log" / "pp"
    run.mkdir(parents=True)
    _rank_with_p2p(run, 0, [("send", "1", 100, 1), ("send", "3", 7, 2)])  # 400 B to rank 1; one to anybody
    _rank_with_p2p(run, 1, [("recv", "1", 100, 1)])                        # the same 400 B: counted once
    _rank_with_p2p(run, 2, [])                                             # its send is not in its trace
    _rank_with_p2p(run, 3, [("recv", "2", 200, 1)])                        # 800 B from rank 2
    _app, c = serve(tmp_path / "log")
    doc = settle(c, "distributed/matrix?run=pp")
    assert doc["ranks"] == [0, 1, 2, 3]
    assert doc["bytes"] == [[0, 400, 0, 0], [0, 0, 0, 0], [0, 0, 0, 800], [0, 0, 0, 0]]
    assert len(doc["notes"]) == 1 and doc["notes"][0].startswith("1 send/recv calls (28 B) are in process groups of "
                                                                 "more than 2 ranks")
    _app2, c2 = serve(many, cache_dir=str(stored))
    empty = settle(c2, "distributed/matrix?run=r16")
    assert empty["ranks"] == [] and empty["bytes"] == [] and "no point-to-point" in empty["notes"][0]


def _longest_collective_ns(run_dir: Path) -> int:
    """The longest gloo:* range of the run's traces (ns)."""
    longest = 0
    for path in run_dir.glob("*.pt.trace.json*"):
        t = tb_profiler.load(str(path), cache=False)
        names = t.str(t.events["name"])
        gloo = np.array([isinstance(n, str) and n.startswith("gloo:") for n in names], bool)
        if gloo.any():
            longest = max(longest, int(t.events["dur"][gloo].max()))
    return longest


def test_trace_ranks_aligns_a_shifted_clock_and_is_bounded(sample_logdir, tmp_path, serve):
    """Rank 1's clock is 5 ms late (make_many_ranks --skew-rank 1 --skew-us 5000); rank 3 is
    the same real trace on time. Aligned by the cross-rank analysis' clock, their steps
    start together in the merged window, while as written they are 5 ms apart."""
    mmr.generate(tmp_path / "log" / "skew", 4, 0, source=sample_logdir / "ddp_gloo_2ranks", jitter_us=0, skew_rank=1,
                 skew_us=5000)
    _app, c = serve(tmp_path / "log")
    clock = {r["worker"]: r for r in settle(c, "distributed/ranks?run=skew")["ranks"]}
    assert clock["rank1"]["clock_method"] == "collectives" and clock["rank3"]["clock_offset_ns"] == 0
    # the collectives pin the shift to within their own durations (analysis/clock.py): the
    # sample's gloo ranges are ~0.4 ms, but on a busy machine one can last several ms
    slack = max(1_000_000, _longest_collective_ns(sample_logdir / "ddp_gloo_2ranks"))
    assert -5_000_000 - slack < clock["rank1"]["clock_offset_ns"] < -5_000_000 + slack
    doc = settle(c, "trace/ranks?run=skew&workers=rank1,rank3&width=400&max_events=100&max_flows=10")
    parts = {w["worker"]: w for w in doc["workers"]}
    assert parts["rank1"]["clock_offset_ns"] == clock["rank1"]["clock_offset_ns"]
    assert parts["rank1"]["clock_method"] == "collectives" and parts["rank1"]["rank"] == 1
    assert [t["id"] for t in doc["tracks"]] == list(range(len(doc["tracks"])))
    assert all(t["process"].startswith(t["worker"] + ": ") for t in doc["tracks"])
    assert len(doc["events"]) <= 100 and len(doc["flows"]) <= 10
    assert doc["counts"]["in_window"] == doc["counts"]["events"] + sum(doc["busy"]["count"])

    def first_step(worker):
        tracks = {t["id"] for t in doc["tracks"] if t["worker"] == worker}
        return min(e["ts_ns"] for e in doc["events"] if e["track"] in tracks and e["name"].startswith("ProfilerStep#"))

    aligned = first_step("rank1") - first_step("rank3")
    assert abs(aligned) < slack  # 5 ms apart as written
    own = settle(c, "trace?run=skew&worker=rank1&width=400&max_events=100")
    step = min(e["ts_ns"] for e in own["events"] if e["name"].startswith("ProfilerStep#"))
    assert first_step("rank1") == step + parts["rank1"]["offset_ns"]
    assert int(own["origin_ns"]) + parts["rank1"]["clock_offset_ns"] == int(doc["origin_ns"]) + parts["rank1"]["offset_ns"]
    default = settle(c, "trace/ranks?run=skew&width=200&max_events=100")
    order = settle(c, "distributed/ranks?run=skew")["order"]
    assert [w["rank"] for w in default["workers"]] == order[:4]


def test_summaries_folder_setting(many, tmp_path, serve, monkeypatch):
    """serve --summaries / $TB_PROFILER_SUMMARIES: the run's summaries are kept in that
    folder (here a URL, read and written through fsspec), not in the cache folder."""
    shared = tmp_path / "sums"
    monkeypatch.setenv("TB_PROFILER_SUMMARIES", f"local://{shared}")
    _app, c = serve(many, cache_dir=str(tmp_path / "cache"))
    assert len(settle(c, "distributed/overlap?run=r16")["ranks"]) == 16
    assert len(list(shared.glob("*.tbpc"))) == 16
    assert not (tmp_path / "cache" / "summaries").exists()
    _app, c = serve(many, cache_dir=str(tmp_path / "cache2"), summaries=f"local://{shared}")
    monkeypatch.setattr(pool_mod, "summarize_files", lambda *a, **k: pytest.fail("a stored summary was built"))
    assert len(settle(c, "distributed/overlap?run=r16")["ranks"]) == 16


def test_jobs_and_dask_settings(tmp_path, many, serve, monkeypatch):
    monkeypatch.setenv("TB_PROFILER_JOBS", "3")
    monkeypatch.setenv("TB_PROFILER_DASK", "tcp://127.0.0.1:1")
    state = ProfilerState(str(tmp_path))
    assert (state.jobs, state.dask) == (3, "tcp://127.0.0.1:1")
    assert ProfilerState(str(tmp_path), jobs=5, dask="tcp://h:8786").jobs == 5
    seen = []
    real = pool_mod.summarize_files

    def unreachable(paths, **kw):  # a scheduler nobody answers at: the local pool builds them
        seen.append((kw.get("dask"), kw.get("jobs")))
        if kw.get("dask"):
            raise OSError("Timed out trying to connect to tcp://127.0.0.1:1")
        return real(paths, **kw)

    monkeypatch.setattr(pool_mod, "summarize_files", unreachable)
    monkeypatch.setattr(state_mod, "MAX_CHUNK", 8)
    monkeypatch.delenv("TB_PROFILER_JOBS")
    _app, c = serve(many, jobs=1)
    assert len(settle(c, "distributed/overlap?run=r16")["ranks"]) == 16
    # two chunks of 8: Dask is tried once, then the local pool builds (no connect timeout per chunk)
    assert seen == [("tcp://127.0.0.1:1", 1), (None, 1), (None, 1)]
