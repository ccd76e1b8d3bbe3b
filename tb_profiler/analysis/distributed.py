"""Distributed view: how each rank of a multi-process run splits its step time between
computation and communication, and how much of its communication is waiting for peers.

Input is one Trace per rank (one span of each worker of a run).  Definitions, chosen to
match torch-tb-profiler's Distributed view where it had one and stated here because the
numbers are only as good as their definitions:

Where time is measured
    A trace with kernels is measured on the device: computation is the union of every
    kernel that is not a communication kernel, communication the union of the
    communication kernels ("nccl" in the name: NCCL, and RCCL which keeps NCCL's kernel
    names).  If such a trace has no communication kernel (gloo with CUDA tensors), its
    host-side collectives are the communication.  A trace without kernels (gloo on CPU)
    is measured on the host: computation is the union of CPU operators (``cpu_op``) that
    are not communication calls, minus, on each thread, the time that thread spent inside
    communication calls (an operator around a collective does not compute while it
    waits); communication is the union of the host-side collectives.
Overlap, other
    overlap = |computation ∩ communication|; other = step time - |computation ∪
    communication| (idle, data loading, host overhead...), so for every rank and step
    ``step = computation + communication - overlap + other``.
Steps
    The step windows of ``steps(trace)`` (ProfilerStep#N stretched over the device work it
    launched; a trace without steps is one step, with a note).  Only time inside the
    windows is counted, and only collectives starting inside them are listed.
Communication calls (host) and kernels
    As tb_profiler.analysis.communication defines them (shared with the step breakdown).
    Nested calls form one collective: the outermost call on its thread.  Gloo records
    each collective twice, the ``c10d::allreduce_`` that enqueues it on the caller thread
    and the ``gloo:all_reduce`` range where a gloo worker thread runs it; when a trace has
    such backend ranges, the collectives are the calls holding one, and enqueue-only calls
    are not collectives (they still do not count as computation).
One collective
    On the device: the communication kernels launched inside one outermost host
    collective (usually one kernel); a kernel whose launch is not in the trace is a
    collective of its own.  Its name is the "Collective name" argument (from the kernel,
    else the ``record_param_comms`` around its launch), else the host call's name, else the
    kernel name; its process group is "Process Group Name" where present.
    Bytes are "In msg nelems" × dtype size where the trace has them, else the product of
    each input's "Input Dims" × the size of its "Input type" (this rank's input message,
    as the old plugin counted).
Wait and transfer
    The i-th collective of the same (name, process group) on each rank is the same
    collective (every rank issues a group's collectives in the same order).  It cannot
    move data before the last rank arrives, so on each rank wait = (latest start among the
    ranks) - (own start), clamped to [0, duration], and transfer = duration - wait.  The
    old plugin took transfer = the shortest duration among ranks, which is the same when
    the ranks end together; comparing starts is what the definition says and does not
    assume that.  Starts are compared across processes, so the ranks' clocks must agree
    (one machine: they do; several machines: only as well as their clocks are synced).  A
    matched collective whose ranks do not all overlap in time shows that they do not, and
    is reported in the notes.  Per rank, wait_ns is the part of the communication time
    inside some collective's wait, transfer_ns the rest (unions, so concurrent
    collectives count once); per collective, wait and transfer are plain sums.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tb_profiler.analysis.communication import (
    BACKEND_RE,
    comm_calls,
    comm_kernels,
    name_flags,
)
from tb_profiler.analysis.intervals import (
    covered_in,
    intersect,
    merge_intervals,
    per_group_subtract,
)
from tb_profiler.analysis.keys import factorize
from tb_profiler.analysis.links import NO_ROW, launch, launching_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.steps import step_notes, steps, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.io.discovery import parse_trace_name
from tb_profiler.trace.categories import Kind, kind_mask
from tb_profiler.trace.roles import Role
from tb_profiler.trace.strings import map_string_ids

__all__ = ["COLLECTIVE_COLUMNS", "DTYPE_BYTES", "RANK_COLUMNS", "STEP_COLUMNS", "collectives", "comm_calls",
           "comm_kernels", "distributed"]

# Communication backends whose record_function ranges are named "<backend>:<op>".

# Element sizes, by the spellings traces use: record_param_comms "dtype" (ScalarType
# names) and "Input type" (C++ type names).
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "long": 8,
    "int": 4, "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "int64_t": 8, "int32_t": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::half>": 4,
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "half": 2, "byte": 1, "char": 1,
    "complexfloat": 8, "complexdouble": 16, "complexhalf": 4, "int64": 8, "int32": 4,
    "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2fnuz": 1,
}

RANK_COLUMNS = ["rank", "worker", "steps", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns"]
STEP_COLUMNS = ["rank", "worker", "step", "step_ns", "computation_ns", "communication_ns",
                "overlap_ns", "other_ns", "wait_ns", "transfer_ns"]
COLLECTIVE_COLUMNS = ["rank", "worker", "name", "pg_name", "calls", "bytes", "total_ns", "avg_ns",
                      "wait_ns", "transfer_ns"]
_RECORD_COLUMNS = ["row", "name", "pg_name", "start", "end", "bytes"]

_EMPTY_I = np.zeros(0, dtype=np.int64)


# -- per-trace facts -------------------------------------------------------------------

@per_trace
def _comm_roots(trace) -> np.ndarray:
    """Each communication call's outermost enclosing call on its thread (itself for a
    root); -1 for other events.  One logical collective = one root."""
    comm = comm_calls(trace)
    rows = np.flatnonzero(comm)
    outer = nearest_ancestor(trace, rows, comm, include_self=False)
    is_root = np.zeros(len(comm), dtype=bool)
    is_root[rows[outer < 0]] = True
    out = np.full(len(comm), NO_ROW, dtype=np.int64)
    out[rows] = nearest_ancestor(trace, rows, is_root, include_self=True)
    return out


def _dims_bytes(dims_json: str | None, types_json: str | None) -> int:
    """Bytes of the tensor inputs: product of each input's dims × its element size."""
    try:
        dims, types = json.loads(dims_json), json.loads(types_json)
    except (TypeError, ValueError):
        return 0
    if not isinstance(dims, list) or not isinstance(types, list):
        return 0
    total = 0
    for d, t in zip(dims, types):
        size = DTYPE_BYTES.get(str(t).lower(), 0)
        if size and isinstance(d, list) and all(isinstance(x, int) for x in d):
            total += int(np.prod(d, dtype=np.int64)) * size
    return total


