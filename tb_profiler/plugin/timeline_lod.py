"""The trace view's level-of-detail index: a window's events and busy blocks without
reading the events outside it, nor every small event inside it.

A trace's events are put in rows, one per (track, nesting depth), and in duration
classes against a ladder of bin widths ``w_l = base * factor**l`` (l = 0 .. levels-1):
class c holds the events with ``w_(c-1) <= dur < w_c`` (class 0: shorter than ``base``;
the last class: at least the widest bin).  Built once per trace, all vectorized:

* the interval index: every event's key ``(class * rows + row) << ev_shift | ts - t0``,
  sorted.  The events of one (class, row) overlapping ``[a, b)`` start in
  ``[a - longest(class), b)``, a key range found by ``searchsorted``: a lookup reads the
  events of the window (and, per class, the few ending just before it), never all the
  events before the window's end.  Events straddling the window's start are found
  because each class knows its longest event.
* the busy runs: per level l and row, the maximal runs of consecutive bins of width
  ``w_l`` (bin j covers ``t0 + [j * w_l, (j + 1) * w_l)``) touched by an event of class
  <= l (each shorter than a bin), with how many of those events start in the run.  Level
  l is built from level l-1's runs (coarsened) and class l's events, so the whole ladder
  costs about one pass over the events.

Keys never overflow, whatever the span (a ts of 0 among times of 2024, a time decades
away: anything the Trace keeps, within ±2**62 ns): where ``ts - t0`` and the key's group
bits do not fit 62 bits together, the key holds the time's rank among the indexed events'
distinct start times instead (``times``; a lookup turns a time into its rank with one
``searchsorted``, which keeps every "starts before x" exact), and where the bins would not
fit, the finest bin is made coarser by ``factor`` until they do (a window finer than it
is then read event by event, exactly as below ``base`` anyway).

A window of ``p`` ns per pixel reads level ``l``, the widest whose bins are at most a
pixel: the events of the classes above l (those at least ``w_l`` long) come as
themselves through the interval index (the ones narrower than a pixel go to the busy
blocks as their bins), the rest as the level's runs clipped to the window.  Below the
finest bin (``p < base``) nothing is binned ahead: the window's events come from the
interval index and the caller bins them to pixels as before.

Everything lives in plain numpy arrays (``arrays`` / ``from_arrays``), so the index can
be stored with the trace's cache entry and read back without rebuilding it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BASE_NS = 1000         # the finest bin: windows of less than a microsecond per pixel are exact
FACTOR = 4             # each level's bins are this many times wider than the previous level's
MIN_BINS = 64          # the widest level still has about this many bins over the trace
LOD_VERSION = 3        # bump when the arrays change meaning
_PARAMS = ("version", "t0", "base", "factor", "levels", "rows", "ev_shift", "bin_shift", "events", "ranked")
KEY_BITS = 62          # bits a key may use (int64, and room for the arithmetic on it)
TIME_CLIP = 1 << 62    # |a time from t0| a lookup clips to (no event is further), so key arithmetic never wraps


@dataclass
class LodIndex:
    t0: int                 # absolute ns bins and keys count from
    base: int               # level 0's bin width, ns
    factor: int
    levels: int
    rows: int               # rows: (track, depth) pairs, track-major
    ev_shift: int           # bits of (ts - t0) in ev_key
    bin_shift: int          # bits of a bin number in run keys
    events: int             # events in the trace the index was built for
    row_start: np.ndarray   # per track: its first row (rows of track t: row_start[t] + depth)
    ev_key: np.ndarray      # sorted: (class * rows + row) << ev_shift | ts - t0
    ev_id: np.ndarray       # the event row of each ev_key (int32 below 2**31 events)
    ev_class_start: np.ndarray  # per class, where its keys start in ev_key (levels + 2 entries)
    class_max_dur: np.ndarray   # per class, its longest event (ns, 0 when empty)
    run_lo: np.ndarray      # sorted: (level * rows + row) << bin_shift | first bin of a busy run
    run_len: np.ndarray     # its bins (int32 where they fit)
    run_count: np.ndarray   # events of class <= level starting in the run (int32 where they fit)
    ranked: bool = False    # whether ev_key holds a start time's rank in ``times`` instead of ts - t0
    times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ranked: distinct ts - t0, sorted

    # -- levels ------------------------------------------------------------------------------
    def width(self, level: int) -> int:
        return self.base * self.factor ** level

    @property
    def widths(self) -> np.ndarray:
        return self.base * self.factor ** np.arange(self.levels, dtype=np.int64)

    def time_key(self, rel):
        """The key part for a time ``rel`` (ns from t0; an int or an array): an event's key
        part is below it exactly when the event starts before rel (ts - t0 clipped to the
        key's range, or in a ranked index the number of distinct start times before rel)."""
        if self.ranked:
            return np.searchsorted(self.times, rel, side="left")
        return np.clip(rel, 0, 1 << self.ev_shift)

    def key_time(self, part: np.ndarray) -> np.ndarray:
        """ts - t0 of the events whose key parts (``ev_key & mask``) these are."""
        return self.times[part] if self.ranked else part

    def level_for(self, ns_per_px: float) -> int:
        """The widest level whose bin is at most ns_per_px; -1 below the finest bin."""
        return int(np.searchsorted(self.widths, ns_per_px, side="right")) - 1

    # -- events ------------------------------------------------------------------------------
    def overlapping(self, ts: np.ndarray, dur: np.ndarray, a: int, b: int, min_class: int = 0) -> np.ndarray:
        """Event rows of class >= min_class overlapping [a, b) (absolute ns), sorted: those
        with ts < b and an end after a, and zero-length ones at a (as the window counts
        them).  ts, dur: the trace's event columns."""
        classes = np.arange(min_class, self.levels + 1, dtype=np.int64)
        classes = classes[(np.diff(self.ev_class_start)[classes] > 0)] if len(classes) else classes
        if not len(classes):
            return np.zeros(0, np.int64)
        rows = np.arange(self.rows, dtype=np.int64)
        groups = (classes[:, None] * self.rows + rows[None, :]).ravel()
        back = np.repeat(self.class_max_dur[classes], self.rows)
        lo = (groups << self.ev_shift) + self.time_key(_clip(int(a) - self.t0) - back)
        hi = (groups << self.ev_shift) + self.time_key(_clip(int(b) - self.t0))
        idx = concat_ranges(np.searchsorted(self.ev_key, lo, side="left"),
                            np.searchsorted(self.ev_key, hi, side="left"))
        rows_ = self.ev_id[idx].astype(np.int64)
        t = ts[rows_]
        end = t + np.maximum(dur[rows_], 0)
        keep = (end > a) | ((end == a) & (t == a))
        return np.sort(rows_[keep])

    def count_starting(self, row: np.ndarray, max_class: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per i: events of class <= max_class on row[i] starting in [lo[i], hi[i]) (ns from t0)."""
        if not len(row):
            return np.zeros(0, np.int64)
        classes = np.arange(max_class + 1, dtype=np.int64)
        g = (classes[:, None] * self.rows + row[None, :]) << self.ev_shift
        n = (np.searchsorted(self.ev_key, g + self.time_key(hi)[None, :], side="left")
             - np.searchsorted(self.ev_key, g + self.time_key(lo)[None, :], side="left"))
        return n.sum(axis=0)

    # -- busy blocks --------------------------------------------------------------------------
    def busy(self, level: int, a: int, b: int, ns_per_px: float, dur: np.ndarray, extra_row: np.ndarray,
             extra_ts: np.ndarray, extra_end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The busy blocks of [a, b) at ``level``: (row, start, end, count), absolute ns, sorted
        by row then start.  The level's runs clipped to the window's bins (those holding an
        event that overlaps the window), and the ``extra`` events (narrower than a pixel
        but not in the level: class > level) as the bins they touch; blocks of one row
        less than a pixel apart are merged.  count: the events overlapping the window in
        the block (a run's own count, corrected by the events of its edge bins that start
        or end outside the window).  dur: the trace's event durations."""
        w = self.width(level)
        ja = max((int(a) - self.t0) // w, 0)
        jb = min((int(b) - 1 - self.t0) // w, (1 << self.bin_shift) - 1)
        parts_row, parts_lo, parts_hi, parts_n = [], [], [], []
        if jb >= ja:
            rows = np.arange(self.rows, dtype=np.int64)
            g = (level * self.rows + rows) << self.bin_shift
            # per row, the first run reaching past bin ja: the last one starting at or before ja if it
            # does, else the next one
            first = np.searchsorted(self.run_lo, g + ja, side="right")
            prev = np.maximum(first - 1, 0)
            reaches = ((first > 0) & (self.run_lo[prev] >= g) & (self.run_lo[prev] - g + self.run_len[prev] > ja)
                       if len(self.run_lo) else np.zeros(len(g), dtype=bool))
            sel = concat_ranges(first - reaches, np.searchsorted(self.run_lo, g + jb, side="right"))
            mask = (1 << self.bin_shift) - 1
            r = (self.run_lo[sel] >> self.bin_shift) - level * self.rows
            lo0 = self.run_lo[sel] & mask
            hi0 = lo0 + self.run_len[sel]
            lo, hi = np.maximum(lo0, ja), np.minimum(hi0, jb + 1)
            n = self.run_count[sel].astype(np.int64)
            cut = np.flatnonzero((lo != lo0) | (hi != hi0))
            if len(cut):
                n[cut] = self.count_starting(r[cut], level, lo[cut] * w, hi[cut] * w)
            at_start, at_end = self._edge_counts(level, a, b, ja, jb, dur)
            n += np.where(lo == ja, at_start[r], 0) + np.where(hi == jb + 1, at_end[r], 0)
            keep = n > 0
            parts_row.append(r[keep])
            parts_lo.append(lo[keep])
            parts_hi.append(hi[keep])
            parts_n.append(n[keep])
        if len(extra_row):
            rel_ts = np.asarray(extra_ts, np.int64) - self.t0
            rel_end = np.maximum(np.asarray(extra_end, np.int64) - self.t0, rel_ts + 1)
            lo = np.maximum(rel_ts // w, ja)
            hi = np.minimum((rel_end - 1) // w + 1, jb + 1)
            ok = hi > lo
            parts_row.append(np.asarray(extra_row, np.int64)[ok])
            parts_lo.append(lo[ok])
            parts_hi.append(hi[ok])
            parts_n.append(np.ones(int(ok.sum()), np.int64))
        if not parts_row:
            e = np.zeros(0, np.int64)
            return e, e, e, e
        row, lo, hi, n = (np.concatenate(x) for x in (parts_row, parts_lo, parts_hi, parts_n))
        if not len(row):
            return row, lo, hi, n
        # merge per row: a new block where the gap to everything before it on the row is more than a pixel
        gap_bins = int(ns_per_px // w)  # a gap of at most this many whole bins is at most a pixel
        key_lo = (row << self.bin_shift) | lo
        order = np.argsort(key_lo, kind="stable")
        row, lo, hi, n, key_lo = row[order], lo[order], hi[order], n[order], key_lo[order]
        reach = np.maximum.accumulate((row << self.bin_shift) | hi)
        new = np.ones(len(row), dtype=bool)
        new[1:] = key_lo[1:] - reach[:-1] > gap_bins
        new[1:] |= row[1:] != row[:-1]
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, len(row) - 1]
        mask = (1 << self.bin_shift) - 1
        return (row[first], self.t0 + lo[first] * w, self.t0 + (reach[last] & mask) * w,
                np.add.reduceat(n, first))

    def _edge_counts(self, level: int, a: int, b: int, ja: int, jb: int,
                     dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, what the counts by start bin miss at the window's edges (events of class
        <= level): + those starting in the bin before ja that end after a, - those
        starting in bin ja before a that end by a (ja's run), - those starting in bin jb
        at b or later (jb's run)."""
        w = self.width(level)
        rel_a, rel_b = int(a) - self.t0, int(b) - self.t0
        spans = [((ja - 1) * w, ja * w, 1), (ja * w, rel_a, -1), (rel_b, (jb + 1) * w, -1)]
        out = [np.zeros(self.rows, np.int64), np.zeros(self.rows, np.int64)]
        classes = np.arange(level + 1, dtype=np.int64)
        g = ((classes[:, None] * self.rows + np.arange(self.rows, dtype=np.int64)[None, :]) << self.ev_shift).ravel()
        mask = (1 << self.ev_shift) - 1
        for k, (lo, hi, sign) in enumerate(spans):
            lo, hi = int(self.time_key(_clip(lo))), int(self.time_key(_clip(hi)))
            if hi <= lo:
                continue
            pos = concat_ranges(np.searchsorted(self.ev_key, g + lo, side="left"),
                                np.searchsorted(self.ev_key, g + hi, side="left"))
            if not len(pos):
                continue
            key = self.ev_key[pos]
            row = (key >> self.ev_shift) % self.rows
            if k < 2:  # by its end: after a for the bin before, by a for bin ja's head
                end = self.key_time(key & mask) + np.maximum(dur[self.ev_id[pos]], 0)
                row = row[end > rel_a] if k == 0 else row[end <= rel_a]
            out[0 if k < 2 else 1] += sign * np.bincount(row, minlength=self.rows)
        return out[0], out[1]

    # -- storage -------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """The index as plain arrays (name -> ndarray), for ``from_arrays``."""
        params = np.array([LOD_VERSION, self.t0, self.base, self.factor, self.levels, self.rows, self.ev_shift,
                           self.bin_shift, self.events, int(self.ranked)], dtype=np.int64)
        return {"lod_params": params, "lod_row_start": self.row_start, "lod_ev_key": self.ev_key,
                "lod_ev_id": self.ev_id, "lod_ev_class_start": self.ev_class_start,
                "lod_class_max_dur": self.class_max_dur, "lod_run_lo": self.run_lo, "lod_run_len": self.run_len,
                "lod_run_count": self.run_count, "lod_times": self.times}


def from_arrays(arrays: dict[str, np.ndarray]) -> LodIndex:
    """The index ``LodIndex.arrays`` stored; ValueError when they are of another version."""
    params = [int(x) for x in np.asarray(arrays["lod_params"]).tolist()]
    if len(params) != len(_PARAMS) or params[0] != LOD_VERSION:
        raise ValueError(f"level-of-detail arrays of another version ({params[:1]}, expected {LOD_VERSION})")
    p = dict(zip(_PARAMS, params))
    cols = []
    for k in ("row_start", "ev_key", "ev_id", "ev_class_start", "class_max_dur", "run_lo", "run_len", "run_count",
              "times"):
        a = np.asarray(arrays[f"lod_{k}"])
        if a.dtype.kind != "i" or a.ndim != 1:
            raise ValueError(f"level-of-detail array {k}: {a.dtype} {a.shape}, expected a 1-d integer array")
        cols.append(a)
    return LodIndex(p["t0"], p["base"], p["factor"], p["levels"], p["rows"], p["ev_shift"], p["bin_shift"],
                    p["events"], *cols[:-1], ranked=bool(p["ranked"]), times=cols[-1])


def _clip(rel: int) -> int:
    """A time from t0 within ±TIME_CLIP: what lies beyond holds no event, and key arithmetic on it stays in int64."""
    return min(max(int(rel), -TIME_CLIP), TIME_CLIP)


def concat_ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The concatenation of arange(start[i], stop[i]) over i (empty ranges allowed)."""
    n = np.maximum(stop - start, 0)
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.int64)
    keep = n > 0
    start, n = start[keep], n[keep]
    offsets = np.cumsum(n) - n
    return np.repeat(start - offsets, n) + np.arange(total, dtype=np.int64)


def build(track: np.ndarray, depth: np.ndarray, ts: np.ndarray, dur: np.ndarray, t0: int,
          track_depths: np.ndarray, base: int = BASE_NS, factor: int = FACTOR) -> LodIndex:
    """The index of events (track, depth, ts, dur per event; absolute ns) whose valid
    times start at t0 or later (an event starting before t0 — a missing ts — is left
    out); track_depths: per track, its deepest depth."""
    track = np.asarray(track, np.int64)
    depth = np.asarray(depth, np.int64)
    ts = np.asarray(ts, np.int64)
    n_events = len(ts)
    t0 = int(t0)
    row_start = np.concatenate([[0], np.cumsum(np.asarray(track_depths, np.int64) + 1)]).astype(np.int64)
    n_rows = int(row_start[-1]) if len(track_depths) else 0
    ids = np.flatnonzero(ts >= t0)
    d = np.maximum(np.asarray(dur, np.int64)[ids], 0)
    rel = ts[ids] - t0
    span = int((rel + np.maximum(d, 1)).max()) if len(ids) else 1
    base, levels, bin_shift = _ladder(span, max(n_rows, 1), base, factor)
    n_groups = (levels + 1) * max(n_rows, 1)
    widths = base * factor ** np.arange(levels, dtype=np.int64)
    cls = np.searchsorted(widths, d, side="right").astype(np.int64)
    row = row_start[:-1][track[ids]] + depth[ids] if len(ids) else np.zeros(0, np.int64)
    ev_shift = max(int(span).bit_length() + 1, 1)
    ranked = n_groups.bit_length() + ev_shift > KEY_BITS
    times = np.unique(rel) if ranked else np.zeros(0, np.int64)
    if ranked:  # the time's rank instead of its ns: a key part below len(times) + 1
        ev_shift = (len(times) + 1).bit_length() + 1
        if n_groups.bit_length() + ev_shift > KEY_BITS:
            raise ValueError(f"too many rows for the level-of-detail keys ({n_rows} rows, {len(times)} times)")
    part = np.searchsorted(times, rel) if ranked else rel
    group = cls * n_rows + row
    if len(ids) and np.all(rel[1:] >= rel[:-1]):  # time-ordered already: a stable sort by group keeps ts order
        order = np.argsort(group.astype(np.uint16 if n_groups < (1 << 16) else np.int64), kind="stable")
    else:
        order = np.argsort((group << ev_shift) + part, kind="stable")
    ev_key = (group[order] << ev_shift) + part[order]
    ev_id = ids[order]
    d_sorted = d[order]
    rel_sorted = rel[order]
    ev_class_start = np.searchsorted(ev_key, (np.arange(levels + 2, dtype=np.int64) * n_rows) << ev_shift)
    class_max_dur = np.zeros(levels + 1, np.int64)
    nonempty = np.flatnonzero(np.diff(ev_class_start) > 0)
    if len(nonempty):
        class_max_dur[nonempty] = np.maximum.reduceat(d_sorted, ev_class_start[nonempty])

    # busy runs, level by level: the previous level's runs coarsened, plus this level's class
    mask = (1 << bin_shift) - 1
    prev_row = prev_lo = prev_hi = prev_n = np.zeros(0, np.int64)
    out_lo, out_len, out_n = [], [], []
    for level in range(levels):
        w = int(widths[level])
        s, e = ev_class_start[level], ev_class_start[level + 1]
        r = (ev_key[s:e] >> ev_shift) - level * n_rows
        t = rel_sorted[s:e]
        lo = t // w
        hi = (t + np.maximum(d_sorted[s:e], 1) - 1) // w + 1
        if level:
            prev_lo = prev_lo // factor
            prev_hi = -(-prev_hi // factor)
        row_ = np.concatenate([prev_row, r])
        key_lo = (row_ << bin_shift) | np.concatenate([prev_lo, lo])
        key_hi = (row_ << bin_shift) | np.concatenate([prev_hi, hi])
        count = np.concatenate([prev_n, np.ones(len(r), np.int64)])
        if len(prev_row) and len(r):
            o = np.argsort(key_lo, kind="stable")  # two sorted runs: a merge
            key_lo, key_hi, count, row_ = key_lo[o], key_hi[o], count[o], row_[o]
        if len(key_lo):
            reach = np.maximum.accumulate(key_hi)
            new = np.ones(len(key_lo), dtype=bool)
            new[1:] = key_lo[1:] > reach[:-1]  # touching bins join (key_lo == reach)
            first = np.flatnonzero(new)
            last = np.r_[first[1:] - 1, len(key_lo) - 1]
            prev_row, prev_lo = row_[first], key_lo[first] & mask
            prev_hi, prev_n = reach[last] & mask, np.add.reduceat(count, first)
        base_key = (level * n_rows + prev_row) << bin_shift
        out_lo.append(base_key | prev_lo)
        out_len.append(prev_hi - prev_lo)
        out_n.append(prev_n)
    return LodIndex(t0, base, factor, levels, n_rows, ev_shift, bin_shift, n_events, row_start, ev_key,
                    _narrow(ev_id), ev_class_start.astype(np.int64), class_max_dur, np.concatenate(out_lo),
                    _narrow(np.concatenate(out_len)), _narrow(np.concatenate(out_n)), ranked, times)


def _ladder(span: int, rows: int, base: int, factor: int) -> tuple[int, int, int]:
    """(finest bin, levels, bin_shift) for a span of ``span`` ns over ``rows`` rows: levels
    up to about MIN_BINS bins over the span, the finest bin ``base`` unless the bin numbers
    and the (level, row) groups would not fit KEY_BITS together: then ``base * factor**k``
    for the least k that fits (a span of decades over thousands of rows)."""
    while True:
        levels = 1
        while base * factor ** (levels - 1) * MIN_BINS < span:
            levels += 1
        bin_shift = (span // base + 2).bit_length() + 1
        if ((levels + 1) * rows).bit_length() + bin_shift <= KEY_BITS:
            return base, levels, bin_shift
        if base > span:
            raise ValueError(f"too many rows for the level-of-detail keys ({rows} rows)")
        base *= factor


def _narrow(x: np.ndarray) -> np.ndarray:
    """x as int32 where its values fit (indices, counts: half the bytes to keep and store)."""
    return x.astype(np.int32) if not len(x) or (x.min() >= 0 and x.max() < 2**31) else x.astype(np.int64)
