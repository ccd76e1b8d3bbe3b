"""The one thread that writes cache entries for the whole process, in the order asked.

Why one: a load used to start a thread of its own to write its entry (and another for
each stored part), so a logdir of thousands of files had hundreds of writers at once
(201 seen), each contending for the disk, the GIL and the cache folder's bookkeeping.
One writer with a queue does the same work in the same total time with one thread, and
the queue is bounded (``MAX_PENDING``): a loader that runs ahead of the disk waits
instead of holding ever more decoded traces in memory for writes not done yet.

- ``later(fn, key)`` queues fn (a write) and returns its ``Pending``; ``join()`` waits for
  it (``Trace.cache_path`` does).  Called from the writer thread itself, fn runs at once.
- ``wait_for(key)`` waits for the write queued under key (an entry file), if any: a second
  load of a file in this process reads the entry its first load is writing.
- At exit the queue is drained (an ``atexit`` hook), so a command that loads and exits
  leaves its entries behind as a thread per write did.  A forked child starts with an
  empty queue (the parent's writes are the parent's).
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import deque
from typing import Callable

__all__ = ["MAX_PENDING", "Pending", "drain", "later", "pending", "wait_for"]

logger = logging.getLogger("tb_profiler")
MAX_PENDING = 32   # writes waiting at most; a caller past that waits for room


class Pending:
    """A write asked for; ``join()`` waits until it ran (whatever it did)."""

    def __init__(self, fn: Callable[[], object], key: str | None):
        self.fn, self.key = fn, key
        self._done = threading.Event()

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def done(self) -> bool:
        return self._done.is_set()


class _State:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queue: deque[Pending] = deque()
        self.by_key: dict[str, Pending] = {}
        self.running: Pending | None = None
        self.thread: threading.Thread | None = None


_s = _State()


def later(fn: Callable[[], object], key: str | None = None) -> Pending:
    """Run fn on the writer thread after the writes already queued (see the module docstring)."""
    job = Pending(fn, key)
    s = _s
    if threading.current_thread() is s.thread:
        _run_one(job)
        return job
    with s.cond:
        while len(s.queue) >= MAX_PENDING:
            s.cond.wait()
        s.queue.append(job)
        if key is not None:
            s.by_key[key] = job
        if s.thread is None or not s.thread.is_alive():
            s.thread = threading.Thread(target=_work, args=(s,), name="tb_profiler-cache-writer", daemon=True)
            s.thread.start()
        s.cond.notify_all()
    return job


def wait_for(key: str) -> None:
    """Wait for the write queued under key, if one is queued or running."""
    s = _s
    with s.cond:
        job = s.by_key.get(key)
    if job is not None and threading.current_thread() is not s.thread:
        job.join()


def pending() -> int:
    """Writes queued or running now."""
    s = _s
    with s.cond:
        return len(s.queue) + (s.running is not None)


def drain(timeout: float | None = None) -> bool:
    """Wait until every write queued so far has run; False when timeout passed first."""
    s = _s
    with s.cond:
        return s.cond.wait_for(lambda: not s.queue and s.running is None, timeout)


def _work(s: _State) -> None:
    while True:
        with s.cond:
            while not s.queue:
                s.cond.wait()
            job = s.running = s.queue.popleft()
            s.cond.notify_all()  # room for a caller waiting in later()
        _run_one(job)
        with s.cond:
            s.running = None
            if job.key is not None and s.by_key.get(job.key) is job:
                del s.by_key[job.key]
            s.cond.notify_all()


def _run_one(job: Pending) -> None:
    try:
        job.fn()
    except Exception:  # a write never takes the writer down; the load it serves goes on
        logger.exception("tb_profiler: writing a cache entry failed")
    finally:
        job._done.set()


def _after_fork_in_child() -> None:
    """The parent's writes are not this process's: let anyone waiting on them go, start empty."""
    global _s
    old = _s
    for job in [*old.queue, *([old.running] if old.running is not None else [])]:
        job._done.set()
    _s = _State()


atexit.register(drain)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
