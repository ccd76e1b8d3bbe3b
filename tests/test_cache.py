"""The on-disk cache: a reopen in a new process reads only the cache; anything stale or
damaged is rebuilt (never trusted) with identical results; a broken cache dir never
breaks a load."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from datafiles import V100X4, read_bytes

import tb_profiler.decode as decode_mod
from tb_profiler import cache as cache_mod
from tb_profiler import cache_folder
from tb_profiler.trace import load as _load


def load(*args, **kwargs):
    """trace.load, then wait for its cache entry to be written (these tests read the entry)."""
    trace = _load(*args, **kwargs)
    trace.cache_path
    return trace

ROOT = Path(__file__).resolve().parents[1]
V100X4_TEXT = read_bytes(V100X4)  # the plain JSON of a small real trace (4xV100)

# Shared by this process and the child processes: a fingerprint of everything a Trace holds.
DIGEST = textwrap.dedent("""
    import hashlib, json
    import numpy as np

    def digest(t):
        h = hashlib.sha256()
        for name in sorted(t._state.arrays):
            a = np.ascontiguousarray(t._state.arrays[name])
            h.update(name.encode() + a.dtype.str.encode() + a.tobytes())
        h.update("\\0".join(t.strings).encode("utf-8", "surrogatepass"))
        h.update(bytes(t.args_blob))
        meta = {k: v for k, v in t._state.meta.items() if not k.endswith("_seconds")}
        h.update(json.dumps(meta, sort_keys=True).encode())
        return h.hexdigest()
""")
exec(DIGEST)

# Child process: the decoder and the file reader are replaced by tripwires, so a load that
# succeeds can only have come from the cache.
CHILD = DIGEST + textwrap.dedent("""
    import sys
    import tb_profiler.decode as d
    import tb_profiler.trace.load as L
    from tb_profiler.trace import load

    def tripwire(*a, **k):
        raise AssertionError("decoder or file reader called on a cache hit")

    d.decode = tripwire
    L.read_trace_bytes = tripwire
    t = load(sys.argv[1], cache_dir=sys.argv[2])
    print(json.dumps({"from_cache": t.from_cache, "digest": digest(t), "events": len(t.events),
                      "steps": t.steps["number"].tolist(), "args0": t.args(0), "load_seconds": t.load_seconds}))
