"""Clock alignment across ranks: one time axis for collectives recorded by many processes.

Why: wait time compares the starts of the same collective on different ranks, so their
clocks must agree.  On one machine they do; across machines only as well as the hosts
sync their clocks, and modern Kineto writes ts relative to a per-trace
``baseTimeNanoseconds`` (plugin/timeline.py ``wall_origin``), so two ranks' raw ts need not
even share an origin.

Two steps, giving each rank one offset (``clock_offset_ns``) that puts its ts on the
reference rank's axis (the lowest rank with matched collectives):

1. baseTimeNanoseconds: absolute time = ts + base, so the offset starts as
   base(rank) - base(reference).  Only when every rank has a base; a run where some do
   and some do not keeps every trace's ts as written, and says so.
2. Collectives: a collective cannot end on one rank before it starts on another, so for
   every instance i matched between rank r and the reference, the offset o must satisfy
   start_r(i) + o <= end_ref(i) and start_ref(i) <= end_r(i) + o.  o = 0 is kept when it
   satisfies them all; else o is the value nearest 0 among those satisfying the most of
   them (a sweep over the intervals [start_ref - end_r, end_ref - start_r], all ranks at
   once).  Each collective ends on every rank soon after the last rank arrives, so the
   tightest constraint pins o to within the shortest such transfer time.  Ranks that
   share no instance with the reference are aligned in later rounds against the ranks
   aligned so far (each collective's latest start and earliest end among them).

``clock_method`` says how each offset was found: "collectives" (a correction was
needed), "baseTimeNanoseconds" (the bases alone), "none" (ts as written).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.advice_text import fmt_ns

__all__ = ["CLOCK_COLUMNS", "align"]

CLOCK_COLUMNS = ["rank", "worker", "base_time_ns", "clock_offset_ns", "clock_method"]


def align(recs: pd.DataFrame, ranks: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(recs with astart/aend: start/end on the reference rank's axis, the clock table).

    recs: collective records with rank, gid (the instance across ranks), matched, start,
    end.  ranks: one row per rank (rank, worker, base_time_ns), by rank.
    """
    base = _base_offsets(ranks, notes)
    recs = recs.assign(astart=recs["start"] + recs["rank"].map(base).to_numpy(np.int64),
                       aend=recs["end"] + recs["rank"].map(base).to_numpy(np.int64))
    correction, recs = _collective_offsets(recs, ranks, notes)
    offset = ranks["rank"].map(base).to_numpy(np.int64) + ranks["rank"].map(correction).fillna(0).to_numpy(np.int64)
    used_base = ranks["base_time_ns"].notna().all() and len(ranks) > 0
    method = np.where(ranks["rank"].map(correction).fillna(0).to_numpy() != 0, "collectives",
                      "baseTimeNanoseconds" if used_base else "none")
    clock = pd.DataFrame({"rank": ranks["rank"].to_numpy(np.int64), "worker": ranks["worker"].to_numpy(object),
                          "base_time_ns": pd.array(ranks["base_time_ns"], dtype="Int64"),
                          "clock_offset_ns": offset, "clock_method": method.astype(object)})
    return recs, clock[CLOCK_COLUMNS]


def _base_offsets(ranks: pd.DataFrame, notes: list[str]) -> pd.Series:
    """Per rank: base - the first rank's base, where every rank has one; else zeros."""
    base = pd.array(ranks["base_time_ns"], dtype="Int64")
    zeros = pd.Series(0, index=ranks["rank"].to_numpy(), dtype=np.int64)
    if not len(ranks) or pd.isna(base).all():
        return zeros
    if pd.isna(base).any():
        without = ", ".join(str(r) for r in ranks["rank"][pd.isna(base)].tolist())
        notes.append(f"rank{'s' if pd.isna(base).sum() > 1 else ''} {without} have no baseTimeNanoseconds while "
                     "the others do: every rank's times are taken as written (ts), not on one absolute clock")
        return zeros
    values = np.asarray(base, dtype=np.int64)
    return pd.Series(values - values[0], index=ranks["rank"].to_numpy())


