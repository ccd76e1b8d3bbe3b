"""Find runs, workers and spans under a logdir (a local path or any fsspec URL).

The rules extend torch-tb-profiler's, so existing logdirs look the same:

- a folder (the logdir itself or any subfolder, recursively) holding trace
  files is a run, named by its path relative to the logdir (the logdir
  itself: its base name);
- ``*.pt.trace.json[.gz]`` files are traces by their name, and
  ``^(.*?)(\\.\\d+)?\\.pt\\.trace\\.json(\\.gz)?$`` splits it into worker and span
  (the numeric suffix, usually the writer's time_ns; a file without one is the
  worker's only span); spans sort numerically (the old plugin sorted them as
  text, which misorders suffixes of different lengths);
- any other ``*.json[.gz]`` file is a trace when its head says so (``sniff``:
  a JSON object with a ``traceEvents`` key, or the legacy bare array of events),
  as HTA's test data, job launchers and other tools name them
  (``rank-0.json.gz``, ``trace.json``, ``step_trace.json.gz``); its worker is the
  file name without ``.json[.gz]`` and a trailing ``_trace`` / ``.trace``, its
  only span has no suffix. Files of both namings in one folder form one run.
  Workers sort naturally (``rank-2`` before ``rank-10``).

Unlike the old plugin, a file that looks like a trace but cannot be used, and
any other JSON file in a run folder, is reported in ``skipped`` with a reason,
instead of vanishing silently.

Why discovery stays cheap: a background watcher calls ``discover`` every few
seconds, so it lists folders and stats files; the only reads are the heads
(at most SNIFF_BYTES of text) of JSON files not named like torch's traces, each
done once per version of the file (path, size, mtime and what changes with its content:
inode and ctime, a store's ETag; see ``sniff``) and remembered. Names on disk are untrusted:
nothing outside the logdir is ever listed (symbolic links leaving it are
skipped, ``..`` components are rejected). Hidden names (``.*``), and with them
the writer's in-progress temp files, are ignored altogether.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import functools
import os
import re
import stat as _stat
from dataclasses import dataclass, field

from tb_profiler.io.read import INFLATE_ERRORS, LINK_LOOP, is_link_loop, is_url, local_tag, read_head, remote_identity
from tb_profiler.io.snapshot_head import HEAD_BYTES, is_snapshot_head

__all__ = ["SNIFF_BYTES", "TRACE_NAME_RE", "Discovery", "RunInfo", "SkippedFile", "SnapshotFile", "Sniff", "SpanFile",
           "classify_head", "discover", "natural_key", "parse_trace_name", "sniff", "sniff_snapshot", "worker_name"]

TRACE_NAME_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
_TRACE_INFIX = ".pt.trace.json"
SNIFF_BYTES = 64 << 10  # of text: Kineto writes traceEvents after a few KB of deviceProperties at most


@dataclass(frozen=True)
class SpanFile:
    """One trace file: one worker's one profiling span."""

    span: str | None  # numeric suffix as written ("1690000000123"); None when the name has none
    index: int        # 1-based position among the worker's spans, in numeric order
    path: str         # absolute local path, or the full fsspec URL
    size: int
    mtime: float      # seconds since the epoch; 0.0 where a filesystem reports none
    tag: str = ""     # what changes with the content (io.read.stat_key): inode and ctime locally, a store's ETag


@dataclass(frozen=True)
class SnapshotFile:
    """A memory snapshot (the allocator's pickle, issue 20) beside a run's traces."""

    rel: str          # its path relative to the run's folder ("w.pickle", "sub/x.pkl"): what clients name
    path: str         # absolute local path, or the full fsspec URL
    size: int
    mtime: float
    tag: str = ""


@dataclass
class RunInfo:
    name: str
    path: str
    workers: dict[str, list[SpanFile]]
    snapshots: list[SnapshotFile] = field(default_factory=list)  # memory snapshots in the run's folder

    @property
    def files(self) -> list[SpanFile]:
        return [s for spans in self.workers.values() for s in spans]


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str  # for the user: what is wrong and, where possible, what to do


@dataclass
class Discovery:
    logdir: str
    runs: list[RunInfo] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)

    def run(self, name: str) -> RunInfo | None:
        return next((r for r in self.runs if r.name == name), None)