""")


@pytest.fixture
def trace_file(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(V100X4_TEXT)
    return p


def run_child(path, cache_dir) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(cache_dir)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def entry_of(trace_file, cache_dir) -> Path:
    return Path(cache_folder.entry_path(os.path.abspath(trace_file), cache_dir))


def test_reopen_in_new_process_reads_only_the_cache(trace_file, tmp_path):
    cdir = tmp_path / "cache"
    first = load(trace_file, cache_dir=cdir)
    assert not first.from_cache and first.cache_path == str(entry_of(trace_file, cdir))
    child = run_child(trace_file, cdir)
    assert child["from_cache"] is True
    assert child["digest"] == digest(first)
    assert child["events"] == len(first.events) == 254 and child["steps"] == [2]
    assert child["args0"] == first.args(0)
    assert not list(cdir.glob(".tmp-*"))  # no temp files left behind


def test_cached_trace_equals_fresh(trace_file, tmp_path):
    fresh = load(trace_file, cache=False)
    load(trace_file, cache_dir=tmp_path)
    cached = load(trace_file, cache_dir=tmp_path)
    assert cached.from_cache and digest(cached) == digest(fresh)
    for table in ("events", "instants", "flows", "counters", "memory_records", "steps"):
        a, b = getattr(fresh, table).df(), getattr(cached, table).df()
        assert a.equals(b), table
    assert cached.devices == fresh.devices and cached.thread_names == fresh.thread_names
    assert cached.events["correlation"].tolist() == fresh.events["correlation"].tolist()
    k = int(np.flatnonzero(cached.events["kind"] == 5)[0])
    assert cached.args(k) == fresh.args(k) and cached.args(k)["grid"]
    assert not cached.events["ts"].flags.writeable  # memory-mapped, read-only


def test_modified_file_is_rebuilt(trace_file, tmp_path):
    load(trace_file, cache_dir=tmp_path)
    assert load(trace_file, cache_dir=tmp_path).from_cache
    st = trace_file.stat()
    os.utime(trace_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same bytes, new mtime
    t = load(trace_file, cache_dir=tmp_path)
    assert not t.from_cache
    assert load(trace_file, cache_dir=tmp_path).from_cache
    doc = json.loads(trace_file.read_text())
    doc["traceEvents"] = doc["traceEvents"][:100]  # new content and size
    trace_file.write_text(json.dumps(doc))
    os.utime(trace_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # even with the old mtime
    t = load(trace_file, cache_dir=tmp_path)
    assert not t.from_cache and t.n_rows == 100


def test_new_decoder_version_is_rebuilt(trace_file, tmp_path, monkeypatch):
    load(trace_file, cache_dir=tmp_path)
    monkeypatch.setattr(decode_mod, "DECODER_VERSION", "some-other-version", raising=False)
    assert not load(trace_file, cache_dir=tmp_path).from_cache
    assert load(trace_file, cache_dir=tmp_path).from_cache


def _rewrite_header(entry: Path, change) -> None:
    """Edit the header JSON and give it a valid CRC, so only deeper checks can catch it."""
    data = entry.read_bytes()
    magic, fmt, _, hlen = struct.unpack_from("<8sIIQ", data)
    header = json.loads(data[24:24 + hlen])
    change(header)
    body = json.dumps(header, separators=(",", ":")).encode()
    pad = lambda n: (n + 63) // 64 * 64  # noqa: E731 - the data starts at the next 64-byte boundary
    payload = data[pad(24 + hlen):]
    entry.write_bytes(struct.pack("<8sIIQ", magic, fmt, cache_mod._crc32(body), len(body)) + body
                      + b"\0" * (pad(24 + len(body)) - 24 - len(body)) + payload)


def _flip(offset_from_end: int):
    def damage(entry: Path):
        data = bytearray(entry.read_bytes())
        data[len(data) - offset_from_end] ^= 0x5A
        entry.write_bytes(bytes(data))
    return damage


def _flip_in_first_array(entry: Path):
    """Flip a byte inside the first array's data (not read at the open)."""
    data = bytearray(entry.read_bytes())
    magic, fmt, crc, hlen = struct.unpack_from("<8sIIQ", data)
    header = json.loads(data[24:24 + hlen])
    spec = next(iter(header["arrays"].values()))
    at = (24 + hlen + 63) // 64 * 64 + spec["offset"] + spec["nbytes"] // 2
    data[at] ^= 0x5A
    entry.write_bytes(bytes(data))


def _grow_first_array(header):
    name = next(iter(header["arrays"]))
    header["arrays"][name]["shape"][0] += 1
    header["arrays"][name]["nbytes"] += np.dtype(header["arrays"][name]["dtype"]).itemsize


def _point_past_end(header):
    spec = next(iter(header["arrays"].values()))
    spec["offset"] = header["data_size"]


