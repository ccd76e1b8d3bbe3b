"""One trace's collective calls: what each one is, how much it moves, in which process
group, when it ran, and how fast (algorithm and bus bandwidth).

Why a module of its own: the Distributed view, the CLI and run summaries need the same
per-call facts, and each fact has a trap that a table of sums hides.

One collective
    On the device: the communication kernels launched inside one outermost host
    collective (usually one kernel).  A kernel whose launch is not in the trace (cut off by
    the profiling window) belongs to the host call with its External id; failing that, it
    is a collective of its own when it carries the collective's args itself (modern
    Kineto copies them onto NCCL kernels), else it joins the collective it overlaps in
    time on the same device, else it is unattributed (its time is still communication
    time; ``collective_notes`` counts it).  It never becomes a nameless collective that
    no other rank could match.  On the host (a trace without communication kernels): the
    outermost communication calls; when the trace has backend ranges (``gloo:*``), only
    the calls that hold one (gloo's ``c10d::allreduce_`` only enqueues the work that a
    gloo thread runs under ``gloo:all_reduce``).
Describing a collective
    Each field comes from the first of: the kernel's own args, the ``record_param_comms``
    inside the host call (torch >= 2.1: "Collective name", "In msg nelems", "Out msg
    nelems", "dtype", "Group size", "Process Group Name" / "Process Group Ranks",
    "Seq"), the backend range inside it (``nccl:*`` / ``gloo:*``: "Input Dims" x the size
    of each "Input type").  Never the ``c10d::*`` dispatcher op's own "Input Dims": they
    hold TensorLists (``[[[1000]], [], ...]``: 0 bytes when summed as tensors) and, for
    ``_allgather_base_``, the output buffer before the input ((n + 1) x the message).
Bytes
    ``bytes`` is this rank's input message, ``out_bytes`` its output message where the
    trace records one ("Out msg nelems"); a barrier moves 0 bytes; unknown is null.
Group size n
    "Group size", else the length of "Process Group Ranks", else the process group's
    ``pg_size`` in distributedInfo's ``pg_config``, else distributedInfo's ``world_size``
    when the call names no process group (or the default one); else unknown (null).
Bandwidth, as nccl-tests defines it (doc/PERFORMANCE.md of github.com/NVIDIA/nccl-tests)
    algbw = S / t and busbw = algbw x a factor of the family and n, so that busbw compares
    with the hardware's peak whatever the number of ranks:

    =====================  ==================================  ============
    family                 S                                   factor
    =====================  ==================================  ============
    all_reduce             the buffer (input message)          2(n-1)/n
    all_gather, gather     the gathered size, n x input        (n-1)/n
    reduce_scatter,        the full size before it is          (n-1)/n
    scatter                scattered, n x output
    all_to_all             the send buffer (input message)     (n-1)/n
    broadcast, reduce,     the message                         1
    send, recv, send_recv
    =====================  ==================================  ============

    (PERFORMANCE.md lists all_reduce, reduce_scatter, all_gather, broadcast, reduce and
    all_to_all; gather and scatter as nccl-tests' src/gather.cu and src/scatter.cu compute
    them.)  A barrier, or a family the name does not tell, has no bandwidth.  t is the
    collective's duration where it is measured (``time_on``): its kernels on the device,
    or its host range when the trace has no communication kernels; it includes any wait
    for the other ranks, as the profiler saw it.  Bytes per ns are GB/s (1e9 bytes/s, as
    nccl-tests report).
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from tb_profiler.analysis.communication import BACKEND_RE, comm_calls, comm_kernels, name_flags
from tb_profiler.analysis.links import NO_ROW, launch, launching_op, nearest_ancestor
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.advice_text import fmt_ns
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.strings import map_string_ids

__all__ = ["DTYPE_BYTES", "FAMILIES", "RECORD_COLUMNS", "bus_factor", "collective_family", "collective_notes",
           "collectives"]

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

# (letters in the lowercased name, family), first match wins: the longer names first so
# that "allreduce" is not taken for "reduce", nor "reducescatter" for "scatter".
_FAMILY_WORDS = (("barrier", "barrier"), ("allreduce", "all_reduce"), ("reducescatter", "reduce_scatter"),
                 ("allgather", "all_gather"), ("alltoall", "all_to_all"), ("sendrecv", "send_recv"),
                 ("broadcast", "broadcast"), ("reduce", "reduce"), ("gather", "gather"),
                 ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))
FAMILIES = tuple(f for _, f in _FAMILY_WORDS)
_GATHERS, _SCATTERS = ("all_gather", "gather"), ("reduce_scatter", "scatter")
_NEEDS_N = ("all_reduce", *_GATHERS, *_SCATTERS, "all_to_all")  # busbw factors that depend on n
_FACTOR_ONE = ("broadcast", "reduce", "send", "recv", "send_recv")
_NOT_LETTERS = re.compile(r"[^a-z]+")

RECORD_COLUMNS = ["row", "name", "family", "pg_name", "group_size", "seq", "start", "end", "time_on", "bytes",
                  "out_bytes", "size_bytes", "algbw_gbps", "busbw_gbps", "comms_id"]
COMMS_ID = "Comms Id"  # libkineto appendCollectiveArgs (MetadataFieldCatalog kCommsId, a uint64)
_U64_MAX = "18446744073709551615"
_NULLABLE = ("group_size", "seq", "bytes", "out_bytes", "size_bytes")


# -- names and sizes -------------------------------------------------------------------

def collective_family(name: str | None) -> str:
    """The collective family of any spelling of its name ("" when the name does not say):
    allreduce, all_reduce, c10d::allreduce_, nccl:all_reduce and
    ncclDevKernel_AllReduce_Sum_f32_RING_LL are all "all_reduce"."""
    letters = _NOT_LETTERS.sub("", (name or "").lower())
    return next((fam for word, fam in _FAMILY_WORDS if word in letters), "")


def bus_factor(family, n):
    """nccl-tests' busbw / algbw for a family over n ranks (NaN when it has none or n is
    unknown); see the module docstring.  Scalars give a float, arrays an array."""
    fam = np.asarray(family, dtype=object)
    n = np.asarray(n, dtype=np.float64)
    n = np.where(n >= 1, n, np.nan)
    out = np.select([np.isin(fam, _FACTOR_ONE), fam == "all_reduce", np.isin(fam, _NEEDS_N)],
                    [np.ones_like(n), 2.0 * (n - 1) / n, (n - 1) / n], np.nan)
    return out if out.ndim else float(out)


def _dims_bytes(dims_json: str | None, types_json: str | None) -> int:
    """Bytes of the tensor inputs of a backend range: each input's dims product x its
    element size; -1 when the trace records no shapes."""
    try:
        dims, types = json.loads(dims_json), json.loads(types_json)
    except (TypeError, ValueError):
        return -1
    if not isinstance(dims, list) or not isinstance(types, list):
        return -1
    total = 0
    for d, t in zip(dims, types):
        size = DTYPE_BYTES.get(str(t).lower(), 0)
        if size and isinstance(d, list) and all(isinstance(x, int) for x in d):
            total += int(np.prod(d, dtype=np.int64)) * size
    return total


def _group_len(text: str) -> int:
    """Length of a "Process Group Ranks" value ([0, 1], or that list written as a string)."""
    try:
        ranks = json.loads(text)
        if isinstance(ranks, str):
            ranks = json.loads(ranks)
    except (TypeError, ValueError):
        return -1
    return len(ranks) if isinstance(ranks, list) and ranks else -1


def _msg_bytes(trace, rows: np.ndarray, column: str) -> np.ndarray:
    """Each row's "In/Out msg nelems" x its dtype's size; -1 where either is missing."""
    ev = trace.events
    safe = np.maximum(rows, 0)
    nelems = ev[column][safe]
    size = map_string_ids(ev["dtype"][safe], trace.strings, lambda s: DTYPE_BYTES.get(s.lower(), 0), np.int64, 0)
    ok = (rows >= 0) & (nelems != MISSING_INT) & (nelems >= 0) & (size > 0)
    return np.where(ok, nelems * size, -1)


def _range_bytes(trace, rows: np.ndarray) -> np.ndarray:
    """Input Dims x Input type of each (backend range) row; -1 for none."""
    ev = trace.events
    out = np.full(len(rows), -1, dtype=np.int64)
    have = np.flatnonzero(rows >= 0)
    if len(have):
        pairs = np.stack([ev["input_dims"][rows[have]], ev["input_type"][rows[have]]]).astype(np.int64)
        uniq, inv = np.unique(pairs, axis=1, return_inverse=True)
        # One parse per distinct (dims, types) pair: shapes repeat, events do not matter.
        per_pair = np.array([_dims_bytes(trace.str(d), trace.str(t)) for d, t in uniq.T.tolist()], dtype=np.int64)
        out[have] = per_pair[inv.reshape(-1)]
    return out


def _first(values: list[np.ndarray], missing) -> np.ndarray:
    """Per position, the first of the candidate value arrays that is not ``missing``."""
    out = values[0].copy()
    for v in values[1:]:  # a few sources, not events
        out = np.where(out == missing, v, out)
    return out


def _column(trace, column: str, rows: np.ndarray, missing) -> np.ndarray:
    """events[column] at rows, ``missing`` where a row is -1."""
    col = trace.events[column]
    return np.where(rows >= 0, col[np.maximum(rows, 0)], missing)


# -- which call holds what ------------------------------------------------------------

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


def _first_inside(trace, mask: np.ndarray) -> np.ndarray:
    """For each root, the first communication call inside it (itself included) where
    ``mask`` holds; -1 elsewhere."""
    roots = _comm_roots(trace)
    out = np.full(len(roots), NO_ROW, dtype=np.int64)
    rows = np.flatnonzero((roots >= 0) & mask)
    out[roots[rows][::-1]] = rows[::-1]  # the first such call wins
    return out


@per_trace
def _param_call(trace) -> np.ndarray:
    """Per root, its record_param_comms (any call carrying "Collective name")."""
    return _first_inside(trace, trace.events["collective_name"] >= 0)


@per_trace
def _backend_range(trace) -> np.ndarray:
    """Per root, its backend range (nccl:all_reduce, gloo:all_reduce, ...)."""
    return _first_inside(trace, name_flags(trace, lambda n: BACKEND_RE.match(n) is not None))


# -- records -----------------------------------------------------------------------------

def _describe(trace, root: np.ndarray, kern: np.ndarray) -> pd.DataFrame:
    """name, family, pg_name, group_size, seq, bytes, out_bytes of collectives given by their
    host root (or -1) and a kernel carrying the collective's args (or -1)."""
    param = np.where(root >= 0, _param_call(trace)[np.maximum(root, 0)], NO_ROW)
    backend = np.where(root >= 0, _backend_range(trace)[np.maximum(root, 0)], NO_ROW)
    args = [kern, param]  # where the collective's own args are, best first

    def field(col, missing=MISSING_INT):
        return _first([_column(trace, col, r, missing) for r in args], missing)

    name_id = _first([field("collective_name", -1), _column(trace, "name", root, -1),
                      _column(trace, "name", kern, -1)], -1)
    names = trace.str(name_id)
    family = map_string_ids(name_id, trace.strings, collective_family, object, "")
    ranks_len = [map_string_ids(_column(trace, "pg_ranks", r, -1), trace.strings, _group_len, np.int64, -1)
                 for r in args]
    group = _first([field("group_size"), *ranks_len], MISSING_INT)
    in_bytes = _first([*(_msg_bytes(trace, r, "in_msg_nelems") for r in args), _range_bytes(trace, backend)], -1)
    barrier = family == "barrier"
    pg = trace.str(field("pg_name", -1))
    seq = field("seq")
    comms = _first([_comms_ids(trace, r) for r in args], MISSING_INT)
    return pd.DataFrame({
        "name": pd.Series(names, dtype=object).fillna("(unnamed)").to_numpy(object),
        "family": family,
        "pg_name": pd.Series(pg, dtype=object).fillna("").to_numpy(object),
        "group_size": np.where(group > 0, group, -1),
        "seq": np.where(seq >= 0, seq, -1),
        "bytes": np.where(barrier, 0, in_bytes),
        "out_bytes": np.where(barrier, 0, _first([_msg_bytes(trace, r, "out_msg_nelems") for r in args], -1)),
        "comms_id": comms,
    })