def parse_trace_name(name: str) -> tuple[str, str | None] | None:
    """``(worker, span)`` for a trace file name, None when it is not one."""
    m = TRACE_NAME_RE.match(name)
    if not m or not m.group(1):
        return None
    return m.group(1), (m.group(2)[1:] if m.group(2) else None)


def worker_name(name: str) -> tuple[str, str | None]:
    """``(worker, span)`` of any trace file name: torch's naming where it is used, else the
    name without ``.json[.gz]`` and a trailing ``_trace`` / ``.trace`` (``rank-0.json.gz``
    -> ``rank-0``; ``step_trace.json`` -> ``step``; ``trace.json`` -> ``trace``), span None."""
    parsed = parse_trace_name(name)
    if parsed:
        return parsed
    stem = name.removesuffix(".gz").removesuffix(".json")
    for suffix in ("_trace", ".trace"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem[:-len(suffix)], None
    return stem, None


@dataclass(frozen=True)
class Sniff:
    """What a JSON file's head says: a trace, or why not; and for a trace, the process
    that wrote it (host, pid, rank or None) and its first timestamp (µs), where the head
    shows them."""

    trace: bool
    reason: str | None = None  # for a file that is not a trace, worded for the user
    process: tuple[str, int, int | None] | None = None
    first_ts: float | None = None


_OBJECT_TRACE = re.compile(rb'"traceEvents"\s*:\s*\[')
# Kineto writes its metadata before the events: a big job's distributedInfo (pg_config over
# every rank) can push "traceEvents" past the head, but these keys start within it.
_KINETO_VERSION = re.compile(rb'"schemaVersion"\s*:')
_KINETO_META = re.compile(rb'"(?:deviceProperties|distributedInfo)"\s*:')
_EVENT_KEY = re.compile(rb'"ph"\s*:')


@functools.lru_cache(maxsize=1 << 14)
def sniff(path: str, size: int, mtime: float, tag: str = "") -> Sniff:
    """Whether the file at path is a Kineto trace, from at most SNIFF_BYTES of its text.

    Keyed by (path, size, mtime, content tag) so the watcher re-reads a file only when it
    changed, a rewrite that kept size and mtime included (``cp -p``, a restore; an object
    store's mtime has whole seconds): the tag is the local inode and ctime
    (``io.read.local_tag``), a store's ETag or version, or a digest of the object's head
    and tail (``io.read.remote_identity``).  A read error raises (OSError,
    io.read.INFLATE_ERRORS) and is not remembered.
    """
    return classify_head(read_head(path, SNIFF_BYTES))


def classify_head(head: bytes) -> Sniff:
    """A trace: ``{... "traceEvents": [``, or Kineto's ``schemaVersion`` with its
    ``deviceProperties`` / ``distributedInfo`` (the events come after them), or a bare array
    of objects with a ``"ph"`` key (the legacy layout).  A regex over the head, not a
    parse: the head is cut anywhere."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    whole = len(head) < SNIFF_BYTES
    within = "in the file" if whole else f"in its first {SNIFF_BYTES >> 10} KiB"
    if text[:1] == b"{":
        if _OBJECT_TRACE.search(text) or (_KINETO_VERSION.search(text) and _KINETO_META.search(text)):
            return Sniff(True, None, *_writer_process(text))
        return Sniff(False, f"JSON, but not a Kineto trace: no traceEvents {within}")
    if text[:1] == b"[":
        if text[1:].lstrip()[:1] == b"{" and _EVENT_KEY.search(text):
            return Sniff(True)
        return Sniff(False, f"a JSON array, but not of trace events (no \"ph\" {within})")
    if not text:
        return Sniff(False, "only whitespace" if whole else f"only whitespace in its first {SNIFF_BYTES >> 10} KiB")
    return Sniff(False, f"not JSON: it starts with {bytes(text[:16])!r}")


_HOST = re.compile(rb'"host_name"\s*:\s*"([^"\\]{0,256})"')
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(-?\d{1,9})')
# the host process: the pid labelled "CPU" (the python exporter lists GPU "processes" first)
_CPU_PID = re.compile(rb'"process_labels"[^{}]{0,200}?"pid"\s*:\s*(\d{1,12})[^{}]{0,200}?\{\s*"labels"\s*:\s*"CPU"')
_PID = re.compile(rb'"pid"\s*:\s*(\d{1,12})\b')
_TS = re.compile(rb'"ts"\s*:\s*(-?\d{1,20}(?:\.\d{1,9})?)')


def _writer_process(text: bytes) -> tuple[tuple[str, int, int | None] | None, float | None]:
    """(host, pid, rank) of the process that wrote the trace, and its first ts, from the
    head: Kineto writes host_name and distributedInfo before the events, and the process
    metadata (with its pid) first among them."""
    host = _HOST.search(text)
    pid = _CPU_PID.search(text) or _PID.search(text)
    rank = _RANK.search(text)
    ts = _TS.search(text)
    process = None
    if host is not None and pid is not None:
        process = (host.group(1).decode("utf-8", "replace"), int(pid.group(1)),
                   int(rank.group(1)) if rank is not None else None)
    return process, (float(ts.group(1)) if ts is not None else None)


# Reasons, worded for the user (LINK_LOOP comes from io.read: loading says the same).
# Files a trace reads beside it (Inductor's provenance artifacts: analysis.provenance): JSON
# that is not a trace and not skipped either, so never in the skipped list.
COMPANION_PATTERNS = ("inductor_provenance_tracking_node_mappings*.json",
                      "inductor_provenance_tracking_kernel_stack_traces*.json", "kernel_information.json")


def is_companion(name: str) -> bool:
    """Whether a file name is one of COMPANION_PATTERNS."""
    return any(fnmatch.fnmatchcase(name, p) for p in COMPANION_PATTERNS)


_UNREAD = object()  # a file whose head could not be read (_Collector._sniffed)
EMPTY = "empty file (0 bytes): the profiler probably crashed or was killed while writing it"
UNREADABLE = "permission denied: this process cannot read the file"
NOT_REGULAR = "not a regular file"
IS_FOLDER = "a folder named like a trace file, not a trace file"
BROKEN_LINK = "broken symbolic link: its target does not exist"
LINK_OUTSIDE = "symbolic link pointing outside the logdir: not followed"
LINK_DIR_INSIDE = "symbolic link to a folder inside the logdir: not followed (its traces are listed under their real folder)"
DOTDOT = "path has a '..' component: ignored, it could leave the logdir"
ODD_NAME = "object name has an empty or '.' component (a '//' or '/./' in it): ignored, it does not name one place"


_COMPRESSIONS = {".zst", ".zstd", ".bz2", ".xz", ".lzma", ".lz4", ".zip", ".7z", ".br", ".z", ".tgz", ".tar"}


def _bad_suffix(name: str) -> str:
    ext = name[name.rindex(_TRACE_INFIX) + len(_TRACE_INFIX):]
    if ext.lower() in _COMPRESSIONS:
        return f"compressed as '{ext}': only '.gz' is supported; recompress it with gzip"
    return f"name ends in '{ext}' after '.pt.trace.json', so it is not read as a trace"


def _duplicate(other: str) -> str:
    return f"same worker and span as {other}, which is newer and is the one listed"


# Memory snapshots (issue 20): pickles told apart by their head, never unpickled here.
PICKLE_SUFFIXES = (".pickle", ".pkl", ".pickle.gz", ".pkl.gz")
PICKLE_COMPANIONS = ("kernel_annotations_rank*.pkl",)  # analysis.graph_annotations reads these beside a trace
NOT_SNAPSHOT = ("a pickle, but not a PyTorch memory snapshot (no 'segments' or 'device_traces' at its start); "
                "only snapshots from torch.cuda.memory._dump_snapshot are read, and no pickle is ever unpickled here")
SNAPSHOT_NO_RUN = ("a memory snapshot with no trace in its folder: put it beside the run's traces to see it in "
                   "the Memory view, or open it with `tb-profiler snapshot PATH`")


def _is_pickle(name: str) -> bool:
    return name.endswith(PICKLE_SUFFIXES)


@functools.lru_cache(maxsize=1 << 12)
def sniff_snapshot(path: str, size: int, mtime: float, tag: str = "") -> bool:
    """Whether the pickle at path is a memory snapshot, from its first HEAD_BYTES
    (inflated for .gz), remembered per version of the file as ``sniff`` is. Raises OSError
    or INFLATE_ERRORS (not remembered)."""
    return is_snapshot_head(read_head(path, HEAD_BYTES))


def _looks_like_trace(name: str) -> bool:
    return _TRACE_INFIX in name


def _is_json(name: str) -> bool:
    return name.endswith(".json") or name.endswith(".json.gz")


class _Collector:
    """Groups candidate files per folder, then decides runs and skips."""

    def __init__(self, logdir: str, root_name: str):
        self.logdir, self.root_name = logdir, root_name
        self.folders: dict[str, tuple[str, list[tuple[str, str, int, float, str]]]] = {}
        self.other_json: dict[str, list[SkippedFile]] = {}  # reported only where the folder is a run
        self.snapshots: dict[str, list[SnapshotFile]] = {}  # folder -> snapshots (attached to its run)
        self.skipped: list[SkippedFile] = []

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append(SkippedFile(path, reason))

    def file(self, rel_dir: str, dir_path: str, name: str, path: str, size: int, mtime: float,
             tag: str = "") -> None:
        """A regular, readable file ``name`` in folder ``rel_dir`` (tag: its content tag)."""
        if parse_trace_name(name):
            if size == 0:
                self.skip(path, EMPTY)
            else:
                self._trace(rel_dir, dir_path, name, path, size, mtime, tag)
        elif _looks_like_trace(name):
            self.skip(path, _bad_suffix(name))
        elif _is_json(name) and not is_companion(name):
            self._other_json(rel_dir, dir_path, name, path, size, mtime, tag)
        elif _is_pickle(name) and not any(fnmatch.fnmatchcase(name, p) for p in PICKLE_COMPANIONS):
            self._pickle(rel_dir, name, path, size, mtime, tag)

    def _pickle(self, rel_dir: str, name: str, path: str, size: int, mtime: float, tag: str) -> None:
        """A pickle: a memory snapshot of the folder's run if its head says so, else skipped."""
        if size == 0:
            self.skip(path, EMPTY)
            return
        found = self._sniffed(sniff_snapshot, path, size, mtime, tag)
        if found is _UNREAD:
            return
        if found:
            self.snapshots.setdefault(rel_dir, []).append(SnapshotFile(name, path, size, mtime, tag))
        else:
            self.skip(path, NOT_SNAPSHOT)

    def _sniffed(self, sniffer, path: str, size: int, mtime: float, tag: str):
        """sniffer(path, size, mtime, tag) (a look at the file's head), or _UNREAD once the
        file is in the skipped list with why its head could not be read."""
        try:
            return sniffer(path, size, mtime, tag)
        except INFLATE_ERRORS as e:
            self.skip(path, f"not a readable gzip file: {e}")
        except OSError as e:
            self.skip(path, f"cannot be read: {e.strerror or e}")
        return _UNREAD

    def _trace(self, rel_dir: str, dir_path: str, name: str, path: str, size: int, mtime: float, tag: str) -> None:
        self.folders.setdefault(rel_dir, (dir_path, []))[1].append((name, path, size, mtime, tag))

    def _other_json(self, rel_dir: str, dir_path: str, name: str, path: str, size: int, mtime: float,
                    tag: str) -> None:
        """A JSON file not named like torch's traces: a trace if its head says so."""
        if size == 0:
            self.other_json.setdefault(rel_dir, []).append(SkippedFile(path, EMPTY))
            return
        found = self._sniffed(sniff, path, size, mtime, tag)
        if found is _UNREAD:
            return
        if found.trace:
            self._trace(rel_dir, dir_path, name, path, size, mtime, tag)
        else:
            self.other_json.setdefault(rel_dir, []).append(SkippedFile(path, found.reason))

    def result(self) -> Discovery:
        runs = []
        names = {rel for rel in self.folders if rel}
        for rel, (dir_path, files) in sorted(self.folders.items()):
            if not rel:
                name = self.root_name if self.root_name and self.root_name not in names else "."
            else:
                name = rel
            runs.append(RunInfo(name, dir_path, self._workers(files),
                                sorted(self.snapshots.get(rel, []), key=lambda s: natural_key(s.rel))))
            self.skipped += self.other_json.get(rel, [])
        for rel, snaps in self.snapshots.items():
            if rel not in self.folders:
                self.skipped += [SkippedFile(s.path, SNAPSHOT_NO_RUN) for s in snaps]
        runs.sort(key=lambda r: r.name)
        return Discovery(self.logdir, runs, sorted(self.skipped, key=lambda s: s.path))

    def _workers(self, files) -> dict[str, list[SpanFile]]:
        by_worker: dict[str, dict[str | None, tuple[str, str, int, float, str]]] = {}
        for item in sorted(files):
            name, _, _, mtime, _ = item
            worker, span = worker_name(name)
            spans = by_worker.setdefault(worker, {})
            old = spans.get(span)
            if old is not None:  # e.g. w.1.pt.trace.json next to w.1.pt.trace.json.gz
                keep, drop = (old, item) if old[3] >= mtime else (item, old)
                spans[span] = keep
                self.skip(drop[1], _duplicate(keep[0]))
            else:
                spans[span] = item
        self._one_process_spans(by_worker)
        out = {}
        for worker in sorted(by_worker, key=natural_key):
            ordered = sorted(by_worker[worker].items(), key=lambda kv: -1 if kv[0] is None else int(kv[0]))
            out[worker] = [SpanFile(span, i, p, size, mtime, tag)
                           for i, (span, (_, p, size, mtime, tag)) in enumerate(ordered, 1)]
        return out


    def _one_process_spans(self, by_worker: dict) -> None:
        """Files of one folder that each hold a whole "worker" but come from one process
        (``on_trace_ready=lambda p: p.export_chrome_trace(f"cycle{n}.json")``, the common
        pattern without a handler) are that process's spans, not ranks of a job: same
        host and pid and no rank or the same rank. They become one worker named as torch's
        handler names it (``{host}_{pid}``), its spans in time order. Two ranks of a job
        are two processes, so they never merge."""
        single = {w: spans[None] for w, spans in by_worker.items() if list(spans) == [None]}
        if len(single) < 2:
            return
        groups: dict[tuple, list[tuple[float, str]]] = {}
        for worker, (_, path, size, mtime, tag) in single.items():
            try:
                found = sniff(path, size, mtime, tag)
            except (OSError, *INFLATE_ERRORS):
                continue
            if found.trace and found.process is not None and found.first_ts is not None:
                groups.setdefault(found.process, []).append((found.first_ts, worker))
        for (host, pid, _), members in groups.items():
            if len(members) < 2:
                continue
            name = f"{host}_{pid}"
            merged = by_worker.setdefault(name, {})
            for first_ts, worker in sorted(members):
                merged[str(int(round(first_ts * 1000)))] = single[worker]
                if worker != name:
                    del by_worker[worker]
            merged.pop(None, None)


def natural_key(name: str) -> list:
    """Sort key for worker names: digit runs compare as numbers (rank-2 before rank-10)."""
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name))]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _walk_local(logdir: str, c: _Collector) -> None:
    root = os.path.realpath(logdir)
    stack = [("", logdir)]
    while stack:
        rel, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as e:
            c.skip(folder, f"folder cannot be listed: {e.strerror or e}")
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue  # hidden, including the writer's temp files
            child_rel = f"{rel}/{name}" if rel else name
            candidate = _looks_like_trace(name) or _is_json(name) or _is_pickle(name)
            try:
                st = entry.stat(follow_symlinks=False)
                if _stat.S_ISLNK(st.st_mode):
                    target = os.path.realpath(entry.path)
                    if not os.path.exists(target):
                        if candidate:
                            c.skip(entry.path, LINK_LOOP if is_link_loop(entry.path) else BROKEN_LINK)
                        continue
                    if not _inside(target, root):
                        if candidate or os.path.isdir(target):
                            c.skip(entry.path, LINK_OUTSIDE)
                        continue
                    if os.path.isdir(target):
                        c.skip(entry.path, LINK_DIR_INSIDE)
                        continue
                    st = os.stat(target)
                if _stat.S_ISDIR(st.st_mode):
                    if _looks_like_trace(name) and parse_trace_name(name):
                        c.skip(entry.path, IS_FOLDER)
                    stack.append((child_rel, entry.path))
                    continue
                if not candidate:
                    continue
                if not _stat.S_ISREG(st.st_mode):
                    c.skip(entry.path, NOT_REGULAR)
                elif not os.access(entry.path, os.R_OK):
                    c.skip(entry.path, UNREADABLE)
                else:
                    c.file(rel, folder, name, entry.path, st.st_size, st.st_mtime, local_tag(st))
            except OSError as e:
                if candidate:
                    c.skip(entry.path, f"cannot be read: {e.strerror or e}")


