"""torch 2.13's trace validator rules (``torch.profiler._trace_validator``), over a Trace's columns.

Why a second implementation: torch's rules loop over every event dict of a JSON file loaded
whole (seconds for a 30 MB trace, gigabytes for a big one); the trust report runs on every
view, so here each rule is a few numpy/pandas passes over the columns the decoder already
made.  The count of each rule is the number of ``Violation`` objects torch's rule returns
for the same file (``tests/test_integrity.py`` compares them on every trace of tests/data
and on fixtures breaking each rule); the rule names are torch's function names.

What torch's rules read, and how it is matched here:

- ``ev.get("cat") == "kernel"`` etc. compare the category *as written*: the string ids of
  exactly that text, never our canonical ``Kind`` (which folds old spellings in).
- ``float(ev["ts"])``: a ts in µs as a float64.  The decoder keeps exact int ns; ``us``
  below rounds ns / 1000 to float64 correctly (extended precision; exact for the
  3-decimal ts Kineto writes), so two events whose µs texts round to the same float tie
  here as they do in torch, and ``ts + dur`` is the same float64 sum.
- ``args.get("External id")``: the exact key.  The decoder also reads PyTorch 1.8's
  ``"external id"`` into that column; rows whose args hold that spelling are read again
  for the exact key (``rows_with_key`` finds them in the args text, usually none).
- ``cuda_sync_kind`` / ``wait_on_cuda_event_record_corr_id`` are no decoder columns: the
  rows holding the key are found in the args text, and their values read with
  ``trace.arg_values`` (any category, as torch's rules look at every complete event).
- ``args.get("Sequence number") or args.get("seq_num")``: a sequence number of 0 falls
  through to ``seq_num`` (and without it the event is skipped), as in torch.

Known differences (inputs torch itself fails on or no profiler writes): events without a
usable ts (torch reads a missing ts as 0 and raises on text; the Trace drops them, see
the report's ``dropped_events``), ids written as fractions, a key written twice in one
args object, ts with more than 3 decimals, and numbers written as text compared against
numbers for the stream/device keys.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.shared import name_mask
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.arg_values import WINDOW, _texts, arg_numbers, arg_strings

__all__ = ["TORCH_RULES", "MAX_ROWS", "run_torch_rules", "rows_with_key", "us"]

TORCH_RULES = ("_check_gpu_kernel_causality", "_check_stream_wait_corr_id_populated", "_check_stream_sync_overlap",
               "_check_stream_wait_corr_id_in_past", "_check_nccl_metadata", "_check_backward_seq_id_uniqueness")
MAX_ROWS = 1000  # finding rows kept per rule (the count is always the full count)
_EVENT_RECORD = ("cudaEventRecord", "cudaEventRecord_ptsz", "cudaEventRecordWithFlags",
                 "cudaEventRecordWithFlags_ptsz")
_NCCL_FIELDS = ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size")
_BACKWARD = "autograd::engine::evaluate_function:"
FRAME_COLUMNS = ["rule", "count", "detail", "event", "ts_ns", "share"]


# -- helpers -------------------------------------------------------------------------------
def us(ns: np.ndarray) -> np.ndarray:
    """float(ts text in µs) for int ns: ns / 1000 rounded once to float64 (via long double)."""
    ns = np.asarray(ns, dtype=np.int64)
    q, r = np.divmod(ns, 1000)
    return (q.astype(np.longdouble) + r.astype(np.longdouble) / 1000).astype(np.float64)


def _ids(trace, texts) -> np.ndarray:
    """String ids whose text is exactly one of ``texts`` (a pass over the string table)."""
    return np.flatnonzero(np.isin(trace.strings, list(texts)))


def _is(trace, col: str, texts) -> np.ndarray:
    return np.isin(trace.events[col], _ids(trace, texts))


def rows_with_key(trace, key: str) -> np.ndarray:
    """Event rows whose args text holds ``"key"`` (sorted, unique): one C-level split of the
    args store per window, so only the events holding the key are looked at afterwards."""
    ev = trace.events
    blob, pat = trace.args_blob, ('"' + key + '"').encode()
    n = len(blob) if blob is not None else 0
    if not n or not len(ev):
        return np.zeros(0, np.int64)
    found = []
    for lo in range(0, n, WINDOW):  # a loop over 64 MB windows, not events
        chunk = bytes(blob[lo:min(n, lo + WINDOW + len(pat) - 1)])
        pieces = chunk.split(pat)
        if len(pieces) > 1:
            lens = np.fromiter(map(len, pieces[:-1]), np.int64, len(pieces) - 1) + len(pat)
            found.append(lo + np.cumsum(lens) - len(pat))
    if not found:
        return np.zeros(0, np.int64)
    pos = np.unique(np.concatenate(found))
    has = np.flatnonzero(ev["args_len"] > 0)
    off = ev["args_off"][has].astype(np.int64)
    order = np.argsort(off, kind="stable")
    off, has = off[order], has[order]
    at = np.searchsorted(off, pos, side="right") - 1
    ok = at >= 0
    at, pos = at[ok], pos[ok]
    inside = pos + len(pat) <= off[at] + ev["args_len"][has[at]]
    return np.unique(has[at[inside]])


def exact_external_id(trace) -> np.ndarray:
    """``args.get("External id")`` per event as int64 (MISSING_INT where absent): the
    decoder's column without the values it read from the 1.8 spelling "external id"."""
    ext = trace.events["external_id"]
    old = rows_with_key(trace, "external id")
    if not len(old):
        return ext
    ext = ext.copy()
    v = arg_numbers(trace, old, "External id")
    ext[old] = np.where(np.isnan(v), MISSING_INT, np.trunc(np.nan_to_num(v)).astype(np.int64))
    return ext


