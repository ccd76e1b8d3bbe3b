"""Memory-copy bandwidth: achieved GB/s per copy, per direction, and over time.

Why per direction and host memory kind: a host-to-device copy from pageable memory goes
through a staging buffer and reaches a fraction of what the same copy from pinned memory
does (``pin_memory=True`` in the DataLoader is the usual fix), and a device-to-device or
peer-to-peer copy is bound by other links; one average over all copies hides all of that.

What a copy is: ``trace.roles`` (Role.MEMCPY): ``gpu_memcpy`` events, and the copies a
backend records under its compute category, told by name (``roles.NAMED_COPIES``: MTIA's
``mtia_ccp_events`` named ``dma_request``).

Direction and memory kinds come from the copy's name, as each backend writes it: CUDA's
``Memcpy HtoD (Pageable -> Device)``, ``Memcpy PtoP (Device -> Device)``, ROCm's
``CopyHostToDevice``; a name that says neither is "other".  A named copy's direction is
its direction arg instead (MTIA: ``HOST_TO_DEVICE``, ``DEVICE_TO_HOST``), read the same way.
Bytes are the event's ``bytes`` arg (a named copy: its size arg, MTIA ``size``).

GB/s is bytes per ns (1 B/ns = 1 GB/s).  Where the event carries Kineto's own
``memory bandwidth (GB/s)`` arg, that is the copy's figure: Kineto (libkineto's CUPTI,
rocprof and XPUPTI activities) computes it as bytes over the duration in exact ns, before
the trace writes ``dur`` in us (whole us in older traces: a 1.248 us copy written as
``"dur": 1`` would read 25 % fast from bytes / dur; 8.8 % median error over the copies of
HTA's A100 trace ``negative_queue_length_values_check``).  Elsewhere it is bytes / dur.
The same exact time, bytes / GB/s, is the copy's share of ``time_ns`` in the per-direction
figures, so one copy alone gives the same GB/s there as in its row.

Over time, each copy's bytes are spread evenly over its duration as written, so a bin's
figure is the bytes moved inside it over its width: the throughput a link actually
carried, not a mean of per-copy rates.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tb_profiler.analysis.links import launching_op
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.steps import step_numbers, valid_times
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.arg_values import arg_numbers, arg_strings
from tb_profiler.trace.roles import NAMED_COPIES, Role, named_copy_index

__all__ = ["COPY_COLUMNS", "DIRECTIONS", "copy_direction", "memcpy_bandwidth"]

COPY_COLUMNS = ["name", "direction", "src", "dst", "device", "stream", "start_ns", "dur_ns", "bytes", "gbps",
                "operator", "step"]
DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "H2H", "other")
_CUDA = re.compile(r"\bMemcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH|HtoA|AtoH|DtoA|AtoD|AtoA)\b(?:\s*\((\w+)\s*->\s*(\w+)\))?")
_CUDA_DIR = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H", "HtoA": "H2D",
             "AtoH": "D2H", "DtoA": "D2D", "AtoD": "D2D", "AtoA": "D2D"}
_WORDS = re.compile(r"(Host|Device|Peer)_?To_?(Host|Device|Peer)", re.IGNORECASE)
_WORD_DIR = {("host", "device"): "H2D", ("device", "host"): "D2H", ("device", "device"): "D2D",
             ("peer", "peer"): "P2P", ("device", "peer"): "P2P", ("peer", "device"): "P2P", ("host", "host"): "H2H"}


def copy_direction(name: str) -> tuple[str, str | None, str | None]:
    """(direction, source memory kind, destination memory kind) a copy's name (or a named
    copy's direction arg: HOST_TO_DEVICE) says."""
    m = _CUDA.search(name or "")
    if m:
        return _CUDA_DIR[m.group(1)], m.group(2), m.group(3)
    m = _WORDS.search(name or "")
    if m:
        return _WORD_DIR.get((m.group(1).lower(), m.group(2).lower()), "other"), None, None
    return "other", None, None


