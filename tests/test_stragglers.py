"""analysis.stragglers: per-step means per rank and the outlier rule (10 % of the median
rank, or 3 robust standard deviations of a tight pack), over a handmade distributed result."""
from __future__ import annotations

import pandas as pd

from tb_profiler.analysis.stragglers import step_matrix, stragglers

MS = 1_000_000


def result(step_ms: list[float], steps: int = 2) -> dict:
    """A distributed result of len(step_ms) ranks, each with `steps` steps of step_ms[r] ms."""
    n = len(step_ms)
    per_step = pd.DataFrame({"rank": [r for r in range(n) for _ in range(steps)],
                             "worker": [f"rank{r}" for r in range(n) for _ in range(steps)],
                             "step": [s for _ in range(n) for s in range(steps)],
                             "step_ns": [int(step_ms[r] * MS) for r in range(n) for _ in range(steps)]})
    total = [int(ms * MS) * steps for ms in step_ms]
    ranks = pd.DataFrame({"rank": range(n), "worker": [f"rank{r}" for r in range(n)], "steps": steps,
                          "step_ns": total, "computation_ns": [t // 2 for t in total],
                          "communication_ns": [t // 4 for t in total],
                          "overlap_ns": pd.array([0] * n, dtype="Int64"),
                          "other_ns": pd.array([t // 4 for t in total], dtype="Int64"),
                          "wait_ns": [t // 8 for t in total], "transfer_ns": [t // 8 for t in total]})
    clock = pd.DataFrame({"rank": range(n), "worker": [f"rank{r}" for r in range(n)], "base_time_ns": pd.NA,
                          "clock_offset_ns": [0] * n, "clock_method": ["none"] * n})
    return {"ranks": ranks, "steps": per_step, "clock": clock}


def test_a_rank_10_percent_slower_than_the_median_is_an_outlier():
    table, notes = stragglers(result([10.0] * 7 + [11.5, 9.9, 10.1]))
    assert notes == []
    assert table["rank"].iloc[0] == 7 and table["step_ns"].iloc[0] == 11_500_000  # slowest first
    out = table.set_index("rank")
    assert out["outlier"].tolist().count(True) == 1 and out.loc[7, "outlier"]
    assert out.loc[7, "outlier_reason"].startswith("mean step 11.5 ms is 1.5 ms above the median rank's 10.0 ms: "
                                                   "15 % of the median, more than 10 %")
    assert out.loc[7, "computation_ns"] == 5_750_000  # per step


def test_a_rank_out_of_a_tight_pack_is_an_outlier_by_the_robust_rule():
    pack = [10.0, 10.01, 9.99, 10.02, 9.98, 10.0, 10.01, 9.99]
    table, _ = stragglers(result(pack + [10.5]))  # 5 %: not 10 %, but far out of a pack spread by 0.01 ms
    out = table.set_index("rank")
    assert out["outlier"].tolist().count(True) == 1 and out.loc[8, "outlier"]
    reason = out.loc[8, "outlier_reason"]
    assert "robust standard deviations (1.4826 x MAD = " in reason and "more than 3" in reason and "10 %" not in reason


def test_identical_ranks_and_tiny_noise_are_not_outliers():
    table, _ = stragglers(result([10.0] * 6))
    assert not table["outlier"].any()
    table, _ = stragglers(result([10.0] * 6 + [10.15]))  # MAD 0, but 1.5 % is noise (below 2 %)
    assert not table["outlier"].any()


def test_fewer_than_three_ranks_call_no_outlier():
    table, notes = stragglers(result([10.0, 20.0]))
    assert not table["outlier"].any() and table["outlier_reason"].isna().all()
    assert notes == ["fewer than 3 ranks with steps: no rank is called an outlier"]
    assert table["rank"].tolist() == [1, 0]


def test_a_faster_rank_is_an_outlier_below_the_median():
    table, _ = stragglers(result([10.0] * 5 + [8.0]))
    row = table.set_index("rank").loc[5]
    assert row["outlier"] and "below the median" in row["outlier_reason"]


def test_step_matrix_is_bounded():
    r = result([10.0, 11.0, 12.0], steps=4)
    m = step_matrix(r, max_cells=1000)
    assert m == {"ranks": [0, 1, 2], "steps": [0, 1, 2, 3], "step_ns": [[10 * MS] * 4, [11 * MS] * 4, [12 * MS] * 4],
                 "truncated": False}
    m = step_matrix(r, max_cells=7)  # 3 ranks: 2 steps fit
    assert m["steps"] == [0, 1] and m["truncated"] and len(m["step_ns"][0]) == 2
