"""The diff leads with the step-time breakdown, and every diff table sorts by the size of
the change: the analysis (handmade traces, the V100 runs with 0 and 4 DataLoader workers),
the plugin's diff route body, and `tb-profiler diff` (text and --json)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from datafiles import V100_RUN, V100_RUN_W4

import tb_profiler
from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.diff import by_change, diff
from tb_profiler.plugin import views

US = 1000


def _ev(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _load(tmp_path, name, events):
    path = tmp_path / f"{name}.1.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return tb_profiler.load(path, cache=False)


def _abs_sorted(values) -> bool:
    """Non-increasing by absolute value (NaN last)."""
    a = np.abs(np.asarray([np.nan if v is None else v for v in values], dtype=np.float64))
    a = a[~np.isnan(a)]
    return bool((np.diff(a) <= 0).all())


# -- ordering -------------------------------------------------------------------------------
def test_by_change_orders_by_size_never_by_sign():
    frame = pd.DataFrame({"name": ["up", "down", "small", "both", "none", "unknown"],
                          "x_delta": [5.0, -10.0, 1.0, -3.0, 0.0, np.nan],
                          "y_delta": [0.0, 0.0, 0.0, 4.0, 0.0, 0.0]})
    out = by_change(frame, ["x_delta"], ["name"])
    # |-10| > |5| > |-3| > |1| > 0, the unknown change last
    assert out["name"].tolist() == ["down", "up", "both", "small", "none", "unknown"]
    # several delta columns: the sum of their sizes (both: 3 + 4 = 7)
    assert by_change(frame, ["x_delta", "y_delta"], ["name"])["name"].tolist()[:3] == ["down", "both", "up"]
    # ties keep their order without keys (the breakdown: CATEGORIES order)
    tie = pd.DataFrame({"name": ["b", "a", "c"], "x_delta": [-2.0, 2.0, 1.0]})
    assert by_change(tie, ["x_delta"])["name"].tolist() == ["b", "a", "c"]


@pytest.fixture
def mixed(tmp_path):
    """A: one step of 100 µs: DataLoader [10,60), aten::mm [60,90).
    B: one step of 100 µs: DataLoader [10,20), aten::mm [20,80).
    B also runs aten::relu [85,87).
    Breakdown per step: DataLoader 50 -> 10 µs (-40), CPU Exec 30 -> 62 (+32), Other 20 -> 28 (+8)."""
    step = _ev("user_annotation", "ProfilerStep#1", 0, 100)
    dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    a = _load(tmp_path, "a", [step, _ev("user_annotation", dl, 10, 50), _ev("cpu_op", "aten::mm", 60, 30)])
    b = _load(tmp_path, "b", [step, _ev("user_annotation", dl, 10, 10), _ev("cpu_op", "aten::mm", 20, 60),
                              _ev("cpu_op", "aten::relu", 85, 2)])
    return a, b


def test_breakdown_rows_by_size_of_change(mixed):
    r = diff(*mixed)
    t = r["breakdown"]
    assert list(t.columns) == ["category", "label", "time_ns_a", "time_ns_b", "time_ns_delta", "delta_pct"]
    assert sorted(t["category"]) == sorted(bd.CATEGORIES)
    assert t["label"].tolist() == [bd.LABELS[c] for c in t["category"]]
    # DataLoader -40 µs, CPU Exec +32 (mm +30, relu +2), Other +8: -40 first although it is a saving
    assert t["category"].tolist()[:3] == ["dataloader", "cpu_exec", "other"]
    rows = t.set_index("category")
    assert (rows.loc["dataloader", "time_ns_a"], rows.loc["dataloader", "time_ns_b"]) == (50 * US, 10 * US)
    assert rows.loc["dataloader", "time_ns_delta"] == -40 * US
    assert rows.loc["dataloader", "delta_pct"] == -40.0          # of A's 100 µs step
    assert rows.loc["cpu_exec", "time_ns_delta"] == 32 * US
    assert rows.loc["other", "time_ns_delta"] == 8 * US
    assert (rows.loc["kernel", ["time_ns_a", "time_ns_b", "time_ns_delta"]] == 0).all()
    # the categories add up to each side's step
    assert t["time_ns_a"].sum() == r["summary"]["step_time_avg_ns_a"] == 100 * US
    assert t["time_ns_b"].sum() == r["summary"]["step_time_avg_ns_b"]
    # every table of the diff: largest change first, whatever its sign
    assert _abs_sorted(t["time_ns_delta"]) and (t["time_ns_delta"] < 0).any() and (t["time_ns_delta"] > 0).any()
    ops = r["operators"]
    assert _abs_sorted(ops["host_total_ns_delta"].abs() + ops["device_total_ns_delta"].abs())


def test_breakdown_of_a_side_of_several_traces_is_weighted_by_steps(tmp_path, mixed):
    """A side of a 2-step trace and a 1-step trace: the average over its 3 steps, not the
    mean of the two traces' averages."""
    a, b = mixed
    two = _load(tmp_path, "two", [_ev("user_annotation", "ProfilerStep#1", 0, 100),
                                  _ev("user_annotation", "ProfilerStep#2", 100, 100),
                                  _ev("cpu_op", "aten::mm", 10, 80), _ev("cpu_op", "aten::mm", 110, 80)])
    r = diff([two, a], b)
    rows = r["breakdown"].set_index("category")
    # CPU Exec: 80, 80 (two) and 30 (a) over 3 steps; DataLoader 0, 0, 50
    assert rows.loc["cpu_exec", "time_ns_a"] == pytest.approx(190 * US / 3)
    assert rows.loc["dataloader", "time_ns_a"] == pytest.approx(50 * US / 3)
    assert rows.loc["dataloader", "delta_pct"] == pytest.approx(100 * (10 * US - 50 * US / 3) / (100 * US))