def _comms_ids(trace, rows: np.ndarray) -> np.ndarray:
    """Each row's "Comms Id" arg (issue 19: the id every rank gives the same collective), as
    the int64 holding its uint64 bits; MISSING_INT where the row is -1 or has none.  Read
    from the args text of these few rows (arg_values), never through a float: the id is
    64-bit."""
    from tb_profiler.trace.arg_values import _extract

    out = np.full(len(rows), MISSING_INT, dtype=np.int64)
    have = np.flatnonzero(np.asarray(rows) >= 0)
    if not len(have):
        return out
    text = pd.Series(_extract(trace, np.asarray(rows)[have], COMMS_ID, r'"?(\d{1,20})(?![\d.eE])'), dtype=object)
    text = text.str.lstrip("0").str.rjust(1, "0")
    fits = text.notna() & ((text.str.len() < 20) | ((text.str.len() == 20) & (text <= _U64_MAX)))
    ok = fits.to_numpy(bool)
    out[have[ok]] = text[fits].to_numpy(dtype=str).astype(np.uint64).view(np.int64)
    return out


def _records(rows, starts, ends, where: str, attrs: pd.DataFrame) -> pd.DataFrame:
    df = attrs.reset_index(drop=True)
    df.insert(0, "row", np.asarray(rows, dtype=np.int64))
    df["start"] = np.asarray(starts, dtype=np.int64)
    df["end"] = np.asarray(ends, dtype=np.int64)
    df["time_on"] = where
    return df