def _mtime(info: dict) -> float:
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created", "timeCreated"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, _dt.datetime):
            return v.timestamp()
        try:
            return float(v)
        except (TypeError, ValueError):
            try:
                return _dt.datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def _walk_fsspec(url: str, c: _Collector) -> None:
    from fsspec.core import url_to_fs

    fs = root = None
    try:
        fs, root = url_to_fs(url)
        root = root.rstrip("/")
        _forget_listings(fs, root)
        listed = fs.find(root, detail=True, withdirs=False)
    except OSError:
        raise
    except Exception as e:  # a remote filesystem's own (no endpoint, no credentials), s3fs missing
        raise OSError(f"cannot list it: {type(e).__name__}: {e}") from e
    finally:  # and leaves none behind: whoever opens one of these objects next asks the store
        if fs is not None:
            _forget_listings(fs, root)
    prefix = root + "/" if root else ""
    for path, info in sorted(listed.items()):
        full = fs.unstrip_protocol(path)
        if not path.startswith(prefix) and prefix:
            continue
        parts = path[len(prefix):].split("/")
        name = parts[-1]
        if any(p.startswith(".") for p in parts if p not in ("..", ".")):
            continue
        if ".." in parts or "." in parts or "" in parts:  # object names are any text
            if _looks_like_trace(name) or _is_json(name) or _is_pickle(name):
                c.skip(full, DOTDOT if ".." in parts else ODD_NAME)
            continue
        rel = "/".join(parts[:-1])
        folder = fs.unstrip_protocol(f"{prefix}{rel}" if rel else root)
        c.file(rel, folder, name, full, int(info.get("size") or 0), _mtime(info), _identity(fs, path, info))