def test_a_side_without_steps_has_no_breakdown(tmp_path, mixed):
    r = diff([], mixed[1])
    t = r["breakdown"]
    assert t["time_ns_a"].isna().all() and t["time_ns_delta"].isna().all() and t["delta_pct"].isna().all()
    assert t.set_index("category").loc["cpu_exec", "time_ns_b"] == 62 * US


# -- the V100 runs: 0 against 4 DataLoader workers ---------------------------------------------
def test_v100_dataloader_workers_lead_the_diff():
    """ResNet50 on a V100, DataLoader without workers (A) against 4 workers (B), span 2 of
    each: DataLoader per step from 35.5 ms to 0.29 ms, the largest change by far."""
    a, b = tb_profiler.load_run(V100_RUN, cache=False), tb_profiler.load_run(V100_RUN_W4, cache=False)
    r = diff(a, b)
    t = r["breakdown"]
    dl = t.iloc[0]
    assert dl["category"] == "dataloader" and dl["label"] == "DataLoader"
    # per step of 6: 213,022,000 ns -> 1,751,000 ns of DataLoader
    assert dl["time_ns_a"] == pytest.approx(213_022_000 / 6)
    assert dl["time_ns_b"] == pytest.approx(1_751_000 / 6)
    assert dl["time_ns_delta"] == pytest.approx((1_751_000 - 213_022_000) / 6)
    assert dl["delta_pct"] == pytest.approx(-22.73, abs=0.01)      # of A's 154.9 ms step
    assert abs(dl["time_ns_delta"]) > 2 * t["time_ns_delta"].iloc[1:].abs().max()
    assert _abs_sorted(t["time_ns_delta"])
    # the breakdown's averages, one definition (its average row holds each part's mean
    # rounded down or up so that the parts add up to the rounded total: within 1 ns)
    for side, run in (("a", a), ("b", b)):
        avg = bd.average(run.trace())
        for c in bd.CATEGORIES:
            assert abs(t.set_index("category").loc[c, f"time_ns_{side}"] - avg[c]) < 1
        assert t[f"time_ns_{side}"].sum() == pytest.approx(r["summary"][f"step_time_avg_ns_{side}"], abs=0.5)


