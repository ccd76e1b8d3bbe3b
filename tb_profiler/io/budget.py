"""One memory budget for every trace load of this user on this machine: a server's loader
threads, its summary worker processes, other servers and the CLI.

Why: each process used to check its own limit (half the memory free at that moment), so
four loads at once each saw the same free memory and together took it all (four gzip
bombs: 8.5 GB, the good run waiting 14 s behind them).  Here a load first reserves the
bytes of text it expects (``reserve``), in a ledger every process reads under a file
lock; it waits its turn while the loads in flight hold the budget, first come first
served, and gives the bytes back when it ends.  A process that dies gives back all it
held (its entries name its pid, and a dead pid's are dropped by the next process to look).

The budget is $TB_PROFILER_LOAD_MEMORY_MB, else half the physical memory (never more than
the memory available now plus what the ledger already holds).  A load bigger than the
whole budget runs alone.  Where the ledger cannot be written (a read-only temp folder)
loads are not held back: the budget is a courtesy between processes, never a failure.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
import time
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no shared budget
    fcntl = None

__all__ = ["BUDGET_ENV", "budget_bytes", "held", "ledger_path", "reserve"]

BUDGET_ENV = "TB_PROFILER_LOAD_MEMORY_MB"
LEDGER_ENV = "TB_PROFILER_LOAD_LEDGER"   # another ledger file (tests: one of their own)
MAX_WAIT_S = 900.0       # a load never waits longer than this (a stuck holder must not stop the others)
_POLL_S = (0.02, 0.25)   # first and longest pause between two looks at the ledger
_seq_lock = threading.Lock()


def ledger_path() -> str:
    """$TB_PROFILER_LOAD_LEDGER, else one file per user in the temp folder."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.environ.get(LEDGER_ENV) or os.path.join(tempfile.gettempdir(), f"tb_profiler-{uid}-loads.ledger")


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                key, _, rest = line.partition(b":")
                out[key.decode()] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def budget_bytes(held_now: int = 0) -> int:
    """Bytes of text the loads in flight may hold together (see the module docstring)."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if raw:
        try:
            return max(1 << 20, int(float(raw) * (1 << 20)))
        except ValueError:
            pass
    info = _meminfo()
    total = info.get("MemTotal")
    if total is None:
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
            return 1 << 62
    avail = info.get("MemAvailable", total)
    return max(64 << 20, min(total // 2, avail + held_now))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(f) -> list[list[int]]:
    """The ledger's live entries [pid, seq, bytes, granted], dead pids' dropped."""
    f.seek(0)
    rows = []
    for line in f.read().decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 4 and all(p.lstrip("-").isdigit() for p in parts):
            rows.append([int(p) for p in parts])
    mine = os.getpid()
    return [r for r in rows if r[0] == mine or _alive(r[0])]


def _write(f, rows: list[list[int]]) -> None:
    f.seek(0)
    f.truncate()
    f.write("".join(f"{pid} {seq} {n} {g}\n" for pid, seq, n, g in rows).encode("ascii"))
    f.flush()


@contextlib.contextmanager
def _locked() -> Iterator:
    """The ledger file, open and locked (exclusive) for one read-modify-write."""
    fd = os.open(ledger_path(), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "r+b", buffering=0) as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield f
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _enqueue(nbytes: int) -> tuple[int, int]:
    """Put a waiting entry in the ledger; (pid, seq) names it."""
    with _seq_lock, _locked() as f:
        rows = _read(f)
        seq = max((r[1] for r in rows), default=0) + 1
        rows.append([os.getpid(), seq, int(nbytes), 0])
        _write(f, rows)
    return os.getpid(), seq


def _try_grant(me: tuple[int, int], force: bool) -> bool:
    """Grant the entry ``me`` when it is the oldest waiting one and fits (or nothing else is
    granted, or ``force``); True when it holds its bytes now."""
    with _locked() as f:
        rows = _read(f)
        entry = next((r for r in rows if (r[0], r[1]) == me), None)
        if entry is None:  # dropped by someone who thought this process dead: enqueue again
            entry = [me[0], me[1], 0, 0]
            rows.append(entry)
        granted = sum(r[2] for r in rows if r[3])
        first = min((r[1] for r in rows if not r[3]), default=me[1])
        fits = granted == 0 or granted + entry[2] <= budget_bytes(granted)
        if force or (first == entry[1] and fits):
            entry[3] = 1
            _write(f, rows)
            return True
        _write(f, rows)
        return False


def _release(me: tuple[int, int]) -> None:
    with _locked() as f:
        _write(f, [r for r in _read(f) if (r[0], r[1]) != me])


def held() -> list[dict]:
    """The ledger now: every live entry (pid, bytes, granted or waiting), oldest first."""
    if fcntl is None:
        return []
    try:
        with _locked() as f:
            rows = _read(f)
    except OSError:
        return []
    return [{"pid": pid, "bytes": n, "granted": bool(g)} for pid, _, n, g in sorted(rows, key=lambda r: r[1])]


@contextlib.contextmanager
def reserve(nbytes: int, max_wait_s: float = MAX_WAIT_S) -> Iterator[float]:
    """Hold ``nbytes`` of the shared budget for the body of the ``with``; waits (first come,
    first served) until they fit beside what the loads in flight hold, at most max_wait_s.
    Yields the seconds it waited."""
    t0 = time.monotonic()
    if fcntl is None or nbytes <= 0:
        yield 0.0
        return
    try:
        me = _enqueue(nbytes)
    except OSError as e:  # no ledger (read-only temp folder, ...): not held back
        if e.errno not in (errno.EACCES, errno.EROFS, errno.ENOENT, errno.ENOSPC, errno.EPERM):
            raise
        yield 0.0
        return
    try:
        pause = _POLL_S[0]
        while not _try_grant(me, force=time.monotonic() - t0 >= max_wait_s):
            time.sleep(pause)
            pause = min(pause * 1.5, _POLL_S[1])
        yield time.monotonic() - t0
    finally:
        try:
            _release(me)
        except OSError:
            pass
