"""A bounded, deterministic mutation fuzzer for the native decoder (no atheris needed).

Seeds: the tiny-h100 traces, tensorlist_ops, a slice of a Kineto V100 trace and the handmade
cases in tests/decode_cases. Mutations: bit flips, interesting bytes, insertions, deletions,
truncation, spliced JSON tokens (``{ [ " \\ \\u`` digits ``, :`` ...), duplicated and swapped
chunks, deep nesting, odd numbers. Every input must either decode to a result whose
invariants hold or raise TraceFormatError; anything else fails, a crash included. Every
input is also decoded with one thread and split between 2 to 8 threads with tiny parts
(``split_params``): both must give the same outcome (test_decode_parallel's comparison:
the same columns, strings, top level and args blob, or the same error at the same offset);
one input in four (on average) is also decoded read-only (keep_input, split or not) and
compared with the in-place single pass (test_decode_keep_input's outcome).

The loop runs in a subprocess (a segfault or an ASan report must not kill pytest): before
each decode the input is written to ``current.bin`` (one pwrite on a kept descriptor), so
when the worker dies the input that killed it is kept under test-output/fuzz/ (and named in
the failure).

Budget: TB_PROFILER_FUZZ_SECONDS (default 20, split 60/40 between the invariant run and the
differential run against the reference decoder), an iteration cap, and a fixed seed
(TB_PROFILER_FUZZ_SEED).

Run by hand:  python tests/test_decode_fuzz.py --seconds 60 [--differential] [--seed N]
The long run (millions of executions under ASan+UBSan, small seeds, one worker per CPU):
benchmarks/fuzz_long.py.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from datafiles import (DECODE_CASES, LEGACY_AUTOGRAD_API, LEGACY_BARE_ARRAY, LEGACY_PROFILER_API, SMALL_TRACES,
                       V100_TRACE, plain_rel, read_bytes)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR = ROOT / "test-output" / "fuzz"
FUZZ_SECONDS = float(os.environ.get("TB_PROFILER_FUZZ_SECONDS", "20"))
FUZZ_SEED = int(os.environ.get("TB_PROFILER_FUZZ_SEED", "20240607"))
SOURCE = "<fuzz>"


# ---------------------------------------------------------------- seeds

def _kineto_slice(path: Path, events: int, skip: int) -> bytes:
    """The header and `events` events (after skipping `skip`) of a real trace, closed again."""
    text = _text(path)
    start = text.index(b'"traceEvents"')
    start = text.index(b"[", start) + 1
    header = text[:start]
    pos = start
    kept = []
    for k in range(skip + events):
        nxt = text.find(b"\n  },", pos)
        if nxt < 0:
            break
        if k >= skip:
            kept.append(text[pos:nxt + 4].strip().lstrip(b","))
        pos = nxt + 4
    return header + b"\n" + b",\n".join(kept) + b"\n]}\n"


@functools.cache
def _text(path: Path) -> bytes:
    return read_bytes(path)


def seeds() -> list[tuple[str, bytes]]:
    out = []
    for p in SMALL_TRACES:
        out.append((plain_rel(p), _text(p)))
    for skip in (0, 30000, 60000):
        out.append((f"kineto-slice-{skip}", _kineto_slice(V100_TRACE, 60, skip)))
    text = _text(LEGACY_BARE_ARRAY)
    cut = text.index(b"\n  },", 20000)
    out.append(("legacy-bare-array-slice", text[:cut + 4] + b"\n]\n"))
    for p in sorted(DECODE_CASES.glob("*.json")):
        out.append((p.name, p.read_bytes()))
    out.append(("minimal-object", b'{"traceEvents":[{"ph":"X","name":"a","ts":1.5,"dur":2,"pid":1,"tid":"2",'
                                  b'"args":{"External id":3,"grid":[1,2,3],"Input Dims":[[1],[]]}}]}'))
    out.append(("minimal-array", b'[{"ph":"C","args":{"a":1}},{"ph":"s","id":"0x1f","bp":"e"}]'))
    return out


def _events_at(text: bytes, fraction: float, count: int) -> tuple[int, int, list[bytes]]:
    """The raw text of `count` events of a real trace from about `fraction` of the way into
    it (an event starts a line with two spaces of indent, checked by parsing it), and where
    the events array opens and closes: (after its '[', at its ']', [event texts])."""
    t = text.decode("latin-1")  # one char per byte: offsets are byte offsets
    dec = json.JSONDecoder()
    key = t.find('"traceEvents"')
    opening = t.index("[", max(key, 0))
    closing = t.rindex("]")
    pos = opening + 1
    if fraction > 0:
        pos = t.index("\n  {", int(len(t) * fraction)) + 1
    events = []
    while len(events) < count:
        while pos < closing and t[pos] in " \t\r\n,":
            pos += 1
        if pos >= closing or t[pos] != "{":
            break
        try:
            ev, end = dec.raw_decode(t, pos)
        except ValueError:
            ev, end = None, pos
        if not isinstance(ev, dict) or "ph" not in ev:  # not an event start: the next one
            pos = t.index("\n  {", pos + 1) + 1
            continue
        events.append(text[pos:end])
        pos = end
    return opening + 1, closing, events


def small_seeds(max_bytes: int = 4096) -> list[tuple[str, bytes]]:
    """Seeds of at most `max_bytes` (cheap to decode, for the long run, benchmarks/fuzz_long.py):
    1 to 6 events of each real trace (not the two near copies of the V100 one) from four
    places, behind a minimal header (``{"traceEvents": [`` or ``[``) and behind the trace's own
    header and trailer for 1 and 2 events; the handmade cases; the two minimal seeds.

    Why not more events (more cuts for the forced splits)? What a split costs under ASan is
    mostly its threads' start and join. Measured on mutated inputs: with these seeds a split
    decode starts 1.1 helper threads and 0.65 of them decode some events (a helper works in
    37% of the split decodes, in 68% of those of accepted inputs); with 2 to 16 events per
    seed, 1.9 and 1.3 (58%, 96%), but executions were 40% slower: about as many working
    helpers per second (+20%), and far fewer executions."""
    out = []
    for p in (V100_TRACE, LEGACY_BARE_ARRAY, LEGACY_PROFILER_API, LEGACY_AUTOGRAD_API) + SMALL_TRACES:
        text = _text(p)
        name = plain_rel(p)
        bare = text.lstrip()[:1] == b"["
        for fraction in (0, 0.3, 0.6, 0.9):
            for count in (1, 2, 3, 6):
                start, end, events = _events_at(text, fraction, count)
                body = b",\n  ".join(events)
                candidates = [(b"[\n  ", b"\n]\n") if bare else (b'{"traceEvents": [\n  ', b"\n]}")]
                if count <= 2 and fraction in (0, 0.6):
                    candidates.append((text[:start], text[end:]))  # the trace's own header and trailer
                for k, (head, tail) in enumerate(candidates):
                    data = head + body + tail
                    if len(data) <= max_bytes:
                        out.append((f"{name}@{fraction}x{count}{'+header' if k else ''}", data))
    for p in sorted(DECODE_CASES.glob("*.json")):
        if p.stat().st_size <= max_bytes:
            out.append((p.name, p.read_bytes()))
    out += seeds()[-2:]  # minimal-object, minimal-array
    unique = {}
    for name, data in out:
        unique.setdefault(data, name)
    return [(name, data) for data, name in unique.items()]


# ---------------------------------------------------------------- mutations

TOKENS = [b"{", b"}", b"[", b"]", b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"\\u00", b"\\\"", b"0", b"1",
          b"9", b"-", b".", b"e", b"E+", b",", b":", b" ", b"\n", b"true", b"null", b"false", b"1e999",
          b"-0.0", b"9223372036854775808", b'"\\u0000"', b"{}", b"[]", b'""', b'"args":', b'"ts":', b'"ph":"C",',
          b'"grid":[1,2,3]', b'"External id":"0x1f"', b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80",
          b"\x00", b"\x1f", b"\t", b"\r"]
NUMBERS = [b"1.", b"-", b"01", b"1e", b".5", b"+1", b"1e+", b"-0", b"1E400", b"4432774345046.3135",
           b"9223372036854775807", b"-9223372036854775809", b"0.0000000000000000000001", b"1" * 40, b"1." + b"9" * 40,
           b'"12"', b'"0x1f"', b"NaN", b"Infinity", b"-Infinity", b"1e-999999999", b"1e999999999"]
INTERESTING = [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x22, 0x2C, 0x2D, 0x2E, 0x30, 0x31, 0x39, 0x3A, 0x45,
               0x5B, 0x5C, 0x5D, 0x65, 0x75, 0x7B, 0x7D, 0x7F, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xEF, 0xF0,
               0xF4, 0xF8, 0xFF]


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
        n = len(buf)
        op = rng.randrange(12)
        i = rng.randrange(n + 1)
        if op == 0 and n:  # bit flip
            i = min(i, n - 1)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            buf[min(i, n - 1)] = rng.choice(INTERESTING)
        elif op == 2:  # random bytes inserted
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif op == 3 and n:  # delete a range
            del buf[i:i + rng.randint(1, 16)]
        elif op == 4:  # truncate
            del buf[i:]
        elif op in (5, 6):  # splice a JSON token
            buf[i:i] = rng.choice(TOKENS)
        elif op == 7 and n:  # duplicate a chunk elsewhere
            a = rng.randrange(n)
            chunk = bytes(buf[a:a + rng.randint(1, 200)])
            j = rng.randrange(len(buf) + 1)
            buf[j:j] = chunk
        elif op == 8 and n:  # swap two chunks
            a, b = sorted((rng.randrange(n), rng.randrange(n)))
            ln = rng.randint(1, 64)
            if a + ln <= b:
                x, y = bytes(buf[a:a + ln]), bytes(buf[b:b + ln])
                buf[b:b + ln] = x
                buf[a:a + ln] = y
        elif op == 9:  # replace a number with an odd one
            digits = [k for k in range(max(0, i - 200), min(n, i + 200)) if 0x30 <= buf[k] <= 0x39]
            if digits:
                k = rng.choice(digits)
                e = k
                while e < n and buf[e] in b"0123456789.eE+-":
                    e += 1
                buf[k:e] = rng.choice(NUMBERS)
        elif op == 10:  # deep nesting
            depth = rng.choice((250, 253, 254, 255, 256, 257, 300, 5000))
            opener = rng.choice((b"[", b'{"k":'))
            closer = b"]" if opener == b"[" else b"}"
            buf[i:i] = opener * depth + (closer * depth if rng.random() < 0.7 else b"")
        elif op == 11 and n:  # delete or duplicate one structural byte
            k = min(i, n - 1)
            cands = [j for j in range(max(0, k - 64), min(n, k + 64)) if buf[j] in b'{}[]",:\\']
            if cands:
                j = rng.choice(cands)
                if rng.random() < 0.5:
                    del buf[j]
                else:
                    buf[j:j] = buf[j:j + 1]
    return bytes(buf)


# ---------------------------------------------------------------- the worker (subprocess)

def _decoders():
    from tb_profiler.decode import decode, decode_bytes

    return decode, decode_bytes


SPLIT_THREADS = (2, 8)  # a forced split: this many threads, at random


def split_params(rng: random.Random, size: int, min_threads: int = SPLIT_THREADS[0]) -> tuple[int, int]:
    """(threads, min_part) for a forced split of a `size`-byte input: parts mostly tiny, so
    that even a 100-byte input is cut (at most into TB_MAX_PARTS parts, native/decoder_parallel.c)."""
    threads = rng.randint(min_threads, SPLIT_THREADS[1])
    r = rng.random()
    if r < 0.3:
        min_part = 1
    elif r < 0.7:
        min_part = rng.randint(1, 64)
    else:
        min_part = rng.randint(1, max(1, size // threads))
    return threads, min_part


def check_split(data: bytes, threads: int, min_part: int, single=None) -> str | None:
    """None when decoding `data` split (threads, min_part) gives what one pass gives (the
    columns, strings, top level and args blob, or the same error at the same offset), else
    why not. Uses test_decode_parallel's comparison; `single`: the one-pass outcome if known."""
    import test_decode_parallel as P

    label = f"split threads={threads} min_part={min_part}"
    try:
        one = P._outcome(data, 1, 1 << 30) if single is None else single
        P.assert_same_outcome(P._outcome(data, threads, min_part), one, label)
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - anything but DecodeError is a bug
        return f"{label}: {type(exc).__name__}: {exc}"
    return None


def check_keep_input(data: bytes, threads: int, min_part: int) -> str | None:
    """None when decoding `data` read-only (keep_input, a read-only numpy view, split (threads,
    min_part)) gives what the in-place single pass gives, args texts included, else why not.
    Uses test_decode_keep_input's outcome."""
    import test_decode_keep_input as K
    import test_decode_parallel as P

    label = f"keep_input threads={threads} min_part={min_part}"
    try:
        P.assert_same_outcome(K._outcome(data, threads, min_part, keep_input=True),
                              K._outcome(data, 1, 1 << 30, keep_input=False), label)
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001
        return f"{label}: {type(exc).__name__}: {exc}"
    return None


def check_all(data: bytes) -> list[str]:
    """Every check of the worker on one input, the split ones over a fixed grid of (threads,
    min_part) instead of random draws: the problems found (empty: it passes). For
    reproducing and minimizing a kept input (benchmarks/fuzz_long.py --minimize)."""
    sys.path.insert(0, str(HERE))
    import reference_decode as R
    from tb_profiler.errors import TraceFormatError

    decode, decode_bytes = _decoders()
    problems = []
    for got_of in (lambda: decode_bytes(data, SOURCE), lambda: decode(bytearray(data), SOURCE)):
        try:
            got = got_of()
        except TraceFormatError as exc:
            if not (isinstance(exc.offset, int) and 0 <= exc.offset <= len(data) and SOURCE in str(exc)
                    and exc.excerpt is not None):
                problems.append(f"bad TraceFormatError: offset {exc.offset!r}, excerpt {exc.excerpt!r}: {exc}")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{type(exc).__name__}: {exc}")
        else:
            errs = R.check_invariants(got)
            if errs:
                problems.append("invariants: " + "; ".join(errs))
    grid = sorted({(t, m) for t in range(2, SPLIT_THREADS[1] + 1)
                   for m in (1, 2, 3, 8, 16, 64, max(1, len(data) // t))})
    for threads, min_part in grid:
        why = check_split(data, threads, min_part)
        if why is not None:
            problems.append(why)
    for threads, min_part in [(1, 1 << 30)] + grid:
        why = check_keep_input(data, threads, min_part)
        if why is not None:
            problems.append(why)
    return problems


class _CurrentInput:
    """current.bin, rewritten before each decode by one pwrite + ftruncate on a kept file
    descriptor (no open and close per iteration): when the worker dies, the file holds the
    input that killed it (the page cache outlives the process)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, data: bytes) -> None:
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


def worker(seconds: float, seed: int, max_iterations: int, out: Path, differential: bool, *, split: bool = True,
           keep_input_every: int = 4, small: bool = False, seeds_dir: Path | None = None) -> int:
    """The fuzz loop. Each iteration mutates a seed and decodes it with decode() (or
    decode_bytes()): a result must pass the invariants, an error must be a sound
    TraceFormatError. Then, with `split`, a single pass against a forced split (random
    threads and tiny parts, split_params); one iteration in `keep_input_every` (0: never) a
    read-only decode (keep_input) against the in-place one; with `differential`, the
    reference decoder. Seeds: seeds(), small_seeds() with `small`, or every file in
    `seeds_dir` (sorted). Prints one JSON line: {"stats": ..., "failures": [...]}."""
    import faulthandler

    faulthandler.enable()
    sys.path.insert(0, str(HERE))
    import reference_decode as R
    from tb_profiler.errors import TraceFormatError

    decode, decode_bytes = _decoders()
    rng = random.Random(seed)
    check_rng = random.Random(seed * 7919 + 1)  # the checks' choices: the mutations stay those of `seed`
    if seeds_dir is not None:
        corpus = [(p.name, p.read_bytes()) for p in sorted(seeds_dir.iterdir()) if p.is_file()]
    else:
        corpus = small_seeds() if small else seeds()
    out.mkdir(parents=True, exist_ok=True)
    current = _CurrentInput(out / "current.bin")
    failures = []
    stats = {"iterations": 0, "accepted": 0, "rejected": 0, "split_checks": 0, "keep_input_checks": 0,
             "reference_checks": 0, "decodes": 0, "seeds": len(corpus), "seconds": 0.0, "cpu_seconds": 0.0}
    started, cpu_started = time.monotonic(), time.process_time()
    deadline = started + seconds

    def fail(data: bytes, why: str):
        digest = hashlib.sha1(data).hexdigest()[:12]
        path = out / f"failure-{digest}.bin"
        path.write_bytes(data)
        failures.append({"file": str(path), "why": why[:2000]})

    it = 0
    while it < max_iterations and time.monotonic() < deadline and len(failures) < 20:
        it += 1
        name, base = corpus[rng.randrange(len(corpus))]
        data = mutate(base, rng) if it > len(corpus) else base
        current.write(data)  # survives a crash of this process
        if it == 3 and os.environ.get("TB_PROFILER_FUZZ_SELFTEST_CRASH") == "1":
            import ctypes

            ctypes.string_at(0)  # the harness self-test: die by SIGSEGV
        use_bytes = it % 2 == 0
        stats["decodes"] += 1
        try:
            got = decode_bytes(data, SOURCE) if use_bytes else decode(bytearray(data), SOURCE)
        except TraceFormatError as exc:
            stats["rejected"] += 1
            if not (isinstance(exc.offset, int) and 0 <= exc.offset <= len(data) and SOURCE in str(exc)
                    and exc.excerpt is not None):
                fail(data, f"bad TraceFormatError: offset {exc.offset!r}, excerpt {exc.excerpt!r}: {exc}")
            got = None
        except BaseException as exc:  # noqa: BLE001
            fail(data, f"{type(exc).__name__}: {exc} (seed {name})")
            continue
        else:
            stats["accepted"] += 1
            errs = R.check_invariants(got)
            if errs:
                fail(data, "invariants: " + "; ".join(errs))
                continue
        if split:
            threads, min_part = split_params(check_rng, len(data))
            stats["decodes"] += 2
            why = check_split(data, threads, min_part)
            if why is not None:
                fail(data, why)
                continue
            stats["split_checks"] += 1
        if keep_input_every and check_rng.randrange(keep_input_every) == 0:
            threads, min_part = split_params(check_rng, len(data), min_threads=1)
            stats["decodes"] += 2
            why = check_keep_input(data, threads, min_part)
            if why is not None:
                fail(data, why)
                continue
            stats["keep_input_checks"] += 1
        if differential:
            stats["reference_checks"] += 1
            try:
                ref = R.reference_decode_full(data, SOURCE)
            except TraceFormatError as exc:
                if got is not None:
                    fail(data, f"native accepted, reference rejected: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - a bug of the reference: report, go on
                fail(data, f"the REFERENCE raised {type(exc).__name__}: {exc}")
                continue
            if got is None:
                fail(data, "native rejected, reference accepted")
                continue
            errs = R.compare_decoded(got, ref)
            if errs:
                fail(data, "differs from the reference: " + "\n".join(errs))
    stats["iterations"] = it
    stats["seconds"] = round(time.monotonic() - started, 3)
    stats["cpu_seconds"] = round(time.process_time() - cpu_started, 3)  # all its threads, user + system
    current.close()
    print(json.dumps({"stats": stats, "failures": failures}), flush=True)
    return 0


# ---------------------------------------------------------------- pytest side

def _run_worker(tmp_path: Path, seconds: float, seed: int, iterations: int, differential: bool,
                extra_env: dict | None = None):
    import pytest

    try:
        _decoders()[1](b"[]", "<probe>")
    except ImportError as exc:
        pytest.skip(f"native decoder unavailable: {exc}")
    out = tmp_path / "fuzz"
    env = dict(os.environ, **(extra_env or {}))
    import tb_profiler

    pkg_root = str(Path(tb_profiler.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seconds", str(seconds), "--seed", str(seed),
           "--iterations", str(iterations), "--out", str(out)] + (["--differential"] if differential else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 300, cwd=str(ROOT))
    report = None
    for line in proc.stdout.splitlines():
        if line.startswith('{"stats"'):
            report = json.loads(line)
    if proc.returncode != 0 or report is None:
        current = out / "current.bin"
        kept = "no input recorded"
        if current.exists():
            data = current.read_bytes()
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            keep = OUT_DIR / f"crash-{hashlib.sha1(data).hexdigest()[:12]}.bin"
            shutil.copyfile(current, keep)
            kept = f"input kept in {keep} ({len(data)} bytes): {data[:300]!r}"
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        pytest.fail(f"fuzz worker died ({how}); {kept}\nstderr:\n{proc.stderr[-6000:]}")
    failures = report["failures"]
    if failures:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for f in failures:
            shutil.copy(f["file"], OUT_DIR / Path(f["file"]).name)
            f["file"] = str(OUT_DIR / Path(f["file"]).name)
    assert not failures, f"{len(failures)} failing inputs (stats {report['stats']}):\n" + "\n".join(
        f"{f['file']}: {f['why']}" for f in failures[:10])
    stats = report["stats"]
    assert stats["iterations"] >= min(iterations, 200), stats
    assert stats["accepted"] > 0 and stats["rejected"] > 0, stats
    assert stats["split_checks"] == stats["iterations"], stats  # every input, also decoded split
    assert stats["keep_input_checks"] > 0, stats
    return stats


def test_fuzz_native_invariants(tmp_path):
    """Decoded with sound invariants, or TraceFormatError; never anything else. Split between
    threads (and sometimes read-only), every input decodes as in one pass."""
    stats = _run_worker(tmp_path, FUZZ_SECONDS * 0.6, FUZZ_SEED, 300_000, differential=False)
    print(stats)


def test_fuzz_native_agrees_with_reference(tmp_path):
    """On mutated inputs, native and reference accept and reject the same, and agree when
    accepting (and split and read-only decodes agree with one pass)."""
    stats = _run_worker(tmp_path, FUZZ_SECONDS * 0.4, FUZZ_SEED + 1, 50_000, differential=True)
    print(stats)


def test_harness_keeps_the_input_of_a_crash(tmp_path):
    """A worker dying by a signal fails the test and keeps the input that killed it."""
    import pytest

    env = {"TB_PROFILER_FUZZ_SELFTEST_CRASH": "1"}
    if "ASAN_OPTIONS" in os.environ:  # under .ci/asan_tests.sh: keep this expected report out of its logs
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"] + f":log_path={tmp_path}/selftest-asan"
    with pytest.raises(pytest.fail.Exception) as info:
        _run_worker(tmp_path, 30, FUZZ_SEED, 10, differential=False, extra_env=env)
    message = str(info.value)
    expected = "fuzz worker died (exit status" if "ASAN_OPTIONS" in os.environ else "fuzz worker died (signal 11)"
    assert expected in message, message
    kept = Path(message.split("input kept in ", 1)[1].split(" (", 1)[0])
    assert kept.exists() and kept.read_bytes() == (tmp_path / "fuzz" / "current.bin").read_bytes()
    kept.unlink()


def test_mutations_are_deterministic():
    data = b'{"traceEvents": [{"ph": "X", "ts": 1.5, "args": {"a": [1, 2]}}]}'
    a = [mutate(data, random.Random(7)) for _ in range(3)]
    rng1, rng2 = random.Random(11), random.Random(11)
    assert [mutate(data, rng1) for _ in range(50)] == [mutate(data, rng2) for _ in range(50)]
    assert a[0] == a[1] == a[2]


def test_seeds_are_valid_traces():
    sys.path.insert(0, str(HERE))
    import reference_decode as R

    corpus = seeds()
    # 4 small real traces, 3 slices of the V100 one, 1 of the bare-array one, the handmade cases, 2 minimal
    assert len(corpus) == 4 + 3 + 1 + len(list(DECODE_CASES.glob("*.json"))) + 2
    for name, data in corpus:
        json.loads(data)
        R.reference_decode(data, name)


def test_small_seeds_are_small_valid_traces():
    sys.path.insert(0, str(HERE))
    import reference_decode as R

    corpus = small_seeds()
    assert len(corpus) >= 100 and len({d for _, d in corpus}) == len(corpus)
    assert max(len(d) for _, d in corpus) <= 4096
    assert sum(name.endswith("+header") for name, _ in corpus) >= 8  # real headers too
    for name, data in corpus:
        json.loads(data)
        assert R.reference_decode(data, name).dense["ph"].size >= 1, name


def test_split_params_cut_small_inputs():
    rng = random.Random(5)
    params = [split_params(rng, 300) for _ in range(2000)]
    assert {t for t, _ in params} == set(range(SPLIT_THREADS[0], SPLIT_THREADS[1] + 1))
    assert all(1 <= m <= 300 for _, m in params) and sum(m == 1 for _, m in params) > 400
    assert {t for t, _ in (split_params(rng, 300, min_threads=1) for _ in range(200))} >= {1, 8}


def test_split_and_keep_input_checks_pass_and_fail():
    """The worker's split and keep_input checks: None on agreement (accepted or rejected
    input), the difference named otherwise."""
    import pytest

    pytest.importorskip("tb_profiler._native")
    sys.path.insert(0, str(HERE))
    import test_decode_parallel as P

    events = b",".join(b'{"ph":"X","name":"op%d","ts":%d,"args":{"k":[%d]}}' % (i % 3, i, i) for i in range(40))
    good = b'{"traceEvents":[' + events + b"]}"
    for data in (good, good[:-7], good.replace(b"op2", b"op\xff")):
        for threads, min_part in ((2, 1), (8, 16), (3, 200)):
            assert check_split(data, threads, min_part) is None
            assert check_keep_input(data, threads, min_part) is None
    other = P._outcome(good.replace(b'"op1"', b'"op9"'), 1, 1 << 30)
    assert "strings differs" in check_split(good, 4, 1, single=other)
    assert check_split(good, 4, 1, single=P._outcome(good[:-7], 1, 1 << 30)).startswith("split threads=4 min_part=1")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help="(internal) run the loop in this process")
    ap.add_argument("--seconds", type=float, default=FUZZ_SECONDS)
    ap.add_argument("--seed", type=int, default=FUZZ_SEED)
    ap.add_argument("--iterations", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--differential", action="store_true", help="also against the reference decoder (slow)")
    ap.add_argument("--no-split", action="store_true", help="no split-vs-single check")
    ap.add_argument("--keep-input-every", type=int, default=4, metavar="N",
                    help="a keep_input check in one iteration out of N on average (0: none; default 4)")
    ap.add_argument("--small-seeds", action="store_true", help="small_seeds() (<= 4 KB each), not seeds()")
    ap.add_argument("--seeds-dir", type=Path, help="the seeds: every file in this folder")
    args = ap.parse_args()
    import importlib.util

    if importlib.util.find_spec("tb_profiler") is None:  # a checkout, not installed
        sys.path.append(str(ROOT))
    if args.worker:
        sys.exit(worker(args.seconds, args.seed, args.iterations, args.out, args.differential, split=not args.no_split,
                        keep_input_every=args.keep_input_every, small=args.small_seeds, seeds_dir=args.seeds_dir))
    import tempfile  # by hand: run the worker in a child and report like the test does

    with tempfile.TemporaryDirectory() as d:
        print(_run_worker(Path(d), args.seconds, args.seed, args.iterations, args.differential))
