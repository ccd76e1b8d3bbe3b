"""Pickle protocol 4 written piece by piece, as CPython's C pickler writes it (make_snapshot.py).

``Writer`` frames the output (a FRAME closes at the first object boundary past 64 KiB);
``MiniPickler`` pickles plain objects with the C pickler's opcodes and memo (every str, list,
dict and tuple memoized; a second sight of the same object is a BINGET / LONG_BINGET; lists
and dicts in MARK ... APPENDS / SETITEMS batches of 1000, a single item with APPEND /
SETITEM); ``encode_entries`` writes a block of history entries with numpy, one row of bytes
per entry, the memo advanced as the pickler would have advanced it.
"""
from __future__ import annotations

import struct
from typing import Any, BinaryIO

import numpy as np

FRAME_TARGET = 64 * 1024
BATCH = 1000
EMPTY_FRAMES: list = []          # Module.cpp's empty_frames: one shared list
_BITLEN = np.array([int(i).bit_length() for i in range(256)], dtype=np.int64)


class Writer:
    """Framed output: bytes gather in the current frame, written out past 64 KiB."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.cur = bytearray()

    def raw(self, b: bytes) -> None:
        self.f.write(b)

    def write(self, b: bytes) -> None:
        self.cur += b

    def boundary(self) -> None:
        if len(self.cur) >= FRAME_TARGET:
            self.flush()

    def flush(self) -> None:
        if self.cur:
            self.f.write(b"\x95" + struct.pack("<Q", len(self.cur)))
            self.f.write(self.cur)
            self.cur = bytearray()

    def chunk(self, data: memoryview, ends: np.ndarray) -> None:
        """Rows of bytes ending at `ends`: frames close only between rows."""
        pos = 0
        while pos < len(data):
            need = FRAME_TARGET - len(self.cur)
            k = int(np.searchsorted(ends, pos + need))
            if k >= len(ends):
                self.cur += data[pos:]
                return
            end = int(ends[k])
            self.cur += data[pos:end]
            self.flush()
            pos = end

    def raw_stop(self) -> None:
        self.cur += b"."
        self.flush()


def get_op(idx: int) -> bytes:
    return b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx)


def int_op(x: int) -> bytes:
    if 0 <= x <= 0xFF:
        return b"K" + bytes([x])
    if 0 <= x <= 0xFFFF:
        return b"M" + struct.pack("<H", x)
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return b"J" + struct.pack("<i", x)
    n = (x.bit_length() >> 3) + 1
    b = x.to_bytes(n, "little", signed=True)
    if x < 0 and n > 1 and b[-1] == 0xFF and (b[-2] & 0x80):
        b = b[:-1]
    return b"\x8a" + bytes([len(b)]) + b


class ListWriter:
    """A list of n items written one by one (its MARK / APPENDS batches)."""

    def __init__(self, p: "MiniPickler", n: int):
        self.p, self.n, self.i = p, n, 0
        p.w.write(b"]")
        p.memoize(self)

    def before(self) -> None:
        if self.n > 1 and self.i % BATCH == 0:
            self.p.w.write(b"(")

    def after(self) -> None:
        self.i += 1
        if self.n == 1:
            self.p.w.write(b"a")
        elif self.i % BATCH == 0 or self.i == self.n:
            self.p.w.write(b"e")

    def item(self, obj: Any) -> None:
        self.before()
        self.p.save(obj)
        self.after()

    def end(self) -> None:
        assert self.i == self.n, (self.i, self.n)
        self.p.w.boundary()


class MiniPickler:
    """The C pickler's output for dict/list/tuple/str/int/float/bool/None, memo included."""

    def __init__(self, w: Writer):
        self.w = w
        self.memo: dict[int, int] = {}
        self.keep: list = []
        self.n = 0
        self.stack: list = []

    def memoize(self, obj: Any) -> None:
        self.memo[id(obj)] = self.n
        self.keep.append(obj)
        self.n += 1
        self.w.write(b"\x94")

    def index(self, obj: Any) -> int:
        return self.memo[id(obj)]

    def save(self, obj: Any) -> None:
        w = self.w
        i = self.memo.get(id(obj))
        if i is not None:
            w.write(get_op(i))
        elif obj is None:
            w.write(b"N")
        elif type(obj) is bool:
            w.write(b"\x88" if obj else b"\x89")
        elif type(obj) is int:
            w.write(int_op(obj))
        elif type(obj) is float:
            w.write(b"G" + struct.pack(">d", obj))
        elif type(obj) is str:
            b = obj.encode("utf-8")
            w.write((b"\x8c" + bytes([len(b)]) if len(b) < 256 else b"X" + struct.pack("<I", len(b))) + b)
            self.memoize(obj)
        elif type(obj) is tuple and 0 < len(obj) <= 3:
            for x in obj:
                self.save(x)
            w.write(b"\x85\x86\x87"[len(obj) - 1:len(obj)])
            self.memoize(obj)
        elif type(obj) is list:
            lw = ListWriter(self, len(obj))
            self.keep[-1] = obj
            self.memo[id(obj)] = self.memo.pop(id(lw))
            for x in obj:
                lw.item(x)
        elif type(obj) is dict:
            self._dict(obj)
        else:
            raise TypeError(type(obj))
        w.boundary()

    def _dict(self, obj: dict) -> None:
        self.w.write(b"}")
        self.memoize(obj)
        items = list(obj.items())
        if len(items) == 1:
            self.save(items[0][0])
            self.save(items[0][1])
            self.w.write(b"s")
            return
        for start in range(0, len(items), BATCH):
            self.w.write(b"(")
            for k, v in items[start:start + BATCH]:
                self.save(k)
                self.save(v)
            self.w.write(b"u")

    def begin_dict(self) -> None:
        """A dict written key by key (the top level): EMPTY_DICT MEMOIZE MARK ... SETITEMS."""
        marker = object()
        self.w.write(b"}")
        self.memoize(marker)
        self.w.write(b"(")

    def end_dict(self) -> None:
        self.w.write(b"u")
        self.w.boundary()


