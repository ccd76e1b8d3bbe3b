"""Distributed view: how each rank of a multi-process run splits its step time between
computation and communication, and how much of its communication is waiting for peers.

Input is one TraceSummary per rank (tb_profiler.summary: one span of each worker of a
run), never the ranks' events held together; ``distributed(traces)`` summarizes Traces
first, so every number has one definition.  Definitions, chosen to match
torch-tb-profiler's Distributed view where it had one and stated here because the
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
    definition says and does not assume that (analysis.matching).  Starts are compared
    across processes, so they are put on one clock first (analysis.clock: each trace's
    baseTimeNanoseconds, then the smallest shift per rank that keeps every matched
    collective in time across ranks; ``clock`` gives the shift per rank and how it was
    found).  A matched collective whose ranks still do not all overlap in time is
    reported in the notes.  Per rank, wait_ns is the part
    of the communication time inside some collective's wait, transfer_ns the rest (unions,
    so concurrent collectives count once); per collective, wait and transfer are plain
    sums; ``instances`` has one row per collective instance across the ranks.
Ranks that do not belong
    A rank given twice is used once; a rank whose distributedInfo world size or backend is
    not the majority's, whose steps are none of the others', or whose collectives match
    none of the others' (while the others match among themselves) is left out of the
    analyses (``excluded``, and a note): from another run or span.  The analyses use the
    ranks that agree.
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tb_profiler.analysis.clock import CLOCK_COLUMNS, align
from tb_profiler.analysis.collectives import DTYPE_BYTES, RECORD_COLUMNS, collectives
from tb_profiler.analysis.communication import comm_calls, comm_kernels
from tb_profiler.analysis.hosts import pg_scopes, scope_split, with_scope
from tb_profiler.analysis.intervals import covered_in, intersect, merge_intervals
from tb_profiler.analysis.matching import INSTANCE_COLUMNS, group_instances, instances, match_notes, waits
from tb_profiler.analysis.advice_text import fmt_ns
from tb_profiler.analysis.summarize import summarize_trace
from tb_profiler.analysis.trace_summary import stack

__all__ = ["CLOCK_COLUMNS", "COLLECTIVE_COLUMNS", "DTYPE_BYTES", "EXCLUDED_COLUMNS", "INSTANCE_COLUMNS",
           "RANK_COLUMNS", "STEP_COLUMNS", "collectives", "comm_calls", "comm_kernels", "distributed",
           "distributed_from_summaries"]

RANK_COLUMNS = ["rank", "worker", "steps", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns", "overview_communication_ns",
                "communication_note"]
STEP_COLUMNS = ["rank", "worker", "step", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns"]
COLLECTIVE_COLUMNS = ["rank", "worker", "name", "family", "pg_name", "group_size", "calls", "bytes", "out_bytes",
                      "total_ns", "avg_ns", "algbw_gbps", "busbw_gbps", "time_on", "wait_ns", "transfer_ns"]
# hosts: distinct hosts of the process group's ranks, scope: intra-node / inter-node (analysis.hosts)
COLLECTIVE_COLUMNS = [*COLLECTIVE_COLUMNS, "hosts", "scope"]
EXCLUDED_COLUMNS = ["rank", "worker", "reason"]
_UNKNOWN_IF_MIXED = ("overlap_ns", "other_ns")  # null where host and device timelines would mix


def distributed(traces: Sequence) -> dict:
    """``distributed_from_summaries`` over the traces' summaries (analysis.summarize): one
    definition of every cross-rank number, whether the traces are in memory or not."""
    return distributed_from_summaries([summarize_trace(t) for t in traces])


def distributed_from_summaries(summaries: Sequence) -> dict:
    """Computation/communication/overlap/other and wait/transfer per rank, and per-collective
    statistics, from one TraceSummary per rank (see the module docstring for the
    definitions).  An Exception in the list (a file that could not be summarized) is
    named in the notes.

    Returns {"ranks": totals over the profiled steps per rank (RANK_COLUMNS),
    "steps": the same per rank and step, "collectives": per rank and collective
    (COLLECTIVE_COLUMNS), "instances": one row per collective instance across the ranks
    (INSTANCE_COLUMNS), "clock": per rank the clock correction applied (CLOCK_COLUMNS),
    "excluded": ranks left out of the analyses, and why (EXCLUDED_COLUMNS), "info":
    backend, world size, ranks present/missing, device words, "notes": why a result is
    partial or empty}.  Never raises on missing pieces.
    """
    items = list(summaries)
    notes = [f"not summarized, left out: {x}" for x in items if isinstance(x, BaseException)]
    ranked, more = _identify([s for s in items if not isinstance(s, BaseException)])
    notes += more
    if not ranked:
        notes.append("no traces given")
    elif len(ranked) == 1:
        notes.append("only one rank's trace: no other rank to compare with, so wait time is 0 and all "
                     "communication counts as transfer")
    ranked, excluded = _agreeing(ranked, notes)
    world, missing = _world(ranked, notes)
    recs = group_instances(_records(ranked, notes))
    ranked, recs = _drop_strangers(ranked, recs, excluded, notes)
    recs, clock = align(recs, _rank_frame(ranked), notes)
    recs = waits(recs)
    notes += match_notes(recs)
    per_step, windows = _step_rows(ranked, recs)
    for rank, worker, s in ranked:
        notes += [f"rank {rank} ({worker}): {n}" for n in s.step_notes]
    if len({s.measured_on for _, _, s in ranked}) > 1:
        notes.append("the ranks are not all measured on the same timeline (device, host, or device computation "
                     "with host collectives): their numbers do not compare directly")
    scopes = pg_scopes(recs, {r: getattr(s, "host_name", None) for r, _, s in ranked})  # issue 19: hosts
    colls = with_scope(_collective_table(recs, windows), scopes)
    return {"ranks": _rank_totals(per_step, ranked), "steps": per_step,
            "collectives": colls, "info": {**_info(ranked, world, missing), **_hosts_info(ranked)},
            "arrivals": late_arrivals(recs, windows), "scopes": scope_split(colls),
            "notes": notes, "instances": with_scope(instances(recs), scopes), "clock": clock,
            "excluded": pd.DataFrame(excluded, columns=EXCLUDED_COLUMNS).astype({"rank": "int64"})}


# -- which ranks -----------------------------------------------------------------------

def _file(s) -> str:
    return os.path.basename(str(s.source))


def _identify(summaries: list) -> tuple[list[tuple[int, str, object]], list[str]]:
    """(rank, worker, summary) per usable summary, from distributedInfo (else the position)."""
    out, notes, seen = [], [], {}
    for pos, s in enumerate(summaries):
        rank = s.rank
        if rank is None:
            rank = pos
            notes.append(f"{s.worker}: no distributedInfo rank in the trace; taken as rank {pos} (its position)")
        if rank in seen:
            notes.append(f"rank {rank} given twice ({seen[rank]} and {_file(s)}): only {seen[rank]} is used; "
                         "pass one span per rank")
            continue
        seen[rank] = _file(s)
        out.append((rank, s.worker, s))
    return sorted(out, key=lambda x: x[0]), notes


def _info_value(s, key: str):
    info = s.distributed_info if isinstance(s.distributed_info, dict) else {}
    value = info.get(key)
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _majority(values: list) -> object:
    """The most common value (None ignored); a tie goes to the lowest rank's value."""
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(v for v in values if v is not None and counts[v] == top)