def _frame(rule: str, rows, ts_ns, fmt: str = "", *cols) -> pd.DataFrame:
    """The first MAX_ROWS violations of one rule as finding rows (count 1 each); detail is
    ``fmt`` filled from ``cols`` (arrays, one value per violation), for those rows only."""
    rows, ts_ns = np.asarray(rows, np.int64)[:MAX_ROWS], np.asarray(ts_ns, np.int64)[:MAX_ROWS]
    cut = [np.asarray(c, dtype=object)[:MAX_ROWS].tolist() for c in cols]
    detail = [fmt.format(*vals) for vals in zip(*cut)] if cut else [fmt] * len(rows)  # at most MAX_ROWS
    return pd.DataFrame({"rule": rule, "count": np.ones(len(rows), np.int64), "detail": pd.Series(detail, dtype=object),
                         "event": rows, "ts_ns": ts_ns, "share": np.nan}, columns=FRAME_COLUMNS)


def _sync_kinds(trace) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cuda_sync_kind) of the events whose args hold the key."""
    rows = rows_with_key(trace, "cuda_sync_kind")
    return rows, arg_strings(trace, rows, "cuda_sync_kind")


# -- the rules -----------------------------------------------------------------------------
def gpu_kernel_causality(trace, ext: np.ndarray) -> tuple[int, pd.DataFrame]:
    """Kernels starting before the cudaLaunchKernel of their External id (earliest of each)."""
    ev = trace.events
    has = ext != MISSING_INT
    launch = np.flatnonzero(has & _is(trace, "cat", ["cuda_runtime"]) & _is(trace, "name", ["cudaLaunchKernel"]))
    kern = np.flatnonzero(has & _is(trace, "cat", ["kernel"]))
    if not len(launch) or not len(kern):
        return 0, _frame("", [], [], [])
    first_launch = pd.Series(ev["ts"][launch], index=ext[launch]).groupby(level=0).min()
    k = pd.DataFrame({"ext": ext[kern], "ts": ev["ts"][kern], "row": kern}).sort_values(["ext", "ts"], kind="stable")
    k = k.drop_duplicates("ext")
    l_ts = first_launch.reindex(k["ext"].to_numpy()).to_numpy()
    both = ~np.isnan(l_ts)
    k, l_ts = k[both], l_ts[both].astype(np.int64)
    bad = us(k["ts"].to_numpy()) < us(l_ts)
    k, l_ts = k[bad], l_ts[bad]
    skew = us(l_ts) - us(k["ts"].to_numpy())
    rows = k["row"].to_numpy()[:MAX_ROWS]
    return int(bad.sum()), _frame("_check_gpu_kernel_causality", k["row"], k["ts"],
                                  "GPU kernel '{}' (External id={}) starts {:.1f}us before its cudaLaunchKernel",
                                  trace.str(ev["name"][rows]), k["ext"].to_numpy(), skew)


def stream_wait_corr_id_populated(trace, sync_rows, kinds) -> tuple[int, pd.DataFrame]:
    """Stream Wait Event / Event Sync without a wait_on_cuda_event_record_corr_id >= 0."""
    sel = np.isin(kinds.astype(object), ["Stream Wait Event", "Event Sync"])
    rows = sync_rows[sel]
    v = arg_numbers(trace, rows, "wait_on_cuda_event_record_corr_id")
    bad = np.isnan(v) | (np.trunc(np.nan_to_num(v)) < 0)
    rows = rows[bad]
    ts = trace.events["ts"][rows]
    return int(bad.sum()), _frame("_check_stream_wait_corr_id_populated", rows, ts,
                                  "'{}' event at ts={:.1f}us has no valid wait_on_cuda_event_record_corr_id",
                                  kinds[sel][bad], us(ts))


def stream_sync_overlap(trace, sync_rows, kinds) -> tuple[int, pd.DataFrame]:
    """Pairs (Stream Sync, kernel on its (device, stream)) with kernel.ts < sync.ts < kernel.end."""
    ev = trace.events
    s = sync_rows[(kinds.astype(object) == "Stream Sync") & _is(trace, "cat", ["cuda_sync"])[sync_rows]]
    kern = np.flatnonzero(_is(trace, "cat", ["kernel"]))
    if not len(s) or not len(kern):
        return 0, _frame("", [], [], [])
    k_ts = us(ev["ts"][kern])
    k_end = k_ts + us(ev["dur"][kern])
    live = k_end > k_ts  # a kernel ending at or before its start overlaps nothing
    kern, k_ts, k_end = kern[live], k_ts[live], k_end[live]
    s_ts = us(ev["ts"][s])
    keys = pd.MultiIndex.from_arrays([np.r_[ev["device"][kern], ev["device"][s]], np.r_[ev["stream"][kern], ev["stream"][s]]])
    group = pd.factorize(keys)[0].astype(np.int64)
    gk, gs = group[:len(kern)], group[len(kern):]
    rank = np.unique(np.r_[k_ts, k_end, s_ts], return_inverse=True)[1].astype(np.int64)
    span = int(rank.max()) + 2
    rk, re_, rs = rank[:len(kern)], rank[len(kern):2 * len(kern)], rank[2 * len(kern):]
    starts = np.sort(gk * span + rk)
    ends = np.sort(gk * span + re_)
    q = gs * span + rs
    # kernels of the sync's stream with ts < sync.ts, less those with end <= sync.ts
    per = (np.searchsorted(starts, q, "left") - np.searchsorted(starts, gs * span, "left")
           - (np.searchsorted(ends, q, "right") - np.searchsorted(ends, gs * span, "left")))
    hit = per > 0
    frame = _frame("_check_stream_sync_overlap", s[hit], ev["ts"][s[hit]],
                   "StreamSynchronize at ts={:.1f}us while {} kernel(s) on its stream still run", s_ts[hit], per[hit])
    frame["count"] = per[hit][:MAX_ROWS]
    return int(per.sum()), frame


def stream_wait_corr_id_in_past(trace, ext, sync_rows, kinds) -> tuple[int, pd.DataFrame]:
    """Stream Wait Events whose wait_on_cuda_event_record_corr_id names no cudaEventRecord
    (by External id or correlation) at or before them."""
    ev = trace.events
    rec = np.flatnonzero(_is(trace, "cat", ["cuda_runtime", "cuda_driver"]) & _is(trace, "name", _EVENT_RECORD))
    ids = np.r_[ext[rec], ev["correlation"][rec]]
    ts = np.r_[ev["ts"][rec], ev["ts"][rec]]
    ok = ids != MISSING_INT
    first = pd.Series(ts[ok], index=ids[ok]).groupby(level=0).min()
    waits = sync_rows[kinds.astype(object) == "Stream Wait Event"]
    v = arg_numbers(trace, waits, "wait_on_cuda_event_record_corr_id")
    keep = ~np.isnan(v) & (np.trunc(np.nan_to_num(v)) >= 0)
    waits, ref = waits[keep], np.trunc(v[keep]).astype(np.int64)
    rec_ts = first.reindex(ref).to_numpy() if len(first) else np.full(len(ref), np.nan)
    missing = np.isnan(rec_ts)
    w_us = us(ev["ts"][waits])
    r_us = us(np.where(missing, 0, rec_ts).astype(np.int64))
    bad = missing | (r_us > w_us)
    what = np.where(missing[bad], "no matching cudaEventRecord in trace", "a cudaEventRecord in the future")
    return int(bad.sum()), _frame("_check_stream_wait_corr_id_in_past", waits[bad], ev["ts"][waits[bad]],
                                  "Stream Wait Event at ts={:.1f}us references corr_id={}: {}", w_us[bad], ref[bad], what)


def nccl_metadata(trace) -> tuple[int, pd.DataFrame]:
    """record_param_comms events missing any of torch's five collective fields."""
    rows = np.flatnonzero(_is(trace, "name", ["record_param_comms"]))
    if not len(rows):
        return 0, _frame("", [], [], [])
    texts = pd.Series(_texts(trace, rows), dtype=object)
    missing = pd.Series([""] * len(rows), dtype=object)
    for field in _NCCL_FIELDS:  # a loop over five keys
        lacks = ~texts.str.contains(r'(?<!\\)"' + field + r'"\s*:', regex=True).fillna(False).to_numpy(bool)
        missing = missing.where(~lacks, missing + np.where(missing == "", "", ", ") + field)
    bad = (missing != "").to_numpy()
    ts = trace.events["ts"][rows[bad]]
    return int(bad.sum()), _frame("_check_nccl_metadata", rows[bad], ts, "'record_param_comms' at ts={:.1f}us "
                                  "missing metadata: {}", us(ts), missing[bad].to_numpy())