def _overlapping(dev_g, start_g, end_g, dev_o, start_o, end_o) -> np.ndarray:
    """For each loose kernel (o), the collective (g) on the same device that overlaps it in
    time: among those starting before it ends, the one reaching furthest; -1 if none."""
    out = np.full(len(dev_o), -1, dtype=np.int64)
    for d in np.unique(dev_o).tolist():  # one pass per device
        g = np.flatnonzero(dev_g == d)
        if not len(g):
            continue
        g = g[np.argsort(start_g[g], kind="stable")]
        reach = np.maximum.accumulate(end_g[g])
        furthest = np.maximum.accumulate(np.where(end_g[g] == reach, np.arange(len(g)), 0))
        o = np.flatnonzero(dev_o == d)
        i = np.searchsorted(start_g[g], end_o[o], side="left") - 1
        hit = (i >= 0) & (reach[np.maximum(i, 0)] > start_o[o])
        out[o[hit]] = g[furthest[i[hit]]]
    return out


def _span(key: np.ndarray, start: np.ndarray, end: np.ndarray):
    """(distinct keys, first position of each, key index per position, min start, max end)."""
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    lo = np.full(len(uniq), np.iinfo(np.int64).max)
    hi = np.full(len(uniq), np.iinfo(np.int64).min)
    np.minimum.at(lo, inv, start)
    np.maximum.at(hi, inv, end)
    return uniq, first, inv, lo, hi


