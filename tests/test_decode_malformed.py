"""Malformed trace text: the decoder raises TraceFormatError (a ValueError) naming the source,
with the byte offset of the damage and an excerpt; never another exception, never a crash.

Each case states the window [lo, hi] the offset must fall in (lo == hi where the offset is
unambiguous). The reference decoder must reject every case too, in the same window, so the
windows themselves are checked.
"""
from __future__ import annotations

import os
import re

import pytest

import reference_decode as R
from datafiles import DECODE_CASES as CASES_DIR
from datafiles import H100_AFTER_FIX, TENSORLIST_OPS, V100_TRACE, plain_rel, read_bytes
from tb_profiler.decode import schema
from tb_profiler.errors import TraceFormatError

SOURCE = "gs://bucket/run1/worker0.pt.trace.json"


def _native():
    try:
        from tb_profiler.decode import decode, decode_bytes

        decode_bytes(b"[]", "<probe>")
        return decode, decode_bytes
    except ImportError:
        return None, None


DECODE, DECODE_BYTES = _native()
needs_native = pytest.mark.skipif(DECODE is None, reason="native decoder unavailable")


def E(before: str) -> int:
    """Byte offset of the end of `before` (UTF-8), to write expected offsets readably."""
    return len(before.encode("utf-8"))


# (id, data, lo, hi)
CASES: list[tuple[str, bytes, int, int]] = []


def case(name: str, data, lo: int, hi: int | None = None):
    if isinstance(data, str):
        data = data.encode("utf-8")
    CASES.append((name, data, lo, lo if hi is None else hi))


# -- empty
case("empty", b"", 0)
case("whitespace-only", b" \n\t\r  ", 0, 6)
case("single-space", b" ", 0, 1)

# -- top-level shape
case("scalar-number", b"5", 0, 1)
case("scalar-string", b'"traceEvents"', 0, 13)
case("scalar-null", b"null", 0, 4)
case("scalar-true", b" true", 1, 5)
case("no-traceEvents-empty-object", b"{}", 0, 2)
case("no-traceEvents", b'{"schemaVersion": 1, "traceevents": []}', 0, 39)
case("no-traceEvents-nested-only", b'{"x": {"traceEvents": []}}', 0, 26)
case("traceEvents-object", b'{"traceEvents": {}}', 16)
case("traceEvents-null", b'{"traceEvents": null}', 16)
case("traceEvents-string", b'{"schemaVersion": 1, "traceEvents": "[]"}', 36)
case("traceEvents-number", b'{"traceEvents": 0}', 16)
case("event-number", b'{"traceEvents": [1]}', 17)
case("event-array", b"[[]]", 1)
case("event-string", b'["x"]', 1)
case("event-null-after-object", b'{"traceEvents": [{}, null]}', 21)
case("event-true-bare", b"[{}, {},true]", 8)

# -- trailing garbage
case("trailing-garbage", b'{"traceEvents": []} x', 20)
case("trailing-second-document", b"[] []", 3)
case("trailing-brace", b'{"traceEvents": []}}', 19)
case("trailing-nul", b'{"traceEvents": []}\x00', 19)
case("trailing-comma", b"[],", 2)

# -- invalid tokens
case("literal-truncated", b'{"traceEvents": [{"a": tru}]}', 23, 26)
case("literal-capital", b'{"traceEvents": [{"a": True}]}', 23)
case("literal-nul", b'{"traceEvents": [{"a": nul}]}', 23, 26)
case("literal-undefined", b'{"traceEvents": [{"a": undefined}]}', 23)
case("literal-NaN", b'{"traceEvents": [{"ts": NaN}]}', 24)
case("literal-Infinity", b'{"traceEvents": [{"ts": Infinity}]}', 24)
case("literal-minus-Infinity", b'{"traceEvents": [{"ts": -Infinity}]}', 24, 25)
case("single-quotes", b"{'traceEvents': []}", 1)
case("unquoted-key", b'{"traceEvents": [{ph: "X"}]}', 18)
case("number-key", b'{1: 2, "traceEvents": []}', 1)
case("trailing-comma-object", b'{"traceEvents": [], }', 20)
case("trailing-comma-array", b'{"traceEvents": [{}, ]}', 21)
case("trailing-comma-event", b'{"traceEvents": [{"ph": "X",}]}', 28)
case("trailing-comma-args", b'{"traceEvents": [{"args": {"a": 1,}}]}', 34)
case("trailing-comma-nested", b'{"traceEvents": [{"args": {"a": [1,]}}]}', 35)
case("leading-comma", b'{"traceEvents": [,{}]}', 17)
case("double-comma", b'{"traceEvents": [{},,{}]}', 20)
case("missing-colon", b'{"traceEvents": [{"ph" "X"}]}', 23)
case("missing-comma-members", b'{"traceEvents": [{"ph": "X" "ts": 1}]}', 28)
case("missing-comma-events", b'{"traceEvents": [{} {}]}', 20)
case("mismatched-close", b'{"traceEvents": [{"args": {"a": [1}}]}', 34)
case("mismatched-close-event", b'{"traceEvents": [{]}', 18)
case("unclosed-event", b'{"traceEvents": [{"ph": "X"', 27)
case("colon-in-array", b'{"traceEvents": [{"args": [1: 2]}]}', 28)
case("vertical-tab-whitespace", b'{"traceEvents":\x0b[]}', 15)
case("form-feed-whitespace", b'{"traceEvents": [\x0c]}', 17)
case("nbsp-whitespace", '{"traceEvents":\u00a0[]}', 15)
case("bom-in-middle", '{"traceEvents": \ufeff[]}', 16)

