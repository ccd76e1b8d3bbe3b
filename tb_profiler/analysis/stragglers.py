"""Stragglers: which ranks of a run are slower (or faster) than the others, per step.

Input is the result of ``analysis.distributed.distributed_from_summaries`` (never events),
so a run of 1,024 ranks costs a few vectorized operations.  Why a robust rule: with many
ranks the mean and standard deviation are pulled by the very outliers we look for, while
the median rank and the median absolute deviation (MAD) are not.

Per rank, every figure of the Distributed view's rank rows is given per step (its totals
over its steps divided by its number of steps), with the clock correction the cross-rank
analysis applied to it.  A rank is an outlier when its mean step time ``x`` deviates from
the median rank's ``m``:

- by more than 10 % of ``m`` (``RELATIVE``): slow enough to matter whatever the spread;
- or by more than 3 robust standard deviations, σ = 1.4826 × MAD (``ROBUST_Z``; 1.4826
  makes σ the standard deviation for normally spread ranks), when that is also more than
  2 % of ``m`` (``FLOOR``): a rank standing out of a tight pack, but not a little noise
  when every other rank takes the same time (MAD 0).

The reason names the rule that fired (both when both do).  With fewer than 3 ranks there
is no pack to stand out of: nothing is called an outlier.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.advice_text import fmt_ns

__all__ = ["FLOOR", "LATE_COLUMNS", "MIN_RANKS", "OPERATOR_COLUMNS", "RELATIVE", "ROBUST_Z", "STRAGGLER_COLUMNS",
           "late_ranks", "rank_ranges", "step_matrix", "stragglers", "verdict"]

RELATIVE = 0.10
ROBUST_Z = 3.0
FLOOR = 0.02
MIN_RANKS = 3
MAD_SIGMA = 1.4826
_PER_STEP = ("step_ns", "computation_ns", "communication_ns", "overlap_ns", "other_ns", "wait_ns", "transfer_ns")
STRAGGLER_COLUMNS = ["rank", "worker", "steps", *_PER_STEP, "clock_offset_ns", "clock_method", "outlier",
                     "outlier_reason"]


def stragglers(result: dict) -> tuple[pd.DataFrame, list[str]]:
    """(one row per rank of ``result["ranks"]`` (STRAGGLER_COLUMNS): per-step means (ns,
    nullable: null for a rank without steps, or where the figure is unknown), its clock
    correction, whether it is an outlier and why; notes), slowest rank first."""
    ranks = result["ranks"]
    steps = ranks["steps"].to_numpy(np.int64)
    out = pd.DataFrame({"rank": ranks["rank"].to_numpy(np.int64), "worker": ranks["worker"].to_numpy(object),
                        "steps": steps})
    for c in _PER_STEP:
        total = ranks[c].astype("Float64")
        out[c] = (total / pd.array(np.where(steps > 0, steps, np.nan), dtype="Float64")).round().astype("Int64")
    clock = result["clock"].set_index("rank")
    out["clock_offset_ns"] = pd.array(out["rank"].map(clock["clock_offset_ns"]), dtype="Int64")
    out["clock_method"] = out["rank"].map(clock["clock_method"]).astype(object)
    out["clock_method"] = out["clock_method"].where(out["clock_method"].notna(), None)
    flags, reasons, notes = _outliers(out["step_ns"])
    out["outlier"], out["outlier_reason"] = flags, reasons
    order = out.sort_values(["step_ns", "rank"], ascending=[False, True], na_position="last", kind="stable")
    return order.reset_index(drop=True)[STRAGGLER_COLUMNS], notes


def _outliers(step: pd.Series) -> tuple[np.ndarray, list, list[str]]:
    """Per rank: outlier flag and reason (None when not one), by the module's rules."""
    x = step.to_numpy(dtype="float64", na_value=np.nan)
    known = ~np.isnan(x)
    flags = np.zeros(len(x), dtype=bool)
    reasons: list = [None] * len(x)
    if known.sum() < MIN_RANKS:
        return flags, reasons, [f"fewer than {MIN_RANKS} ranks with steps: no rank is called an outlier"]
    m = float(np.median(x[known]))
    dev = x - m
    sigma = MAD_SIGMA * float(np.median(np.abs(dev[known])))
    relative = known & (np.abs(dev) > RELATIVE * m)
    robust = known & (np.abs(dev) > ROBUST_Z * sigma) & (np.abs(dev) > FLOOR * m)
    for i in np.flatnonzero(relative | robust).tolist():  # the outliers only: a handful
        reasons[i] = _reason(x[i], m, sigma, bool(relative[i]), bool(robust[i]))
    return relative | robust, reasons, []