def _agreeing(ranked: list, notes: list[str]) -> tuple[list, list]:
    """(the ranks that agree with the majority on world size, backend and steps, the others
    as (rank, worker, reason)).  A rank of another run or span must not stand in the
    analyses beside the rest: its collectives match nothing and its steps are others."""
    excluded = []
    for key, what in (("world_size", "world size"), ("backend", "backend")):
        values = [_info_value(s, key) for _, _, s in ranked]
        want = _majority(values)
        for (rank, worker, _), v in zip(ranked, values):
            if v is not None and v != want:
                excluded.append((rank, worker, f"its distributedInfo {what} is {v}, the others' {want}"))
    table, counts = stack([s for _, _, s in ranked], "steps", ["step"])
    steps = [frozenset(x.tolist()) for x in np.split(table["step"].to_numpy(), np.cumsum(counts)[:-1])] \
        if len(table) else [frozenset() for _ in ranked]
    common = _majority([st or None for st in steps])
    for (rank, worker, _), st in zip(ranked, steps):
        if common is not None and st and st != common:
            if st.isdisjoint(common):
                why = f"its steps ({_steps_text(st)}) are none of the others' ({_steps_text(common)})"
                excluded.append((rank, worker, why))
            else:
                notes.append(f"rank {rank} ({worker}) profiled steps {_steps_text(st)}, the others "
                             f"{_steps_text(common)}: its totals cover other steps")
    return _without(ranked, excluded, notes), excluded


