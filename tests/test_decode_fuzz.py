"""A bounded, deterministic mutation fuzzer for the native decoder (no atheris needed).

Seeds: the tiny-h100 traces, tensorlist_ops, a slice of a Kineto V100 trace and the handmade
cases in tests/decode_cases. Mutations: bit flips, interesting bytes, insertions, deletions,
truncation, spliced JSON tokens (``{ [ " \\ \\u`` digits ``, :`` ...), duplicated and swapped
chunks, deep nesting, odd numbers. Every input must either decode to a result whose
invariants hold or raise TraceFormatError; anything else fails, a crash included.

The loop runs in a subprocess (a segfault or an ASan report must not kill pytest): before
each decode the input is written to ``current.bin``, so when the worker dies the input that
killed it is kept under test-output/fuzz/ (and named in the failure).

Budget: TB_PROFILER_FUZZ_SECONDS (default 20, split 60/40 between the invariant run and the
differential run against the reference decoder), an iteration cap, and a fixed seed
(TB_PROFILER_FUZZ_SEED).

Run by hand:  python tests/test_decode_fuzz.py --seconds 60 [--differential] [--seed N]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from datafiles import DECODE_CASES, LEGACY_BARE_ARRAY, SMALL_TRACES, V100_TRACE, plain_rel, read_bytes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR = ROOT / "test-output" / "fuzz"
FUZZ_SECONDS = float(os.environ.get("TB_PROFILER_FUZZ_SECONDS", "20"))
FUZZ_SEED = int(os.environ.get("TB_PROFILER_FUZZ_SEED", "20240607"))
SOURCE = "<fuzz>"


# ---------------------------------------------------------------- seeds

def _kineto_slice(path: Path, events: int, skip: int) -> bytes:
    """The header and `events` events (after skipping `skip`) of a real trace, closed again."""
    text = read_bytes(path)
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


def seeds() -> list[tuple[str, bytes]]:
    out = []
    for p in SMALL_TRACES:
        out.append((plain_rel(p), read_bytes(p)))
    for skip in (0, 30000, 60000):
        out.append((f"kineto-slice-{skip}", _kineto_slice(V100_TRACE, 60, skip)))
    text = read_bytes(LEGACY_BARE_ARRAY)
    cut = text.index(b"\n  },", 20000)
    out.append(("legacy-bare-array-slice", text[:cut + 4] + b"\n]\n"))
    for p in sorted(DECODE_CASES.glob("*.json")):
        out.append((p.name, p.read_bytes()))
    out.append(("minimal-object", b'{"traceEvents":[{"ph":"X","name":"a","ts":1.5,"dur":2,"pid":1,"tid":"2",'
                                  b'"args":{"External id":3,"grid":[1,2,3],"Input Dims":[[1],[]]}}]}'))
    out.append(("minimal-array", b'[{"ph":"C","args":{"a":1}},{"ph":"s","id":"0x1f","bp":"e"}]'))
    return out


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


def worker(seconds: float, seed: int, max_iterations: int, out: Path, differential: bool) -> int:
    import faulthandler

    faulthandler.enable()
    sys.path.insert(0, str(HERE))
    import reference_decode as R
    from tb_profiler.errors import TraceFormatError

    decode, decode_bytes = _decoders()
    rng = random.Random(seed)
    corpus = seeds()
    out.mkdir(parents=True, exist_ok=True)
    current = out / "current.bin"
    failures = []
    stats = {"iterations": 0, "accepted": 0, "rejected": 0, "seeds": len(corpus)}
    deadline = time.monotonic() + seconds

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
        with open(current, "wb") as f:  # survives a crash of this process
            f.write(data)
        if it == 3 and os.environ.get("TB_PROFILER_FUZZ_SELFTEST_CRASH") == "1":
            import ctypes

            ctypes.string_at(0)  # the harness self-test: die by SIGSEGV
        use_bytes = it % 2 == 0
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
        if differential:
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
    current.unlink(missing_ok=True)
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
    return stats


def test_fuzz_native_invariants(tmp_path):
    """Decoded with sound invariants, or TraceFormatError; never anything else."""
    stats = _run_worker(tmp_path, FUZZ_SECONDS * 0.6, FUZZ_SEED, 300_000, differential=False)
    print(stats)


def test_fuzz_native_agrees_with_reference(tmp_path):
    """On mutated inputs, native and reference accept and reject the same, and agree when accepting."""
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


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help="(internal) run the loop in this process")
    ap.add_argument("--seconds", type=float, default=FUZZ_SECONDS)
    ap.add_argument("--seed", type=int, default=FUZZ_SEED)
    ap.add_argument("--iterations", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--differential", action="store_true")
    args = ap.parse_args()
    import importlib.util

    if importlib.util.find_spec("tb_profiler") is None:  # a checkout, not installed
        sys.path.append(str(ROOT))
    if args.worker:
        sys.exit(worker(args.seconds, args.seed, args.iterations, args.out, args.differential))
    import tempfile  # by hand: run the worker in a child and report like the test does

    with tempfile.TemporaryDirectory() as d:
        print(_run_worker(Path(d), args.seconds, args.seed, args.iterations, args.differential))
