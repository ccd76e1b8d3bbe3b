"""A pure-Python reference implementation of the decoder contract (tb_profiler/decode/schema.py).

Slow but simple: the native decoder (tb_profiler._native) is tested against it. Built on the
stdlib json scanner (so string escapes, strict control-character rules and number grammar are
exactly json.loads'), with a small position-tracking walker for the top level, each event and
each event's ``args`` so that the raw JSON text of any value can be recovered byte for byte.

Interpretation of the contract, point by point (every choice below is what the tests expect):

- Input must be UTF-8 (strictly: no surrogates, no overlongs); strict RFC 8259 JSON: only
  ``[ \\t\\n\\r]`` whitespace, no NaN/Infinity literals, no control characters in strings.
- Top level: an object holding ``traceEvents`` (an array of objects), or a bare array of
  objects. Anything else (no ``traceEvents``, ``traceEvents`` not an array, an event that is
  not an object, a scalar document, trailing non-whitespace) is malformed. A key that appears
  twice wins last (also ``traceEvents``: the events of the last array are the events).
- Nesting: the document's outermost container is depth 1; a container at depth > MAX_DEPTH
  is malformed (so MAX_DEPTH nested containers decode).
- ``ph``: first byte of the UTF-8 encoding of the decoded string; 0 when missing, empty or
  not a string.
- ``cat``/``name`` (kind "str"): as "text" fields (decoded string, or the raw JSON text of
  a non-string value); -1 when missing.
- ``pid``/``tid``: a JSON string gives ``*_str`` = its id and the value = the Integer rule
  applied to its text, else 0; a non-string gives ``*_str`` = -1 and the Integer rule's
  value, else MISSING_INT.
- Integer rule: a JSON number, or a string whose whole decoded content is a JSON number
  (RFC 8259 grammar: no sign ``+``, no spaces, no hex), whose exact value is an integer within
  int64.
- Float rule: same inputs, ``float(text)`` (so a huge exponent gives inf).
- ``ts``/``dur``: a JSON number or numeric string (as the Integer rule's inputs), times 1000
  exactly, rounded half to even to an integer, then range-checked into int64; else
  MISSING_INT.
- ``args`` must be an object to count: its raw text (from ``{`` to ``}``) goes into the blob;
  a non-object ``args`` counts as no args (length 0, no args fields).
- ``id`` (flow_id): any event; a string starting with ``0x``/``0X`` followed by hex digits is
  hex, otherwise a string follows the Integer rule; a number follows the Integer rule.
- ``bp`` (flow_bp): first byte of a non-empty string; else absent.
- Args fields: members in file order; a repeated key or an alias (schema.ARG_ALIASES) of an
  earlier key replaces the earlier value, so the last one wins even when it does not convert.
- Dim3: an array of exactly 3 elements, each passing the Integer rule and within int32.
- Counter (ph byte ``C``): the first member, in json.loads dict order (duplicate keys keep
  the position of their first occurrence and the value of their last), whose value is a JSON
  number (a numeric string does not count).
- Lone UTF-16 surrogates (from ``\\u`` escapes) decode to U+FFFD, in keys and values.
"""
from __future__ import annotations

import gc
import json
import json.decoder
import json.scanner
import re

import numpy as np

from tb_profiler.decode import schema
from tb_profiler.decode.schema import MISSING_INT, Decoded
from tb_profiler.errors import TraceFormatError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?", re.ASCII)
HEX_RE = re.compile(r"0[xX][0-9a-fA-F]+", re.ASCII)
_WS = re.compile(r"[ \t\n\r]*")
_MEMBER_HEAD = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
_MEMBER_SEP = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Num(str):
    """The raw text of a JSON number (what the scanner's parse_int/parse_float hooks give)."""

    __slots__ = ()


class _Obj:
    """A walked JSON object: its members as (key, value_start, value_end, value)."""

    __slots__ = ("members",)

    def __init__(self, members):
        self.members = members


class _BadConstant(Exception):
    pass


def _reject_constant(name):
    raise _BadConstant(name)


