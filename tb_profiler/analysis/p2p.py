"""Point-to-point traffic between ranks: bytes sent from each rank to each other rank.

Why a rule of its own: a send or recv record says how many bytes moved and in which
process group, not to whom (Kineto records no peer).  The peer is known for sure only
when the process group has exactly two members: it is the other one.  So:

- a ``send`` (or ``send_recv``: what it sends, its input message) of rank r in a 2-member
  process group {r, p} counts r -> p;
- a ``recv`` of rank r in {r, p} counts p -> r, but only when rank p recorded no send to
  r in that group (p's trace is missing or does not cover it): the sender's record is
  the one counted, so each transfer counts once;
- a send/recv in a larger group, or in a group the traces do not describe, cannot be
  attributed: the notes count its calls and bytes.

The process groups' members come from each trace's distributedInfo ``pg_config``
(``ranks``); a call naming no process group is in the default one (``pg_desc``
"default_pg", else every rank of ``world_size``).  Input is the cross-rank analysis'
per-rank collectives table (``analysis.distributed``: only calls inside the profiled
steps), never events.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tb_profiler.analysis.advice_text import fmt_bytes

__all__ = ["P2P_FAMILIES", "p2p_matrix", "process_groups"]

P2P_FAMILIES = ("send", "recv", "send_recv")


def process_groups(info: dict | None) -> dict[str, Sequence[int]]:
    """{process group name: its member ranks} of one trace's distributedInfo; "" is the
    default group (from world_size: a range, never a tuple of every rank)."""
    info = info if isinstance(info, dict) else {}
    out: dict[str, Sequence[int]] = {}
    for pg in info.get("pg_config") or []:  # one entry per process group
        ranks = pg.get("ranks") if isinstance(pg, dict) else None
        if isinstance(ranks, list) and all(isinstance(r, int) for r in ranks):
            out[str(pg.get("pg_name"))] = tuple(ranks)
            if pg.get("pg_desc") == "default_pg":
                out.setdefault("", tuple(ranks))
    world = info.get("world_size")
    if "" not in out and isinstance(world, int) and not isinstance(world, bool) and world > 0:
        out[""] = range(world)
    return out


def p2p_matrix(collectives: pd.DataFrame, groups: dict[str, dict[str, Sequence[int]]]) -> dict:
    """{"ranks": the ranks with point-to-point traffic, "bytes": bytes[i][j] sent from
    ranks[i] to ranks[j], "notes"} from the per-rank collectives table (rank, worker,
    family, pg_name, calls, bytes) and each worker's process groups (``process_groups``)."""
    p2p = collectives[collectives["family"].isin(P2P_FAMILIES)]
    if p2p.empty:
        return {"ranks": [], "bytes": [], "notes": ["no point-to-point (send/recv) calls in the profiled steps"]}
    peer = np.array([_peer(groups.get(w, {}).get(pg), r) for w, pg, r in
                     zip(p2p["worker"].tolist(), p2p["pg_name"].tolist(), p2p["rank"].tolist())], dtype=np.int64)
    rank = p2p["rank"].to_numpy(np.int64)
    is_recv = (p2p["family"] == "recv").to_numpy(bool)
    flows = pd.DataFrame({"src": np.where(is_recv, peer, rank), "dst": np.where(is_recv, rank, peer),
                          "pg": p2p["pg_name"].to_numpy(object), "recv": is_recv,
                          "bytes": p2p["bytes"].astype("Float64").to_numpy("float64", na_value=np.nan),
                          "calls": p2p["calls"].to_numpy(np.int64)})
    notes = _notes(flows)
    known = flows[(peer >= 0) & ~np.isnan(flows["bytes"].to_numpy())]
    sent = known[~known["recv"]]
    seen = pd.MultiIndex.from_frame(sent[["src", "dst", "pg"]])
    recv = known[known["recv"]]
    recv = recv[~pd.MultiIndex.from_frame(recv[["src", "dst", "pg"]]).isin(seen)]
    counted = pd.concat([sent, recv], ignore_index=True)
    if counted.empty:
        return {"ranks": [], "bytes": [], "notes": notes}
    totals = counted.groupby(["src", "dst"])["bytes"].sum()
    ranks = sorted(set(totals.index.get_level_values(0)) | set(totals.index.get_level_values(1)))
    matrix = totals.unstack(fill_value=0).reindex(index=ranks, columns=ranks, fill_value=0)
    return {"ranks": [int(r) for r in ranks], "bytes": matrix.to_numpy(np.int64).tolist(), "notes": notes}


def _peer(members: Sequence[int] | None, rank: int) -> int:
    """The other member of a 2-member group holding rank; -1 when there is none."""
    if members is None or len(members) != 2 or rank not in members:
        return -1
    return members[1] if members[0] == rank else members[0]


def _notes(flows: pd.DataFrame) -> list[str]:
    """What the matrix leaves out: calls without a peer, calls without a size."""
    notes = []
    lost = flows[flows["src"].lt(0) | flows["dst"].lt(0)]
    if len(lost):
        size = lost["bytes"].sum(skipna=True)
        notes.append(f"{int(lost['calls'].sum())} send/recv calls ({fmt_bytes(size)}) are in process groups of "
                     "more than 2 ranks, or groups the traces do not describe: their peer is unknown, they are not "
                     "in the matrix (unattributed)")
    unsized = flows[np.isnan(flows["bytes"].to_numpy())]
    if len(unsized):
        notes.append(f"{int(unsized['calls'].sum())} send/recv calls record no message size: not in the matrix")
    return notes
