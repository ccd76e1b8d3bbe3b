"""Trace-level metadata: the top-level JSON keys and the ph "M" records.

Why separate: these are small (tens to thousands of items), so plain dicts are the
right shape; they are derived lazily from the stored columns and never cached apart.
"""
from __future__ import annotations

import json
import re

import numpy as np

from tb_profiler.trace.strings import map_string_ids, resolve

_STEP_RE = re.compile(r"ProfilerStep#(\d+)\Z")
_INT_RE = re.compile(r"\s*[-+]?\d+\s*\Z")


def parse_toplevel(raw: dict[str, str]) -> dict:
    """json.loads of each top-level value; a value that does not parse is kept as text."""
    out = {}
    for key, text in raw.items():
        try:
            out[key] = json.loads(text)
        except (TypeError, ValueError):
            out[key] = text
    return out


def step_number(name: str) -> int:
    """N for "ProfilerStep#N", else -1."""
    m = _STEP_RE.match(name)
    return int(m.group(1)) if m else -1


def key_column(ints: np.ndarray, str_ids: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """Per-row pid/tid as used for dict keys: the int, or the text when it is not a number.

    Kineto writes tid 25738 or "25738" (same thread) but also "stream 7" or pid "Spans",
    which the decoder stores as 0 plus a string id; those keep their text.
    """
    numeric = map_string_ids(str_ids, strings, lambda s: bool(_INT_RE.match(s)), bool, True)
    out = ints.astype(object)
    textual = ~numeric
    if textual.any():
        out[textual] = resolve(str_ids[textual], strings)
    return out


class ProcessInfo:
    """process/thread names, labels and sort indexes from the ph "M" records."""

    def __init__(self, meta_table, args_of):
        t = meta_table
        names = resolve(t["name"], t.strings)
        pids = key_column(t["pid"], t["pid_str"], t.strings)
        tids = key_column(t["tid"], t["tid_str"], t.strings)
        arg_name = resolve(t["arg_name"], t.strings)
        sort_index = t["sort_index"]
        missing = np.iinfo(np.int64).min
        self.process_names: dict = {}
        self.thread_names: dict = {}
        self.process_sort_index: dict = {}
        self.thread_sort_index: dict = {}
        self.process_labels: dict = {}
        # M records are few (one per process/thread): a loop over them is fine.
        wanted = np.zeros(len(names), dtype=bool)
        for word in ("process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"):
            wanted |= names == word
        for i in np.flatnonzero(wanted).tolist():
            kind, pid, tid = names[i], pids[i], tids[i]
            if kind == "process_name" and arg_name[i] is not None:
                self.process_names[pid] = arg_name[i]
            elif kind == "thread_name" and arg_name[i] is not None:
                self.thread_names[(pid, tid)] = arg_name[i]
            elif kind == "process_sort_index" and sort_index[i] != missing:
                self.process_sort_index[pid] = int(sort_index[i])
            elif kind == "thread_sort_index" and sort_index[i] != missing:
                self.thread_sort_index[(pid, tid)] = int(sort_index[i])
            elif kind == "process_labels":
                labels = args_of(i).get("labels")
                if labels is not None:
                    self.process_labels[pid] = labels