def _message_bytes(trace, rows: np.ndarray) -> np.ndarray:
    """Bytes each row's collective moves: In msg nelems × dtype, else Input Dims × type."""
    ev = trace.events
    rows = np.asarray(rows, dtype=np.int64)
    nelems = ev["in_msg_nelems"][rows]
    size = map_string_ids(ev["dtype"][rows], trace.strings, lambda s: DTYPE_BYTES.get(s.lower(), 0),
                          np.int64, 0)
    out = np.where((nelems != MISSING_INT) & (nelems >= 0), nelems, 0) * size
    todo = np.flatnonzero(out == 0)
    if len(todo):
        pairs = np.stack([ev["input_dims"][rows[todo]], ev["input_type"][rows[todo]]]).astype(np.int64)
        uniq, inv = np.unique(pairs, axis=1, return_inverse=True)
        # One parse per distinct (dims, types) pair: shapes repeat, events do not matter.
        per_pair = np.array([_dims_bytes(trace.str(d), trace.str(t)) for d, t in uniq.T.tolist()],
                            dtype=np.int64)
        out[todo] = per_pair[inv.reshape(-1)]
    return out


def _attributes(trace, rows: np.ndarray) -> pd.DataFrame:
    """name, pg_name, bytes of the collective described at each row (see docstring)."""
    ev = trace.events
    coll = ev["collective_name"][rows]
    name_ids = np.where(coll >= 0, coll, ev["name"][rows])
    return pd.DataFrame({"name": trace.str(name_ids), "pg_name": trace.str(ev["pg_name"][rows]),
                         "bytes": _message_bytes(trace, rows)})


@per_trace
def _describing_call(trace) -> np.ndarray:
    """For each collective root, the call that best describes it: a record_param_comms (or
    any call carrying "Collective name") inside it, else the root itself; -1 elsewhere."""
    roots = _comm_roots(trace)
    out = np.where(np.arange(len(roots)) == roots, roots, NO_ROW)
    described = np.flatnonzero((roots >= 0) & (trace.events["collective_name"] >= 0))
    out[roots[described][::-1]] = described[::-1]  # the first such call wins
    return out


def _records(rows, starts, ends, attrs: pd.DataFrame) -> pd.DataFrame:
    df = attrs.reset_index(drop=True)
    df.insert(0, "row", np.asarray(rows, dtype=np.int64))
    df["start"] = np.asarray(starts, dtype=np.int64)
    df["end"] = np.asarray(ends, dtype=np.int64)
    df["pg_name"] = df["pg_name"].fillna("")
    df["name"] = df["name"].fillna("(unnamed)")
    return df[_RECORD_COLUMNS]


