"""benchmarks/make_many_ranks.py, the many-rank benchmarks' input: N ranks made from a
handmade 2-rank gloo pair (written here in Kineto's layout) keep every link inside a rank,
carry their own rank, world and process group, move their clocks by the promised offsets,
and form a run whose distributed analysis matches every collective across the N ranks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import tb_profiler
from datafiles import benchmark_module

mmr = benchmark_module("make_many_ranks")

T0 = 5_000_000_000  # µs
PIDS = (4100, 4101)


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _rank_trace(rank: int) -> dict:
    """Two steps of 100 µs on one rank: an op with a forward->backward flow, the c10d call
    on the main thread and the gloo:all_reduce on the gloo thread (rank 1 arrives 10 µs
    later), a [memory] instant, Kineto's metadata and trace-level span."""
    pid, gloo = PIDS[rank], PIDS[rank] + 50
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": T0, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": gloo, "ts": T0, "args": {"name": "gloo"}}]
    for s in range(2):
        at, ext = 100 * s, 10 * s + 1
        ev += [_x("user_annotation", f"ProfilerStep#{s + 1}", pid, pid, at, 100, **{"External id": ext}),
               _x("cpu_op", "aten::mm", pid, pid, at + 10, 20, **{"External id": ext + 1, "Sequence number": s + 7,
                                                                   "Fwd thread id": 0}),
               _x("cpu_op", "MmBackward0", pid, pid, at + 32, 5, **{"External id": ext + 2, "Sequence number": s + 7,
                                                                     "Fwd thread id": 1}),
               {"ph": "s", "id": ext + 1, "pid": pid, "tid": pid, "ts": T0 + at + 10, "cat": "fwdbwd",
                "name": "fwdbwd"},
               {"ph": "f", "id": ext + 1, "pid": pid, "tid": pid, "ts": T0 + at + 32, "cat": "fwdbwd",
                "name": "fwdbwd", "bp": "e"},
               _x("cpu_op", "c10d::allreduce_", pid, pid, at + 40, 4, **{"External id": ext + 3}),
               _x("user_annotation", "gloo:all_reduce", pid, gloo, at + 45 + 10 * rank, 30 - 10 * rank,
                  **{"External id": ext + 4, "Input Dims": [[10, 10]], "Input type": ["float"]}),
               {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid, "tid": pid,
                "ts": T0 + at + 12, "args": {"Bytes": 400, "Addr": 77, "Total Allocated": 400, "Device Id": -1,
                                             "Device Type": 0}}]
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
               "tid": "PyTorch Profiler", "ts": T0, "dur": 200, "args": {"Op count": 0}})
    info = {"backend": "gloo", "rank": rank, "world_size": 2, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]}
    return {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": info, "traceEvents": ev}


def _source(tmp_path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank{rank}.{1000 + rank}.pt.trace.json").write_text(json.dumps(_rank_trace(rank), indent=2))
    return folder


def _flows(t) -> dict:
    """{flow id: (start pid, end pid)} of the trace's fwdbwd flows, read from the file."""
    doc = json.loads(Path(t.source).read_text())
    out: dict = {}
    for e in doc["traceEvents"]:
        if e.get("ph") in ("s", "f"):
            out.setdefault(e["id"], {})[e["ph"]] = (e["pid"], e["tid"], e["ts"])
    return out


def test_four_ranks_from_two(tmp_path):
    out = tmp_path / "run4"
    m = mmr.generate(out, 4, size=0, source=_source(tmp_path), jitter_us=3, seed=1, skew_rank=3, skew_us=7)
    files = sorted(p.name for p in out.glob("*.pt.trace.json"))
    assert files == ["rank0.1000.pt.trace.json", "rank1.1001.pt.trace.json", "rank2.1000.pt.trace.json",
                     "rank3.1001.pt.trace.json"]
    offsets = m["offsets_us"]
    assert all(0 <= o <= 3 for o in offsets[:3]) and 7 <= offsets[3] <= 10
    assert offsets == mmr.generate(tmp_path / "again", 4, source=tmp_path / "src", jitter_us=3, seed=1,
                                   skew_rank=3, skew_us=7)["offsets_us"]  # deterministic
    src = [tb_profiler.load(tmp_path / "src" / f"rank{r}.{1000 + r}.pt.trace.json", cache=False) for r in (0, 1)]
    for i in range(4):
        t = tb_profiler.load(next(out.glob(f"rank{i}.*")), cache=False)
        s = src[i % 2]
        info = t.distributed_info
        assert (info["rank"], info["world_size"]) == (i, 4)
        assert info["pg_config"][0]["ranks"] == [0, 1, 2, 3] and info["pg_config"][0]["pg_size"] == 4
        # the clock moved by the rank's offset, every event alike; durations kept
        assert (t.events["ts"] - s.events["ts"] == offsets[i] * 1000).all()
        assert (t.events["dur"] == s.events["dur"]).all()
        # host pid and tids moved together: 2 * (i // 2)
        moved = 2 * (i // 2)
        assert set(np.unique(t.events["pid"])) == {p + moved for p in np.unique(s.events["pid"]) if p > 0} | \
            ({p for p in np.unique(s.events["pid"]) if p <= 0})
        assert set(np.unique(t.events["tid"])) == {x + moved for x in np.unique(s.events["tid"]) if x > 0} | \
            ({x for x in np.unique(s.events["tid"]) if x <= 0})
        assert (np.asarray(t.events["fwd_tid"]) == np.asarray(s.events["fwd_tid"])).all()  # torch's counter
        assert (np.asarray(t.events["external_id"]) == np.asarray(s.events["external_id"])).all()
        # links kept: the flows join the same ops (same ids, moved pid/tid and clock)
        for fid, ends in _flows(t).items():
            ref = _flows(s)[fid]
            for ph in "sf":
                pid, tid, ts = ends[ph]
                assert (pid, tid) == (ref[ph][0] + moved, ref[ph][1] + moved)
                assert round((ts - ref[ph][2]) * 1000) == offsets[i] * 1000
    d = tb_profiler.load_run(out, cache=False).distributed()
    assert d["info"]["ranks"] == [0, 1, 2, 3] and d["info"]["world_size"] == 4 and not d["info"]["missing_ranks"]
    assert not any("not matched" in n or "different numbers" in n for n in d["notes"]), d["notes"]
    c = d["collectives"]
    assert c["calls"].tolist() == [2, 2, 2, 2]
    # the skewed rank 3 (a later clock, and rank 1's later arrival) is the last to arrive: it never waits
    waits = d["ranks"].set_index("rank")["wait_ns"]
    assert waits[3] == 0 and (waits[[0, 1, 2]] > 0).all()


def test_copies_keep_links_and_one_period(tmp_path):
    source = _source(tmp_path)
    one = sum(p.stat().st_size for p in source.glob("rank0.*"))
    m = mmr.generate(tmp_path / "big", 3, size=3 * one, source=source, jitter_us=0, gzip_level=1, jobs=2)
    assert m["copies"] >= 3
    run = tb_profiler.load_run(tmp_path / "big", cache=False)
    traces = run.traces()
    assert [t.distributed_info["rank"] for t in traces] == [0, 1, 2]
    for t in traces:
        steps = t.steps["number"].tolist()
        assert steps == list(range(1, 2 * m["copies"] + 1))  # consecutive over the copies
        ids = np.asarray(t.events["external_id"])
        ids = ids[ids > 0]
        assert len(ids) == 5 * m["copies"] * 2 and len(ids) == len(np.unique(ids))  # fresh ids in every copy
    d = run.distributed()
    assert not any("not matched" in n or "different numbers" in n or "disagree" in n for n in d["notes"]), d["notes"]
    assert d["collectives"]["calls"].tolist() == [2 * m["copies"]] * 3
