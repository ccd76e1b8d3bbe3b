"""The reference memory-snapshot reader: the oracle the streaming native reader is held to.

Why it exists: it is short enough to be obviously right (Python's own unpickler builds the
objects, a Python loop flattens them), so a differential test can check the fast reader
against it; and it reads any snapshot when the native extension is not built. It holds
the whole object graph, so it is for small files.

Safety: a pickle is a program. Before unpickling, every opcode is checked against
``ALLOWED`` (the opcodes of protocols 2-5 that build dict, list, tuple, str, bytes, int,
float, bool and None), so GLOBAL / STACK_GLOBAL / REDUCE / BUILD / INST / OBJ / NEWOBJ /
PERSID / EXT* and the text opcodes of protocols 0-1 are refused with their byte offset;
the Unpickler's ``find_class`` and ``persistent_load`` refuse everything as a second wall.
"""
from __future__ import annotations

import io
import pickle
import pickletools
import re
from typing import Any

import numpy as np

from tb_profiler.decode import snapshot_schema as S
from tb_profiler.decode.snapshot_columns import SnapshotColumns
from tb_profiler.errors import TraceFormatError

# Opcodes a snapshot may use (the native reader accepts exactly these; snapshot.c mirrors it)
ALLOWED = frozenset({
    "PROTO", "FRAME", "STOP", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "MARK", "POP", "POP_MARK", "DUP",
    "SETITEM", "SETITEMS", "APPEND", "APPENDS", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE",
    "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
    "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET",
})
# the text opcodes kept (INT, PUT, GET) must hold plain decimal text (pickle itself also
# takes "0x1f", " 7", "1_0"; the native reader does not, so neither does the reference)
_DECIMAL = {"INT": re.compile(rb"(?:-?(?:0|[1-9][0-9]{0,17})|00|01)\n"), "PUT": re.compile(rb"[0-9]{1,18}\n"),
            "GET": re.compile(rb"[0-9]{1,18}\n")}
_INT64_MIN, _UINT64_END = -(1 << 63), 1 << 64


def _fail(path: str, message: str, offset: int | None = None) -> TraceFormatError:
    return TraceFormatError(path, f"not a readable memory snapshot: {message}", offset)