_DECODER = json.JSONDecoder(parse_float=Num, parse_int=Num, parse_constant=_reject_constant, strict=True)
_scan_once = json.scanner.make_scanner(_DECODER)
_scanstring = json.decoder.scanstring


def fix_surrogates(text: str) -> str:
    """Lone UTF-16 surrogates (json keeps them as such) become U+FFFD, as the contract says."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def is_string(value) -> bool:
    return isinstance(value, str) and not isinstance(value, Num)


# ---------------------------------------------------------------- conversions

_NUMBER_PARTS = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?", re.ASCII)
_HUGE = 10 ** 30  # stands for an exponent too long to matter (its sign is all that counts)


def _parts(text: str):
    """JSON number text as (negative, digits, exp10, adjusted): |value| = int(digits) * 10**exp10,
    digits without leading zeros ("" for zero), adjusted the exponent of the leading digit.
    Exact for any length of mantissa or exponent (no Decimal context limits)."""
    m = _NUMBER_PARTS.fullmatch(text)
    neg, ip, fp, esign, edigits = m.groups()
    fp = fp or ""
    e = 0
    if edigits:
        edigits = edigits.lstrip("0") or "0"
        e = int(edigits) if len(edigits) <= 20 else _HUGE
        if esign == "-":
            e = -e
    digits = (ip + fp).lstrip("0")
    exp10 = e - len(fp)
    return neg == "-", digits, exp10, exp10 + len(digits) - 1


def _split(digits: str, exp10: int):
    """int(digits) * 10**exp10 as (integer part, fraction digits), for |exp10| small enough."""
    if exp10 >= 0:
        return int(digits) * 10 ** exp10, ""
    k = -exp10
    if k >= len(digits):
        return 0, "0" * (k - len(digits)) + digits
    return int(digits[:len(digits) - k]), digits[len(digits) - k:]


def exact_int(text: str) -> int | None:
    """The integer value of JSON number text if it is exactly an integer within int64."""
    neg, digits, exp10, adj = _parts(text)
    if not digits:
        return 0
    if adj > 19 or adj < 0:
        return None
    v, frac = _split(digits, exp10)
    if frac.strip("0"):
        return None
    if neg:
        v = -v
    return v if INT64_MIN <= v <= INT64_MAX else None


def number_text(value) -> str | None:
    """JSON number text of a value: a number, or a string whose whole content is one."""
    if isinstance(value, Num):
        return str(value)
    if isinstance(value, str) and NUMBER_RE.fullmatch(value):
        return value
    return None


def to_int(value) -> int | None:
    text = number_text(value)
    return None if text is None else exact_int(text)


def to_float(value) -> float | None:
    text = number_text(value)
    return None if text is None else float(text)


def micros_text_to_ns(text: str) -> int | None:
    """Exact ns from the decimal text of a microsecond value, rounding half to even."""
    neg, digits, exp10, adj = _parts(text)
    if not digits:
        return 0
    if adj > 22:
        return None
    if adj < -11:  # |value| < 1e-10 us = 0.1 ns
        return 0
    v, frac = _split(digits, exp10 + 3)
    if frac:
        first, rest = frac[0], frac[1:].strip("0")
        if first > "5" or (first == "5" and (rest or v % 2 == 1)):
            v += 1
    if neg:
        v = -v
    return v if INT64_MIN <= v <= INT64_MAX else None


def to_ns(value) -> int | None:
    text = number_text(value)
    return None if text is None else micros_text_to_ns(text)


def to_flow_id(value) -> int | None:
    if is_string(value) and HEX_RE.fullmatch(value):
        v = int(value[2:], 16)
        return v if v <= INT64_MAX else None
    return to_int(value)


def first_byte(value) -> int | None:
    if not is_string(value) or not value:
        return None
    return fix_surrogates(value).encode("utf-8")[0]


# ---------------------------------------------------------------- the walker

class _Walker:
    def __init__(self, data: bytes, source: str):
        self.data = data
        self.source = source
        try:
            self.s = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail_bytes("invalid UTF-8", exc.start)

    # errors ---------------------------------------------------------
    def fail_bytes(self, message: str, offset: int):
        lo = max(0, offset - 20)
        excerpt = self.data[lo:offset + 20].decode("utf-8", "replace")
        raise TraceFormatError(self.source, message, offset, excerpt)

    def fail(self, message: str, pos: int):
        self.fail_bytes(message, len(self.s[:pos].encode("utf-8")))

    # primitives -----------------------------------------------------
    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()

    def value(self, i: int):
        """Parse one JSON value at i (no leading whitespace); return (value, end)."""
        try:
            return _scan_once(self.s, i)
        except (StopIteration, json.JSONDecodeError, _BadConstant, RecursionError) as exc:
            self.scan_error(exc, i)

    def scan_error(self, exc, i):
        if isinstance(exc, StopIteration):
            self.fail("expected a JSON value", exc.value if isinstance(exc.value, int) else i)
        if isinstance(exc, json.JSONDecodeError):
            self.fail(f"invalid JSON: {exc.msg}", exc.pos)
        if isinstance(exc, _BadConstant):
            self.fail(f"invalid JSON literal {exc.args[0]}", i)
        self.fail_depth()

    def key(self, i: int):
        if self.s[i:i + 1] != '"':
            self.fail("expected a string key", i)
        try:
            k, end = _scanstring(self.s, i + 1, True)
            return fix_surrogates(k), end
        except json.JSONDecodeError as exc:
            self.fail(f"invalid JSON: {exc.msg}", exc.pos)

    def members(self, i: int, walk_value=None, event=False):
        """Walk the object at i (s[i] == '{'): ([(key, vstart, vend, value)], end).

        walk_value(key, i) -> (value, end) parses member values when given; event=True
        walks an ``args`` object value member by member (as _Obj).
        """
        s = self.s
        out = []
        i = self.ws(i + 1)
        if s[i:i + 1] == "}":
            return out, i + 1
        head = _MEMBER_HEAD.match
        sep = _MEMBER_SEP.match
        scan = _scan_once
        start = i
        try:
            while True:
                m = head(s, i)
                if m is not None:  # fast path: a key without escapes
                    k = m.group(1)
                    i = m.end()
                else:
                    k, i = self.key(i)
                    i = self.ws(i)
                    if s[i:i + 1] != ":":
                        self.fail("expected ':'", i)
                    i = self.ws(i + 1)
                start = i
                if walk_value is not None:
                    v, i = walk_value(k, i)
                elif event and k == "args" and s[i:i + 1] == "{":
                    v, i = self.members(i)
                    v = _Obj(v)
                else:
                    v, i = scan(s, i)
                out.append((k, start, i, v))
                m = sep(s, i)
                if m is None:
                    self.fail("expected ',' or '}'", self.ws(i))
                if m.group(1) == ",":
                    i = m.end()
                else:
                    return out, m.end(1)
        except (StopIteration, json.JSONDecodeError, _BadConstant, RecursionError) as exc:
            self.scan_error(exc, start)

    def events(self, i: int):
        """Walk the events array at i (s[i] == '['): ([(start, end, members)], end)."""
        s = self.s
        out = []
        i = self.ws(i + 1)
        if s[i:i + 1] == "]":
            return out, i + 1
        while True:
            if s[i:i + 1] != "{":
                if i >= len(s):
                    self.fail("unexpected end of input", i)
                self.fail("an event is not a JSON object", i)
            start = i
            members, i = self.members(i, event=True)
            out.append((start, i, members))
            i = self.ws(i)
            c = s[i:i + 1]
            if c == ",":
                i = self.ws(i + 1)
            elif c == "]":
                return out, i + 1
            else:
                self.fail("expected ',' or ']'", i)

    def document(self):
        s = self.s
        i = self.ws(0)
        if i >= len(s):
            self.fail("empty trace (no JSON value)", i)
        toplevel: dict[str, str] = {}
        c = s[i]
        if c == "[":
            events, i = self.events(i)
        elif c == "{":
            found = []

            def walk(key, j):
                if key == "traceEvents":
                    if s[j:j + 1] != "[":
                        self.value(j)  # a syntax error inside wins over the shape error
                        self.fail("traceEvents is not an array", j)
                    evs, end = self.events(j)
                    found.append(evs)
                    return None, end
                return self.value(j)

            members, i = self.members(i, walk)
            for k, vs, ve, _ in members:
                if k == "traceEvents":
                    toplevel.pop("traceEvents", None)
                    continue
                toplevel[k] = s[vs:ve]
            if not found:
                self.fail("no traceEvents in the top-level object", 0)
            events = found[-1]
        else:
            self.value(i)
            self.fail("the trace is neither an object nor an array", i)
        j = self.ws(i)
        if j != len(s):
            self.fail("trailing data after the JSON document", j)
        self.check_depth()
        return events, toplevel

    def check_depth(self):
        stripped = re.sub(rb'"[^"\\]*(?:\\.[^"\\]*)*"', b'""', self.data, flags=re.DOTALL)
        arr = np.frombuffer(stripped, dtype=np.uint8)
        where = np.flatnonzero((arr | 0x20) == 0x7B)  # '[' 0x5B / '{' 0x7B
        where = np.union1d(where, np.flatnonzero((arr | 0x20) == 0x7D))  # ']' 0x5D / '}' 0x7D
        if not len(where):
            return
        br = arr[where]
        delta = np.where((br == 0x5B) | (br == 0x7B), 1, -1)
        depth = np.cumsum(delta)
        if depth.max() <= schema.MAX_DEPTH:
            return
        self.fail_depth()

    def fail_depth(self):
        """Raise at the first container opened deeper than MAX_DEPTH (string-aware byte scan)."""
        depth = 0
        in_str = False
        esc = False
        for pos, b in enumerate(self.data):
            if in_str:
                if esc:
                    esc = False
                elif b == 0x5C:
                    esc = True
                elif b == 0x22:
                    in_str = False
            elif b == 0x22:
                in_str = True
            elif b == 0x5B or b == 0x7B:
                depth += 1
                if depth > schema.MAX_DEPTH:
                    self.fail_bytes(f"nesting deeper than {schema.MAX_DEPTH}", pos)
            elif b == 0x5D or b == 0x7D:
                depth -= 1
        self.fail_bytes(f"nesting deeper than {schema.MAX_DEPTH}", 0)


# ---------------------------------------------------------------- the decoder

_ARG_KEYS: dict[str, list[tuple[str, str]]] = {}
for _col, _key in schema.ARG_INT.items():
    _ARG_KEYS.setdefault(_key, []).append(("int", _col))
for _col, _key in schema.ARG_FLOAT.items():
    _ARG_KEYS.setdefault(_key, []).append(("float", _col))
for _col, _key in schema.ARG_DIM3.items():
    _ARG_KEYS.setdefault(_key, []).append(("dim3", _col))
for _col, _key in schema.ARG_TEXT.items():
    _ARG_KEYS.setdefault(_key, []).append(("text", _col))
for _col, _key in schema.ARG_JSON.items():
    _ARG_KEYS.setdefault(_key, []).append(("json", _col))
_COL_KIND = {col: kind for kinds in _ARG_KEYS.values() for kind, col in kinds}
for _key, _col in getattr(schema, "ARG_ALIASES", {}).items():  # other spellings of a column's key
    _ARG_KEYS.setdefault(_key, []).append((_COL_KIND[_col], _col))


class ReferenceResult:
    """reference_decode's output plus, per event, the span of its text (for diagnostics)."""

    def __init__(self, decoded: Decoded, event_spans: list[tuple[int, int]], text: str):
        self.decoded = decoded
        self.event_spans = event_spans
        self.text = text

    def event_text(self, row: int) -> str:
        a, b = self.event_spans[row]
        return self.text[a:b]


