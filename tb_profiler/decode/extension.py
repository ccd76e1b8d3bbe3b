"""The compiled extension (native/*.c, built as tb_profiler._native), imported here only.

Why one module: import-linter reads the import graph from .py files (grimp), so an import
of the compiled tb_profiler._native reads as an import of the tb_profiler package root,
whose public API (``tb_profiler.load``, ...) imports every stage; pyproject.toml's
contracts ignore exactly this module's import of it, and no other module names it.  It
is the decode stage's: most of it is the trace and snapshot readers, beside the nesting
walks analysis.nesting calls.
"""
from __future__ import annotations

from types import ModuleType

__all__ = ["extension"]


def extension() -> ModuleType:
    """tb_profiler._native; ImportError when it is not built.  Imported on the first call,
    so that what needs no C code (decode.schema, ...) imports without a build."""
    from tb_profiler import _native

    return _native