class _Refusing(pickle.Unpickler):
    """An Unpickler that can name no class and load no persistent id (never runs code)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load the global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a persistent id")


def check_opcodes(data: bytes, path: str) -> None:
    """Raises TraceFormatError at the first opcode not in ALLOWED, or malformed, or crossing
    the end of its frame (pickle's spec: no opcode straddles a frame; Python's unpicklers
    disagree on such input, so neither reader takes it)."""
    frame_end = 0
    prev = None  # (name, pos) of the opcode before: it ends where the next one starts
    try:
        for op, arg, pos in pickletools.genops(data):
            if prev and prev[1] < frame_end and pos > frame_end:
                raise _fail(path, "an opcode crosses the end of its frame", prev[1])
            if op.name == "FRAME":
                if pos < frame_end:
                    raise _fail(path, "an opcode crosses the end of its frame", pos)
                frame_end = pos + 9 + arg
            if op.name not in ALLOWED:
                raise _fail(path, f"the pickle uses the opcode {op.name}, which could run code or build "
                                  "something other than plain dicts, lists, strings and numbers", pos)
            if op.name in _DECIMAL and not _DECIMAL[op.name].fullmatch(data, pos + 1, data.index(b"\n", pos + 1) + 1):
                raise _fail(path, f"the {op.name} opcode's text is not a plain decimal number", pos)
            if op.name == "STOP":
                if pos < frame_end < pos + 1:
                    raise _fail(path, "an opcode crosses the end of its frame", pos)
                return
            prev = (op.name, pos)
    except TraceFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - pickletools raises ValueError and others on damage
        raise _fail(path, f"damaged pickle ({e})") from None


def unpickle(data: bytes, path: str) -> Any:
    """The plain object a snapshot pickle holds, refusing anything that is not plain data."""
    check_opcodes(data, path)
    try:
        return _Refusing(io.BytesIO(data)).load()
    except RecursionError:
        raise _fail(path, "the pickle nests too deeply") from None
    except Exception as e:  # noqa: BLE001 - pickle raises many types on damaged input
        raise _fail(path, f"damaged pickle ({type(e).__name__}: {e})") from None


def as_i64(v: Any) -> int:
    """An int (not a bool) in [-2**63, 2**64) as int64 (uint64 bit pattern above 2**63 - 1), else MISSING."""
    if type(v) is not int or not _INT64_MIN <= v < _UINT64_END:
        return S.MISSING
    return v - _UINT64_END if v >= 1 << 63 else v


def as_i32(v: Any) -> int:
    """An int in int32 range, else -1 (devices)."""
    return v if type(v) is int and -(1 << 31) <= v < (1 << 31) else -1


class _Builder:
    """Flattens the unpickled dicts into the schema's columns (a Python loop: small files)."""

    def __init__(self, path: str):
        self.path = path
        self.rows: dict[str, dict[str, list]] = {t: {c: [] for c in cols} for t, cols in S.TABLES.items()}
        self.strings: list[str] = []
        self.string_ids: dict[str, int] = {}
        self.frame_ids: dict[tuple, int] = {}
        self.stack_ids: dict[tuple, int] = {}
        self.stack_offsets = [0]
        self.stack_frames: list[int] = []

    def string(self, v: Any) -> int:
        if type(v) is not str:
            return -1
        sid = self.string_ids.get(v)
        if sid is None:
            sid = self.string_ids[v] = len(self.strings)
            self.strings.append(v)
        return sid

    def coded(self, v: Any, names: tuple) -> tuple[int, int]:
        """(index in names, -1) or (-1, string id of an unknown text)."""
        if type(v) is str and v in names:
            return names.index(v), -1
        return -1, self.string(v)

    def frame(self, f: Any) -> int:
        if type(f) is not dict:
            raise _fail(self.path, f"a frame is a {type(f).__name__}, not a dict")
        key = (self.string(f.get("filename")), as_i64(f.get("line")), self.string(f.get("name")))
        fid = self.frame_ids.get(key)
        if fid is None:
            fid = self.frame_ids[key] = len(self.frame_ids)
            for col, v in zip(("filename", "line", "name"), key):
                self.rows["frames"][col].append(v)
        return fid

    def stack(self, frames: Any) -> int:
        if frames is None:
            return -1
        if type(frames) is not list:
            raise _fail(self.path, f"'frames' is a {type(frames).__name__}, not a list")
        if not frames:
            return -1
        key = tuple(self.frame(f) for f in frames)
        sid = self.stack_ids.get(key)
        if sid is None:
            sid = self.stack_ids[key] = len(self.stack_ids)
            self.stack_frames.extend(key)
            self.stack_offsets.append(len(self.stack_frames))
        return sid

    def list_of(self, obj: dict, key: str, what: str, item_type: type) -> list:
        v = obj.get(key, [])
        if type(v) is not list:
            raise _fail(self.path, f"'{key}' is a {type(v).__name__}, not a list")
        for item in v:
            if type(item) is not item_type:
                raise _fail(self.path, f"{what} is a {type(item).__name__}, not a {item_type.__name__}")
        return v

    def add(self, table: str, values: dict) -> None:
        for col, v in values.items():
            self.rows[table][col].append(v)

    def segment(self, seg: dict) -> None:
        row = len(self.rows["segments"]["device"])
        pool = seg.get("segment_pool_id")
        pool = pool if type(pool) is tuple and len(pool) == 2 else (None, None)
        exp = seg.get("is_expandable")
        blocks = self.list_of(seg, "blocks", "a block", dict)
        start = len(self.rows["blocks"]["segment"])
        stack = self.stack(seg.get("frames"))
        offset = 0
        for b in blocks:
            state, state_text = self.coded(b.get("state"), S.BLOCK_STATES)
            size = as_i64(b.get("size"))
            self.add("blocks", {"segment": row, "offset": offset, "size": size,
                                "requested_size": as_i64(b.get("requested_size")), "state": state,
                                "state_text": state_text, "stack": self.stack(b.get("frames"))})
            offset = (offset + (0 if size == S.MISSING else size) + (1 << 63)) % (1 << 64) - (1 << 63)
        self.add("segments", {
            "device": as_i32(seg.get("device")), "address": as_i64(seg.get("address")),
            "total_size": as_i64(seg.get("total_size")), "allocated_size": as_i64(seg.get("allocated_size")),
            "active_size": as_i64(seg.get("active_size")), "requested_size": as_i64(seg.get("requested_size")),
            "stream": as_i64(seg.get("stream")), "segment_type": self.string(seg.get("segment_type")),
            "pool_a": as_i64(pool[0]), "pool_b": as_i64(pool[1]),
            "is_expandable": int(exp) if type(exp) is bool else -1, "stack": stack,
            "block_start": start, "block_count": len(blocks)})

    def entry(self, device: int, e: dict) -> None:
        action, action_text = self.coded(e.get("action"), S.ACTIONS)
        self.add("history", {
            "device": device, "action": action, "action_text": action_text, "addr": as_i64(e.get("addr")),
            "size": as_i64(e.get("size")), "stream": as_i64(e.get("stream")), "time_us": as_i64(e.get("time_us")),
            "stack": self.stack(e.get("frames")), "device_free": as_i64(e.get("device_free")),
            "compile_context": self.string(e.get("compile_context")),
            "user_metadata": self.string(e.get("user_metadata"))})

    def columns(self, extras: dict, n_devices: int) -> SnapshotColumns:
        tables = {t: {c: np.array(self.rows[t][c], dtype=d) for c, d in cols.items()} for t, cols in S.TABLES.items()}
        return SnapshotColumns(tables=tables, stack_offsets=np.array(self.stack_offsets, dtype=np.int64),
                               stack_frames=np.array(self.stack_frames, dtype=np.int32), strings=self.strings,
                               extras=extras, n_devices=n_devices)


