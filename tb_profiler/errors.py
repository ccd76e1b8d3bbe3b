"""Errors a user can act on: each names the file and the problem."""
from __future__ import annotations


class TraceFormatError(ValueError):
    """A trace file that cannot be decoded.

    Carries the file, the byte offset of the problem (in the decompressed JSON text)
    and a short excerpt around it, so the user can find the damage with a hex editor
    or `zcat | head -c`.
    """

    def __init__(self, source: str, message: str, offset: int | None = None, excerpt: str | None = None):
        self.source = source
        self.reason = message
        self.offset = offset
        self.excerpt = excerpt
        text = f"{source}: {message}"
        if offset is not None:
            text += f" at byte {offset}"
        if excerpt:
            text += f" near {excerpt!r}"
        super().__init__(text)

    def __reduce__(self):
        # Why: a summary built in a worker process (or on a Dask worker) sends its error
        # back pickled; the default reduce would call __init__ with the text alone.
        return type(self), (self.source, self.reason, self.offset, self.excerpt)


class ProcessExiting(RuntimeError):
    """Work asked of the summary pool after the process began to exit (its last
    ``summary.procs.stop_all``): an ordinary end (TensorBoard stopped while summaries were
    being made), said in a line, not a bug's traceback."""