def memcpy_bandwidth(trace, *, bins: int = 200) -> dict:
    """Every device copy with its achieved bandwidth, the figures per direction and host
    memory kind, and the bandwidth per direction over time.

    Returns {"copies": COPY_COLUMNS, one row per copy in time order (bytes -1 and gbps NaN
    where the trace has no size; src/dst: memory kinds such as Pageable, Pinned, Device,
    None when the name does not say); "directions": per direction and source/destination
    kind: copies, bytes, time_ns, gbps (all bytes over all time), gbps_median, gbps_min,
    gbps_max of the single copies; "over_time": {"edges": bin edges (ns), direction:
    [GB/s per bin]}; "notes"}.
    """
    if bins < 1:
        raise ValueError(f"bins {bins}: at least 1")
    ev = trace.events
    rows = np.flatnonzero((trace.roles == Role.MEMCPY) & valid_times(trace))
    if not len(rows):
        return _empty(["no device memory copies in this trace"])
    names = trace.str(ev["name"][rows])
    size, said = _sizes(trace)
    size, said = size[rows], said[rows]
    says = np.where(said != None, said, names)  # noqa: E711 (elementwise)
    parsed = {n: copy_direction(n) for n in set(says.tolist())}  # a few distinct names
    dur = ev["dur"][rows].astype(np.int64)
    arg = ev["bandwidth"][rows].astype(np.float64)
    exact = (size > 0) & np.isfinite(arg) & (arg > 0)   # Kineto's own figure
    known = (size >= 0) & (dur > 0)
    gbps = np.full(len(rows), np.nan)
    gbps[known] = size[known] / dur[known]
    gbps[exact] = arg[exact]
    op = launching_op(trace)[rows]
    copies = pd.DataFrame({
        "name": names, "direction": [parsed[n][0] for n in says], "src": [parsed[n][1] for n in says],
        "dst": [parsed[n][2] for n in says], "device": trace.event_devices[rows].astype(np.int64),
        "stream": trace.event_streams[rows], "start_ns": ev["ts"][rows].astype(np.int64), "dur_ns": dur,
        "bytes": size, "gbps": gbps,
        "operator": np.where(op >= 0, trace.str(ev["name"][np.maximum(op, 0)]), None),
        "step": step_numbers(trace, rows)})
    notes = []
    if not (known | exact).all():
        notes.append(f"{int((~(known | exact)).sum())} of {len(rows)} copies have no size or no duration: "
                     "no bandwidth for them")
    if exact.any():
        notes.append(f"{int(exact.sum())} of {len(rows)} copies carry Kineto's 'memory bandwidth (GB/s)' (bytes "
                     "over their exact duration): their GB/s is that figure")
    time_ns = np.where(exact, size / np.where(exact, arg, 1.0), dur)  # exact ns where Kineto gave the figure
    return {"copies": copies, "directions": _directions(copies.assign(_time=time_ns)),
            "over_time": _over_time(copies, bins), "notes": notes}


@per_trace
def _sizes(trace) -> tuple[np.ndarray, np.ndarray]:
    """Per event: a copy's bytes (int64, -1 unknown) and, for a named copy
    (roles.NAMED_COPIES), the direction its args say (object, None elsewhere)."""
    ev = trace.events
    size = ev["copy_bytes"].astype(np.int64)
    size = np.where(size == MISSING_INT, -1, size)
    said = np.full(len(size), None, dtype=object)
    which = named_copy_index(ev["kind"], ev["name"], trace.strings)
    for i, rule in enumerate(NAMED_COPIES):  # a loop over a few rules, not events
        rows = np.flatnonzero(which == i)
        if len(rows):
            b = arg_numbers(trace, rows, rule.bytes_arg)
            size[rows] = np.where(np.isfinite(b) & (b >= 0), np.nan_to_num(b), -1).astype(np.int64)
            said[rows] = arg_strings(trace, rows, rule.direction_arg)
    return size, said