def reference_decode_full(data: bytes, source: str = "<bytes>") -> ReferenceResult:
    """reference_decode, keeping each event's text span for diagnostics."""
    enabled = gc.isenabled()
    gc.disable()  # millions of small tuples: the cyclic GC would dominate the run time
    try:
        return _decode(data, source)
    finally:
        if enabled:
            gc.enable()


def _decode(data: bytes, source: str) -> ReferenceResult:
    w = _Walker(bytes(data), source)
    events, toplevel = w.document()
    s = w.s
    n = len(events)

    strings: list[str] = []
    index: dict[str, int] = {}

    def intern(text: str) -> int:
        text = fix_surrogates(text)
        sid = index.get(text)
        if sid is None:
            sid = index[text] = len(strings)
            strings.append(text)
        return sid

    def text_id(value, vs, ve) -> int:
        return intern(value) if is_string(value) else intern(s[vs:ve])

    dense = {col: np.empty(n, dtype=dt) for col, dt in schema.dense_dtypes().items()}
    sparse_rows: dict[str, list[int]] = {col: [] for col in schema.sparse_dtypes()}
    sparse_vals: dict[str, list] = {col: [] for col in schema.sparse_dtypes()}

    def drop(col, row):
        # Last one wins: a field seen again in the same event forgets its earlier value.
        if sparse_rows[col] and sparse_rows[col][-1] == row:
            sparse_rows[col].pop()
            sparse_vals[col].pop()

    def put(col, row, value):
        sparse_rows[col].append(row)
        sparse_vals[col].append(value)

    blob = bytearray()
    spans = []
    for row, (estart, eend, members) in enumerate(events):
        spans.append((estart, eend))
        ev = {}
        for k, vs, ve, v in members:
            ev[k] = (vs, ve, v)

        item = ev.get("ph")
        b = first_byte(item[2]) if item else None
        ph = b if b is not None else 0
        dense["ph"][row] = ph

        for col in ("cat", "name"):
            item = ev.get(col)
            dense[col][row] = -1 if item is None else text_id(item[2], item[0], item[1])

        for col in ("pid", "tid"):
            item = ev.get(col)
            if item is None:
                dense[col][row] = MISSING_INT
                dense[col + "_str"][row] = -1
            elif is_string(item[2]):
                dense[col + "_str"][row] = intern(item[2])
                v = to_int(fix_surrogates(item[2]))
                dense[col][row] = 0 if v is None else v
            else:
                dense[col + "_str"][row] = -1
                v = to_int(item[2])
                dense[col][row] = MISSING_INT if v is None else v

        for col in ("ts", "dur"):
            item = ev.get(col)
            v = None if item is None else to_ns(item[2])
            dense[col][row] = MISSING_INT if v is None else v

        item = ev.get("id")
        if item is not None:
            v = to_flow_id(item[2])
            if v is not None:
                put("flow_id", row, v)
        item = ev.get("bp")
        if item is not None:
            v = first_byte(item[2])
            if v is not None:
                put("flow_bp", row, v)

        item = ev.get("args")
        if item is None or not isinstance(item[2], _Obj):
            dense["args_off"][row] = len(blob)
            dense["args_len"][row] = 0
            continue
        vs, ve, obj = item
        raw = s[vs:ve].encode("utf-8")
        dense["args_off"][row] = len(blob)
        dense["args_len"][row] = len(raw)
        blob += raw

        # members in file order: a repeated key, or an alias after its main spelling, replaces
        # the earlier value (the last one wins, also when it does not convert)
        for key, avs, ave, v in obj.members:
            kinds = _ARG_KEYS.get(key)
            if not kinds:
                continue
            for kind, col in kinds:
                for c in ([f"{col}_{a}" for a in "xyz"] if kind == "dim3" else [col]):
                    drop(c, row)
                if kind == "int":
                    x = to_int(v)
                    if x is not None:
                        put(col, row, x)
                elif kind == "float":
                    x = to_float(v)
                    if x is not None:
                        put(col, row, x)
                elif kind == "dim3":
                    if isinstance(v, list) and len(v) == 3:
                        xyz = [to_int(e) for e in v]
                        if all(e is not None and INT32_MIN <= e <= INT32_MAX for e in xyz):
                            for axis, e in zip("xyz", xyz):
                                put(f"{col}_{axis}", row, e)
                elif kind == "text":
                    put(col, row, text_id(v, avs, ave))
                else:
                    put(col, row, intern(s[avs:ave]))
        if ph == ord("C"):
            args = {}  # json.loads order: a repeated key keeps its first position, its last value
            for k, avs, ave, v in obj.members:
                args[k] = (avs, ave, v)
            for key, (avs, ave, v) in args.items():
                if isinstance(v, Num):
                    put("counter_key", row, intern(key))
                    put("counter_value", row, float(v))
                    break

    sparse = {}
    for col, dt in schema.sparse_dtypes().items():
        sparse[col] = (np.asarray(sparse_rows[col], dtype=np.int32), np.asarray(sparse_vals[col], dtype=dt))
    decoded = Decoded(dense=dense, sparse=sparse, strings=strings, args_blob=bytes(blob),
                      toplevel=toplevel, source=source)
    return ReferenceResult(decoded, spans, s)