DAMAGE = {
    "truncated": lambda e: e.write_bytes(e.read_bytes()[: e.stat().st_size // 2]),
    "truncated_to_nothing": lambda e: e.write_bytes(b""),
    "garbage": lambda e: e.write_bytes(os.urandom(e.stat().st_size)),
    "garbage_header": lambda e: e.write_bytes(e.read_bytes()[:24] + b"{not json" + e.read_bytes()[33:]),
    "flipped_data_byte": _flip(200),
    "flipped_array_byte": _flip_in_first_array,
    "flipped_header_byte": lambda e: _flip(e.stat().st_size - 40)(e),
    "wrong_magic": lambda e: e.write_bytes(b"XXXXXXXX" + e.read_bytes()[8:]),
    "appended_bytes": lambda e: e.write_bytes(e.read_bytes() + b"\0" * 64),
    "wrong_lengths": lambda e: _rewrite_header(e, _grow_first_array),
    "offset_out_of_bounds": lambda e: _rewrite_header(e, _point_past_end),
    "checksum_mismatch": lambda e: _rewrite_header(e, lambda h: next(iter(h["arrays"].values())).update(crc=1)),
    "other_source": lambda e: _rewrite_header(e, lambda h: h["key"].update(source="/elsewhere")),
}


# Damage only an array's CRC can catch: found on the array's first read.
ARRAY_DAMAGE = {"checksum_mismatch", "flipped_array_byte"}


def test_header_rewriter_itself_keeps_entries_valid(trace_file, tmp_path):
    load(trace_file, cache_dir=tmp_path)
    _rewrite_header(entry_of(trace_file, tmp_path), lambda h: h["meta"].update(note="x" * 100))
    assert load(trace_file, cache_dir=tmp_path).from_cache  # so the damage cases below test real checks


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_corrupt_entry_is_rebuilt(trace_file, tmp_path, damage):
    fresh = digest(load(trace_file, cache=False))
    load(trace_file, cache_dir=tmp_path)
    entry = entry_of(trace_file, tmp_path)
    DAMAGE[damage](entry)
    damaged = entry.read_bytes() if entry.exists() else b""
    t = load(trace_file, cache_dir=tmp_path)
    # Damage inside an array's bytes is found when the array is first read (its CRC is
    # checked then, not at the open): that read answers from the trace decoded again.
    assert t.from_cache == (damage in ARRAY_DAMAGE)
    assert digest(t) == fresh
    if t.from_cache:
        assert entry.read_bytes() != damaged  # the entry was rewritten when the damage was found
    again = load(trace_file, cache_dir=tmp_path)  # the rebuilt entry is good again
    assert again.from_cache and digest(again) == fresh


def test_unwritable_cache_dir_still_loads(trace_file, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.warns(cache_folder.CacheWarning):
        t = load(trace_file, cache_dir=not_a_dir / "cache")
    assert len(t.events) == 254 and not t.from_cache and t.cache_path is None


def test_permission_denied_cache_dir_still_loads(trace_file, tmp_path, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache_mod.tempfile, "mkstemp", denied)  # what a read-only folder does
    with pytest.warns(cache_folder.CacheWarning, match="Permission denied"):
        t = load(trace_file, cache_dir=tmp_path / "c")
    assert len(t.events) == 254 and not t.from_cache


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_dir_still_loads(trace_file, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.warns(cache_folder.CacheWarning):
            t = load(trace_file, cache_dir=ro)
        assert len(t.events) == 254
    finally:
        ro.chmod(0o700)


def test_write_failure_leaves_no_partial_entry(trace_file, tmp_path, monkeypatch):
    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_mod.os, "replace", fail)
    with pytest.warns(cache_folder.CacheWarning, match="No space"):
        t = load(trace_file, cache_dir=tmp_path / "c")
    assert len(t.events) == 254 and list((tmp_path / "c").iterdir()) == []


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("TB_PROFILER_CACHE_DIR", str(tmp_path / "env"))
    assert cache_folder.cache_dir() == str(tmp_path / "env")
    assert cache_folder.cache_dir(tmp_path / "arg") == str(tmp_path / "arg")
    monkeypatch.delenv("TB_PROFILER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder.cache_dir() == str(tmp_path / "xdg" / "tb_profiler")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_folder.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "tb_profiler")


def test_env_cache_dir_is_used(trace_file, tmp_path, monkeypatch):
    monkeypatch.setenv("TB_PROFILER_CACHE_DIR", str(tmp_path / "envcache"))
    load(trace_file)
    assert load(trace_file).from_cache
    assert len(list((tmp_path / "envcache").glob("*.tbpc"))) == 1


def test_url_sources_are_cached(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/tbp-cache-test/w.pt.trace.json", V100X4_TEXT)
    url = "memory://tbp-cache-test/w.pt.trace.json"
    a = load(url, cache_dir=tmp_path)
    b = load(url, cache_dir=tmp_path)
    assert not a.from_cache and b.from_cache and digest(a) == digest(b)
    fs.pipe("/tbp-cache-test/w.pt.trace.json", V100X4_TEXT.replace(b'"Operator"', b'"cpu_op"  '))
    c = load(url, cache_dir=tmp_path)
    assert not c.from_cache and "Operator" not in c.category_counts(raw=True)


def test_strings_with_nul_and_unicode_round_trip(tmp_path):
    p = tmp_path / "u.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "a\u0000b", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "\u00e9\u4e2d\U0001f600", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
         "args": {"k": "\u00e9"}},
        {"ph": "X", "cat": "cpu_op", "name": "", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    ]}))
    fresh = load(p, cache_dir=tmp_path / "c")
    cached = load(p, cache_dir=tmp_path / "c")
    assert cached.from_cache
    assert list(cached.events.str("name")) == ["a\u0000b", "\u00e9\u4e2d\U0001f600", ""]
    assert list(cached.strings) == list(fresh.strings) and cached.args(1) == {"k": "\u00e9"}


def test_no_warning_on_normal_use(trace_file, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load(trace_file, cache_dir=tmp_path)
        load(trace_file, cache_dir=tmp_path)


def test_the_test_session_writes_no_cache_into_the_users_folder(tmp_path):
    """conftest points $TB_PROFILER_CACHE_DIR at a temporary folder for the whole session:
    a load that names no cache folder writes there, not into ~/.cache/tb_profiler."""
    import tempfile

    from tb_profiler.cache_folder import cache_dir

    session = Path(os.environ["TB_PROFILER_CACHE_DIR"])
    assert session.name.startswith("tbp-test-cache-") and str(session).startswith(tempfile.gettempdir())
    assert Path(cache_dir()) == session
    src = tmp_path / "w.pt.trace.json"
    src.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}')
    load(src)  # no cache_dir: the default folder
    assert any(p.suffix == ".tbpc" and "w.pt.trace.json" in p.name for p in session.iterdir())


def test_cache_info_and_clear_orphans_and_all(tmp_path, capsys):
    """tb-profiler cache info counts columns and summaries and names orphans (trace gone);
    clear --orphans removes only those; clear removes every entry, never other files."""
    from tb_profiler.cache import entries
    from tb_profiler.cli import main
    from tb_profiler.summary import summary_for

    cache = tmp_path / "cache"
    keep, gone = tmp_path / "keep.pt.trace.json", tmp_path / "gone.pt.trace.json"
    for p in (keep, gone):
        p.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}')
        load(p, cache_dir=cache)
    summary_for(keep, cache_dir=cache)
    gone.unlink()
    (cache / "notes.txt").write_text("mine")
    assert main(["cache", "info", "--cache-dir", str(cache), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["columns"]["entries"], doc["summaries"]["entries"], doc["orphans"]["entries"]) == (2, 1, 1)
    assert doc["bytes"] == sum(e.nbytes for e in entries(cache)) > 0
    assert main(["cache", "clear", "--orphans", "--cache-dir", str(cache)]) == 0
    assert "removed 1 orphaned entry" in capsys.readouterr().out
    assert sorted(e.source for e in entries(cache)) == [str(keep), str(keep)]  # its columns and its summary
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert entries(cache) == [] and (cache / "notes.txt").read_text() == "mine"
    assert main(["cache", "info", "--cache-dir", str(cache)]) == 0
    assert "0 entries" in capsys.readouterr().out