def _directions(copies: pd.DataFrame) -> pd.DataFrame:
    if "_time" not in copies:
        copies = copies.assign(_time=copies["dur_ns"])
    c = copies[copies["bytes"] >= 0].assign(src=lambda d: d["src"].fillna("?"), dst=lambda d: d["dst"].fillna("?"))
    if c.empty:
        return pd.DataFrame(columns=["direction", "src", "dst", "copies", "bytes", "time_ns", "gbps", "gbps_median",
                                     "gbps_min", "gbps_max"])
    out = (c.groupby(["direction", "src", "dst"], sort=False)
           .agg(copies=("bytes", "size"), bytes=("bytes", "sum"), time_ns=("_time", "sum"),
                gbps_median=("gbps", "median"), gbps_min=("gbps", "min"), gbps_max=("gbps", "max")).reset_index())
    out.insert(6, "gbps", np.where(out["time_ns"] > 0, out["bytes"] / out["time_ns"].where(out["time_ns"] > 0, 1),
                                   np.nan))
    order = {d: i for i, d in enumerate(DIRECTIONS)}
    return out.sort_values(["direction", "bytes"], key=lambda s: s.map(order) if s.name == "direction" else -s,
                           kind="stable").reset_index(drop=True)


def _over_time(copies: pd.DataFrame, bins: int) -> dict:
    """Bytes each direction moved inside each bin over the bin's width (GB/s), with every
    copy's bytes spread evenly over its duration: F(t), the bytes moved by t, is piecewise
    linear, so its values at the edges come from sorted starts and ends and their cumsums.
    Times are taken relative to the first start before going to float64: absolute ns since
    the epoch (~1.7e18) are only exact to 256 ns there."""
    c = copies[copies["bytes"] >= 0]
    lo, hi = int(copies["start_ns"].min()), int((copies["start_ns"] + copies["dur_ns"]).max())
    rel = np.linspace(0, max(hi - lo, bins), bins + 1).round().astype(np.int64)
    edges = lo + rel
    width = np.diff(rel).astype(np.float64)
    out: dict = {"edges": edges.tolist()}
    for direction, d in c.groupby("direction", sort=False):
        s = (d["start_ns"].to_numpy(np.int64) - lo).astype(np.float64)
        e = s + d["dur_ns"].to_numpy(np.float64)
        b = d["bytes"].to_numpy(np.float64)
        moved = _moved_by(rel.astype(np.float64), s, e, b)
        out[direction] = (np.diff(moved) / np.where(width > 0, width, 1)).tolist()
    return out


def _moved_by(t: np.ndarray, s: np.ndarray, e: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ b_i · clip((t - s_i) / (e_i - s_i), 0, 1) at each t (a zero-length copy moves its
    bytes at its start)."""
    flat = e <= s
    rate = np.where(flat, 0.0, b / np.where(flat, 1.0, e - s))

    def ramp(points, weights):  # Σ over points <= t of w·(t - p)
        order = np.argsort(points)
        p, w = points[order], weights[order]
        cw, cwp = np.concatenate([[0.0], np.cumsum(w)]), np.concatenate([[0.0], np.cumsum(w * p)])
        k = np.searchsorted(p, t, side="right")
        return t * cw[k] - cwp[k]

    steps = np.zeros(len(t))
    if flat.any():
        fs, fb = np.sort(s[flat]), b[flat][np.argsort(s[flat])]
        steps = np.concatenate([[0.0], np.cumsum(fb)])[np.searchsorted(fs, t, side="right")]
    return ramp(s, rate) - ramp(e, rate) + steps


def _empty(notes: list[str]) -> dict:
    copies = pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "direction", "src", "dst", "operator")
                                        else np.float64 if c == "gbps" else np.int64) for c in COPY_COLUMNS})
    return {"copies": copies, "directions": _directions(copies), "over_time": {"edges": []}, "notes": notes}
