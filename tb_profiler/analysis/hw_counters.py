"""Device hardware counters: their series, and each counter's average over each kernel.

Why: Kineto now records device counters beside the kernels (issue 19): CUPTI's PM
sampling as ``hardware_counters`` (libkineto ``ChromeTraceLogger::handleCounterEvent``:
one ``ph: "C"`` event per counter and sample, ``pid: "GPU <device> Counters"``, the
counter as the event's name, ``args: {"": value}``) and MTIA's as ``mtia_counters`` (one
event per sample, ``pid`` the device id, every counter a member of ``args``).  A counter
is a step function: a sample's value holds until the next sample of the same series (as
Perfetto draws it), and the series says nothing before its first sample or after its last.

A kernel's average of a counter is the time-weighted average of that step function over
the part of the kernel's interval the series covers; per kernel name, the average over
all its calls weighted by the time covered (``kernel_counters``).  Counters apply to the
kernels of their device only (the device number in the pid, or the pid itself).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tb_profiler.analysis.memo import per_trace
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.roles import Role

COUNTER_CATEGORIES = ("hardware_counters", "mtia_counters")
MAX_SERIES = 256          # series kept per trace: a hostile trace may write millions of names
MAX_KEYS_PER_EVENT = 64   # members of one multi-counter sample read at most
_DEVICE = re.compile(r"(\d+)")
_MEMBER = r'"((?:[^"\\]|\\.){0,200})"\s*:\s*(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)'


@dataclass(frozen=True)
class CounterSeries:
    """One counter of one device: sample times (ns, ascending) and values."""

    category: str          # hardware_counters | mtia_counters
    device: int | None     # the device its pid names (None: not told)
    track: str             # the pid as the trace writes it ("GPU 0 Counters", "17")
    counter: str           # "sm__throughput" / "MTIA Counters: hbm_read"
    ts: np.ndarray
    values: np.ndarray


def _device_of(track: str) -> int | None:
    """The device a counter track names: the first number of "GPU 0 Counters", or the
    numeric pid itself; None when it names none."""
    m = _DEVICE.search(track)
    return int(m.group(1)) if m else None


@per_trace
def counter_series(trace) -> list[CounterSeries]:
    """Every hardware/MTIA counter series of the trace (at most MAX_SERIES), sorted by track
    and counter name."""
    c = trace.counters
    if not len(c):
        return []
    cats = trace.str(c["cat"])
    rows = np.flatnonzero(np.isin(cats.astype(object), COUNTER_CATEGORIES))
    if not len(rows):
        return []
    pid_str = c["pid_str"][rows]
    track = np.where(pid_str >= 0, trace.str(np.maximum(pid_str, 0)), c["pid"][rows].astype(str)).astype(object)
    name = trace.str(c["name"][rows]).astype(object)
    frame = pd.DataFrame({"row": rows, "cat": cats[rows], "track": track, "name": name,
                          "ts": c["ts"][rows]})
    samples = _samples(trace, frame)
    out = []
    for (cat, trk, counter), g in samples.groupby(["cat", "track", "counter"], sort=True):  # a loop over series
        g = g.sort_values("ts", kind="stable").drop_duplicates("ts", keep="last")
        g = g[np.isfinite(g["value"].to_numpy(np.float64))]
        if len(g):
            out.append(CounterSeries(str(cat), _device_of(str(trk)), str(trk), str(counter),
                                     g["ts"].to_numpy(np.int64), g["value"].to_numpy(np.float64)))
        if len(out) >= MAX_SERIES:
            break
    return out


def _samples(trace, frame: pd.DataFrame) -> pd.DataFrame:
    """(cat, track, pid, counter, ts, value) per sample: a hardware counter's value is its
    single member (the counters table's first numeric member); an MTIA sample gives one row
    per numeric member of its args, named "<event name>: <member>"."""
    c = trace.counters
    single = frame["cat"].to_numpy() != "mtia_counters"
    hw = frame[single].assign(counter=frame["name"][single], value=c["value"][frame["row"][single].to_numpy()])
    multi = frame[~single]
    if not len(multi):
        return hw
    texts = pd.Series(_args_texts(trace, multi["row"].to_numpy()), index=multi.index, dtype=object)
    found = texts.str.extractall(_MEMBER)
    if not len(found):
        return hw
    found = found[found.index.get_level_values(1) < MAX_KEYS_PER_EVENT]
    src = multi.loc[found.index.get_level_values(0)]
    mt = src.assign(counter=(src["name"].to_numpy() + ": " + found[0].to_numpy()).astype(object),
                    value=pd.to_numeric(found[1], errors="coerce").to_numpy())
    return pd.concat([hw, mt.reset_index(drop=True)], ignore_index=True)


def _args_texts(trace, rows: np.ndarray) -> list[str]:
    """The args text of counter rows (arg_values reads the events table; counters share its
    args store)."""
    from tb_profiler.trace.arg_values import _texts

    class _View:  # arg_values._texts reads .events and .args_blob
        events = trace.counters
        args_blob = trace.args_blob

    return _texts(_View, rows)


def step_integral(s: CounterSeries, t: np.ndarray) -> np.ndarray:
    """The integral of the series' step function from its first sample to each time of t
    (clipped to [first, last] sample)."""
    ts, v = s.ts, s.values
    if len(ts) < 2:
        return np.zeros(len(t))
    seg = np.diff(ts).astype(np.float64) * v[:-1]
    cum = np.r_[0.0, np.cumsum(seg)]
    tc = np.clip(t, ts[0], ts[-1])
    i = np.clip(np.searchsorted(ts, tc, side="right") - 1, 0, len(ts) - 2)
    return cum[i] + (tc - ts[i]) * v[i]


def interval_means(s: CounterSeries, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(time-weighted mean over [start, end) ∩ the series' span, covered ns) per interval;
    an empty overlap inside the span (a zero-length interval) takes the value at start; NaN
    outside the span."""
    start = np.asarray(start, np.int64)
    end = np.maximum(np.asarray(end, np.int64), start)
    if not len(s.ts):
        return np.full(len(start), np.nan), np.zeros(len(start), np.int64)
    lo, hi = np.clip(start, s.ts[0], s.ts[-1]), np.clip(end, s.ts[0], s.ts[-1])
    covered = hi - lo
    area = step_integral(s, hi) - step_integral(s, lo)
    at = np.clip(np.searchsorted(s.ts, start, side="right") - 1, 0, len(s.ts) - 1)
    inside = (start >= s.ts[0]) & (start <= s.ts[-1])
    mean = np.where(covered > 0, area / np.maximum(covered, 1), np.where(inside, s.values[at], np.nan))
    return mean, covered


def window_means(s: CounterSeries, abs_a: int, abs_b: int, bins: int) -> np.ndarray:
    """The series' time-weighted mean in each of ``bins`` equal bins of [abs_a, abs_b)
    (NaN where the series does not cover the bin)."""
    edges = np.linspace(abs_a, abs_b, bins + 1).round().astype(np.int64)
    mean, _ = interval_means(s, edges[:-1], np.maximum(edges[1:], edges[:-1] + 1))
    return mean


_COLUMNS = ["name", "counter", "track", "calls", "covered_ns", "avg"]


def kernel_counters(trace) -> pd.DataFrame:
    """One row per (kernel name, counter): calls (kernels the counter covers at least in
    part), covered_ns and the time-weighted average ``avg``; sorted by name, counter."""
    series = counter_series(trace)
    ev = trace.events
    rows = np.flatnonzero(trace.roles == Role.COMPUTE)
    if not series or not len(rows):
        return pd.DataFrame({c: [] for c in _COLUMNS})
    dev = trace.event_devices[rows]
    start = ev["ts"][rows]
    dur = np.where(ev["dur"][rows] == MISSING_INT, 0, ev["dur"][rows])
    names = ev["name"][rows]
    parts = []
    for s in series:  # a loop over counter series (a few dozen), not events
        sel = np.flatnonzero(dev == s.device) if s.device is not None else np.arange(len(rows))
        if not len(sel):
            continue
        mean, covered = interval_means(s, start[sel], start[sel] + dur[sel])
        ok = ~np.isnan(mean)
        if not ok.any():
            continue
        w = np.maximum(covered[ok], 0).astype(np.float64)
        parts.append(pd.DataFrame({"name_id": names[sel][ok], "counter": s.counter, "track": s.track,
                                   "w": w, "wx": w * mean[ok], "x": mean[ok]}))
    if not parts:
        return pd.DataFrame({c: [] for c in _COLUMNS})
    df = pd.concat(parts, ignore_index=True)
    g = df.groupby(["name_id", "counter", "track"], sort=False).agg(
        calls=("w", "size"), covered_ns=("w", "sum"), wx=("wx", "sum"), x=("x", "mean")).reset_index()
    g["avg"] = np.where(g["covered_ns"] > 0, g["wx"] / g["covered_ns"].where(g["covered_ns"] > 0, 1), g["x"])
    g["name"] = trace.str(g["name_id"].to_numpy())
    g["covered_ns"] = g["covered_ns"].astype(np.int64)
    return g[_COLUMNS].sort_values(["name", "counter"], kind="stable").reset_index(drop=True)


__all__ = ["COUNTER_CATEGORIES", "CounterSeries", "counter_series", "interval_means", "kernel_counters",
           "window_means"]