def _collective_offsets(recs: pd.DataFrame, ranks: pd.DataFrame, notes: list[str]) -> tuple[pd.Series, pd.DataFrame]:
    """(correction per aligned rank, recs with astart/aend corrected); see the docstring."""
    matched = recs[recs["matched"]]
    correction = pd.Series(dtype=np.int64)
    if matched.empty:
        return correction, recs
    aligned = {int(matched["rank"].min())}
    ref = min(aligned)
    while True:  # one round per "distance" from the reference: usually one
        mine = matched["rank"].isin(aligned)
        refs = matched[mine].groupby("gid").agg(ref_start=("astart", "max"), ref_end=("aend", "min"))
        cand = matched[~mine].join(refs, on="gid", how="inner")
        if cand.empty:
            break
        lo = (cand["ref_start"] - cand["aend"]).to_numpy(np.int64)
        hi = (cand["ref_end"] - cand["astart"]).to_numpy(np.int64)
        ok = lo <= hi  # against several aligned ranks an instance may give no room at all
        best = _best_offsets(cand["rank"].to_numpy(np.int64)[ok], lo[ok], hi[ok])
        new = pd.Series(0, index=pd.unique(cand["rank"]), dtype=np.int64)
        new.update(best["offset"])
        new = new.astype(np.int64)
        shift = recs["rank"].map(new).fillna(0).to_numpy(np.int64)
        recs = recs.assign(astart=recs["astart"] + shift, aend=recs["aend"] + shift)
        matched = recs[recs["matched"]]
        correction = pd.concat([correction, new])
        aligned |= set(new.index.tolist())
        notes += _shift_notes(new, best, ranks, ref)
    return correction, recs


def _best_offsets(rank: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> pd.DataFrame:
    """Per rank: the offset in the most closed intervals [lo, hi] (nearest 0 among those),
    how many it satisfies and how many there are.

    A sweep over every rank at once: +1 at each lo, -1 at each hi (starts first at equal
    positions, the intervals being closed), ordered by rank then position; the running sum
    is the number of intervals holding each segment [x_j, x_j+1] after a start.  Each
    rank's +1s and -1s cancel, so one cumulative sum serves every rank."""
    n = len(rank)
    if not n:
        return pd.DataFrame({"offset": pd.Series(dtype=np.int64), "satisfied": pd.Series(dtype=np.int64),
                             "total": pd.Series(dtype=np.int64)})
    x = np.concatenate([lo, hi])
    d = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    r = np.concatenate([rank, rank])
    order = np.lexsort((-d, x, r))
    x, d, r = x[order], d[order], r[order]
    count = np.cumsum(d)
    nxt = np.append(x[1:], x[-1])
    seg = pd.DataFrame({"rank": r, "count": count, "lo": x, "hi": np.maximum(nxt, x), "start": d > 0})
    seg = seg[seg["start"]]
    top = seg.groupby("rank")["count"].transform("max")
    best = seg[seg["count"] == top].copy()
    best["offset"] = np.clip(0, best["lo"], best["hi"])
    best["far"] = best["offset"].abs()
    pick = best.sort_values(["rank", "far", "offset"], kind="stable").groupby("rank").head(1).set_index("rank")
    total = pd.Series(rank).value_counts()
    return pd.DataFrame({"offset": pick["offset"].astype(np.int64), "satisfied": pick["count"].astype(np.int64),
                         "total": total.reindex(pick.index).astype(np.int64)})


def _shift_notes(new: pd.Series, best: pd.DataFrame, ranks: pd.DataFrame, ref: int) -> list[str]:
    workers = dict(zip(ranks["rank"].tolist(), ranks["worker"].tolist()))
    out = []
    for rank, off in new[new != 0].items():  # only the ranks that needed a correction
        sat, total = int(best.loc[rank, "satisfied"]), int(best.loc[rank, "total"])
        out.append(f"the ranks' clocks disagree: rank {rank} ({workers.get(rank)}) is shifted by "
                   f"{'+' if off > 0 else '-'}{fmt_ns(abs(int(off)))} (clock_offset_ns), the smallest shift that puts "
                   f"{sat} of its {total} collectives matched with rank {ref} in time with them (a collective "
                   "cannot end on one rank before it starts on another)")
    return out
