"""Event categories: Kineto's activity list as a small int enum, old spellings folded in.

Why: analyses ask "is this a kernel?" millions of times; comparing an int8 column with
``Kind.KERNEL`` is one vectorized compare, and traces from PyTorch 1.8/1.9 ("Kernel",
"Operator", "Runtime", ...) read the same as modern ones ("kernel", "cpu_op",
"cuda_runtime").  The mapping runs once per distinct category string, never per event.
"""
from __future__ import annotations

import enum

import numpy as np

from tb_profiler.trace.strings import map_string_ids


class Kind(enum.IntEnum):
    """Canonical event category (Kineto's ActivityType names, plus flow/trace kinds)."""

    OTHER = 0
    CPU_OP = 1
    USER_ANNOTATION = 2
    GPU_USER_ANNOTATION = 3
    PYTHON_FUNCTION = 4
    KERNEL = 5
    GPU_MEMCPY = 6
    GPU_MEMSET = 7
    CUDA_RUNTIME = 8
    CUDA_DRIVER = 9
    CUDA_SYNC = 10
    CUDA_EVENT = 11
    CUDA_PROFILER_RANGE = 12
    EXTERNAL_CORRELATION = 13
    CPU_INSTANT_EVENT = 14
    OVERHEAD = 15
    AC2G = 16
    FWDBWD = 17
    TRACE = 18
    MTIA_RUNTIME = 19
    MTIA_CCP_EVENTS = 20
    MTIA_INSIGHT = 21
    MTIA_COUNTERS = 22
    GLOW_RUNTIME = 23
    HPU_OP = 24
    XPU_RUNTIME = 25
    XPU_DRIVER = 26
    XPU_SCOPE_PROFILER = 27
    XPU_SYNC = 28
    COLLECTIVE_COMM = 29
    PRIVATEUSE1_RUNTIME = 30
    PRIVATEUSE1_DRIVER = 31

    @property
    def label(self) -> str:
        """The category as Kineto writes it today ("kernel", "cpu_op", "Trace", ...)."""
        return KIND_NAMES[self]


# Kineto spelling of each kind; index = Kind value.
KIND_NAMES: tuple[str, ...] = tuple(
    "other" if k is Kind.OTHER else "Trace" if k is Kind.TRACE else k.name.lower() for k in Kind
)

# Older or alternative spellings (compared lower-cased) -> kind.
_ALIASES: dict[str, Kind] = {
    "operator": Kind.CPU_OP,          # PyTorch 1.8-1.9 Kineto
    "runtime": Kind.CUDA_RUNTIME,
    "driver": Kind.CUDA_DRIVER,
    "memcpy": Kind.GPU_MEMCPY,
    "memset": Kind.GPU_MEMSET,
    "python": Kind.PYTHON_FUNCTION,
    "user annotation": Kind.USER_ANNOTATION,
    "gpu user annotation": Kind.GPU_USER_ANNOTATION,
    "async": Kind.AC2G,               # old runtime -> kernel flows ("launch")
    "forward_backward": Kind.FWDBWD,
}
_BY_NAME: dict[str, Kind] = {name.lower(): Kind(i) for i, name in enumerate(KIND_NAMES) if i}
_BY_NAME.update(_ALIASES)

def kind_of(category: str | None) -> Kind:
    """The canonical kind of one category string (OTHER when unknown)."""
    if not category:
        return Kind.OTHER
    return _BY_NAME.get(category.strip().lower(), Kind.OTHER)


def kind_column(cat_ids: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """uint8 kind per row from category string ids, mapping each distinct id once."""
    return map_string_ids(cat_ids, strings, kind_of, np.uint8, Kind.OTHER)


def codes_in(codes: np.ndarray, wanted: list[int], n_codes: int) -> np.ndarray:
    """Boolean mask of the small codes (uint8 roles, kinds) that are in ``wanted``. Why not
    ``lut[codes]``: numpy casts a uint8 index array to intp before gathering, ~15x the cost
    of a comparison; a few comparisons, or ``take`` for many (no cast), give the same mask."""
    codes, wanted = np.asarray(codes), sorted(set(wanted))
    if len(wanted) <= 4:
        out = np.zeros(codes.shape, dtype=bool)
        for w in wanted:
            out |= codes == w
        return out
    lut = np.zeros(n_codes, dtype=bool)
    lut[wanted] = True
    return lut.take(codes)


def kind_mask(kinds: np.ndarray, wanted) -> np.ndarray:
    """Boolean mask of rows whose kind is in ``wanted`` (one Kind or an iterable of them)."""
    if isinstance(wanted, (int, Kind)):
        return kinds == int(wanted)
    return codes_in(kinds, [int(k) for k in wanted], len(KIND_NAMES))
