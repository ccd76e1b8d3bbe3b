"""Worker processes of our own for the summary pool: started, fed, stopped here.

Why not multiprocessing: its ``spawn`` and ``forkserver`` start methods re-import the
caller's ``__main__`` in every child, so a script without an
``if __name__ == "__main__":`` guard ran again in each worker (and failed there), and the
forkserver and resource tracker it leaves behind outlive a server stopped by SIGTERM or
SIGHUP, with their ``/tmp/pymp-*`` folders.  ``fork`` is no answer in a threaded server
(a forked copy can deadlock on a lock another thread held).  A worker here is a fresh
``python -c BOOT`` (subprocess: fork+exec, safe in a threaded process) running
summary/worker.py: it never sees the caller's ``__main__``, there is no forkserver, no
resource tracker, no temporary folder, and every process started is a child of this one,
known by its pid.

Workers are kept for the next call (a warm process costs nothing to start; a new one
~0.8 s of imports) and end by themselves when idle (IDLE_S), when this process closes
their pipe (after TASKS_PER_WORKER tasks: a worker's heap only grows), or when it is
gone.  ``stop_all`` ends every one of them now; ``stop_on_signals`` makes SIGTERM and
SIGHUP do that before the process ends as the signal says.

One task per worker at a time, so each result is read by the thread that owns that
worker's pipe and a dead worker is known with the task it held: that task is tried again
in a new process, and only a task that loses a second process gets ``WorkerDied``.
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from tb_profiler.errors import ProcessExiting
from tb_profiler.summary.worker import read_frame, write_frame

__all__ = ["ProcessExiting", "WorkerDied", "restore_signals", "run_tasks", "stop_all", "stop_on_signals", "worker_pids"]

IDLE_S = 60.0        # a worker left idle this long ends (the next call starts new ones)
ATTEMPTS = 2         # processes a task may lose before it is given up
TASKS_PER_WORKER = 256  # then a worker is retired (its heap only grows: a new process starts small)
STOP_WAIT_S = 2.0    # after SIGTERM, how long stop_all waits before SIGKILL
BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from tb_profiler.summary.worker import main; main(int(sys.argv[2]), float(sys.argv[3]))")

_LIVE: dict[int, "_Worker"] = {}   # pid -> every worker started and not yet reaped
_IDLE: list["_Worker"] = []        # kept for the next call
_LOCK = threading.Lock()           # guards _IDLE (never taken in a signal handler)
_CLOSED = threading.Event()        # set at exit: no worker is started after the last stop_all


class WorkerDied(RuntimeError):
    """A worker process ended while it held a task (a crash, the OOM killer, a kill)."""


def _package_root() -> str:
    """The folder holding this tb_profiler, first on the workers' path: they run this code
    (from this file's place, tb_profiler/summary/procs.py: the package root is imported by
    nothing below it, it imports them)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Worker:
    """One worker process, and the thread that reads its results into the current sink."""

    def __init__(self, sink: queue.Queue):
        if _CLOSED.is_set():
            raise ProcessExiting("tb_profiler: this process is exiting: no new summary worker is started")
        self.proc = subprocess.Popen([sys.executable, "-c", BOOT, _package_root(), str(os.getpid()), str(IDLE_S)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self.pid = self.proc.pid
        self._lock = threading.Lock()
        self._sink, self.dead, self.tasks = sink, False, 0
        _LIVE[self.pid] = self
        threading.Thread(target=self._read, name=f"tb_profiler-worker-{self.pid}", daemon=True).start()

    def attach(self, sink: queue.Queue) -> bool:
        """Send this worker's next results to sink; False if it is already gone."""
        with self._lock:
            if not self.dead:
                self._sink = sink
            return not self.dead

    def send(self, fn: Callable, args: tuple) -> bool:
        """Hand it a task; False if it is gone (its pipe is closed)."""
        task = (fn, args, dict(os.environ), os.getcwd())
        try:
            write_frame(self.proc.stdin, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
            return True
        except (BrokenPipeError, OSError, ValueError):  # ValueError: the pipe was closed here
            return False

    def retire(self) -> None:
        """Let it end when idle: its pipe closes, it reads the end and exits."""
        try:
            self.proc.stdin.close()
        except OSError:  # a broken pipe's buffer cannot be flushed
            pass

    def stop(self) -> None:
        """End it now (SIGTERM: a worker keeps nothing that needs saving)."""
        try:
            self.proc.terminate()
        except OSError:
            pass

    def _read(self) -> None:
        while True:
            payload = read_frame(self.proc.stdout)
            if payload is None:
                break
            try:
                outcome = pickle.loads(payload)
            except Exception as exc:  # noqa: BLE001 - e.g. an exception class that cannot be rebuilt
                outcome = RuntimeError(f"a result could not be read back: {exc}")
            with self._lock:
                self._sink.put((self, True, outcome))
        code = self.proc.wait()
        _LIVE.pop(self.pid, None)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:  # a broken pipe's buffer cannot be flushed
                pass
        with self._lock:
            self.dead = True
            self._sink.put((self, False, code))


def _how(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _checkout(n: int, sink: queue.Queue) -> list[_Worker]:
    """Up to n idle workers, now sending to sink (the rest are started as needed)."""
    got = []
    with _LOCK:
        while _IDLE and len(got) < n:
            w = _IDLE.pop()
            if w.attach(sink):
                got.append(w)
    return got


def _checkin(workers: Iterable[_Worker]) -> None:
    with _LOCK:
        _IDLE.extend(w for w in workers if not w.dead)


def run_tasks(fn: Callable, tasks: Sequence[tuple[Any, tuple]], jobs: int) -> Iterator[tuple[Any, Any]]:
    """(key, fn(*args)) for each (key, args) of tasks, as each finishes, on up to ``jobs``
    worker processes.  The outcome is fn's return value, the exception it raised, or
    WorkerDied when the task lost ATTEMPTS processes.  fn must be importable by name (a
    module-level function of tb_profiler), args picklable.  Leaving the iterator early
    stops the workers still busy; the others are kept for the next call."""
    todo = deque((key, args, 1) for key, args in tasks)
    sink: queue.Queue = queue.Queue()
    free = _checkout(min(jobs, len(todo)), sink)
    busy: dict[_Worker, tuple] = {}
    try:
        while todo or busy:
            while todo and (free or len(busy) < jobs):
                fresh = not free
                w = free.pop() if free else _Worker(sink)
                task = todo.popleft()
                if w.send(fn, task[1]):
                    busy[w] = task
                elif fresh:  # a new process that could not take it: counts as one lost
                    yield from _lost(task, None, todo)
                else:  # a kept one that ended meanwhile (idle): not the task's doing
                    todo.appendleft(task)
            w, ok, value = sink.get()
            task = busy.pop(w, None)
            if task is None:  # the end of a worker whose send failed: already counted
                continue
            if ok:
                w.tasks += 1
                if w.tasks < TASKS_PER_WORKER:
                    free.append(w)
                else:
                    w.retire()
                yield task[0], value
            else:
                yield from _lost(task, value, todo)
    finally:
        for w in busy:
            w.stop()
        _checkin(free)


def _lost(task: tuple, code: int | None, todo: deque) -> Iterator[tuple[Any, Any]]:
    """A task whose process ended under it: tried again first, given up after ATTEMPTS."""
    key, args, attempt = task
    if attempt < ATTEMPTS:
        todo.appendleft((key, args, attempt + 1))
        return
    how = _how(code) if code is not None else "its pipe closed"
    yield key, WorkerDied(f"the process working on it died {ATTEMPTS} times ({how}: out of memory, "
                          "a crash, or a kill)")


def worker_pids() -> list[int]:
    """The pids of every worker process started here and not yet ended."""
    return sorted(_LIVE)


def stop_all(wait_s: float = STOP_WAIT_S) -> None:
    """End every worker process now: SIGTERM, then SIGKILL after wait_s, and reap them.
    Takes no lock, so a signal handler may call it whatever the interrupted code held."""
    workers = list(_LIVE.values())
    for w in workers:
        w.stop()
    deadline = time.monotonic() + wait_s
    for w in workers:
        try:
            w.proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()
        _LIVE.pop(w.pid, None)


def _at_exit() -> None:
    """At exit, a daemon thread may still be summarizing: its workers end here, and it
    starts no others."""
    _CLOSED.set()
    stop_all()


def _forget_in_child() -> None:
    """A forked copy of this process owns none of these workers (their pipes and reader
    threads are the parent's): it must neither use nor stop them."""
    global _LOCK
    _LIVE.clear()
    _IDLE.clear()
    _LOCK = threading.Lock()  # the parent's may have been held by a thread the child lacks


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def stop_on_signals(signums: Iterable[int] = STOP_SIGNALS) -> dict[int, Any]:
    """Make each signal end the worker processes first, then do what it did before: call
    the handler that was set (TensorBoard's SIGTERM one exits through atexit), or end this
    process by that same signal (a shell reports 128 + its number; a process manager sees
    it stopped by the signal it sent).  A signal set to be ignored (``nohup``) stays
    ignored.  Python sets handlers in the main thread only: elsewhere nothing is set.
    Returns {signal: the handler it replaced}, for restore_signals."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    replaced = {}
    for signum in signums:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN or getattr(previous, "_tb_profiler_stop", False):
            continue
        signal.signal(signum, _stop_handler(previous))
        replaced[signum] = previous
    return replaced


def restore_signals(replaced: dict[int, Any]) -> None:
    """Put back the handlers stop_on_signals replaced (where ours is still the one set)."""
    for signum, previous in replaced.items():
        if getattr(signal.getsignal(signum), "_tb_profiler_stop", False):
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)


def _stop_handler(previous) -> Callable:
    def handler(signum: int, frame) -> None:
        stop_all()
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1.0)  # the default action ends the process; where the signal is blocked:
        os._exit(128 + signum)

    handler._tb_profiler_stop = True  # type: ignore[attr-defined]
    return handler
