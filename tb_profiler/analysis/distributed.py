"""Distributed view: how each rank of a multi-process run splits its step time between
computation and communication, and how much of its communication is waiting for peers.

Input is one Trace per rank (one span of each worker of a run).  Definitions, chosen to
match torch-tb-profiler's Distributed view where it had one and stated here because the
numbers are only as good as their definitions:

Where time is measured (``info.measured_on``)
    One timeline per rank, never host intervals against device ones.  "device": the trace
    has device compute; computation is the union of the compute kernels (``Role.COMPUTE``)
    that are not communication kernels, communication the union of the communication
    kernels (NCCL/RCCL, or launched by a communication call).  "host": a trace without
    device compute (gloo on CPU); computation is the union of CPU operators (``cpu_op``)
    that are not communication calls, minus, on each thread, the time that thread spent
    inside communication calls (an operator around a collective does not compute while it
    waits); communication is the union of the host-side collectives.  "mixed": device
    compute but collectives only on the host (gloo with GPU tensors: no communication
    kernel); computation is on the device and communication on the host, so their overlap
    (and other) is unknown: null, with a note.
Overlap, other
    overlap = |computation ∩ communication|; other = step time - |computation ∪
    communication| (idle, data loading, host overhead...), so for every rank and step
    ``step = computation + communication - overlap + other``.
Steps
    The step windows of ``steps(trace)`` (ProfilerStep#N stretched over the device work it
    launched; a trace without steps is one step, with a note).  Only time inside the
    windows is counted, and only collectives starting inside them are listed.  Rank rows
    are totals over the rank's steps (``steps``); step rows are one step each.
The Overview's Communication
    The step breakdown (tb_profiler.analysis.breakdown) gives each ns to one category by
    priority, so its Communication is the communication time (host calls included) when no
    kernel, memcpy or memset runs, averaged per step; here it is all of the communication,
    summed over the steps.  Each rank row carries the breakdown's figure
    (``overview_communication_ns``, per step) and one line saying both and why they
    differ (``communication_note``).
Collectives
    Each rank's collective calls, their bytes, process group, group size and bandwidth,
    as tb_profiler.analysis.collectives defines them (``collectives(trace)``).
Wait and transfer
    The same collective on each rank: the one with the same (process group, Seq) when
    every call of that process group on every rank carries a "Seq" (record_param_comms,
    torch >= 2.x; point-to-point calls keep their own sequence), else the i-th call of the
    same (name, process group) (every rank issues a group's collectives in the same
    order).  It cannot move data before the last rank arrives, so on each rank wait =
    (latest start among the ranks) - (own start), clamped to [0, duration], and transfer =
    duration - wait.  The old plugin took transfer = the shortest duration among ranks,
    which is the same when the ranks end together; comparing starts is what the
    definition says and does not assume that.  Starts are compared across processes, so
    the ranks' clocks must agree (one machine: they do; several machines: only as well as
    their clocks are synced).  A matched collective whose ranks do not all overlap in time
    shows that they do not, and is reported in the notes.  Per rank, wait_ns is the part
    of the communication time inside some collective's wait, transfer_ns the rest (unions,
    so concurrent collectives count once); per collective, wait and transfer are plain
    sums.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tb_profiler.analysis import breakdown as bd
from tb_profiler.analysis.collectives import DTYPE_BYTES, collective_notes, collectives
from tb_profiler.analysis.communication import BACKEND_RE, comm_calls, comm_kernels
from tb_profiler.analysis.intervals import covered_in, intersect, merge_intervals, per_group_subtract
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.recommendations import fmt_ns
from tb_profiler.analysis.steps import step_notes, steps, valid_times
from tb_profiler.io.discovery import worker_name
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.roles import Role

__all__ = ["COLLECTIVE_COLUMNS", "DTYPE_BYTES", "RANK_COLUMNS", "STEP_COLUMNS", "collectives", "comm_calls",
           "comm_kernels", "distributed"]

RANK_COLUMNS = ["rank", "worker", "steps", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns", "overview_communication_ns",
                "communication_note"]
STEP_COLUMNS = ["rank", "worker", "step", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns"]
COLLECTIVE_COLUMNS = ["rank", "worker", "name", "family", "pg_name", "group_size", "calls", "bytes", "out_bytes",
                      "total_ns", "avg_ns", "algbw_gbps", "busbw_gbps", "time_on", "wait_ns", "transfer_ns"]
_UNKNOWN_IF_MIXED = ("overlap_ns", "other_ns")  # null where host and device timelines would mix


# -- per-trace facts -------------------------------------------------------------------

@per_trace
def _busy(trace) -> dict:
    """Computation and communication as disjoint sorted intervals, and where measured
    ("device", "host" or "mixed": see the module docstring)."""
    ev = trace.events
    kernel = (trace.roles == Role.COMPUTE) & valid_times(trace)
    if kernel.any():
        comp = merge_intervals(*_ends(ev, np.flatnonzero(kernel & ~comm_kernels(trace))))
        source = "device"
    else:
        ops = kind_mask(ev["kind"], Kind.CPU_OP) & ~comm_calls(trace) & valid_times(trace)
        ops[trace.steps["event"]] = False  # old traces call ProfilerStep#N an operator
        ops = np.flatnonzero(ops)
        cuts = np.flatnonzero(comm_calls(trace))
        g, _ = factorize(ev["pid"], ev["tid"], ev["pid_str"], ev["tid_str"])
        comp = per_group_subtract(*_ends(ev, ops), g[ops], *_ends(ev, cuts), g[cuts])
        source = "host"
    if comm_kernels(trace).any():
        comm = merge_intervals(*_ends(ev, np.flatnonzero(comm_kernels(trace))))
    else:
        recs = collectives(trace)
        comm = merge_intervals(recs["start"].to_numpy(np.int64), recs["end"].to_numpy(np.int64))
        if source == "device" and len(comm[0]):
            source = "mixed"
    return {"computation": comp, "communication": comm, "source": source}


def _ends(ev, rows):
    return ev["ts"][rows], ev["ts"][rows] + ev["dur"][rows]


def _step_windows(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(step numbers, starts, ends, notes) from the steps analysis (device work included;
    a trace without ProfilerStep is one step)."""
    st = steps(trace)
    num, lo, hi = (st[c].to_numpy(np.int64) for c in ("step", "start_ns", "end_ns"))
    return num, lo, hi, step_notes(trace)