# -- numpy rows ------------------------------------------------------------------------------------

def _const(b: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_to(np.frombuffer(b, np.uint8), (n, len(b))), np.full(n, len(b), np.int64)


def _table(rows: list[bytes], pick: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings per code, picked per row."""
    width = max(1, max(map(len, rows)))
    mat = np.zeros((len(rows), width), np.uint8)
    for i, r in enumerate(rows):
        mat[i, :len(r)] = np.frombuffer(r, np.uint8)
    return mat[pick], np.array([len(r) for r in rows], np.int64)[pick]


def _ints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int_op for non-negative int64 values, vectorized."""
    x = x.astype(np.int64)
    assert (x >= 0).all()
    le = x.astype("<u8").view(np.uint8).reshape(-1, 8)
    nz = le != 0
    top = np.where(nz.any(1), 7 - np.argmax(nz[:, ::-1], axis=1), 0)
    bits = 8 * top + _BITLEN[le[np.arange(len(x)), top]]
    nlong = (bits >> 3) + 1
    mat = np.zeros((len(x), 10), np.uint8)
    ln = np.empty(len(x), np.int64)
    k1, k2 = x <= 0xFF, (x > 0xFF) & (x <= 0xFFFF)
    k4 = (x > 0xFFFF) & (x <= 0x7FFFFFFF)
    kl = x > 0x7FFFFFFF
    mat[:, 0] = np.select([k1, k2, k4, kl], [ord("K"), ord("M"), ord("J"), 0x8A])
    mat[~kl, 1:5] = le[~kl, :4]
    mat[kl, 1] = nlong[kl]
    mat[kl, 2:10] = le[kl]
    ln[k1], ln[k2], ln[k4], ln[kl] = 2, 3, 5, 2 + nlong[kl]
    return mat, ln


def frames_rows(plan: Any, p: MiniPickler) -> tuple[list[bytes], np.ndarray]:
    """Per stack: the bytes of one entry's frames and how many memo slots they take."""
    key = p.index
    rows, memo = [], []
    for s, lst in enumerate(plan.stack_lists):
        if plan.frames_mode == "shared":
            rows.append(get_op(key(lst)))
            memo.append(0)
        elif plan.frames_mode == "torch":
            rows.append(b"]\x94(" + b"".join(get_op(key(f)) for f in lst) + b"e")
            memo.append(1)
        else:
            parts = [b"]\x94("]
            for f in lst:
                name, fn = f["name"].encode(), f["filename"].encode()
                parts.append(b"}\x94(" + get_op(key("name")) + b"\x8c" + bytes([len(name)]) + name + b"\x94"
                             + get_op(key("filename")) + b"\x8c" + bytes([len(fn)]) + fn + b"\x94"
                             + get_op(key("line")) + int_op(f["line"]) + b"u")
            rows.append(b"".join(parts) + b"e")
            memo.append(1 + 3 * len(lst))
    return rows, np.array(memo, np.int64)


def encode_rows(plan: Any, p: MiniPickler, ev: dict, first: int, n_list: int,
                tables: tuple) -> tuple[np.ndarray, np.ndarray, int]:
    """The bytes of entries (rows) and how many memo slots they take."""
    from make_snapshot import ACTIONS, EMPTY_STR, KEYS
    n = len(ev["action"])
    k = {name: get_op(p.index(obj)) for name, obj in KEYS.items() if id(obj) in p.memo}
    acts = [get_op(p.index(ACTIONS[a])) for a in ("alloc", "free_requested", "free_completed")]
    frows, fmemo = tables
    pos = first + np.arange(n)
    mark = (pos % BATCH == 0) & (n_list > 1)
    close = ((pos + 1) % BATCH == 0) | (pos + 1 == n_list)
    pieces = [(np.full((n, 1), ord("("), np.uint8), mark.astype(np.int64)),
              _const(b"}\x94(" + k["action"], n), _table(acts, ev["action"]), _const(k["addr"], n),
              _ints(ev["addr"]), _const(k["size"], n), _ints(ev["size"]), _const(k["stream"], n),
              _ints(ev["stream"]), _const(k["time_us"], n), _ints(ev["time_us"]),
              _const(k["compile_context"] + b"\x8c\x03N/A\x94" + k["user_metadata"]
                     + get_op(p.index(EMPTY_STR)) + k["frames"], n),
              _table(frows, ev["stack"]), _const(b"u", n),
              (np.full((n, 1), ord("e"), np.uint8), (close & (n_list > 1)).astype(np.int64))]
    buf = np.concatenate([m for m, _ in pieces], axis=1)
    mask = np.concatenate([np.arange(m.shape[1])[None, :] < ln[:, None] for m, ln in pieces], axis=1)
    rows = buf[mask]
    ends = np.cumsum(sum(ln for _, ln in pieces))
    return rows, ends, int(2 * n + fmemo[ev["stack"]].sum())


def encode_entries(plan: Any, p: MiniPickler, lst: ListWriter, ev: dict) -> None:
    """Entries straight into the list being written; memo and batch state advanced."""
    tables = getattr(p, "_frames_tables", None)
    if tables is None:
        tables = p._frames_tables = frames_rows(plan, p)
    rows, ends, memo = encode_rows(plan, p, ev, lst.i, lst.n, tables)
    p.w.chunk(memoryview(rows), ends)
    p.n += memo
    lst.i += len(ev["action"])


def estimate_step_bytes(plan: Any) -> int:
    """Bytes of one body step on device 0 (memo indices as large as a big file's)."""
    import make_snapshot as ms
    p = MiniPickler(Writer(None))
    p.n = 1 << 20
    for obj in list(ms.KEYS.values()) + list(ms.ACTIONS.values()) + [ms.EMPTY_STR, "name", "filename", "line"]:
        p.memo[id(obj)] = 300
    for lst in plan.stack_lists:
        p.memo[id(lst)] = 1 << 16
        for f in lst:
            p.memo[id(f)] = 1 << 16
    ev = ms.step_events(plan, 0, 1, 2)
    _, ends, _ = encode_rows(plan, p, ev, 10, 1 << 30, frames_rows(plan, p))
    return int(ends[-1])
