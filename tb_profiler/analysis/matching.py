"""The same collective on every rank: matching the ranks' collective records, wait and
transfer per record, and one row per collective instance across the ranks.

Matching
    The same collective on each rank is the one with the same (process group, Seq) when
    every call of that process group on every rank carries a "Seq" (record_param_comms,
    torch >= 2.x; point-to-point calls keep their own sequence), else the i-th call of the
    same (name, process group) (every rank issues a group's collectives in the same
    order).  An instance is matched when every rank issuing that kind of call in that
    process group has it.
Wait and transfer
    A collective cannot move data before the last rank arrives, so on each rank wait =
    (latest start among the ranks) - (own start), clamped to [0, duration], and transfer
    = duration - wait, with the starts on one clock (analysis.clock: ``astart``/``aend``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.keys import factorize

__all__ = ["INSTANCE_COLUMNS", "group_instances", "instances", "match_notes", "waits"]

INSTANCE_COLUMNS = ["name", "family", "pg_name", "matched_by", "seq", "occurrence", "comms_id", "ranks", "complete",
                    "first_arrival_ns", "last_arrival_ns", "skew_ns", "slowest_rank", "mean_duration_ns", "bytes",
                    "algbw_min_gbps", "algbw_median_gbps", "busbw_min_gbps", "busbw_median_gbps", "hosts", "scope"]
_P2P = ("send", "recv", "send_recv")


def group_instances(recs: pd.DataFrame) -> pd.DataFrame:
    """recs (every rank's collective records, with rank) sorted by rank, start, row, with:
    by_seq, index (Seq, or the call's occurrence), gid (the instance across ranks),
    present (records of the instance), issuing (ranks issuing that kind of call in that
    process group) and matched."""
    recs = recs.sort_values(["rank", "start", "row"], kind="stable").reset_index(drop=True)
    occ = recs.groupby(["rank", "name", "pg_name"], sort=False).cumcount().to_numpy(np.int64)
    seq = recs["seq"]
    comms = recs["comms_id"] if "comms_id" in recs else pd.Series(pd.NA, index=recs.index, dtype="Int64")
    by_comms = comms.notna().groupby(recs["pg_name"], sort=False).transform("all").to_numpy(bool)
    by_seq = seq.notna().groupby(recs["pg_name"], sort=False).transform("all").to_numpy(bool) & ~by_comms
    p2p = recs["family"].isin(_P2P).to_numpy(bool)
    kind = np.where(by_comms, "\x00comms", np.where(by_seq, np.where(p2p, "\x00p2p", "\x00seq"),
                                                   recs["name"].to_numpy(object))).astype(object)
    index = np.where(by_comms, comms.fillna(-1).to_numpy(np.int64),
                     np.where(by_seq, seq.fillna(-1).to_numpy(np.int64), occ))
    pg = recs["pg_name"].to_numpy(object)
    kind_id, _ = factorize(kind, pg)
    gid, _ = factorize(kind_id, index)
    recs = recs.assign(by_seq=by_seq, by_comms=by_comms, index=index, gid=gid)
    issuing = recs["rank"].groupby(kind_id, sort=False).transform("nunique").to_numpy(np.int64)
    present = recs.groupby("gid", sort=False)["rank"].transform("size").to_numpy(np.int64)
    return recs.assign(present=present, issuing=issuing, matched=(present == issuing) & (issuing > 1))


def waits(recs: pd.DataFrame) -> pd.DataFrame:
    """wait and transfer (ns) per record, from the aligned starts (astart) of its instance."""
    grp = recs.groupby("gid", sort=False)
    last = grp["astart"].transform("max").to_numpy(np.int64)
    dur = (recs["end"] - recs["start"]).to_numpy(np.int64)
    wait = np.where(recs["matched"].to_numpy(bool), np.clip(last - recs["astart"].to_numpy(np.int64), 0, dur), 0)
    return recs.assign(wait=wait.astype(np.int64), transfer=(dur - wait).astype(np.int64))


def match_notes(recs: pd.DataFrame) -> list[str]:
    """Why some records are not matched, or match badly: different numbers of calls, Seqs
    without partners, instances that do not overlap in time even on one clock."""
    notes = []
    if recs.empty:
        return notes
    by_order = recs[~recs["by_seq"] & ~recs["by_comms"]]
    counts = by_order.groupby(["name", "pg_name", "rank"], sort=True).size().unstack("rank")
    for (name, pg), row in counts[counts.nunique(axis=1) > 1].iterrows():  # one per kind of call
        calls = ", ".join(f"rank {r}: {int(c)}" for r, c in row.dropna().items())
        notes.append(f"{name}{f' (process group {pg})' if pg else ''}: ranks recorded different numbers "
                     f"of calls ({calls}); calls past the shortest count are not matched and show no wait")
    alone_id = int((recs["by_comms"] & ~recs["matched"] & (recs["issuing"] > 1)).sum())
    if alone_id:
        notes.append(f"{alone_id} collective calls have no call with the same Comms Id on every other rank "
                     "(cut off by the profiling window?): not matched, they show no wait")
    alone = int((recs["by_seq"] & ~recs["matched"] & (recs["issuing"] > 1)).sum())
    if alone:
        notes.append(f"{alone} collective calls have no call with the same process group and Seq on every other "
                     "rank (cut off by the profiling window?): not matched, they show no wait")
    grp = recs.groupby("gid", sort=False)
    skewed = int((recs["matched"] & (grp["astart"].transform("max") > grp["aend"].transform("min"))).sum())
    if skewed:
        notes.append(f"{skewed} matched collective records do not overlap in time across ranks: the ranks' "
                     "clocks disagree (or the collectives were issued in different orders); their wait is "
                     "capped at their duration")
    return notes


def instances(recs: pd.DataFrame) -> pd.DataFrame:
    """One row per collective instance across the ranks (INSTANCE_COLUMNS), by first
    arrival: who came, when the first and the last arrived (aligned starts), the skew
    between them, the slowest rank (the last to arrive), the mean duration, the bytes and
    the spread of the ranks' bandwidths (min and median, GB/s)."""
    if recs.empty:
        return _empty()
    r = recs.assign(dur=recs["end"] - recs["start"])
    grp = r.groupby("gid", sort=False)
    out = grp.agg(name=("name", "first"), family=("family", "first"), pg_name=("pg_name", "first"),
                  by_seq=("by_seq", "first"), by_comms=("by_comms", "first"), index=("index", "first"), ranks=("rank", "nunique"),
                  complete=("matched", "first"), first_arrival_ns=("astart", "min"),
                  last_arrival_ns=("astart", "max"), mean_duration_ns=("dur", "mean"), bytes=("bytes", "max"),
                  algbw_min_gbps=("algbw_gbps", "min"), algbw_median_gbps=("algbw_gbps", "median"),
                  busbw_min_gbps=("busbw_gbps", "min"), busbw_median_gbps=("busbw_gbps", "median"))
    out["slowest_rank"] = r.loc[grp["astart"].idxmax(), ["gid", "rank"]].set_index("gid")["rank"]
    out["skew_ns"] = out["last_arrival_ns"] - out["first_arrival_ns"]
    out["matched_by"] = np.where(out["by_comms"], "comms_id", np.where(out["by_seq"], "seq", "order")).astype(object)
    out["seq"] = pd.array(out["index"].where(out["by_seq"]), dtype="Int64")
    out["occurrence"] = pd.array(out["index"].where(~out["by_seq"] & ~out["by_comms"]), dtype="Int64")
    # Comms Id is a uint64 (held as its int64 bits): sent as its decimal text, which JSON keeps exact
    ids = out["index"].to_numpy(np.int64).view(np.uint64).astype(str).astype(object)
    out["comms_id"] = np.where(out["by_comms"].to_numpy(bool), ids, None).astype(object)
    out["bytes"] = pd.array(out["bytes"], dtype="Int64")
    for c in ("mean_duration_ns", "algbw_min_gbps", "algbw_median_gbps", "busbw_min_gbps", "busbw_median_gbps"):
        out[c] = out[c].astype("float64")
    out = out.sort_values(["first_arrival_ns", "name"], kind="stable").reset_index(drop=True)
    out["hosts"] = pd.array([pd.NA] * len(out), dtype="Int64")  # analysis.hosts.with_scope fills them
    out["scope"] = pd.Series([None] * len(out), dtype=object)
    return out[INSTANCE_COLUMNS]


def _empty() -> pd.DataFrame:
    text = {"name", "family", "pg_name", "matched_by", "scope", "comms_id"}
    floats = {"mean_duration_ns", "algbw_min_gbps", "algbw_median_gbps", "busbw_min_gbps", "busbw_median_gbps"}
    nullable = {"seq", "occurrence", "bytes", "hosts"}

    def dtype(c):
        return (object if c in text else "float64" if c in floats else "Int64" if c in nullable
                else bool if c == "complete" else "int64")
    return pd.DataFrame({c: pd.Series(dtype=dtype(c)) for c in INSTANCE_COLUMNS})