# -- across ranks -----------------------------------------------------------------------

def _worker_name(trace) -> str:
    """The worker as discovery names it (torch's naming, else the file name's stem)."""
    return worker_name(_file(trace))[0]


def _file(trace) -> str:
    return os.path.basename(str(trace.source))


def _identify(traces: Sequence) -> tuple[list[tuple[int, str, object]], list[str]]:
    """(rank, worker, trace) per usable trace, from distributedInfo (else the position)."""
    out, notes, seen = [], [], {}
    for pos, t in enumerate(traces):
        info = t.distributed_info if isinstance(t.distributed_info, dict) else {}
        worker = _worker_name(t)
        rank = info.get("rank")
        if isinstance(rank, str) and rank.strip().isdigit():
            rank = int(rank)
        if not isinstance(rank, int) or isinstance(rank, bool):
            rank = pos
            notes.append(f"{worker}: no distributedInfo rank in the trace; taken as rank {pos} (its position)")
        if rank in seen:
            notes.append(f"rank {rank} given twice ({seen[rank]} and {_file(t)}): only {seen[rank]} is used; "
                         "pass one span per rank")
            continue
        seen[rank] = _file(t)
        out.append((rank, worker, t))
    return sorted(out, key=lambda x: x[0]), notes


def _match_keys(recs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind, index, by Seq) naming the same collective on every rank, with the process
    group: ("seq" or "p2p", Seq) in the process groups where every call on every rank
    carries a Seq, else (name, i-th call of that name on the rank)."""
    occ = recs.groupby(["rank", "name", "pg_name"], sort=False).cumcount().to_numpy(np.int64)
    seq = recs["seq"]
    by_seq = seq.notna().groupby(recs["pg_name"], sort=False).transform("all").to_numpy(bool)
    p2p = recs["family"].isin(("send", "recv", "send_recv")).to_numpy(bool)
    kind = np.where(by_seq, np.where(p2p, "\x00p2p", "\x00seq"), recs["name"].to_numpy(object)).astype(object)
    index = np.where(by_seq, seq.fillna(-1).to_numpy(np.int64), occ)
    return kind, index, by_seq


def _match(recs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Adds wait/transfer to every rank's records by matching the same collective across
    the ranks that issue it (by Seq, else by order: see the module docstring)."""
    notes = []
    if recs.empty:
        return recs.assign(wait=np.zeros(0, np.int64), transfer=np.zeros(0, np.int64)), notes
    recs = recs.sort_values(["rank", "start", "row"], kind="stable").reset_index(drop=True)
    kind, index, by_seq = _match_keys(recs)
    keys = [pd.Series(kind, name="kind"), recs["pg_name"]]
    issuing = recs["rank"].groupby(keys, sort=False).transform("nunique")
    grp = recs.groupby([*keys, pd.Series(index, name="index")], sort=False)
    present = grp["rank"].transform("size")
    last = grp["start"].transform("max")
    first_end = grp["end"].transform("min")
    matched = (present == issuing) & (issuing > 1)
    dur = recs["end"] - recs["start"]
    wait = np.where(matched, np.clip(last - recs["start"], 0, dur), 0)
    recs["wait"] = wait.astype(np.int64)
    recs["transfer"] = (dur - recs["wait"]).astype(np.int64)
    by_order = recs[~by_seq]
    counts = by_order.groupby(["name", "pg_name", "rank"], sort=True).size().unstack("rank")
    for (name, pg), row in counts[counts.nunique(axis=1) > 1].iterrows():
        calls = ", ".join(f"rank {r}: {int(c)}" for r, c in row.dropna().items())
        notes.append(f"{name}{f' (process group {pg})' if pg else ''}: ranks recorded different numbers "
                     f"of calls ({calls}); calls past the shortest count are not matched and show no wait")
    alone = int((by_seq & ~matched & (issuing > 1)).sum())
    if alone:
        notes.append(f"{alone} collective calls have no call with the same process group and Seq on every other "
                     "rank (cut off by the profiling window?): not matched, they show no wait")
    skewed = int((matched & (last > first_end)).sum())
    if skewed:
        notes.append(f"{skewed} matched collective records do not overlap in time across ranks: the ranks' "
                     "clocks disagree (or the collectives were issued in different orders); their wait is "
                     "capped at their duration")
    return recs, notes