def _steps_text(steps: frozenset) -> str:
    return ", ".join(str(n) for n in sorted(steps))


def _without(ranked: list, excluded: list, notes: list[str]) -> list:
    """ranked less the excluded ranks, each named in the notes."""
    out_ranks = {r for r, _, _ in excluded}
    for rank, worker, reason in excluded:
        notes.append(f"rank {rank} ({worker}) left out: {reason} (from another run or span?); the analyses use "
                     "the ranks that agree")
    return [x for x in ranked if x[0] not in out_ranks]


def _drop_strangers(ranked: list, recs: pd.DataFrame, excluded: list, notes: list[str]) -> tuple[list, pd.DataFrame]:
    """Leaves out ranks whose collectives match none of the others' while the others match
    among themselves (from another run); the rest are matched again without them."""
    with_recs = recs.groupby("rank")["matched"].any()
    strangers = with_recs.index[~with_recs].tolist()
    if len(with_recs) - len(strangers) < 2 or not strangers:
        return ranked, recs
    new = [(r, w, "none of its collectives matches another rank's") for r, w, _ in ranked if r in strangers]
    excluded += new
    ranked = _without(ranked, new, notes)
    return ranked, group_instances(recs[~recs["rank"].isin(strangers)].drop(
        columns=["by_seq", "index", "gid", "present", "issuing", "matched"]))


def _world(ranked: list, notes: list[str]) -> tuple[int | None, list[int]]:
    sizes = sorted({v for _, _, s in ranked for v in [_info_value(s, "world_size")] if isinstance(v, int)})
    world = sizes[-1] if sizes else None
    present = {r for r, _, _ in ranked}
    missing = sorted(set(range(world)) - present) if world else []
    if missing:
        notes.append(f"partial result: rank{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(map(str, missing))} of world size {world} missing; "
                     "wait times compare only the ranks present")
    return world, missing


def _rank_frame(ranked: list) -> pd.DataFrame:
    return pd.DataFrame({"rank": [r for r, _, _ in ranked], "worker": [w for _, w, _ in ranked],
                         "base_time_ns": pd.array([s.base_time_ns for _, _, s in ranked], dtype="Int64")})


# -- per rank --------------------------------------------------------------------------------

def _records(ranked: list, notes: list[str]) -> pd.DataFrame:
    """Every rank's collective records, with rank and worker; notes on each rank's own.
    Concatenated once (a frame per rank would cost seconds for a thousand ranks)."""
    recs, counts = stack([s for _, _, s in ranked], "collectives")
    for (rank, worker, s), n in zip(ranked, counts):
        if not n:
            notes.append(f"rank {rank} ({worker}): no communication events in the trace")
        notes += [f"rank {rank} ({worker}): {n}" for n in (*_source_notes(s), *s.collective_notes)]
    if not counts.any():
        return _empty([*RECORD_COLUMNS, "rank", "worker"])
    recs["rank"] = np.repeat(np.array([r for r, _, _ in ranked], dtype=np.int64), counts)
    recs["worker"] = np.repeat(np.array([w for _, w, _ in ranked], dtype=object), counts)
    return recs