def reference_decode(data: bytes, source: str = "<bytes>") -> Decoded:
    """Decode trace JSON bytes to the schema's columns, or raise TraceFormatError."""
    return reference_decode_full(data, source).decoded


# ---------------------------------------------------------------- checking a decoder's output

STRING_COLUMNS = set(schema.STRING_COLUMNS)


def _resolve(strings, ids):
    n = len(strings)
    return [None if i == -1 else (strings[i] if 0 <= i < n else f"<bad string id {i}>") for i in ids.tolist()]


def _blob_slice(blob, off: int, length: int) -> bytes:
    return bytes(memoryview(blob)[off:off + length])


def check_invariants(dec: Decoded) -> list[str]:
    """Structural invariants any decode result must satisfy; returns the violations."""
    errs: list[str] = []
    dense_types = schema.dense_dtypes()
    sparse_types = schema.sparse_dtypes()
    if set(dec.dense) != set(dense_types):
        errs.append(f"dense columns {sorted(dec.dense)} != {sorted(dense_types)}")
    if set(dec.sparse) != set(sparse_types):
        errs.append(f"sparse columns {sorted(dec.sparse)} != {sorted(sparse_types)}")
    if errs:
        return errs
    n = len(dec.dense["ph"])
    nstr = len(dec.strings)
    if not all(isinstance(x, str) for x in dec.strings):
        errs.append("strings holds a non-str")
    elif len(set(dec.strings)) != len(dec.strings):
        errs.append("a string is interned more than once")
    for col, dt in dense_types.items():
        a = dec.dense[col]
        if not isinstance(a, np.ndarray) or a.ndim != 1:
            errs.append(f"dense {col}: not a 1-D array")
            continue
        if a.dtype != dt:
            errs.append(f"dense {col}: dtype {a.dtype} != {dt}")
        if len(a) != n:
            errs.append(f"dense {col}: length {len(a)} != {n}")
    for col, dt in sparse_types.items():
        pair = dec.sparse[col]
        if not isinstance(pair, tuple) or len(pair) != 2:
            errs.append(f"sparse {col}: not a (rows, values) pair")
            continue
        rows, vals = pair
        if rows.dtype != np.int32:
            errs.append(f"sparse {col}: rows dtype {rows.dtype} != int32")
        if vals.dtype != dt:
            errs.append(f"sparse {col}: values dtype {vals.dtype} != {dt}")
        if rows.ndim != 1 or vals.ndim != 1 or len(rows) != len(vals):
            errs.append(f"sparse {col}: rows/values lengths {rows.shape} {vals.shape}")
            continue
        if len(rows):
            if rows.min() < 0 or rows.max() >= n:
                errs.append(f"sparse {col}: rows outside [0, {n})")
            if len(rows) > 1 and not (np.diff(rows.astype(np.int64)) > 0).all():
                errs.append(f"sparse {col}: rows not strictly ascending")
        if col in STRING_COLUMNS and len(vals) and (vals.min() < 0 or vals.max() >= nstr):
            errs.append(f"sparse {col}: string id outside [0, {nstr})")
    for col in ("cat", "name", "pid_str", "tid_str"):
        a = dec.dense[col]
        if len(a) and (a.min() < -1 or a.max() >= nstr):
            errs.append(f"dense {col}: string id outside [-1, {nstr})")
    off = dec.dense["args_off"].astype(np.int64)
    ln = dec.dense["args_len"].astype(np.int64)
    blob_len = len(memoryview(dec.args_blob).cast("B")) if dec.args_blob is not None else -1
    if (ln < 0).any():
        errs.append("args_len negative")
    has = ln > 0
    if has.any() and ((off[has] < 0).any() or (off[has] + ln[has] > blob_len).any()):
        errs.append(f"args_off + args_len outside the blob (length {blob_len})")
    if not isinstance(dec.toplevel, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in dec.toplevel.items()):
        errs.append("toplevel is not a dict of str -> str")
    return errs