def _device_records(trace) -> pd.DataFrame:
    """One record per outermost host collective whose kernels ran (or per orphan kernel)."""
    ev = trace.events
    k = np.flatnonzero(comm_kernels(trace))
    roots = _comm_roots(trace)
    rt = launch(trace)[k]
    # The comm call around the launch; without the launch in the trace, the operator
    # that shares the kernel's External id (or one of its enclosing calls).
    root = nearest_ancestor(trace, rt, roots >= 0, include_self=False)
    no_rt = rt < 0
    root[no_rt] = nearest_ancestor(trace, launching_op(trace)[k[no_rt]], roots >= 0, include_self=True)
    root[root >= 0] = roots[root[root >= 0]]
    key = np.where(root >= 0, root, k)
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    start = np.full(len(uniq), np.iinfo(np.int64).max)
    end = np.full(len(uniq), np.iinfo(np.int64).min)
    np.minimum.at(start, inv, ev["ts"][k])
    np.maximum.at(end, inv, ev["ts"][k] + ev["dur"][k])
    # Describe by the first kernel's own args when it carries them, else its host call.
    kern = k[first]
    desc = np.where(ev["collective_name"][kern] >= 0, kern, NO_ROW)
    has_root = (desc < 0) & (root[first] >= 0)
    desc[has_root] = _describing_call(trace)[root[first][has_root]]
    desc = np.where(desc >= 0, desc, kern)
    return _records(kern, start, end, _attributes(trace, desc))


def _host_records(trace) -> pd.DataFrame:
    """The outermost host communication calls; when backend ranges (gloo:...) exist, only
    the roots that hold one (the enqueue-only c10d:: calls are not collectives)."""
    ev = trace.events
    roots = _comm_roots(trace)
    rows = np.flatnonzero(np.arange(len(roots)) == roots)
    backend = np.flatnonzero((roots >= 0) & name_flags(trace, lambda n: BACKEND_RE.match(n) is not None))
    if len(backend):
        holds = np.zeros(len(roots), dtype=bool)
        holds[roots[backend]] = True
        rows = rows[holds[rows]]
    desc = _describing_call(trace)[rows]
    return _records(rows, ev["ts"][rows], ev["ts"][rows] + ev["dur"][rows], _attributes(trace, desc))


@per_trace
def collectives(trace) -> pd.DataFrame:
    """This trace's collectives, by start: row (its first kernel, or its host call), name,
    pg_name ("" when the trace has none), start, end (ns), bytes.  From the device when the
    trace has communication kernels, else from the host calls."""
    recs = _device_records(trace) if comm_kernels(trace).any() else _host_records(trace)
    return recs.sort_values(["start", "row"], kind="stable").reset_index(drop=True)


@per_trace
def _busy(trace) -> dict:
    """Computation and communication as disjoint sorted intervals, and where measured."""
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
        comm = merge_intervals(recs["start"].to_numpy(), recs["end"].to_numpy())
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
    base = _file(trace)
    parsed = parse_trace_name(base)
    return parsed[0] if parsed else base


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