@per_trace
def _device_records(trace) -> tuple[pd.DataFrame, np.ndarray]:
    """(one record per collective that ran kernels, the unattributed kernels' rows)."""
    ev = trace.events
    k = np.flatnonzero(comm_kernels(trace))
    ts, end, dev = ev["ts"][k], ev["ts"][k] + ev["dur"][k], trace.event_devices[k]
    roots = _comm_roots(trace)
    rt = launch(trace)[k]
    # The comm call around the launch; without the launch in the trace, the operator
    # that shares the kernel's External id (or one of its enclosing calls).
    root = nearest_ancestor(trace, rt, roots >= 0, include_self=False)
    no_rt = rt < 0
    root[no_rt] = nearest_ancestor(trace, launching_op(trace)[k[no_rt]], roots >= 0, include_self=True)
    root[root >= 0] = roots[root[root >= 0]]
    # A kernel with neither: its own collective when it carries the collective's args.
    key = np.where(root >= 0, root, np.where(ev["collective_name"][k] >= 0, k, NO_ROW))
    loose = np.flatnonzero(key < 0)
    if len(loose):
        placed = np.flatnonzero(key >= 0)
        uniq, first, _, lo, hi = _span(key[placed], ts[placed], end[placed])
        hit = _overlapping(dev[placed[first]], lo, hi, dev[loose], ts[loose], end[loose])
        key[loose[hit >= 0]] = uniq[hit[hit >= 0]]
    keep = key >= 0
    k, key, ts, end = k[keep], key[keep], ts[keep], end[keep]
    uniq, first, _, lo, hi = _span(key, ts, end)
    kern = k[first]
    own = np.where(ev["collective_name"][kern] >= 0, kern, NO_ROW)
    root_of = np.where(uniq == kern, NO_ROW, uniq)  # a key is a root row, or the kernel itself
    recs = _records(kern, lo, hi, "device", _describe(trace, root_of, own))
    return recs, np.flatnonzero(comm_kernels(trace))[~keep]


def _host_records(trace) -> pd.DataFrame:
    """The outermost host communication calls; when backend ranges (gloo:...) exist, only
    the roots that hold one (the enqueue-only c10d:: calls are not collectives)."""
    ev = trace.events
    roots = _comm_roots(trace)
    rows = np.flatnonzero(np.arange(len(roots)) == roots)
    backend = _backend_range(trace)
    if (backend >= 0).any():
        rows = rows[backend[rows] >= 0]
    attrs = _describe(trace, rows, np.full(len(rows), NO_ROW, dtype=np.int64))
    return _records(rows, ev["ts"][rows], ev["ts"][rows] + ev["dur"][rows], "host", attrs)


# -- group sizes and bandwidth ---------------------------------------------------------------