def compare_decoded(got: Decoded, ref: ReferenceResult, limit: int = 8) -> list[str]:
    """Differences between a decoder's output and the reference's (empty when equal)."""
    want = ref.decoded
    errs = check_invariants(got)
    if errs:
        return ["invariant: " + e for e in errs]
    n = len(want)
    if len(got) != n:
        return [f"event count {len(got)} != reference {n}"]

    def show(row):
        text = ref.event_text(row)
        return text if len(text) < 400 else text[:400] + "..."

    for col in schema.dense_dtypes():
        if col == "args_off":
            continue
        g, w = got.dense[col], want.dense[col]
        if col in STRING_COLUMNS:
            gl, wl = _resolve(got.strings, g), _resolve(want.strings, w)
            bad = [i for i in range(n) if gl[i] != wl[i]]
            for i in bad[:limit]:
                errs.append(f"dense {col} row {i}: got {gl[i]!r}, want {wl[i]!r}; event {show(i)}")
        else:
            bad = np.flatnonzero(g != w).tolist()
            for i in bad[:limit]:
                errs.append(f"dense {col} row {i}: got {g[i]!r}, want {w[i]!r}; event {show(i)}")
        if len(bad) > limit:
            errs.append(f"dense {col}: {len(bad)} rows differ in all")

    goff, glen = got.dense["args_off"], got.dense["args_len"]
    woff, wlen = want.dense["args_off"], want.dense["args_len"]
    bad = 0
    for i in np.flatnonzero(wlen > 0).tolist():
        if glen[i] != wlen[i]:
            continue  # reported above with args_len
        gs = _blob_slice(got.args_blob, int(goff[i]), int(glen[i]))
        ws = _blob_slice(want.args_blob, int(woff[i]), int(wlen[i]))
        if gs != ws:
            bad += 1
            if bad <= limit:
                errs.append(f"args text row {i}: got {gs[:300]!r}, want {ws[:300]!r}")
    if bad > limit:
        errs.append(f"args text: {bad} rows differ in all")

    for col, dt in schema.sparse_dtypes().items():
        grows, gvals = got.sparse[col]
        wrows, wvals = want.sparse[col]
        if col in STRING_COLUMNS:
            gmap = dict(zip(grows.tolist(), _resolve(got.strings, gvals)))
            wmap = dict(zip(wrows.tolist(), _resolve(want.strings, wvals)))
        else:
            gmap = dict(zip(grows.tolist(), gvals.tolist()))
            wmap = dict(zip(wrows.tolist(), wvals.tolist()))
        bad = []
        for row in sorted(set(gmap) | set(wmap)):
            a, b = gmap.get(row, "<absent>"), wmap.get(row, "<absent>")
            if a == b and (not isinstance(a, float) or str(a) == str(b)):
                continue  # str() tells -0.0 from 0.0
            if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
                continue
            bad.append((row, a, b))
        for row, a, b in bad[:limit]:
            errs.append(f"sparse {col} row {row}: got {a!r}, want {b!r}; event {show(row)}")
        if len(bad) > limit:
            errs.append(f"sparse {col}: {len(bad)} rows differ in all")

    if dict(got.toplevel) != dict(want.toplevel):
        errs.append(f"toplevel: got {dict(got.toplevel)!r:.1000}, want {dict(want.toplevel)!r:.1000}")
    if got.source != want.source:
        errs.append(f"source: got {got.source!r}, want {want.source!r}")
    return errs