def bounded_extra(v: Any) -> Any:
    """v when it holds at most EXTRA_LIMIT container items (counted through shared and
    self-referencing parts as often as they are reached), else None."""
    budget, todo = S.EXTRA_LIMIT, [v]
    while todo:
        x = todo.pop()
        if type(x) is dict:
            items = list(x.keys()) + list(x.values())
        elif type(x) in (list, tuple):
            items = list(x)
        else:
            continue
        budget -= len(x)
        if budget < 0:
            return None
        todo.extend(i for i in items if type(i) in (dict, list, tuple))
    return v


def flatten(obj: Any, path: str) -> SnapshotColumns:
    """The schema's columns of an unpickled snapshot (a dict of plain values)."""
    if type(obj) is not dict:
        raise _fail(path, f"the pickle holds a {type(obj).__name__}, not a snapshot dict")
    b = _Builder(path)
    for seg in b.list_of(obj, "segments", "a segment", dict):
        b.segment(seg)
    traces = b.list_of(obj, "device_traces", "a device's trace", list)
    for device, trace in enumerate(traces):
        for e in trace:
            if type(e) is not dict:
                raise _fail(path, f"a history entry is a {type(e).__name__}, not a dict")
            b.entry(device, e)
    extras = {k: bounded_extra(obj[k]) for k in S.EXTRAS if k in obj}
    return b.columns(extras, len(traces))


def read_snapshot_reference(data: bytes, path: str) -> SnapshotColumns:
    """The columns of a snapshot pickle (bytes, already decompressed); ``path`` names the
    file in errors (TraceFormatError)."""
    return flatten(unpickle(bytes(data), path), path)


__all__ = ["ALLOWED", "as_i64", "bounded_extra", "check_opcodes", "flatten", "read_snapshot_reference", "unpickle"]