def backward_seq_id_uniqueness(trace) -> tuple[int, pd.DataFrame]:
    """Sequence numbers shared by more than one distinct backward op name."""
    ev = trace.events
    rows = np.flatnonzero(name_mask(trace, lambda names: pd.Series(names, dtype=object).astype(str).str.contains(
        _BACKWARD, regex=False).to_numpy(bool)))
    if not len(rows):
        return 0, _frame("", [], [], [])
    seq = ev["seq_num"][rows].astype(np.float64)
    seq[(ev["seq_num"][rows] == MISSING_INT) | (ev["seq_num"][rows] == 0)] = np.nan
    fall = np.flatnonzero(np.isnan(seq))
    if len(fall) and len(rows_with_key(trace, "seq_num")):
        seq[fall] = np.trunc(arg_numbers(trace, rows[fall], "seq_num"))
    keep = ~np.isnan(seq)
    ids = np.unique(ev["name"][rows])
    op_of = dict(zip(ids.tolist(), (str(n).split(":", 1)[-1].strip() for n in trace.strings[ids])))  # per distinct name
    df = pd.DataFrame({"seq": seq[keep].astype(np.int64), "op": pd.Series(ev["name"][rows[keep]]).map(op_of).to_numpy(),
                       "row": rows[keep]})
    df = df.drop_duplicates(["seq", "op"])
    n_ops = df.groupby("seq", sort=False)["op"].transform("size")
    shared = df[n_ops > 1]
    first = shared.drop_duplicates("seq")
    ops = shared.groupby("seq", sort=False)["op"].agg(lambda s: ", ".join(s.iloc[:5]))
    return int(len(first)), _frame("_check_backward_seq_id_uniqueness", first["row"], ev["ts"][first["row"].to_numpy()],
                                   "Sequence number {} shared by backward ops: {}", first["seq"].to_numpy(),
                                   first["seq"].map(ops).to_numpy())


def run_torch_rules(trace) -> tuple[dict[str, int], pd.DataFrame]:
    """({torch rule name: violations}, the first MAX_ROWS violations of each as finding rows)."""
    ext = exact_external_id(trace)
    sync_rows, kinds = _sync_kinds(trace)
    results = {
        "_check_gpu_kernel_causality": gpu_kernel_causality(trace, ext),
        "_check_stream_wait_corr_id_populated": stream_wait_corr_id_populated(trace, sync_rows, kinds),
        "_check_stream_sync_overlap": stream_sync_overlap(trace, sync_rows, kinds),
        "_check_stream_wait_corr_id_in_past": stream_wait_corr_id_in_past(trace, ext, sync_rows, kinds),
        "_check_nccl_metadata": nccl_metadata(trace),
        "_check_backward_seq_id_uniqueness": backward_seq_id_uniqueness(trace),
    }
    frames = [f for _, f in results.values() if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else _frame("", [], [], [])
    return {rule: count for rule, (count, _) in results.items()}, frame