# -- numbers
for name, num in [("dot-end", "1."), ("minus", "-"), ("leading-zero", "01"), ("exp-no-digits", "1e"),
                  ("exp-sign-no-digits", "1e+"), ("dot-start", ".5"), ("plus", "+1"), ("double-minus", "--1"),
                  ("dot-exp", "1.e5"), ("hex", "0x10"), ("minus-letter", "-a"), ("minus-dot", "-.5"),
                  ("exp-double", "1e5e5"), ("dot-dot", "1.2.3"), ("leading-zero-neg", "-01")]:
    pre = '{"traceEvents": [{"ts": '
    case(f"number-{name}", pre + num + "}]}", E(pre), E(pre) + len(num))
    pre = '{"traceEvents": [{"args": {"External id": ['
    case(f"number-in-args-{name}", pre + num + "]}}]}", E(pre), E(pre) + len(num))
case("number-toplevel-value", b'{"schemaVersion": 1., "traceEvents": []}', 18, 20)

# -- strings: unescaped control characters, bad escapes, unterminated
for cc in (0x00, 0x01, 0x0A, 0x09, 0x0D, 0x1F):
    pre = '{"traceEvents": [{"name": "ab'
    case(f"control-{cc:02x}-in-name", pre.encode() + bytes([cc]) + b'c"}]}', E(pre))
    pre = '{"traceEvents": [{"args": {"Call stack": ["x", "a'
    case(f"control-{cc:02x}-in-args", pre.encode() + bytes([cc]) + b'"]}}]}', E(pre))
    pre = '{"traceEvents": [{"a'
    case(f"control-{cc:02x}-in-key", pre.encode() + bytes([cc]) + b'": 1}]}', E(pre))
    pre = '{"x": "a'
    case(f"control-{cc:02x}-in-toplevel", pre.encode() + bytes([cc]) + b'", "traceEvents": []}', E(pre))
for name, esc in [("x", "\\x41"), ("u-bad-hex", "\\u12G4"), ("u-short", "\\u123\""), ("u-empty", "\\u\""),
                  ("capital-U", "\\U0041"), ("single-quote", "\\'"), ("a", "\\a"), ("zero", "\\0"),
                  ("space", "\\ "), ("u-plus", "\\u+123")]:
    for where, pre, post in [("name", '{"traceEvents": [{"name": "a', '"}]}'),
                             ("args", '{"traceEvents": [{"args": {"Input type": ["', '"]}}]}'),
                             ("key", '{"traceEvents": [{"a', '": 1}]}'),
                             ("unknown", '{"traceEvents": [{"zz": {"q": "', '"}}]}'),
                             ("toplevel", '{"traceName": "', '", "traceEvents": []}')]:
        text = pre + esc + post
        case(f"escape-{name}-in-{where}", text, E(pre), E(pre) + len(esc))
case("string-unterminated-eof", b'{"traceEvents": [{"name": "abc', 26, 30)
case("string-backslash-eof", b'{"traceEvents": [{"name": "abc\\', 26, 31)
case("string-u-escape-eof", b'{"traceEvents": [{"name": "abc\\u12', 26, 34)
case("string-escaped-quote-unterminated", b'{"traceEvents": [{"name": "abc\\"}]}', 26, 36)

# -- bad UTF-8 inside (and outside) strings
BAD_UTF8 = [("ff", b"\xff"), ("fe", b"\xfe"), ("lone-continuation", b"\x80"), ("overlong-slash", b"\xc0\xaf"),
            ("overlong-3", b"\xe0\x80\xaf"), ("overlong-4", b"\xf0\x80\x80\xaf"), ("surrogate", b"\xed\xa0\x80"),
            ("surrogate-low", b"\xed\xbf\xbf"), ("above-max", b"\xf4\x90\x80\x80"), ("f5", b"\xf5\x80\x80\x80"),
            ("truncated-2", b"\xc3"), ("truncated-3", b"\xe4\xb8"), ("truncated-4", b"\xf0\x9f\x98"),
            ("c1-start", b"\xc1\xbf"), ("five-byte", b"\xf8\x88\x80\x80\x80")]