def _step_rows(ranked: list, recs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(per rank and step: computation/communication/overlap/other/wait/transfer
    (STEP_COLUMNS), each rank's step windows).  Every rank's tables are concatenated once
    and each rank's wait is a few numpy calls on its slices (pandas per rank would cost
    seconds for a thousand ranks)."""
    if not ranked:
        return _empty(STEP_COLUMNS), {}
    steps, n_steps = _stacked(ranked, "steps", ["step", "start_ns", "end_ns"])
    busy, _ = _stacked(ranked, "step_busy", ["computation_ns", "communication_ns", "overlap_ns"])
    comm, n_comm = _stacked(ranked, "communication", ["start", "end"])
    where = recs.groupby("rank", sort=False).indices if len(recs) else {}
    starts, waits = recs["start"].to_numpy(np.int64), recs["wait"].to_numpy(np.int64)
    none = np.zeros(0, dtype=np.int64)
    lo, hi = steps["start_ns"], steps["end_ns"]
    wait = np.zeros(len(lo), dtype=np.int64)
    windows = {}
    step_at, comm_at = np.cumsum([0, *n_steps]), np.cumsum([0, *n_comm])
    for i, (rank, _, _) in enumerate(ranked):  # numpy calls on the rank's own slices
        a, b = step_at[i], step_at[i + 1]
        windows[rank] = (lo[a:b], hi[a:b], steps["step"][a:b])
        mine = where.get(rank, none)
        intervals = (comm["start"][comm_at[i]:comm_at[i + 1]], comm["end"][comm_at[i]:comm_at[i + 1]])
        wait[a:b] = covered_in(*intersect(merge_intervals(starts[mine], starts[mine] + waits[mine]), intervals),
                               lo[a:b], hi[a:b])
    known = np.repeat([s.measured_on != "mixed" for _, _, s in ranked], n_steps)  # else host and device mix
    step = hi - lo
    comp, comm_ns, overlap = busy["computation_ns"], busy["communication_ns"], busy["overlap_ns"]
    df = pd.DataFrame({"rank": np.repeat(np.array([r for r, _, _ in ranked], dtype=np.int64), n_steps),
                       "worker": np.repeat(np.array([w for _, w, _ in ranked], dtype=object), n_steps),
                       "step": steps["step"], "step_ns": step, "computation_ns": comp, "communication_ns": comm_ns,
                       "overlap_ns": pd.array(overlap, dtype="Int64"),
                       "other_ns": pd.array(step - (comp + comm_ns - overlap), dtype="Int64"),
                       "wait_ns": wait, "transfer_ns": comm_ns - wait})
    for c in _UNKNOWN_IF_MIXED:
        df[c] = df[c].mask(~known)
    return df[STEP_COLUMNS], windows


def _stacked(ranked: list, frame: str, columns: list[str]) -> tuple[dict[str, np.ndarray], list[int]]:
    """({column: every rank's values, rank after rank}, rows per rank) of one summary frame."""
    table, counts = stack([s for _, _, s in ranked], frame, columns)
    none = np.zeros(0, np.int64)
    return {c: table[c].to_numpy(np.int64) if len(table) else none for c in columns}, counts.tolist()


ARRIVAL_COLUMNS = ["rank", "worker", "step", "instances", "last", "late_ns", "late_max_ns"]


def late_arrivals(recs: pd.DataFrame, windows: dict) -> pd.DataFrame:
    """Per rank and step: the matched collective instances it joined, how often it was the
    last rank to arrive, and how late it arrived (its aligned start less the first rank's,
    summed and at most): who the others waited for, and when.  Step -1: outside its steps."""
    r = recs[recs["matched"]] if len(recs) else recs
    if r.empty:
        return _empty(ARRIVAL_COLUMNS).astype({"worker": object})
    grp = r.groupby("gid", sort=False)["astart"]
    late = (r["astart"] - grp.transform("min")).to_numpy(np.int64)
    last = (r["astart"] == grp.transform("max")).to_numpy(bool) & (late > 0)
    step = np.full(len(r), -1, dtype=np.int64)
    ranks, starts = r["rank"].to_numpy(np.int64), r["start"].to_numpy(np.int64)
    for rank, mine in r.groupby("rank", sort=False).indices.items():  # one pass per rank
        if rank in windows:
            lo, hi, numbers = windows[rank]
            order = np.argsort(lo)
            i = np.searchsorted(lo[order], starts[mine], side="right") - 1
            inside = (i >= 0) & (starts[mine] < hi[order][np.maximum(i, 0)])
            step[mine] = np.where(inside, np.asarray(numbers)[order][np.maximum(i, 0)], -1)
    frame = pd.DataFrame({"rank": ranks, "worker": r["worker"].to_numpy(object), "step": step, "late": late,
                          "last": last})
    out = (frame.groupby(["rank", "worker", "step"], sort=True)
           .agg(instances=("late", "size"), last=("last", "sum"), late_ns=("late", "sum"), late_max_ns=("late", "max"))
           .reset_index())
    return out.astype({"instances": np.int64, "last": np.int64, "late_ns": np.int64, "late_max_ns": np.int64})[
        ARRIVAL_COLUMNS]


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
        return _empty(COLLECTIVE_COLUMNS[:-2])
    keep = np.zeros(len(ranked), dtype=bool)
    starts = ranked["start"].to_numpy()
    for rank, mine in ranked.groupby("rank", sort=False).indices.items():  # one pass per rank, not per event
        if rank in windows:
            keep[mine] = _in_windows(starts[mine], *windows[rank][:2])
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
    return out[COLLECTIVE_COLUMNS[:-2]]


def _info(ranked: list, world: int | None, missing: list[int]) -> dict:
    backends = sorted({str(v) for _, _, s in ranked for v in [_info_value(s, "backend")] if v})
    if not backends:
        backends = sorted({s.backend_guess for _, _, s in ranked if s.backend_guess})
    return {"backend": backends[0] if len(backends) == 1 else (backends or None),
            "world_size": world,
            "ranks": [r for r, _, _ in ranked],
            "missing_ranks": missing,
            "workers": {r: w for r, w, _ in ranked},
            "device_words": {r: (s.device_word or "CPU") for r, _, s in ranked},
            "measured_on": {r: s.measured_on for r, _, s in ranked}}


def _hosts_info(ranked: list) -> dict:
    """Per rank its host (Kineto's host_name; None where the trace has none) and the number
    of distinct hosts named, and the job (PT_PROFILER_JOB_*) where a trace gives it."""
    hosts = {r: getattr(s, "host_name", None) for r, _, s in ranked}
    jobs = [getattr(s, "job", None) for _, _, s in ranked]
    return {"hosts": hosts, "host_count": len({h for h in hosts.values() if h}) or None,
            "job": next((j for j in jobs if j), None)}


def _source_notes(s) -> list[str]:
    """Why a rank's overlap is unknown."""
    if s.measured_on != "mixed":
        return []
    word = s.device_word or "device"
    return [(f"computation is measured on the {word} (kernels) but the collectives only on the host (no "
             f"communication kernels: gloo with {word} tensors?); host and {word} times are not compared, so "
             "overlap and other are unknown")]


_TEXT = {"worker", "name", "pg_name", "family", "time_on", "communication_note", "scope"}
_FLOATS = {"avg_ns", "algbw_gbps", "busbw_gbps"}
_NULLABLE_INTS = {"group_size", "seq", "comms_id", "hosts", "bytes", "out_bytes", "size_bytes", "overlap_ns", "other_ns",
                  "overview_communication_ns"}


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
    lines = [_communication_line(s, o, int(n), int(c))
             for (_, _, s), o, n, c in zip(ranked, _overview_communication(ranked), out["steps"], out["communication_ns"])]
    out["overview_communication_ns"] = pd.array([x for x, _ in lines], dtype="Int64")
    out["communication_note"] = [line for _, line in lines]
    return out[RANK_COLUMNS]


def _overview_communication(ranked: list) -> list[int | None]:
    """Per rank, the Overview's Communication per step: the step breakdown's average row
    (the last of the summary's breakdown), None without one."""
    table, counts = stack([s for _, _, s in ranked], "breakdown", ["communication_ns"])
    if not len(table):
        return [None] * len(ranked)
    last = table["communication_ns"].to_numpy(np.int64)[np.maximum(np.cumsum(counts) - 1, 0)]
    return [int(v) if n else None for v, n in zip(last, counts)]


def _communication_line(s, overview: int | None, n_steps: int, total: int) -> tuple[int | None, str]:
    """(the Overview's Communication per step, one line saying it beside this view's and why
    they differ)."""
    source = s.measured_on
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