def _rank_rows(rank, worker, trace, recs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per-step computation/communication/overlap/other/wait/transfer of one rank."""
    num, lo, hi, notes = _step_windows(trace)
    busy = _busy(trace)
    comp, comm = busy["computation"], busy["communication"]
    starts = recs["start"].to_numpy(np.int64)
    wait_iv = intersect(merge_intervals(starts, starts + recs["wait"].to_numpy(np.int64)), comm)
    m = {k: covered_in(*iv, lo, hi) for k, iv in (("comp", comp), ("comm", comm), ("overlap", intersect(comp, comm)),
                                                 ("wait", wait_iv))}
    step = hi - lo
    known = busy["source"] != "mixed"  # else computation (device) and communication (host) do not compare
    df = pd.DataFrame({"rank": rank, "worker": worker, "step": num, "step_ns": step,
                       "computation_ns": m["comp"], "communication_ns": m["comm"],
                       "overlap_ns": _maybe(m["overlap"], known),
                       "other_ns": _maybe(step - (m["comp"] + m["comm"] - m["overlap"]), known),
                       "wait_ns": m["wait"], "transfer_ns": m["comm"] - m["wait"]})
    return df[STEP_COLUMNS], [f"rank {rank} ({worker}): {n}" for n in notes]


def _maybe(values: np.ndarray, known: bool) -> pd.array:
    """Nullable int64: the values, or all null when they are not known."""
    out = pd.array(np.asarray(values, dtype=np.int64), dtype="Int64")
    return out if known else pd.array([pd.NA] * len(out), dtype="Int64")


def _in_windows(start: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each start lies inside one of the (sorted, disjoint) windows."""
    order = np.argsort(lo)
    lo, hi = lo[order], hi[order]
    i = np.searchsorted(lo, start, side="right") - 1
    return (i >= 0) & (start < hi[np.maximum(i, 0)])


def _collective_table(ranked: pd.DataFrame, windows: dict) -> pd.DataFrame:
    """Per rank and (name, process group): calls, bytes, total/avg time, bandwidth, wait,
    transfer; only collectives starting inside that rank's steps.  A row's algbw is the
    bytes (S) of its calls over their time, its busbw their bus bytes (S x factor) over
    their time: time-weighted means of the calls' own figures; null when one call lacks
    them."""
    if ranked.empty:
        return _empty(COLLECTIVE_COLUMNS)
    keep = np.zeros(len(ranked), dtype=bool)
    for rank, (lo, hi) in windows.items():  # one pass per rank, not per event
        mine = (ranked["rank"] == rank).to_numpy()
        keep[mine] = _in_windows(ranked["start"].to_numpy()[mine], lo, hi)
    r = ranked[keep]
    dur = r["end"] - r["start"]
    size = r["size_bytes"].astype("float64")
    r = r.assign(dur=dur, size=size, bus=r["busbw_gbps"] * dur, no_bytes=r["bytes"].isna(),
                 no_out=r["out_bytes"].isna(), no_size=size.isna(), no_bus=r["busbw_gbps"].isna())
    out = (r.groupby(["rank", "worker", "name", "pg_name"], sort=True)
           .agg(family=("family", "first"), group_size=("group_size", "max"), calls=("dur", "size"),
                bytes=("bytes", "sum"), out_bytes=("out_bytes", "sum"), total_ns=("dur", "sum"),
                size=("size", "sum"), bus=("bus", "sum"), time_on=("time_on", "first"),
                wait_ns=("wait", "sum"), transfer_ns=("transfer", "sum"), no_bytes=("no_bytes", "any"),
                no_out=("no_out", "any"), no_size=("no_size", "any"), no_bus=("no_bus", "any"))
           .reset_index())
    out["bytes"] = out["bytes"].mask(out["no_bytes"])
    out["out_bytes"] = out["out_bytes"].mask(out["no_out"])
    total = out["total_ns"].where(out["total_ns"] > 0)
    out["avg_ns"] = out["total_ns"] / out["calls"]
    out["algbw_gbps"] = (out["size"] / total).mask(out["no_size"])  # bytes per ns = GB/s
    out["busbw_gbps"] = (out["bus"] / total).mask(out["no_bus"])
    return out[COLLECTIVE_COLUMNS]


def _info(ranked_traces, world: int | None, missing: list[int]) -> dict:
    infos = [t.distributed_info if isinstance(t.distributed_info, dict) else {} for _, _, t in ranked_traces]
    backends = sorted({str(i["backend"]) for i in infos if i.get("backend")})
    if not backends:
        backends = sorted({b for _, _, t in ranked_traces for b in [_guess_backend(t)] if b})
    return {"backend": backends[0] if len(backends) == 1 else (backends or None),
            "world_size": world,
            "ranks": [r for r, _, _ in ranked_traces],
            "missing_ranks": missing,
            "workers": {r: w for r, w, _ in ranked_traces},
            "device_words": {r: (t.device_word or "CPU") for r, _, t in ranked_traces},
            "measured_on": {r: _busy(t)["source"] for r, _, t in ranked_traces}}


def _guess_backend(trace) -> str | None:
    """For traces without distributedInfo: nccl from its kernels, else the prefix of the
    host collectives ("gloo" from gloo:all_reduce)."""
    if comm_kernels(trace).any():
        return "nccl"
    names = collectives(trace)["name"]
    found = names[names.str.match(BACKEND_RE)]
    return found.iloc[0].split(":", 1)[0].lower() if len(found) else None


def _world(ranked_traces, notes: list[str]) -> tuple[int | None, list[int]]:
    sizes = {i.get("world_size") for _, _, t in ranked_traces
             for i in [t.distributed_info if isinstance(t.distributed_info, dict) else {}]}
    sizes = sorted(s for s in sizes if isinstance(s, int))
    if len(sizes) > 1:
        notes.append(f"the traces disagree on the world size ({sizes}): the largest is used")
    world = sizes[-1] if sizes else None
    present = {r for r, _, _ in ranked_traces}
    missing = sorted(set(range(world)) - present) if world else []
    if missing:
        notes.append(f"partial result: rank{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(map(str, missing))} of world size {world} missing; "
                     "wait times compare only the ranks present")
    return world, missing


def distributed(traces: Sequence) -> dict:
    """Computation/communication/overlap/other and wait/transfer per rank, and per-collective
    statistics, from one Trace per rank (see the module docstring for the definitions).

    Returns {"ranks": totals over the profiled steps per rank (RANK_COLUMNS),
    "steps": the same per rank and step, "collectives": per rank and collective
    (COLLECTIVE_COLUMNS), "info": backend, world size, ranks present/missing, device words,
    "notes": why a result is partial or empty}.  Never raises on missing pieces.
    """
    ranked, notes = _identify(list(traces))
    if not ranked:
        notes.append("no traces given")
    elif len(ranked) == 1:
        notes.append("only one rank's trace: no other rank to compare with, so wait time is 0 and all "
                     "communication counts as transfer")
    world, missing = _world(ranked, notes)
    recs = []
    for rank, worker, t in ranked:  # one iteration per rank
        c = collectives(t)
        if c.empty:
            notes.append(f"rank {rank} ({worker}): no communication events in the trace")
        notes += [f"rank {rank} ({worker}): {n}" for n in (*_source_notes(t), *collective_notes(t))]
        recs.append(c.assign(rank=rank, worker=worker))
    allrecs = pd.concat(recs, ignore_index=True) if recs else _empty([*COLLECTIVE_COLUMNS, "start", "end", "seq"])
    allrecs, match_notes = _match(allrecs)
    notes += match_notes
    per_rank, windows = [], {}
    for rank, worker, t in ranked:
        df, step_msgs = _rank_rows(rank, worker, t, allrecs[allrecs["rank"] == rank])
        per_rank.append(df)
        windows[rank] = _step_windows(t)[1:3]
        notes += step_msgs
    per_step = pd.concat(per_rank, ignore_index=True) if per_rank else _empty(STEP_COLUMNS)
    totals = _rank_totals(per_step, ranked)
    if len({_busy(t)["source"] for _, _, t in ranked}) > 1:
        notes.append("the ranks are not all measured on the same timeline (device, host, or device computation "
                     "with host collectives): their numbers do not compare directly")
    return {"ranks": totals, "steps": per_step, "collectives": _collective_table(allrecs, windows),
            "info": _info(ranked, world, missing), "notes": notes}


def _source_notes(trace) -> list[str]:
    """Why a rank's overlap is unknown."""
    if _busy(trace)["source"] != "mixed":
        return []
    word = trace.device_word or "device"
    return [(f"computation is measured on the {word} (kernels) but the collectives only on the host (no "
             f"communication kernels: gloo with {word} tensors?); host and {word} times are not compared, so "
             "overlap and other are unknown")]


_TEXT = {"worker", "name", "pg_name", "family", "time_on", "communication_note"}
_FLOATS = {"avg_ns", "algbw_gbps", "busbw_gbps"}
_NULLABLE_INTS = {"group_size", "seq", "bytes", "out_bytes", "overlap_ns", "other_ns", "overview_communication_ns"}


def _empty(columns: list[str]) -> pd.DataFrame:
    """A typed empty table, so callers can rely on the columns and their dtypes."""
    def dtype(c):
        return object if c in _TEXT else "float64" if c in _FLOATS else "Int64" if c in _NULLABLE_INTS else "int64"
    return pd.DataFrame({c: pd.Series(dtype=dtype(c)) for c in columns})


def _rank_totals(per_step: pd.DataFrame, ranked: list) -> pd.DataFrame:
    """Sums over each rank's steps (null where a step's figure is unknown); a rank whose
    trace has no steps keeps a row of zeros.  With the Overview's Communication beside."""
    sums = [c for c in STEP_COLUMNS if c.endswith("_ns")]
    keys = ["rank", "worker"]
    out = per_step.groupby(keys, sort=True).agg(steps=("step", "size"), **{c: (c, "sum") for c in sums}).reset_index()
    for c in _UNKNOWN_IF_MIXED:
        out[c] = out[c].astype("Int64").mask(per_step[c].isna().groupby([per_step[k] for k in keys]).any().to_numpy())
    every = pd.DataFrame([(r, w) for r, w, _ in ranked], columns=keys).astype({"rank": "int64", "worker": object})
    out = every.merge(out, on=keys, how="left")
    known = [c for c in sums if c not in _UNKNOWN_IF_MIXED]
    out[["steps", *known]] = out[["steps", *known]].fillna(0).astype("int64")
    for c in _UNKNOWN_IF_MIXED:
        out[c] = out[c].astype("Int64").mask(out["steps"] == 0, 0)
    lines = [_communication_line(t, _busy(t)["source"], int(n), int(c))
             for (_, _, t), n, c in zip(ranked, out["steps"], out["communication_ns"])]
    out["overview_communication_ns"] = pd.array([x for x, _ in lines], dtype="Int64")
    out["communication_note"] = [line for _, line in lines]
    return out[RANK_COLUMNS]


def _communication_line(trace, source: str, n_steps: int, total: int) -> tuple[int | None, str]:
    """(the Overview's Communication per step, one line saying it beside this view's and why
    they differ).  The Overview's figure comes from the step breakdown itself."""
    overview = bd.average(trace).get("communication")
    if not n_steps or overview is None:
        return overview, "Communication: no steps to count"
    here = total / n_steps
    what = "communication kernels" if source == "device" else "host collectives"
    head = (f"Communication: {fmt_ns(here)} per step here ({fmt_ns(total)} total over {n_steps} "
            f"step{'s' if n_steps > 1 else ''}: all the time {what} run)")
    if abs(here - overview) < 1:
        return overview, f"{head}, the same as the Overview's"
    why = ("every host communication call, the c10d:: calls that only enqueue a collective included"
           if source == "host" else
           "the part not hidden behind kernels, memcpy or memset, host communication calls included")
    return overview, f"{head}; the Overview counts {fmt_ns(overview)} per step: {why}"