def _reason(x: float, m: float, sigma: float, relative: bool, robust: bool) -> str:
    side = "above" if x > m else "below"
    head = f"mean step {fmt_ns(x)} is {fmt_ns(abs(x - m))} {side} the median rank's {fmt_ns(m)}"
    why = []
    if relative:
        why.append(f"{abs(x - m) / m * 100:.0f} % of the median, more than {RELATIVE * 100:.0f} %")
    if robust:
        z = abs(x - m) / sigma if sigma else float("inf")
        spread = f"{z:.1f}" if np.isfinite(z) else "infinitely many"
        why.append(f"{spread} robust standard deviations (1.4826 x MAD = {fmt_ns(sigma)}), more than "
                   f"{ROBUST_Z:g}")
    return f"{head}: {'; '.join(why)}"


def step_matrix(result: dict, max_cells: int) -> dict:
    """Step time per rank and step ({"ranks", "steps", "step_ns": rows per rank, null where a
    rank has no such step, "truncated"}), at most max_cells numbers: the first steps that
    fit when there are more."""
    per_step = result["steps"]
    ranks = result["ranks"]["rank"].to_numpy(np.int64).tolist()
    steps = np.unique(per_step["step"].to_numpy(np.int64))
    keep = max(1, max_cells // max(len(ranks), 1))
    truncated = len(steps) > keep
    steps = steps[:keep]
    table = (per_step[per_step["step"].isin(steps)].pivot_table(index="rank", columns="step", values="step_ns",
                                                                aggfunc="first")
             .reindex(index=ranks, columns=steps))
    values = [[None if np.isnan(v) else int(v) for v in row] for row in table.to_numpy(dtype="float64").tolist()]
    return {"ranks": ranks, "steps": steps.tolist(), "step_ns": values, "truncated": bool(truncated)}


LATE_COLUMNS = ["rank", "worker", "instances", "last", "last_share", "late_ns", "late_per_step_ns", "late_max_ns",
                "worst_step", "worst_step_late_ns"]
OPERATOR_COLUMNS = ["rank", "name", "rank_ns", "median_ns", "excess_ns"]


def late_ranks(result: dict, summaries: list, top_ranks: int = 5, top_operators: int = 5) -> dict:
    """Who the other ranks waited for, and why.

    From ``result["arrivals"]`` (per rank and step: how late the rank arrived at each matched
    collective instance): per rank, instances joined, how often it was the last to arrive,
    its lateness summed, per step and at most, and its worst step (LATE_COLUMNS), latest
    first.  For the ``top_ranks`` latest ranks, the operators that ran longer on that rank
    than on the median rank, per step (self time; OPERATOR_COLUMNS; on the timeline its collectives
    are measured on: device time for communication kernels, host time for host
    collectives): what kept it from arriving.  ``summaries``: the same TraceSummaries the
    result was computed from (their operators tables; no events)."""
    arrivals = result["arrivals"]
    if arrivals.empty:
        return {"ranks": pd.DataFrame(columns=LATE_COLUMNS), "operators": pd.DataFrame(columns=OPERATOR_COLUMNS),
                "notes": ["no collective instance matched across ranks: nobody waited for anybody"]}
    per = arrivals.groupby(["rank", "worker"], sort=True).agg(
        instances=("instances", "sum"), last=("last", "sum"), late_ns=("late_ns", "sum"),
        late_max_ns=("late_max_ns", "max")).reset_index()
    in_steps = arrivals[arrivals["step"] >= 0]
    worst = in_steps.loc[in_steps.groupby("rank")["late_ns"].idxmax()].set_index("rank") if len(in_steps) else None
    steps = result["ranks"].set_index("rank")["steps"]
    n = per["rank"].map(steps).fillna(0).to_numpy(np.int64)
    per["last_share"] = per["last"] / per["instances"]
    per["late_per_step_ns"] = np.where(n > 0, np.rint(per["late_ns"] / np.maximum(n, 1)), np.nan)
    per["worst_step"] = pd.array(per["rank"].map(worst["step"]) if worst is not None else [None] * len(per),
                                 dtype="Int64")
    per["worst_step_late_ns"] = pd.array(per["rank"].map(worst["late_ns"]) if worst is not None
                                         else [None] * len(per), dtype="Int64")
    per = per.sort_values(["late_ns", "rank"], ascending=[False, True], kind="stable").reset_index(drop=True)
    late = per[per["late_ns"] > 0]["rank"].head(top_ranks).tolist()
    return {"ranks": per[LATE_COLUMNS], "operators": _long_operators(result, summaries, late, top_operators),
            "notes": []}


def _long_operators(result: dict, summaries: list, ranks: list[int], top: int) -> pd.DataFrame:
    """Per late rank, the operators whose self time per step most exceeds the median rank's
    (self time: a wrapper that only calls the slow operator does not hide it)."""
    from tb_profiler.analysis.communication import is_comm_name
    from tb_profiler.analysis.trace_summary import stack

    by_worker = {s.worker: s for s in summaries if not isinstance(s, BaseException)}
    rank_rows = result["ranks"]
    ranked = [(int(r), by_worker[w]) for r, w in zip(rank_rows["rank"], rank_rows["worker"]) if w in by_worker]
    if not ranks or not ranked:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    table, counts = stack([s for _, s in ranked], "operators", ["name", "host_self_ns", "device_self_ns"])
    if table.empty:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    rank_of = np.repeat([r for r, _ in ranked], counts)
    n_steps = np.repeat([max(len(s.steps), 1) for _, s in ranked], counts)
    device = np.repeat([s.measured_on == "device" for _, s in ranked], counts)
    ns = np.where(device, table["device_self_ns"].to_numpy(np.int64), table["host_self_ns"].to_numpy(np.int64))
    names = table["name"].to_numpy(object)
    keep = ~np.array([is_comm_name(n) or n.startswith("ProfilerStep#") for n in pd.unique(names)], bool)[
        pd.factorize(names)[0]]  # the collectives themselves are where it waited, not why
    frame = pd.DataFrame({"rank": rank_of[keep], "name": names[keep], "ns": (ns / n_steps)[keep]})
    wide = frame.pivot_table(index="name", columns="rank", values="ns", aggfunc="sum", fill_value=0.0)
    median = wide.median(axis=1)
    out = []
    for r in ranks:
        if r not in wide.columns:
            continue
        excess = (wide[r] - median).sort_values(ascending=False).head(top)
        excess = excess[excess > 0]
        out += [{"rank": r, "name": name, "rank_ns": int(round(wide.at[name, r])), "median_ns": int(round(median[name])),
                 "excess_ns": int(round(v))} for name, v in excess.items()]
    return pd.DataFrame(out, columns=OPERATOR_COLUMNS)


def rank_ranges(ranks) -> str:
    """Ranks as ranges: [0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8" (a list of 1,024 said once)."""
    out, rs = [], sorted(int(r) for r in ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


def verdict(late: pd.DataFrame, collectives: pd.DataFrame, ranks: pd.DataFrame, missing: list) -> dict:
    """The Distributed view's first sentence: who arrives last and who waits most, in one
    place, with "late" and "waiting" told apart (a rank is late when it reaches a collective
    after the others; the others wait for it meanwhile), and the ranks without a trace said
    once as ranges. late: late_ranks()["ranks"]; collectives: per rank and collective
    (analysis.distributed COLLECTIVE_COLUMNS, wait_ns a total over the rank's steps); ranks:
    the result's ranks (rank, steps). Returns {"sentence", "late": {...} | None,
    "waits": {...} | None, "missing_ranks": str}."""
    parts, late_fig, wait_fig = [], None, None
    lr = late[late["late_ns"] > 0] if len(late) else late
    if len(lr):
        r = lr.iloc[0]
        late_fig = {"rank": int(r["rank"]), "last": int(r["last"]), "instances": int(r["instances"]),
                    "late_per_step_ns": None if pd.isna(r["late_per_step_ns"]) else int(r["late_per_step_ns"])}
        per = f", {fmt_ns(late_fig['late_per_step_ns'])} late per step" if late_fig["late_per_step_ns"] else ""
        parts.append(f"rank {late_fig['rank']} arrives last in {late_fig['last']} of {late_fig['instances']} "
                     f"collectives{per}")
    if len(collectives) and "wait_ns" in collectives:
        steps = ranks.set_index("rank")["steps"] if len(ranks) else pd.Series(dtype=np.int64)
        c = collectives[collectives["wait_ns"].notna()].copy()
        if len(c):
            n = c["rank"].map(steps).fillna(1).clip(lower=1).to_numpy(np.float64)
            c["wait_per_step"] = c["wait_ns"].to_numpy(np.float64) / n
            c = c.sort_values(["wait_per_step", "rank"], ascending=[False, True], kind="stable")
            w = c.iloc[0]
            if w["wait_per_step"] > 0:
                wait_fig = {"rank": int(w["rank"]), "name": str(w["name"]), "wait_per_step_ns": int(round(w["wait_per_step"]))}
                parts.append(f"rank {wait_fig['rank']} waits most, in {wait_fig['name']}, "
                             f"{fmt_ns(wait_fig['wait_per_step_ns'])} per step")
    if not parts:
        sentence = "No rank waits for another: no collective was matched across ranks, or none waited."
    else:
        sentence = "; ".join(parts) + "."
        sentence = sentence[0].upper() + sentence[1:]
        if late_fig and wait_fig and late_fig["rank"] != wait_fig["rank"]:
            sentence += (f" Waiting is time spent in a collective until the last rank arrives: rank "
                         f"{wait_fig['rank']} waits for rank {late_fig['rank']}.")
    miss = rank_ranges(missing) if missing else ""
    if miss:
        sentence += f" Ranks {miss} have no trace." if len(missing) > 1 else f" Rank {miss} has no trace."
    return {"sentence": sentence, "late": late_fig, "waits": wait_fig, "missing_ranks": miss}
