#!/usr/bin/env python
"""Write a run folder of N ranks from a few real rank traces: the input of the many-rank
benchmarks (issue 8: 64 ranks x 64 MB, 1,024 ranks).

    python benchmarks/make_many_ranks.py OUT_DIR --ranks N [--size 64M] [--source DIR]
        [--jitter-us 5] [--skew-rank K --skew-us X] [--spans last|all] [--gzip [--gzip-level L]]
        [--jobs J] [--seed S] [--validate]

OUT_DIR gets `rank{i}.{suffix}.pt.trace.json[.gz]` for i in 0..N-1 (torch's naming; suffix:
the source span's own), written under a hidden temporary name and renamed when complete,
and `.make_many_ranks.json` (hidden: discovery skips it) saying how it was made.

What is replicated (real)
    Every event of real rank (i mod R)'s trace, as its own text (R = number of source
    ranks; default: the 2 ranks of the ddp_gloo_2ranks sample, samples/ddp.py, a real 2-process
    gloo DDP job on CPU, written into ./bench-output/samples/ when missing). With --size,
    its body is first repeated K times as benchmarks/make_big_trace.py does (times moved
    by one period per copy, linking ids by one offset per copy, ProfilerStep#N renumbered),
    with one K and one period for every source, so copy k of each rank covers the same
    collectives at the same time. --size 0: the sample as it is (K = 1).
What is synthetic (changed per rank i, in the text, no number through a float)
    - distributedInfo: rank = i, world_size = N; a process group that held every source
      rank holds every rank 0..N-1 (pg_size N), a smaller group is the same group in
      rank i's block of R ranks (ranks + R * (i // R)); args "Group size" equal to R
      become N, "Process Group Ranks" listing every source rank list 0..N-1, "Rank" is i.
    - host pid and tid: + R * (i // R) (the source ranks' pids stay apart: rank 2 of two
      sources with pids 5717/5718 gets 5719). Only the ids of host threads and processes
      move (pid/tid of cpu_op, python_function, runtime ... events and of the metadata and
      flows on them); a device pid/stream (GPU 0, stream 7) is kept, and so is "Fwd thread
      id" (torch's own thread counter, not an OS id).
      Thread names in metadata keep their text ("thread 5768 (python)").
    - the clock: every "ts" (and "external ts") of rank i + offset_i whole microseconds,
      offset_i = a deterministic draw (--seed) from 0..--jitter-us; with --skew-rank K
      --skew-us X, rank K's clock is X us later as well. Event order, durations and
      baseTimeNanoseconds are kept. To the wait analysis (wait = latest start among the
      ranks - own start), a rank whose clock is X us late is a rank that arrives X us late
      at every collective: a straggler, and a clock-alignment check sees an offset of X.
    - linking ids (External id, correlation, flow id, Python id, Sequence number, Ev Idx,
      ...) are those of the source (shifted per copy when --size repeats the body): ids
      are per process, so every link inside a rank stays a link. "Seq" (record_param_comms)
      moves per copy by one common span, so rank i and rank j still agree on each
      collective's Seq.

Memory: one template per source trace (its text cut at the numeric slots, and a vector of
numbers); each output is written copy by copy, so a 64 MB or 1 GB rank needs about what
its source needs. --jobs writes ranks in parallel processes.

--validate loads a few of the outputs with tb_profiler.load (no cache) and checks rank,
world size, process group, pid shift, clock offset and that each holds K times its
source's collective calls.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_big_trace as mbt  # (benchmarks/: the seed parser and the copy rules)

DEFAULT_SOURCE = ROOT / "bench-output" / "samples" / "ddp_gloo_2ranks"
MANIFEST = ".make_many_ranks.json"
VERSION = 1  # bump when the same arguments write different files

HOST_CATS = {"cpu_op", "Operator", "user_annotation", "python_function", "cpu_instant_event", "cuda_runtime",
             "Runtime", "cuda_driver", "xpu_runtime", "mtia_runtime", "privateuse1_runtime", "fwdbwd",
             "Trace"}
PID_KEYS, TID_KEYS = ("pid",), ("tid",)  # "Fwd thread id" is torch's own thread counter (1, 2...): kept
# slot kinds: what a number does per copy (k) and per rank (i)
TS, ID, STEP, SEQ, PID, TID, RANK, GROUP, NONE = range(9)
_KEYS = mbt.TIME_KEYS + mbt.ID_KEYS + PID_KEYS + TID_KEYS + ("Rank", "Group size", "Seq")
SLOT_RE = re.compile(r'"(' + "|".join(re.escape(k) for k in _KEYS) +
                     r')"\s*:\s*"?(-?\d+)(?=[.,\s}\]"])|"name"\s*:\s*"ProfilerStep#(\d+)"')
PG_RANKS_RE = re.compile(r'("Process Group Ranks"\s*:\s*)("\[[\d,\s]*\]"|\[[\d,\s]*\])')
DIST_RE = re.compile(r'"distributedInfo"\s*:\s*')


# ------------------------------------------------------------------------------ sources

@dataclass
class Source:
    """One real rank's span: its file, its rank, its parsed pieces (filled by `parse`)."""

    path: Path
    rank: int
    suffix: str
    info: dict = field(default_factory=dict)