def _match(recs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Adds wait/transfer to every rank's records by matching the i-th collective of each
    (name, process group) across the ranks that issue it."""
    notes = []
    if recs.empty:
        return recs.assign(wait=np.zeros(0, np.int64), transfer=np.zeros(0, np.int64)), notes
    recs = recs.sort_values(["rank", "start", "row"], kind="stable").reset_index(drop=True)
    key = ["name", "pg_name"]
    recs["occ"] = recs.groupby(["rank", *key], sort=False).cumcount()
    issuing = recs.groupby(key, sort=False)["rank"].transform("nunique")
    grp = recs.groupby([*key, "occ"], sort=False)
    present = grp["rank"].transform("size")
    last = grp["start"].transform("max")
    first_end = grp["end"].transform("min")
    matched = (present == issuing) & (issuing > 1)
    dur = recs["end"] - recs["start"]
    wait = np.where(matched, np.clip(last - recs["start"], 0, dur), 0)
    recs["wait"] = wait.astype(np.int64)
    recs["transfer"] = (dur - recs["wait"]).astype(np.int64)
    counts = recs.groupby([*key, "rank"], sort=True).size().unstack("rank")
    for (name, pg), row in counts[counts.nunique(axis=1) > 1].iterrows():
        calls = ", ".join(f"rank {r}: {int(c)}" for r, c in row.dropna().items())
        notes.append(f"{name}{f' (process group {pg})' if pg else ''}: ranks recorded different numbers "
                     f"of calls ({calls}); calls past the shortest count are not matched and show no wait")
    skewed = int((matched & (last > first_end)).sum())
    if skewed:
        notes.append(f"{skewed} matched collective records do not overlap in time across ranks: the ranks' "
                     "clocks disagree (or the collectives were issued in different orders); their wait is "
                     "capped at their duration")
    return recs.drop(columns="occ"), notes


def _rank_rows(rank, worker, trace, recs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per-step computation/communication/overlap/other/wait/transfer of one rank."""
    num, lo, hi, notes = _step_windows(trace)
    busy = _busy(trace)
    comp, comm = busy["computation"], busy["communication"]
    wait_iv = intersect(merge_intervals(recs["start"].to_numpy(), (recs["start"] + recs["wait"]).to_numpy()), comm)
    m = {k: covered_in(*iv, lo, hi) for k, iv in (("comp", comp), ("comm", comm), ("overlap", intersect(comp, comm)),
                                                 ("wait", wait_iv))}
    step = hi - lo
    df = pd.DataFrame({"rank": rank, "worker": worker, "step": num, "step_ns": step,
                       "computation_ns": m["comp"], "communication_ns": m["comm"], "overlap_ns": m["overlap"],
                       "other_ns": step - (m["comp"] + m["comm"] - m["overlap"]),
                       "wait_ns": m["wait"], "transfer_ns": m["comm"] - m["wait"]})
    return df[STEP_COLUMNS], [f"rank {rank} ({worker}): {n}" for n in notes]


def _in_windows(start: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each start lies inside one of the (sorted, disjoint) windows."""
    order = np.argsort(lo)
    lo, hi = lo[order], hi[order]
    i = np.searchsorted(lo, start, side="right") - 1
    return (i >= 0) & (start < hi[np.maximum(i, 0)])


def _collective_table(ranked: pd.DataFrame, windows: dict) -> pd.DataFrame:
    """Per rank and (name, process group): calls, bytes, total/avg time, wait, transfer;
    only collectives starting inside that rank's steps."""
    if ranked.empty:
        return _empty(COLLECTIVE_COLUMNS)
    keep = np.zeros(len(ranked), dtype=bool)
    for rank, (lo, hi) in windows.items():  # one pass per rank, not per event
        mine = (ranked["rank"] == rank).to_numpy()
        keep[mine] = _in_windows(ranked["start"].to_numpy()[mine], lo, hi)
    r = ranked[keep].assign(dur=lambda d: d["end"] - d["start"])
    out = (r.groupby(["rank", "worker", "name", "pg_name"], sort=True)
           .agg(calls=("dur", "size"), bytes=("bytes", "sum"), total_ns=("dur", "sum"),
                wait_ns=("wait", "sum"), transfer_ns=("transfer", "sum"))
           .reset_index())
    out["avg_ns"] = out["total_ns"] / out["calls"]
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
        recs.append(c.assign(rank=rank, worker=worker))
    allrecs = pd.concat(recs, ignore_index=True) if recs else pd.DataFrame(columns=[*_RECORD_COLUMNS, "rank", "worker"])
    allrecs, match_notes = _match(allrecs)
    notes += match_notes
    per_rank, windows = [], {}
    for rank, worker, t in ranked:
        df, step_msgs = _rank_rows(rank, worker, t, allrecs[allrecs["rank"] == rank])
        per_rank.append(df)
        windows[rank] = _step_windows(t)[1:3]
        notes += step_msgs
    per_step = pd.concat(per_rank, ignore_index=True) if per_rank else _empty(STEP_COLUMNS)
    totals = _rank_totals(per_step, [(r, w) for r, w, _ in ranked])
    if len({_busy(t)["source"] for _, _, t in ranked}) > 1:
        notes.append("some ranks are measured on the device and others on the host (some traces have no "
                     "kernels): their numbers do not compare directly")
    return {"ranks": totals, "steps": per_step, "collectives": _collective_table(allrecs, windows),
            "info": _info(ranked, world, missing), "notes": notes}


def _empty(columns: list[str]) -> pd.DataFrame:
    """A typed empty table, so callers can rely on the columns and their dtypes."""
    text, floats = {"worker", "name", "pg_name"}, {"avg_ns"}
    return pd.DataFrame({c: pd.Series(dtype=object if c in text else "float64" if c in floats else "int64")
                         for c in columns})


def _rank_totals(per_step: pd.DataFrame, ranks: list[tuple[int, str]]) -> pd.DataFrame:
    """Sums over each rank's steps; a rank whose trace has no steps keeps a row of zeros."""
    sums = [c for c in RANK_COLUMNS if c.endswith("_ns")]
    out = (per_step.groupby(["rank", "worker"], sort=True)
           .agg(steps=("step", "size"), **{c: (c, "sum") for c in sums})
           .reset_index())
    every = pd.DataFrame(ranks, columns=["rank", "worker"]).astype({"rank": "int64", "worker": object})
    out = every.merge(out, on=["rank", "worker"], how="left").fillna(0)
    return out[RANK_COLUMNS].astype({c: "int64" for c in ["rank", "steps", *sums]})
