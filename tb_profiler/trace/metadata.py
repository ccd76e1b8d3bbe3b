"""Trace-level metadata: the top-level JSON keys and the ph "M" records.

Why separate: these are small (tens to thousands of items), so plain dicts are the
right shape; they are derived lazily from the stored columns and never cached apart.
"""
from __future__ import annotations

import math
import re

import numpy as np

from tb_profiler.decode.schema import TIME_LIMIT_NS, json_value
from tb_profiler.trace.strings import map_string_ids, resolve

_STEP_RE = re.compile(r"ProfilerStep#(\d+)\Z")
_INT_RE = re.compile(r"\s*[-+]?\d+\s*\Z")
_JSON_NUMBER_RE = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?\Z")
INT64_MAX = (1 << 63) - 1
RANK_LIMIT = 1 << 31

# The top-level fields read by name, and what each must be (else it is missing, with a
# note): "int" an integer within int64 (the decoder's rule: a JSON number with an integral
# value, or a string holding one), "count" such an integer >= 0, "rank" one below 2**31
# (torch.distributed's ranks and sizes are C ints), "time" one within ±TIME_LIMIT_NS,
# "str" a string; a dict: an object whose named fields follow these rules
# (its other fields are kept as written); a list of one rule: a list of such values.  A
# rule ending in "!" is the object's key: when it breaks its rule the whole object is
# missing (a device whose id is 1e400 is no device, not device 0).
_DEVICE = {"id": "count!", "name": "str", **{k: "count" for k in (
    "totalGlobalMem", "computeMajor", "computeMinor", "major", "minor", "numSms", "multiProcessorCount",
    "maxThreadsPerBlock", "maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor", "regsPerBlock",
    "regsPerMultiprocessor", "warpSize", "sharedMemPerBlock", "sharedMemPerMultiprocessor",
    "sharedMemPerBlockOptin")}}
_PG = {"pg_name": "str", "pg_desc": "str", "backend_config": "str", "pg_size": "rank", "ranks": ["rank"]}
TOPLEVEL_RULES: dict = {
    "schemaVersion": "int", "baseTimeNanoseconds": "time", "displayTimeUnit": "str", "traceName": "str",
    "trace_id": "str", "deviceProperties": [_DEVICE], "computeProperties": [_DEVICE],
    "distributedInfo": {"backend": "str", "rank": "rank", "world_size": "rank", "pg_count": "rank",
                        "pg_config": [_PG]},
}


def parse_toplevel(raw: dict[str, str]) -> dict:
    """Each top-level value parsed (``json_value``; a value that does not parse is kept as
    text), the fields TOPLEVEL_RULES names that break their rule left out."""
    return checked_toplevel(raw)[0]


def checked_toplevel(raw: dict[str, str]) -> tuple[dict, list[str]]:
    """(parse_toplevel's dict, the paths of the fields left out: "deviceProperties[0].id")."""
    out, dropped = {}, []
    for key, text in raw.items():
        try:
            value = json_value(text)
        except (TypeError, ValueError):
            value = text
        rule = TOPLEVEL_RULES.get(key)
        if rule is not None:
            value = _checked(value, rule, key, dropped)
            if value is _MISSING:
                continue
        out[key] = value
    return out, dropped


_MISSING = object()


def _checked(value, rule, path: str, dropped: list[str]):
    """value if it follows rule (containers: with their bad fields left out), else _MISSING
    (and path added to dropped)."""
    if isinstance(rule, dict):
        if not isinstance(value, dict):
            dropped.append(path)
            return _MISSING
        out = dict(value)
        for key, sub in rule.items():
            if key in out:
                is_key = isinstance(sub, str) and sub.endswith("!")
                checked = _checked(out[key], sub.rstrip("!") if is_key else sub, f"{path}.{key}", dropped)
                if checked is _MISSING and is_key:
                    return _MISSING
                if checked is _MISSING:
                    del out[key]
                else:
                    out[key] = checked
        return out
    if isinstance(rule, list):
        if not isinstance(value, list):
            dropped.append(path)
            return _MISSING
        kept = [_checked(v, rule[0], f"{path}[{i}]", dropped) for i, v in enumerate(value)]
        return [v for v in kept if v is not _MISSING]
    if rule == "str":
        ok = isinstance(value, str)
    else:
        value = json_int(value)
        ok = value is not None and (rule == "int" or (rule == "count" and value >= 0)
                                    or (rule == "rank" and 0 <= value < RANK_LIMIT)
                                    or (rule == "time" and abs(value) < TIME_LIMIT_NS))
    if not ok:
        dropped.append(path)
        return _MISSING
    return value


def json_int(value) -> int | None:
    """value as an integer under the decoder's rule for integer fields (decode/schema.py):
    a JSON number whose exact value is an integer within int64, or a string holding one;
    None for anything else (a fraction, 1e400, a bool, null, a list, other text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _JSON_NUMBER_RE.match(value):
            return None
        value = int(value) if value.lstrip("-").isdigit() else float(value)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not -INT64_MAX - 1 <= value <= INT64_MAX:
        return None
    return value


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
