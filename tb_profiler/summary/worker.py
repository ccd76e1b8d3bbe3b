"""The loop a summary worker process runs (the other end of summary/procs.py).

A worker is a fresh interpreter started as ``python -c BOOT`` (procs.BOOT): it imports
tb_profiler, never the caller's ``__main__``, so a script without an
``if __name__ == "__main__":`` guard, a notebook and ``python -`` all work, and a user's
script never runs twice.  It reads tasks from its stdin and writes results to the stdout
it was started with; fd 1 then points at stderr, so a print in library code cannot
corrupt a result.

Frames both ways: 8 bytes little-endian length, then a pickle.  A task is
``(fn, args, environ, cwd)``: the caller's environment and folder of the moment are made
this process's own first (a worker outlives one call: settings made since it started
must reach it).  The answer is fn's return value (its exception where it raised).

A worker never outlives its parent: a thread checks the parent is still the one that
started it (a parent that died, even by SIGKILL, re-parents it) and ends the process.
An idle worker ends after ``idle_s`` seconds.  SIGINT is ignored: Ctrl+C reaches the
whole process group, and the parent decides what happens to its workers.
"""
from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import threading
import time

HEADER = struct.Struct("<Q")
CHECK_S = 0.2  # how often the watchdog looks at the parent and the idle time


def read_frame(stream) -> bytes | None:
    """One frame's payload, or None at the end of the stream (also a cut-off frame)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (n,) = HEADER.unpack(head)
    body = stream.read(n)
    return body if len(body) == n else None


def write_frame(stream, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _answer(outcome) -> bytes:
    """The pickled outcome, or, where it cannot be pickled, a RuntimeError saying what it was."""
    try:
        return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception
        text = f"{type(outcome).__name__}: {outcome}"[:2000]
        return pickle.dumps(RuntimeError(f"a result could not be sent back ({exc}): {text}"))


def _run(payload: bytes):
    """The outcome of one task frame: fn(*args) after taking on the caller's environment."""
    try:
        fn, args, environ, cwd = pickle.loads(payload)
        if environ != os.environ:
            os.environ.clear()
            os.environ.update(environ)
        if cwd and cwd != os.getcwd():
            os.chdir(cwd)
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the caller gets it as the task's outcome
        return exc


class _Watchdog:
    """Ends the process when its parent is gone or it has been idle for idle_s."""

    def __init__(self, parent: int, idle_s: float):
        self.parent, self.idle_s = parent, idle_s
        self.busy, self.since = False, time.monotonic()

    def __call__(self) -> None:
        while True:
            time.sleep(CHECK_S)
            idle = not self.busy and time.monotonic() - self.since > self.idle_s
            if os.getppid() != self.parent or idle:
                os._exit(0)


def _protocol_streams():
    """(tasks in, results out) on duplicates of fds 0 and 1; fd 0 becomes /dev/null and fd
    1 stderr, so nothing else in this process reads a task or writes into a result."""
    tasks = os.fdopen(os.dup(0), "rb")
    results = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return tasks, results


def main(parent: int, idle_s: float) -> None:
    """Serve tasks until the parent closes the pipe, goes away, or leaves this idle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tasks, results = _protocol_streams()
    watchdog = _Watchdog(parent, idle_s)
    threading.Thread(target=watchdog, name="tb_profiler-watchdog", daemon=True).start()
    if os.getppid() != parent:  # the parent died while this one started
        return
    import tb_profiler.summary.ingest  # noqa: F401 - warm before the first task arrives

    while True:
        payload = read_frame(tasks)
        if payload is None:
            return
        watchdog.busy = True
        try:
            write_frame(results, _answer(_run(payload)))
        except (BrokenPipeError, OSError):
            return
        finally:
            watchdog.busy, watchdog.since = False, time.monotonic()


if __name__ == "__main__":  # pragma: no cover - procs.BOOT is the way in
    main(int(sys.argv[1]), float(sys.argv[2]))