def _fallback_group_size(trace, pg_names: np.ndarray) -> np.ndarray:
    """n from distributedInfo for collectives whose args do not give it: the process
    group's pg_size in pg_config, else world_size for the default (or unnamed) group."""
    info = trace.distributed_info if isinstance(trace.distributed_info, dict) else {}
    sizes, default = {}, {""}
    for pg in info.get("pg_config") or []:  # one entry per process group
        if isinstance(pg, dict) and isinstance(pg.get("pg_size"), int):
            sizes[str(pg.get("pg_name"))] = pg["pg_size"]
            if pg.get("pg_desc") == "default_pg":
                default.add(str(pg.get("pg_name")))
    world = info.get("world_size")
    if isinstance(world, int) and world > 0:
        sizes.update({d: sizes.get(d, world) for d in default})
    return np.array([sizes.get(p, -1) for p in pg_names.tolist()], dtype=np.int64)


def _bandwidth(recs: pd.DataFrame) -> pd.DataFrame:
    """size_bytes (nccl-tests' S), algbw and busbw (GB/s) of each call."""
    fam = recs["family"].to_numpy(object)
    n = recs["group_size"].to_numpy(np.float64)
    n[n <= 0] = np.nan
    inp = recs["bytes"].to_numpy(np.float64)
    out = recs["out_bytes"].to_numpy(np.float64)
    inp[inp < 0], out[out < 0] = np.nan, np.nan
    gathers, scatters = np.isin(fam, _GATHERS), np.isin(fam, _SCATTERS)
    size = np.select([gathers, scatters, fam == "barrier", fam == ""],
                     [np.where(np.isnan(n), out, n * inp), np.where(np.isnan(n), inp, n * out), np.nan, np.nan], inp)
    # gathers and scatters without n: S is the output / input message when recorded
    dur = (recs["end"] - recs["start"]).to_numpy(np.float64)
    algbw = np.where(dur > 0, size / np.where(dur > 0, dur, 1.0), np.nan)  # bytes per ns = GB/s
    factor = bus_factor(fam, n)
    return recs.assign(size_bytes=np.where(np.isnan(size), -1, size).astype(np.int64), algbw_gbps=algbw,
                       busbw_gbps=algbw * factor)


@per_trace
def collectives(trace) -> pd.DataFrame:
    """This trace's collectives, by start (RECORD_COLUMNS): row (its first kernel, or its
    host call), name, family, pg_name ("" when the trace has none), group_size, seq,
    start, end (ns), time_on ("device" or "host"), bytes (this rank's input message),
    out_bytes, size_bytes (nccl-tests' S), algbw_gbps, busbw_gbps, comms_id (Kineto's "Comms
    Id", its uint64 bits as int64).  Unknown sizes, group sizes, sequence numbers and comms
    ids are null (pandas NA), unknown bandwidths NaN."""
    recs = _device_records(trace)[0] if comm_kernels(trace).any() else _host_records(trace)
    gs = recs["group_size"].to_numpy(np.int64)
    recs["group_size"] = np.where(gs > 0, gs, _fallback_group_size(trace, recs["pg_name"].to_numpy(object)))
    recs = _bandwidth(recs).sort_values(["start", "row"], kind="stable").reset_index(drop=True)
    for c in _NULLABLE:
        recs[c] = recs[c].astype("Int64").mask(recs[c] < 0)
    recs["comms_id"] = recs["comms_id"].astype("Int64").mask(recs["comms_id"] == MISSING_INT)
    return recs[RECORD_COLUMNS]


@per_trace
def collective_notes(trace) -> list[str]:
    """Why some of this trace's communication is not in its collectives, or has no
    bandwidth: unattributed kernels, unknown group sizes."""
    notes = []
    if comm_kernels(trace).any():
        loose = _device_records(trace)[1]
        if len(loose):
            ev = trace.events
            n = len(loose)
            notes.append(f"{n} communication kernel{'s' if n > 1 else ''} ({fmt_ns(ev['dur'][loose].sum())}) "
                         "with no launch in the trace (cut off by the profiling window?) and overlapping no "
                         "collective: counted as communication time, in no collective")
    recs = collectives(trace)
    unknown = recs["group_size"].isna() & recs["family"].isin(_NEEDS_N)
    if unknown.any():
        names = ", ".join(sorted(set(recs.loc[unknown, "name"])))
        notes.append(f"group size unknown for {int(unknown.sum())} collective calls ({names}): no "
                     "'Group size' or 'Process Group Ranks' in the trace and no distributedInfo for their "
                     "process group, so their bus bandwidth is left empty")
    return notes