for name, bad in BAD_UTF8:
    for where, pre, post in [("name", b'{"traceEvents": [{"name": "a', b'b"}]}'),
                             ("args-text", b'{"traceEvents": [{"args": {"Call stack": "a', b'"}}]}'),
                             ("args-nested", b'{"traceEvents": [{"args": {"zz": [{"q": "', b'"}]}}]}'),
                             ("key", b'{"traceEvents": [{"n', b'": 1}]}'),
                             ("args-key", b'{"traceEvents": [{"args": {"n', b'": 1}}]}'),
                             ("toplevel", b'{"traceName": "', b'", "traceEvents": []}')]:
        case(f"utf8-{name}-in-{where}", pre + bad + post, len(pre), len(pre) + len(bad))
    case(f"utf8-{name}-outside-string", b'{"traceEvents": [' + bad + b"]}", 17, 17 + len(bad))

# -- nesting
D = schema.MAX_DEPTH
for where, pre, post, outer in [("args", '{"traceEvents": [{"args": {"a": ', "}}]}", 4),
                                ("unknown-key", '{"traceEvents": [{"zz": ', "}]}", 3),
                                ("toplevel", '{"x": ', ', "traceEvents": []}', 1),
                                ("bare-array-event", '[{"args": ', "}]", 2)]:
    inner = D + 1 - outer  # one container too many
    text = pre + "[" * inner + "]" * inner + post
    case(f"too-deep-{where}", text, E(pre) + inner - 1)
    inner_obj = D + 1 - outer
    text = pre + '{"k":' * inner_obj + "1" + "}" * inner_obj + post
    case(f"too-deep-objects-{where}", text, E(pre) + 5 * (inner_obj - 1))
case("too-deep-huge", '{"traceEvents": [{"args": {"a": ' + "[" * 200000 + "]" * 200000 + "}}]}", 32 + D - 4)
case("too-deep-huge-unclosed", '{"traceEvents": [{"args": {"a": ' + "[" * 200000, 32 + D - 4)
# two faults (an event that is an array, and the depth): either may be reported
case("too-deep-toplevel-arrays", "[" * (D + 1) + "]" * (D + 1), 1, D)


def _check_error(exc: TraceFormatError, data: bytes, source: str, lo: int, hi: int, who: str):
    assert isinstance(exc, ValueError)
    assert exc.source == source, who
    assert source in str(exc), f"{who}: message {str(exc)!r} does not name the source"
    assert exc.reason, who
    assert isinstance(exc.offset, int), f"{who}: offset {exc.offset!r}"
    assert lo <= exc.offset <= hi, f"{who}: offset {exc.offset} not in [{lo}, {hi}] ({exc}) for {data[:300]!r}"
    assert exc.excerpt is not None, f"{who}: no excerpt"
    if exc.offset < len(data):
        assert exc.excerpt, f"{who}: empty excerpt at offset {exc.offset} of {len(data)}"


def _excerpt_is_from_the_text(exc: TraceFormatError, data: bytes) -> bool:
    """The excerpt shows the original text near the offset (not bytes the decoder overwrote)."""
    lo = max(0, exc.offset - 80)
    around = data[lo:exc.offset + 80].decode("utf-8", "replace")
    pieces = [p for p in re.split("\ufffd+", exc.excerpt) if p]
    return all(p in around for p in pieces)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_reference_rejects(case):
    _, data, lo, hi = case
    with pytest.raises(TraceFormatError) as info:
        R.reference_decode(data, SOURCE)
    _check_error(info.value, data, SOURCE, lo, hi, "reference")


@needs_native
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_native_rejects(case):
    _, data, lo, hi = case
    for api, call in (("decode_bytes", lambda: DECODE_BYTES(data, SOURCE)),
                      ("decode", lambda: DECODE(bytearray(data), SOURCE))):
        try:
            call()
        except TraceFormatError as exc:
            _check_error(exc, data, SOURCE, lo, hi, api)
        except BaseException as exc:  # noqa: BLE001 - anything else is a bug
            pytest.fail(f"{api} raised {type(exc).__name__}: {exc} instead of TraceFormatError")
        else:
            pytest.fail(f"{api} accepted malformed input {data[:200]!r}")


@needs_native
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_native_excerpt_shows_original_text(case):
    _, data, lo, hi = case
    with pytest.raises(TraceFormatError) as info:
        DECODE(bytearray(data), SOURCE)
    assert _excerpt_is_from_the_text(info.value, data), \
        f"excerpt {info.value.excerpt!r} is not the text near byte {info.value.offset}: {data[max(0, info.value.offset - 40):info.value.offset + 40]!r}"


# ---------------------------------------------------------------- exactly MAX_DEPTH decodes