def ensure_sample(source: Path) -> None:
    """The ddp_gloo_2ranks sample (real torch gloo traces) when the default source is asked for
    and missing: samples/make_all.py writes it (needs torch; a few seconds)."""
    if source != DEFAULT_SOURCE or any(source.glob("*.pt.trace.json*")):
        return
    print(f"writing the ddp_gloo_2ranks sample into {source.parent} ...", file=sys.stderr)
    subprocess.run([sys.executable, str(ROOT / "samples" / "make_all.py"), str(source.parent),
                    "--only", "ddp_gloo_2ranks"], check=True, stdout=subprocess.DEVNULL)


def find_sources(folder: Path, spans: str) -> list[list[Source]]:
    """[rank][span] of the real traces in a run folder, ranks in distributedInfo order
    (the worker's position when a trace has none)."""
    from tb_profiler.io.discovery import discover

    found = discover(str(folder))
    if len(found.runs) != 1:
        raise ValueError(f"{folder}: expected one run folder of rank traces, found {len(found.runs)} runs")
    out = []
    for pos, (worker, span_files) in enumerate(found.runs[0].workers.items()):
        chosen = span_files if spans == "all" else span_files[-1:]
        srcs = [Source(Path(s.path), pos, s.span or str(s.index)) for s in chosen]
        for s in srcs:
            s.info = read_dist_info(s.path)
            if isinstance(s.info.get("rank"), int):
                s.rank = s.info["rank"]
        out.append(srcs)
    out.sort(key=lambda spans_: spans_[0].rank)
    if len({len(s) for s in out}) != 1:
        raise ValueError(f"{folder}: the ranks have different numbers of spans: use --spans last")
    return out


def read_dist_info(path: Path) -> dict:
    """distributedInfo of a trace (head or tail of the document), {} when absent."""
    text = mbt.read_text(path)
    m = DIST_RE.search(text)
    if not m:
        return {}
    info, _ = json.JSONDecoder().raw_decode(text, m.end())
    return info if isinstance(info, dict) else {}


# ------------------------------------------------------------------------------ templates

def split_events(seed: mbt.Seed) -> tuple[list, list, list]:
    """(prefix, body, late) as make_big_trace splits them: metadata and trace-level events
    before the first body event are written once first, the body is copied, trace-level
    events after it are written once last (stretched over the copies)."""
    first = next((i for i, e in enumerate(seed.events) if e.get("ph") != "M" and not mbt.Seed.is_trace_level(e)),
                 None)
    if first is None:
        raise ValueError("the source has no events to copy (only metadata and trace-level events)")
    prefix, early, body, late = [], [], [], []
    for i, (c, e) in enumerate(zip(seed.chunks, seed.events)):
        if e.get("ph") == "M":
            prefix.append((c, e))
        elif mbt.Seed.is_trace_level(e):
            (early if i < first and e.get("ph") != "X" else late).append((c, e))
        else:
            body.append((c, e))
    return prefix + early, body, late


def host_ids(events: list) -> tuple[np.ndarray, np.ndarray]:
    """The pids of host events and the (non-zero) tids of events on those pids: the ids
    that move per rank."""
    pids = {e["pid"] for _, e in events if e.get("cat") in HOST_CATS and _is_int(e.get("pid"))}
    pids = {int(p) for p in pids}
    tids = {int(e["tid"]) for _, e in events if _is_int(e.get("pid")) and int(e["pid"]) in pids
            and _is_int(e.get("tid"))}
    tids.discard(0)
    return np.array(sorted(pids), dtype=np.int64), np.array(sorted(tids), dtype=np.int64)


def _is_int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.strip().isdigit())