# -- API and CLI on the CPU sample runs (DataLoader workers 0 and 2) -----------------------------
def _sample_sides(sample_logdir):
    return [tb_profiler.load_run(sample_logdir / run, cache=False).traces() for run in ("cnn_dataloader_0workers", "cnn_dataloader_2workers")]


def _weighted(traces, cat: str) -> float:
    frames = [bd.breakdown(t).iloc[:-1] for t in traces]
    return sum(float(f[f"{cat}_ns"].sum()) for f in frames) / sum(len(f) for f in frames)


def test_diff_route_leads_with_the_breakdown(sample_logdir):
    """The plugin's diff route body: a breakdown list first, its rows the breakdown's
    per-step averages of each side, largest |delta| first."""
    a, b = _sample_sides(sample_logdir)
    doc = views.diff(a, b)
    assert next(iter(doc)) == "breakdown"
    rows = doc["breakdown"]
    assert _abs_sorted([r["time_ns_delta"] for r in rows])
    for r in rows:
        assert r["time_ns_a"] == pytest.approx(_weighted(a, r["category"]))
        assert r["time_ns_b"] == pytest.approx(_weighted(b, r["category"]))
        assert r["delta_pct"] == pytest.approx(100 * r["time_ns_delta"] / doc["summary"]["step_time_avg_ns_a"], rel=1e-6)
    # the CPU runs: time in CPU ops and data loading changes, nothing on a device
    by = {r["category"]: r for r in rows}
    assert by["dataloader"]["time_ns_a"] > 0 and by["dataloader"]["time_ns_b"] > 0
    assert by["kernel"]["time_ns_a"] == by["kernel"]["time_ns_b"] == 0
    assert rows[0]["category"] in ("cpu_exec", "dataloader", "other")


def _run_cli(*args: str, cache_dir) -> subprocess.CompletedProcess:
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-m", "tb_profiler.cli", *args], check=False, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def _breakdown_lines(text: str) -> list[str]:
    """The rows of the text's first table, which must be the breakdown."""
    lines = text.splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("  ") and line.endswith(":") and
              not line.startswith("    ")]
    assert tables and lines[tables[0]] == "  Step time breakdown (per step):", lines
    end = tables[1] if len(tables) > 1 else len(lines)
    return lines[tables[0] + 2:end]


@pytest.mark.parametrize("pair", ["samples", "v100"])
def test_cli_diff_prints_the_breakdown_first(pair, sample_logdir, tmp_path):
    a, b = ((sample_logdir / "cnn_dataloader_0workers", sample_logdir / "cnn_dataloader_2workers") if pair == "samples"
            else (V100_RUN, V100_RUN_W4))
    doc = json.loads(_run_cli("diff", str(a), str(b), "--json", cache_dir=tmp_path).stdout)
    api = views.diff(tb_profiler.load_run(a).traces(), tb_profiler.load_run(b).traces())
    assert doc["breakdown"] == api["breakdown"]
    text = _run_cli("diff", str(a), str(b), cache_dir=tmp_path).stdout
    rows = _breakdown_lines(text)
    assert [line.split()[0] for line in rows] == [r["label"].split()[0] for r in doc["breakdown"]]
    assert text.index("Step time breakdown") < text.index("operators with the largest change")
    if pair == "v100":
        assert rows[0].split()[:3] == ["DataLoader", "35.504", "ms"] and rows[0].rstrip().endswith("-22.7%")
        assert "291.833 µs" in rows[0] and "-35.212 ms" in rows[0]
    # operators as the API orders them: the largest |host total delta| + |device total delta| first
    ops = [line.split()[0] for line in text.split("operators with the largest change")[1].splitlines()[2:7]]
    assert ops == [r["name"].split()[0] for r in doc["operators"][:5]]