@pytest.mark.parametrize("where", ["args", "unknown-key", "toplevel", "bare-array-event"])
def test_max_depth_exactly_decodes(where):
    pre, post, outer = {"args": ('{"traceEvents": [{"args": {"a": ', "}}]}", 4),
                        "unknown-key": ('{"traceEvents": [{"zz": ', "}]}", 3),
                        "toplevel": ('{"x": ', ', "traceEvents": []}', 1),
                        "bare-array-event": ('[{"args": ', "}]", 2)}[where]
    inner = schema.MAX_DEPTH - outer
    for text in (pre + "[" * inner + "]" * inner + post, pre + '{"k":' * inner + "1" + "}" * inner + post):
        data = text.encode()
        ref = R.reference_decode(data, SOURCE)
        if DECODE is not None:
            got = DECODE_BYTES(data, SOURCE)
            assert not R.compare_decoded(got, R.reference_decode_full(data, SOURCE))
            assert len(got) == len(ref)


# ---------------------------------------------------------------- truncation at many offsets

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null|[{}\[\]:,]|[ \t\r\n]+', re.DOTALL)


def _token_starts(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every JSON token of valid data, whitespace excluded."""
    out = []
    pos = 0
    while pos < len(data):
        m = _TOKEN.match(data, pos)
        assert m, data[pos:pos + 20]
        if not data[pos:pos + 1].isspace():
            out.append((m.start(), m.end()))
        pos = m.end()
    return out


def _truncation_windows(data: bytes, stride: int, offset: int = 0):
    tokens = _token_starts(data)
    starts = [s for s, _ in tokens]
    import bisect

    end_of_doc = len(data.rstrip())
    for cut in range(offset, end_of_doc, stride):
        k = bisect.bisect_left(starts, cut) - 1  # last token starting before the cut
        lo = starts[k] if k >= 0 else 0
        yield cut, lo


def _small_traces() -> list[tuple[str, bytes]]:
    out = []
    for p in (H100_AFTER_FIX, TENSORLIST_OPS):
        out.append((plain_rel(p), read_bytes(p)))
    for p in sorted(CASES_DIR.glob("*.json")):
        out.append((p.name, p.read_bytes()))
    return out


@pytest.mark.parametrize("name,data", _small_traces(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_truncation_is_rejected(name, data):
    stride = 1 if len(data) < 5000 else 7
    failures = []
    checked = 0
    for cut, lo in _truncation_windows(data, stride):
        prefix = data[:cut]
        decoders = [("reference", lambda: R.reference_decode(prefix, SOURCE))]
        if DECODE is not None:
            decoders.append(("native", lambda: DECODE(bytearray(prefix), SOURCE)))
        for who, call in decoders:
            try:
                call()
            except TraceFormatError as exc:
                if not (isinstance(exc.offset, int) and lo <= exc.offset <= cut and exc.excerpt is not None
                        and SOURCE in str(exc)):
                    failures.append(f"{who} cut {cut}: offset {exc.offset} not in [{lo}, {cut}] or bad message: {exc}")
            except BaseException as exc:  # noqa: BLE001
                failures.append(f"{who} cut {cut}: {type(exc).__name__}: {exc}")
            else:
                failures.append(f"{who} cut {cut}: accepted a truncated trace")
        checked += 1
    assert checked > 100
    assert not failures, f"{len(failures)} failures, first: " + "\n".join(failures[:10])


@needs_native
def test_truncated_kineto_trace_at_many_offsets():
    """A 35 MB real trace cut at 200 offsets spread over it (native only: the reference is slow)."""
    data = read_bytes(V100_TRACE)
    failures = []
    cuts = int(os.environ.get("TB_PROFILER_TRUNCATION_CUTS", "200"))
    step = len(data) // cuts
    for i in range(1, cuts):
        cut = i * step + (i * 7919) % 97
        prefix = data[:cut]
        try:
            DECODE(bytearray(prefix), SOURCE)
        except TraceFormatError as exc:
            lo = max(0, cut - 4096)  # no token in this trace is that long
            if not (lo <= exc.offset <= cut):
                failures.append(f"cut {cut}: offset {exc.offset}")
        except BaseException as exc:  # noqa: BLE001
            failures.append(f"cut {cut}: {type(exc).__name__}: {exc}")
        else:
            failures.append(f"cut {cut}: accepted")
    assert not failures, failures[:10]


# ---------------------------------------------------------------- API misuse

@needs_native
def test_decode_of_read_only_bytes_is_a_type_error_not_a_crash():
    with pytest.raises((TypeError, ValueError)):
        DECODE(b'{"traceEvents": []}', SOURCE)


@needs_native
def test_malformed_message_is_a_value_error_subclass():
    with pytest.raises(ValueError, match=re.escape(SOURCE)):
        DECODE_BYTES(b'{"traceEvents": [}', SOURCE)