class Template:
    """Events as one text cut at its numeric slots; `render(k, add)` writes copy k of it
    for one rank: value = base + k * per_copy + add[kind] (vectorized over the slots)."""

    def __init__(self, events: list, pids: np.ndarray, tids: np.ndarray, world: int, new_world: int):
        text = mbt.SEP.join(c for c, _ in events)
        text = PG_RANKS_RE.sub(lambda m: _pg_ranks(m, world, new_world), text)
        cuts, base, kind = self._slots(text, events)
        self.base = np.array(base, dtype=np.int64)
        kind = np.array(kind, dtype=np.int64)
        kind[(kind == PID) & ~np.isin(self.base, pids)] = NONE
        kind[(kind == TID) & ~np.isin(self.base, tids)] = NONE
        kind[(kind == GROUP) & (self.base != world)] = NONE
        self.kind = kind
        self.per_copy = np.zeros(len(kind), dtype=np.int64)
        bounds = [0, *[x for ab in cuts for x in ab], len(text)]
        self.parts = [text[bounds[j]:bounds[j + 1]] for j in range(0, len(bounds), 2)]
        self.n_events = len(events)

    @staticmethod
    def _slots(text: str, events: list) -> tuple[list, list, list]:
        """(span, value, kind) of every number that moves: per copy or per rank."""
        starts = np.cumsum([0] + [len(c) + len(mbt.SEP) for c, _ in events[:-1]]) if events else np.zeros(1)
        is_flow = np.array([e.get("ph") in mbt.FLOW_PHASES for _, e in events] or [False], dtype=bool)
        cuts, base, kind = [], [], []
        for m in SLOT_RE.finditer(text):
            if m.group(3) is not None:  # ProfilerStep#N
                cuts.append(m.span(3)), base.append(int(m.group(3))), kind.append(STEP)
                continue
            key, value = m.group(1), int(m.group(2))
            k = _kind_of(key)
            if k == ID:
                if key == "id" and not is_flow[np.searchsorted(starts, m.start(), "right") - 1]:
                    continue
                if value < 0 or (value == 0 and key not in mbt.ZERO_IS_AN_ID):
                    continue
            cuts.append(m.span(2)), base.append(value), kind.append(k)
        return cuts, base, kind

    def moving(self, steps: dict) -> Template:
        """Sets how much each kind of slot moves per copy ({kind: amount})."""
        self.per_copy = np.array([steps.get(k, 0) for k in range(NONE + 1)], dtype=np.int64)[self.kind]
        return self

    def render(self, k: int, add: np.ndarray) -> str:
        if not self.parts:
            return ""
        values = (self.base + k * self.per_copy + add[self.kind]).tolist()
        out = [""] * (2 * len(self.parts) - 1)
        out[0::2] = self.parts
        out[1::2] = map(str, values)
        return "".join(out)

    def ids(self, kind: int) -> np.ndarray:
        return self.base[self.kind == kind]


def _kind_of(key: str) -> int:
    if key in mbt.TIME_KEYS:
        return TS
    if key in PID_KEYS:
        return PID
    if key in TID_KEYS:
        return TID
    return {"Rank": RANK, "Group size": GROUP, "Seq": SEQ}.get(key, ID)


def _pg_ranks(m: re.Match, world: int, new_world: int) -> str:
    """"Process Group Ranks" listing every source rank -> every rank of the new world."""
    ranks = [int(x) for x in re.findall(r"\d+", m.group(2))]
    if sorted(ranks) != list(range(world)):
        return m.group(0)
    listed = "[" + ", ".join(map(str, range(new_world))) + "]"
    return m.group(1) + (json.dumps(listed) if m.group(2).startswith('"') else listed)


@dataclass
class Plan:
    """What every rank is made of: shared by the writer processes (picklable)."""

    sources: list[list[Source]]   # [source rank][span]
    out_dir: Path
    ranks: int
    size: int
    copies: int
    period_us: int
    seq_step: int
    offsets_us: list[int]
    gzip_level: int | None

    @property
    def world(self) -> int:
        return len(self.sources)