def _identity(fs, path: str, info: dict) -> str:
    """The object's content tag, or a digest of its head and tail where the store has none
    (io.read.remote_identity), for the candidates only (a trace or JSON name); '' when that
    cannot be read (loading it says why)."""
    name = path.rsplit("/", 1)[-1]
    if not (_looks_like_trace(name) or _is_json(name) or _is_pickle(name)):
        return ""
    try:
        return remote_identity(fs, path, info)
    except Exception:  # noqa: BLE001 - a store's own error; the load reports it
        return ""


def _forget_listings(fs, root: str) -> None:
    """Drop what the filesystem remembers of listings at and under root, so each scan (and
    each open after it) sees the store as it is now.

    Why: fsspec keeps one filesystem per set of options for the life of the process, and
    its listings with it; s3fs's ``find`` fills in only folders it has not listed yet, and
    ``info`` and ``open`` answer from them, so an object rewritten by another process would
    keep its old size and ETag (a stale read, or s3fs's FileExpired on the next fetch).
    """
    try:
        fs.invalidate_cache(root)
    except Exception:  # noqa: BLE001 - nothing remembered, or nothing to forget
        return
    cache = getattr(fs, "dircache", None)
    if not cache:
        return
    under = root + "/"
    try:
        for key in [k for k in list(cache) if isinstance(k, str) and k.startswith(under)]:
            cache.pop(key, None)
    except Exception:  # noqa: BLE001 - a listings cache we cannot walk
        pass


def discover(logdir: str | os.PathLike) -> Discovery:
    """List the runs under ``logdir`` and the trace-like files that cannot be used.

    Cheap (listing and stat, plus the head of each JSON file not named like torch's
    traces, once per version of it), so it can be called again and again; the result
    compares equal when nothing changed.
    """
    logdir = os.fspath(logdir)
    if is_url(logdir):
        base = logdir.split("://", 1)[1].rstrip("/").rsplit("/", 1)[-1]
        c = _Collector(logdir, base)
        _walk_fsspec(logdir, c)
    else:
        if logdir.startswith("file://"):
            logdir = logdir[len("file://"):]
        logdir = os.path.abspath(logdir)
        c = _Collector(logdir, os.path.basename(logdir.rstrip(os.sep)))
        if not os.path.isdir(logdir):
            raise FileNotFoundError(f"logdir does not exist or is not a folder: {logdir}")
        _walk_local(logdir, c)
    return c.result()
