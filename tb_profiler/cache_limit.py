"""A bounded cache folder: a size cap, least-recently-used eviction, orphan and temp-file cleanup.

Why: without a bound the cache only grows (one user's reached 452 MB; a busy logdir can
reach tens of GB): traces replaced or deleted leave orphaned entries, and a writer killed
mid-write leaves its ``.tmp-*.tbpc`` file.  This module decides what may go; tb_profiler.cache
reads and writes entries and calls it (this module never imports the cache: what it needs of
the folder and of an entry's header is tb_profiler.cache_folder's):

- ``mark_used(path)`` after an entry is read: its mtime becomes "last used" (atime is not
  reliable: relatime updates it at most daily, noatime never);
- ``would_fit(folder, nbytes)`` before writing: an entry bigger than the whole cap is
  never written;
- ``enforce(folder, incoming=nbytes, keep=(path,))``: makes room, from a listing of the
  folder made now (the command line's ``cache trim``, and anyone who changed it by hand);
- ``make_room(folder, incoming, keep)`` before writing and ``written(path, source)`` after
  (what ``cache.write_entry`` calls): the same rules, from this process's picture of the
  folder (below), so a write costs the same with 10 entries or 10,000.

Why a picture in memory: listing the folder and reading every entry's header before each
write cost ~85 µs per entry (0.93 s a write at 10,000 entries), so loading N files cost
O(N²): a logdir of 10,000 one-file runs never finished loading.  Each process keeps, per
cache folder, what it listed (entry and temp file sizes and times, no header read) and
updates it as it writes, reads (``mark_used``) and removes; it lists the folder again at
most every ``RELIST_SECONDS`` (a few ms per thousand entries), which is also when stale
temp files and old orphans are swept.  An entry's source (its header) is read only where
eviction needs it (an orphan is the first to go), once per entry file.  What other
processes write meanwhile is counted at the next listing: the cap can be overshot by
what they wrote in those seconds, never by more.

The folder given to these may be the cache folder or the folder of an entry: a
``summaries`` subfolder stands for its parent (the cache folder holds both), so
``os.path.dirname(entry_path)`` is enough for a caller.

What counts: the files ``tb_profiler.cache.entries()`` lists (the cache folder's ``*.tbpc``
and its ``summaries/`` folder's) whose name is an entry's (``<name>.<32 hex>.tbpc``, as
``cache_folder.entry_name`` makes them) or a writer's temp file (``.tmp-*.tbpc``), and that are
regular files.  Anything else in the folder (a ``notes.tbpc``, a symlink, other files) is
never counted, never removed.

The order of eviction: temp files whose writer has not written for ``STALE_TEMP_SECONDS``
always go (nothing can use them: an entry is renamed into place whole, and a live writer
keeps touching its file), and so do orphans unused for ``ORPHAN_GRACE_SECONDS``; then, only while the entries plus ``incoming`` exceed the cap,
orphans (the trace is gone, or the entry is unreadable) oldest first, then the least
recently used.  Younger orphans are not removed while there is room: a trace folder on a
mount that is down for a moment would otherwise lose all its entries (``tb-profiler cache clear
--orphans`` removes them on demand).  Fresh temp files are neither counted nor removed:
each is about to become an entry its writer accounts for (``incoming``), or to vanish.

Races are harmless: a file that vanished is skipped (and no longer counted), a file used or
rewritten since it was listed (its mtime or size changed) is left alone, and two processes
evicting at once may together remove a little more than needed, never a kept path.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import threading
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from tb_profiler.cache_folder import CacheWarning, cache_dir, entry_source

__all__ = ["CAP_CEILING", "CAP_DISK_FRACTION", "ENV", "ORPHAN_GRACE_SECONDS", "RELIST_SECONDS", "STALE_TEMP_SECONDS",
           "Item", "Removed", "cache_max", "cache_max_bytes", "cache_root", "clear", "enforce", "evict", "inventory",
           "is_temp", "make_room", "mark_used", "parse_size", "would_fit", "written"]

ENV = "TB_PROFILER_CACHE_MAX"
CAP_CEILING = 20 << 30      # 20 GiB
CAP_DISK_FRACTION = 0.10    # of the free space on the cache folder's filesystem
STALE_TEMP_SECONDS = 600.0  # a temp file not written for this long belongs to a dead writer
ORPHAN_GRACE_SECONDS = 7 * 86400.0  # an orphan unused this long goes even with room to spare
RELIST_SECONDS = 30.0       # a process lists a cache folder again after this long (see the docstring)
SUBDIR = "summaries"        # tb_profiler.summary.store.SUBDIR (not imported: that pulls the decoder in)

_ENTRY_NAME = re.compile(r"\.[0-9a-f]{32}\.tbpc\Z")      # cache_folder.entry_name: <safe name>.<sha256[:32]>.tbpc
_TEMP_NAME = re.compile(r"\A\.tmp-[^/]+\.tbpc\Z")         # cache.write_entry: mkstemp(prefix=".tmp-", suffix=".tbpc")
_SIZE = re.compile(r"\A\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


# -- the cap ------------------------------------------------------------------------------
def parse_size(text: str) -> int | None:
    """Bytes for "1048576", "500M", "20G", "1.5GiB", "64kb" (units are powers of 1024, so
    "20G" is the default's 20 GiB); None when text is not a size."""
    m = _SIZE.match(text or "")
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def cache_max(folder: str | os.PathLike | None = None) -> tuple[int, str]:
    """The cache folder's cap in bytes and where it comes from, in words.

    ``$TB_PROFILER_CACHE_MAX`` when set to a size ("0": no caching); otherwise (or when it
    is not a size: a warning, then) the default, min(20 GiB, 10 % of the free space on the
    cache folder's filesystem).  Why that default: a cache must never be what fills a disk,
    so it takes a tenth of what is free (less as the disk fills, which also makes it give
    space back on a nearly full disk), and 20 GiB is already hundreds of decoded traces,
    more than a working set, so a big empty disk is no reason to keep more.  The free
    space counts the cache's own files as used, so with the default the cache settles a
    little under a tenth of the space free without it; conservative on purpose."""
    raw = os.environ.get(ENV, "").strip()
    note = ""
    if raw:
        size = parse_size(raw)
        if size is not None:
            return size, f"${ENV}={raw}"
        warnings.warn(f"tb_profiler: ${ENV}={raw!r} is not a size (bytes, or like 500M, 20G; 0: no cache); "
                      "using the default cap", CacheWarning, stacklevel=2)
        note = f"; ${ENV}={raw!r} is not a size"
    where = _existing_parent(cache_dir(folder))
    try:
        free = int(shutil.disk_usage(where).free)
    except (OSError, ValueError) as e:
        return CAP_CEILING, f"default: {_gib(CAP_CEILING)} (the free space of {where} is unknown: {e}){note}"
    share = int(free * CAP_DISK_FRACTION)
    if share < CAP_CEILING:
        return share, (f"default: {CAP_DISK_FRACTION:.0%} of the {_gib(free)} free on the filesystem of {where} "
                       f"(at most {_gib(CAP_CEILING)}){note}")
    return CAP_CEILING, f"default: {_gib(CAP_CEILING)} ({CAP_DISK_FRACTION:.0%} of the free space would be more){note}"


def cache_max_bytes(folder: str | os.PathLike | None = None) -> int:
    """The cache folder's cap in bytes (see cache_max); 0 means no caching."""
    return cache_max(folder)[0]


def would_fit(folder: str | os.PathLike | None, nbytes: int) -> bool:
    """Whether an entry of nbytes may be written at all: False when it is bigger than the
    cap itself (or the cap is 0), so the caller skips writing it (saying so)."""
    cap = cache_max_bytes(cache_root(folder))
    return cap > 0 and 0 <= nbytes <= cap


def _existing_parent(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


# -- use ----------------------------------------------------------------------------------
def mark_used(path: str | os.PathLike) -> None:
    """Record that the entry at path was just used: its mtime (and atime) become now, which
    is what eviction orders by.  One syscall; never raises (a read-only cache simply keeps
    its write times)."""
    try:
        os.utime(path)
    except (OSError, TypeError, ValueError):
        return
    _ledger_of(os.path.dirname(os.fspath(path))).touch(os.fspath(path), time.time())


# -- inventory ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One file eviction may consider: an entry, or a writer's temp file.  Its source and
    whether it is an orphan are read when first asked (the entry's header, a stat of the
    source): eviction asks only where it must."""

    path: str
    kind: str          # "columns" or "summary" (the folder it is in)
    nbytes: int
    used: float        # st_mtime: written, or last marked used
    temp: bool         # a writer's .tmp-*.tbpc file
    ino: int = field(default=0, compare=False, repr=False)

    @cached_property
    def source(self) -> str | None:
        """The source the entry's header names; None for a temp file or what is not an entry."""
        return None if self.temp else _source_of(self.path, self.ino, self.nbytes)

    @cached_property
    def orphan(self) -> bool:
        """An entry whose trace is gone (a local file no longer there), or that is unreadable
        (never set for temp files)."""
        if self.temp:
            return False
        source = self.source
        return source is None or ("://" not in source and not os.path.exists(source))


_SOURCES: dict[tuple[str, int, int], str | None] = {}   # (entry file, inode, size) -> its header's source
_SOURCES_MAX = 1 << 17


def _source_of(path: str, ino: int, nbytes: int) -> str | None:
    """An entry file's source, its header read once per file (an entry is replaced by a
    rename: a new version is another inode)."""
    key = (path, ino, nbytes)
    if key not in _SOURCES:
        if len(_SOURCES) >= _SOURCES_MAX:
            _SOURCES.clear()
        _SOURCES[key] = entry_source(path)
    return _SOURCES[key]


@dataclass(frozen=True)
class Removed:
    path: str
    nbytes: int
    reason: str        # "stale temp", "orphan", "least recently used", "cleared"


def is_temp(path: str | os.PathLike) -> bool:
    """Whether path is named as a writer's temp file (``.tmp-*.tbpc``)."""
    return bool(_TEMP_NAME.match(os.path.basename(os.fspath(path))))


def cache_root(folder: str | os.PathLike | None = None) -> str:
    """The cache folder that folder belongs to: itself, or for the ``summaries`` folder of a
    cache folder (where summary entries live), its parent.  The configured cache folder
    ($TB_PROFILER_CACHE_DIR) is itself even when it is named ``summaries``."""
    root = cache_dir(folder)
    norm = os.path.normpath(root)
    if os.path.basename(norm) == SUBDIR and norm != os.path.normpath(cache_dir()):
        return os.path.dirname(norm) or "."
    return root


def inventory(folder: str | os.PathLike | None = None) -> list[Item]:
    """The entries and temp files of the cache folder and its summaries folder, listed now,
    least recently used first.  Files not named as entries or temp files, and anything that
    is not a regular file, are left out."""
    root = cache_root(folder)
    return sorted(_ledger_of(root).relist(root), key=lambda i: i.used)


def _listing(root: str) -> list[Item]:
    """The cache folder's and its summaries folder's entry and temp files: names and one
    lstat each (no header is read)."""
    out = []
    for sub, kind in (("", "columns"), (SUBDIR, "summary")):
        base = os.path.join(root, sub) if sub else root
        try:
            with os.scandir(base) as it:
                found = [e for e in it if e.name.endswith(".tbpc")]
        except OSError:
            continue
        for e in found:
            temp = is_temp(e.name)
            if not (temp or _ENTRY_NAME.search(e.name)):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(Item(e.path, kind, st.st_size, st.st_mtime, temp, st.st_ino))
    return out


class _Ledger:
    """One process's picture of one cache folder (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: dict[str, Item] = {}
        self.total = 0            # bytes of the entries (temp files are not counted)
        self.listed: float | None = None

    def relist(self, root: str) -> list[Item]:
        items = _listing(root)
        with self.lock:
            self.items = {_key(i.path): i for i in items}
            self.total = sum(i.nbytes for i in items if not i.temp)
            self.listed = time.monotonic()
        return items

    def due(self) -> bool:
        with self.lock:
            return self.listed is None or time.monotonic() - self.listed >= RELIST_SECONDS

    def note(self, item: Item) -> None:
        key = _key(item.path)
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None and not old.temp:
                self.total -= old.nbytes
            self.items[key] = item
            if not item.temp:
                self.total += item.nbytes

    def touch(self, path: str, used: float) -> None:
        key = _key(path)
        with self.lock:
            old = self.items.get(key)
            if old is not None:
                new = Item(old.path, old.kind, old.nbytes, used, old.temp, old.ino)
                if "source" in old.__dict__:
                    new.__dict__["source"] = old.source
                self.items[key] = new

    def forget(self, path: str) -> None:
        with self.lock:
            old = self.items.pop(_key(path), None)
            if old is not None and not old.temp:
                self.total -= old.nbytes

    def snapshot(self) -> tuple[list[Item], int]:
        with self.lock:
            return list(self.items.values()), self.total


def _key(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


_LEDGERS: dict[str, _Ledger] = {}
_LEDGERS_LOCK = threading.Lock()


def _ledger_of(folder: str | os.PathLike | None) -> _Ledger:
    """The picture of the cache folder that folder belongs to (its summaries folder included)."""
    root = _key(cache_root(folder))
    with _LEDGERS_LOCK:
        led = _LEDGERS.get(root)
        if led is None:
            led = _LEDGERS[root] = _Ledger()
        return led


def _forget_ledgers() -> None:
    """A forked child starts with no picture (and no lock some parent thread held)."""
    global _LEDGERS_LOCK
    _LEDGERS.clear()
    _LEDGERS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_ledgers)


def _remove(item: Item, led: "_Ledger | None" = None) -> str:
    """'removed', 'gone' (someone else removed it) or 'kept' (changed since listed: used,
    rewritten, replaced by something else; or it cannot be removed).  What is no longer
    there leaves led's picture too."""
    outcome = _unlink_unchanged(item)
    if outcome != "kept" and led is not None:
        led.forget(item.path)
    return outcome


def _unlink_unchanged(item: Item) -> str:
    try:
        st = os.lstat(item.path)
    except FileNotFoundError:
        return "gone"
    except OSError:
        return "kept"
    if not stat.S_ISREG(st.st_mode) or st.st_size != item.nbytes or st.st_mtime > item.used:
        return "kept"
    try:
        os.unlink(item.path)
    except FileNotFoundError:
        return "gone"
    except OSError:
        return "kept"
    return "removed"


def _norm(path: str | os.PathLike) -> str:
    return os.path.normcase(os.path.realpath(os.fspath(path)))


# -- eviction -------------------------------------------------------------------------------
def evict(folder: str | os.PathLike | None = None, incoming: int = 0, keep: tuple[str, ...] = (),
          stale_after: float = STALE_TEMP_SECONDS) -> list[Removed]:
    """enforce(), saying for each file removed its size and why."""
    root = cache_root(folder)
    return _evict_from(root, inventory(root), incoming, keep, stale_after, sweep=True)


def _evict_from(root: str, items: list[Item], incoming: int, keep: tuple[str, ...], stale_after: float,
                sweep: bool) -> list[Removed]:
    """Eviction over a listing: with sweep, stale temp files and old orphans first; then,
    only while over the cap, orphans, then the least recently used."""
    cap = cache_max_bytes(root)
    kept = {_norm(p) for p in keep}
    now = time.time()
    led = _ledger_of(root)
    removed: list[Removed] = []
    live = []
    for item in sorted(items, key=lambda i: i.used):
        old = now - item.used > (stale_after if item.temp else ORPHAN_GRACE_SECONDS)
        if sweep and old and (item.temp or item.orphan) and _norm(item.path) not in kept:
            outcome = _remove(item, led)
            if outcome == "removed":
                removed.append(Removed(item.path, item.nbytes, "stale temp" if item.temp else "orphan"))
            if outcome != "kept":
                continue
        if not item.temp:
            live.append(item)
    total = sum(i.nbytes for i in live)
    if total + incoming <= cap or incoming > cap:  # room already; or none can be made (would_fit is False)
        return removed
    for item in sorted(live, key=lambda i: (not i.orphan, i.used)):
        if total + incoming <= cap:
            break
        if _norm(item.path) in kept:
            continue
        outcome = _remove(item, led)
        if outcome != "kept":
            total -= item.nbytes
        if outcome == "removed":
            removed.append(Removed(item.path, item.nbytes, "orphan" if item.orphan else "least recently used"))
    return removed


def make_room(folder: str | os.PathLike | None = None, incoming: int = 0, keep: tuple[str, ...] = ()) -> list[str]:
    """enforce() for a writer about to write ``incoming`` bytes, from this process's picture
    of the folder: a listing only every RELIST_SECONDS (then stale temp files and old
    orphans are swept too), else nothing read unless the picture says the cap is reached."""
    root = cache_root(folder)
    led = _ledger_of(root)
    if led.due():
        return [r.path for r in evict(root, incoming, keep)]
    cap = cache_max_bytes(root)
    if led.total + incoming <= cap or incoming > cap:
        return []
    items, _ = led.snapshot()
    return [r.path for r in _evict_from(root, items, incoming, keep, STALE_TEMP_SECONDS, sweep=False)]


def written(path: str | os.PathLike, source: str | None) -> None:
    """Count an entry this process just wrote (renamed into place) at path, for source."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except OSError:
        return
    folder = os.path.dirname(path)
    kind = "summary" if os.path.normpath(cache_root(folder)) != os.path.normpath(folder) else "columns"
    item = Item(path, kind, st.st_size, st.st_mtime, False, st.st_ino)
    _SOURCES[(path, st.st_ino, st.st_size)] = source
    _ledger_of(folder).note(item)


def enforce(folder: str | os.PathLike | None = None, incoming: int = 0, keep: tuple[str, ...] = ()) -> list[str]:
    """Make room so the folder's entries plus ``incoming`` bytes stay under the cap: stale
    temp files always go, then (only while over the cap) orphans, then the least recently
    used entries.  Never removes a path in keep, a file that is not an entry or temp file,
    nor anything outside the cache folder and its summaries folder.  Never raises for a
    file that vanished or changed meanwhile.  Returns the paths removed."""
    return [r.path for r in evict(folder, incoming, keep)]


def clear(folder: str | os.PathLike | None = None, orphans_only: bool = False,
          stale_after: float = STALE_TEMP_SECONDS) -> list[Removed]:
    """Remove every entry (or only the orphans) and the stale temp files; a temp file still
    being written, and files that are not entries, stay."""
    now = time.time()
    removed = []
    for item in inventory(folder):
        if item.temp:
            if now - item.used <= stale_after:
                continue
            reason = "stale temp"
        elif item.orphan:
            reason = "orphan"
        elif orphans_only:
            continue
        else:
            reason = "cleared"
        if _remove(item, _ledger_of(folder)) == "removed":
            removed.append(Removed(item.path, item.nbytes, reason))
    return removed