class RankMaker:
    """The templates of one source span, and the writing of any rank made from it."""

    def __init__(self, src: Source, plan: Plan):
        seed = mbt.Seed(mbt.read_text(src.path))
        self.src, self.plan = src, plan
        prefix, body, late = split_events(seed)
        pids, tids = host_ids(prefix + body)
        R, N = plan.world, plan.ranks
        self.body = Template(body, pids, tids, R, N)
        ids, step_numbers = self.body.ids(ID), self.body.ids(STEP)
        self.id_offset = int(ids.max()) + 1 if len(ids) else 0
        n_steps = int(step_numbers.max() - step_numbers.min() + 1) if len(step_numbers) else 0
        self.body.moving({TS: plan.period_us, ID: self.id_offset, STEP: n_steps, SEQ: plan.seq_step})
        self.prefix = Template(prefix, pids, tids, R, N)
        self.late = Template(self._stretched(late, body), pids, tids, R, N)
        self.head, self.tail = seed.head, seed.tail

    def _stretched(self, late: list, body: list) -> list:
        """The trace-level span over every copy, "Record Window End" after the last."""
        k_last = self.plan.copies - 1
        if not k_last:
            return late
        ts = [mbt._num(e["ts"]) for _, e in body if "ts" in e]
        mid = (min(ts) + max(ts)) / 2
        out = []
        for c, e in late:
            if e.get("ph") == "X":
                c = mbt._shift_text(c, "dur", k_last * self.plan.period_us)
            elif mbt._num(e.get("ts", 0)) >= mid:
                c = mbt._shift_text(c, "ts", k_last * self.plan.period_us)
            out.append((c, e))
        return out

    def adds(self, i: int) -> np.ndarray:
        """Per slot kind, what rank i adds to the source's numbers."""
        R, N = self.plan.world, self.plan.ranks
        add = np.zeros(NONE + 1, dtype=np.int64)
        add[TS] = self.plan.offsets_us[i]
        add[PID] = add[TID] = R * (i // R)
        add[RANK] = i - self.src.rank
        add[GROUP] = N - R
        return add

    def dist_info(self, i: int) -> dict:
        """The source's distributedInfo for rank i of N (see the module docstring)."""
        R, N = self.plan.world, self.plan.ranks
        info = json.loads(json.dumps(self.src.info))
        info.update(rank=i, world_size=N)
        for pg in info.get("pg_config") or []:
            ranks = pg.get("ranks")
            if not isinstance(ranks, list):
                continue
            if sorted(ranks) == list(range(R)):
                pg["ranks"], pg["pg_size"] = list(range(N)), N
            else:
                pg["ranks"] = [r + R * (i // R) for r in ranks]
        return info

    def framing(self, i: int) -> tuple[str, str]:
        """Head and tail texts of rank i: distributedInfo replaced where it stands."""
        head, tail = self.head, self.tail
        info = json.dumps(self.dist_info(i))
        for which, text in (("head", head), ("tail", tail)):
            m = DIST_RE.search(text)
            if m:
                _, end = json.JSONDecoder().raw_decode(text, m.end())
                text = text[:m.end()] + info + text[end:]
                head, tail = (text, tail) if which == "head" else (head, text)
                break
        return head, tail

    def write(self, i: int, path: Path) -> int:
        """Rank i's trace, streamed copy by copy; returns the bytes of JSON written."""
        add = self.adds(i)
        head, tail = self.framing(i)
        pieces = self._pieces(add)
        return write_atomic(path, (head, "\n  ", *pieces, "\n", tail), self.plan.gzip_level)

    def _pieces(self, add: np.ndarray):
        """The events: prefix, the copies of the body, the late ones; one copy at a time."""
        sep = ""
        prefix = self.prefix.render(0, add)
        if prefix:
            yield prefix
            sep = mbt.SEP
        for k in range(self.plan.copies):
            yield sep + self.body.render(k, add)
            sep = mbt.SEP
        late = self.late.render(0, add)
        if late:
            yield sep + late

    def fixed_and_copy_bytes(self) -> tuple[int, int]:
        """(bytes written once, bytes per copy): for choosing the number of copies."""
        add = np.zeros(NONE + 1, dtype=np.int64)
        once = len((self.head + self.tail + self.prefix.render(0, add) + self.late.render(0, add)).encode())
        return once, len(self.body.render(0, add).encode()) + len(mbt.SEP)


def write_atomic(path: Path, pieces, gzip_level: int | None) -> int:
    """Writes the pieces under a hidden temporary name, renamed when complete."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    written = 0
    try:
        with open(tmp, "wb", buffering=1 << 22) as raw:
            sink = raw if gzip_level is None else gzip.GzipFile(
                filename="", fileobj=raw, mode="wb", compresslevel=gzip_level, mtime=0)
            for piece in pieces:
                b = piece.encode("utf-8", "surrogateescape")
                sink.write(b)
                written += len(b)
            if sink is not raw:
                sink.close()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return written


# ------------------------------------------------------------------------------ the plan

def source_stats(src: Source) -> dict:
    """What a common plan needs from one source: its body's time span and Seq span."""
    seed = mbt.Seed(mbt.read_text(src.path))
    _, body, _ = split_events(seed)
    ts = [mbt._num(e["ts"]) for _, e in body if "ts" in e]
    ends = [mbt._num(e["ts"]) + mbt._num(e.get("dur", 0)) for _, e in body if "ts" in e]
    seqs = [int(v) for v in re.findall(r'"Seq"\s*:\s*"?(\d+)', mbt.SEP.join(c for c, _ in body))]
    return {"period_us": math.ceil(max(ends) - min(ts)) + mbt.GAP_US,
            "seq_step": (max(seqs) - min(seqs) + 1) if seqs else 0}


def jitter(ranks: int, jitter_us: int, seed: int, skew_rank: int | None, skew_us: int) -> list[int]:
    """Per-rank clock offsets in whole microseconds (deterministic for a seed)."""
    offsets = np.random.default_rng(seed).integers(0, jitter_us + 1, size=ranks)
    if skew_rank is not None:
        offsets[skew_rank] += skew_us
    return offsets.tolist()


def make_plan(sources, out_dir: Path, ranks: int, size: int, offsets: list[int], gzip_level) -> Plan:
    """One number of copies and one period for every source (see the module docstring)."""
    stats = [source_stats(s) for spans in sources for s in spans]
    plan = Plan(sources, out_dir, ranks, size, 1, max(s["period_us"] for s in stats),
                max(s["seq_step"] for s in stats), offsets, gzip_level)
    if size > 0:
        copies = 1
        for spans in sources:
            for s in spans:
                once, per_copy = RankMaker(s, plan).fixed_and_copy_bytes()
                copies = max(copies, math.ceil((size - once) / per_copy))
        plan.copies = copies
    return plan


def output_path(plan: Plan, i: int, span: int) -> Path:
    src = plan.sources[i % plan.world][span]
    ext = ".pt.trace.json" + (".gz" if plan.gzip_level is not None else "")
    return plan.out_dir / f"rank{i}.{src.suffix}{ext}"


# ------------------------------------------------------------------------------ writing

_PLAN: Plan | None = None


def _init(plan: Plan) -> None:
    """A process's plan; makers of an earlier plan (inherited through fork) are dropped."""
    global _PLAN
    _PLAN = plan
    _maker.cache_clear()


@cache
def _maker(source_rank: int, span: int) -> RankMaker:
    return RankMaker(_PLAN.sources[source_rank][span], _PLAN)


def _write_ranks(ranks: list[int]) -> int:
    """Writes these ranks (every span) in this process; returns the JSON bytes written."""
    total = 0
    for i in ranks:
        for span in range(len(_PLAN.sources[0])):
            total += _maker(i % _PLAN.world, span).write(i, output_path(_PLAN, i, span))
    return total


def write_all(plan: Plan, jobs: int) -> int:
    """Every rank, in `jobs` processes (each builds its templates once)."""
    batches = [list(range(j, plan.ranks, max(1, jobs))) for j in range(max(1, jobs))]
    if jobs <= 1:
        _init(plan)
        return _write_ranks(list(range(plan.ranks)))
    with ProcessPoolExecutor(max_workers=jobs, initializer=_init, initargs=(plan,)) as pool:
        return sum(pool.map(_write_ranks, batches))


def clear_old(out_dir: Path) -> None:
    """Removes the trace files an earlier generation left (a different N would mix)."""
    for p in out_dir.iterdir():
        if p.is_file() and (".pt.trace.json" in p.name or p.name == MANIFEST):
            p.unlink()


def generate(out_dir, ranks: int, size: int = 0, source=DEFAULT_SOURCE, jitter_us: int = 5, seed: int = 0,
             skew_rank: int | None = None, skew_us: int = 0, spans: str = "last", gzip_level: int | None = None,
             jobs: int = 1, quiet: bool = True) -> dict:
    """Writes the run folder; returns the manifest (also written as .make_many_ranks.json)."""
    t0 = time.monotonic()
    out_dir, source = Path(out_dir), Path(source)
    if skew_rank is not None and not 0 <= skew_rank < ranks:
        raise ValueError(f"--skew-rank {skew_rank}: not a rank of 0..{ranks - 1}")
    ensure_sample(source)
    sources = find_sources(source, spans)
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_old(out_dir)
    plan = make_plan(sources, out_dir, ranks, size, jitter(ranks, jitter_us, seed, skew_rank, skew_us), gzip_level)
    written = write_all(plan, jobs)
    manifest = {"version": VERSION, "ranks": ranks, "size": size, "source": str(source),
                "source_ranks": [[str(s.path) for s in sp] for sp in sources], "spans": spans,
                "copies": plan.copies, "period_us": plan.period_us, "jitter_us": jitter_us, "seed": seed,
                "skew_rank": skew_rank, "skew_us": skew_us, "offsets_us": plan.offsets_us,
                "gzip_level": gzip_level, "files": ranks * len(sources[0]), "json_bytes": written,
                "seconds": round(time.monotonic() - t0, 2), "jobs": jobs}
    (out_dir / MANIFEST).write_text(json.dumps(manifest))
    if not quiet:
        print(json.dumps({k: v for k, v in manifest.items() if k != "offsets_us"}))
    return manifest


# ------------------------------------------------------------------------------ --validate

def validate(out_dir: Path, manifest: dict, picks: list[int] | None = None) -> dict:
    """Loads a few ranks (first, second, last, the skewed one, one in the middle) with
    tb_profiler.load and checks what the generator promises against the source."""
    import tb_profiler
    from tb_profiler.analysis.collectives import collectives

    N, R = manifest["ranks"], len(manifest["source_ranks"])
    picks = picks or sorted({0, min(1, N - 1), N // 2, N - 1} |
                            ({manifest["skew_rank"]} if manifest["skew_rank"] is not None else set()))
    sources = [tb_profiler.load(sp[-1], cache=False) for sp in manifest["source_ranks"]]
    checked = []
    for i in picks:
        path = max(out_dir.glob(f"rank{i}.*.pt.trace.json*"))  # its latest span
        t, src = tb_profiler.load(path, cache=False), sources[i % R]
        info = t.distributed_info
        assert info["rank"] == i and info["world_size"] == N, (path.name, info)
        for pg in info.get("pg_config") or []:
            assert pg.get("pg_size") in (None, N, len(pg["ranks"])), pg
        calls, src_calls = len(collectives(t)), len(collectives(src))
        assert calls == manifest["copies"] * src_calls, (path.name, calls, src_calls, manifest["copies"])
        shift = int(t.events["ts"].min()) - int(src.events["ts"].min())
        assert shift == manifest["offsets_us"][i] * 1000, (path.name, shift, manifest["offsets_us"][i])
        host = set(np.unique(src.events["pid"]).tolist()) - {0}
        moved = {p + R * (i // R) for p in host}
        assert moved <= set(np.unique(t.events["pid"]).tolist()), (path.name, moved)
        checked.append({"rank": i, "collective_calls": calls, "clock_offset_us": shift / 1000})
    result = {"validated": str(out_dir), "ranks": N, "checked": checked}
    print(json.dumps(result))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path, help="the run folder to write (its old rank files are removed)")
    ap.add_argument("--ranks", type=int, required=True, help="N: how many ranks")
    ap.add_argument("--size", type=mbt.parse_size, default=0,
                    help="JSON bytes per rank (64M, 1G; 0 = the source as it is)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                    help="a run folder of real rank traces (default: the ddp_gloo_2ranks sample, written when missing)")
    ap.add_argument("--spans", choices=("last", "all"), default="last",
                    help="the source's latest span only (what the Distributed view opens), or every span")
    ap.add_argument("--jitter-us", type=int, default=5, help="per-rank clock offsets drawn from 0..this (us)")
    ap.add_argument("--skew-rank", type=int, help="one rank whose clock is --skew-us later (a straggler)")
    ap.add_argument("--skew-us", type=int, default=0, help="its extra clock offset in microseconds")
    ap.add_argument("--seed", type=int, default=0, help="seed of the clock offsets")
    ap.add_argument("--gzip", action="store_true", help="write .pt.trace.json.gz")
    ap.add_argument("--gzip-level", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=1, help="processes writing ranks in parallel")
    ap.add_argument("--validate", action="store_true", help="load a few outputs and check them")
    args = ap.parse_args(argv)
    if args.ranks < 1:
        ap.error("--ranks must be at least 1")
    try:
        manifest = generate(args.out_dir, args.ranks, args.size, args.source, args.jitter_us, args.seed,
                            args.skew_rank, args.skew_us, args.spans, args.gzip_level if args.gzip else None,
                            args.jobs, quiet=False)
    except (OSError, ValueError) as exc:
        print(f"make_many_ranks: {exc}", file=sys.stderr)
        return 1
    if args.validate:
        validate(args.out_dir, manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
