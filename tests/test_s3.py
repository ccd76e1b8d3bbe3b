"""Logdirs on S3, against a real S3-protocol server on 127.0.0.1 (moto's server mode, see
s3_server.py), reached as a user reaches one: credentials and AWS_ENDPOINT_URL in the
environment, s3:// URLs everywhere, read through fsspec (s3fs).

Discovery (library and `tb-profiler runs`), load with progress (gzip and plain), the
on-disk cache (a hit, and an object rewritten by another client never served stale), the
plugin's live refresh, the writer with a real torch.profiler profile, broken objects beside
good ones, and names that could leave the logdir. The store-independent checks also run on
``memory://``, fsspec's in-process filesystem, which must keep working as before.
"""
from __future__ import annotations

import gzip
import importlib
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from datafiles import H100_AFTER_FIX, H100_BEFORE_FIX, V100X4
from s3_server import s3_server
from test_plugin_state import wait_for
from werkzeug.test import Client

import tb_profiler
from tb_profiler import decode as decode_mod
from tb_profiler.errors import TraceFormatError
from tb_profiler.io import read as read_mod
from tb_profiler.io.discovery import DOTDOT, ODD_NAME, discover
from tb_profiler.io.read import stat_key

load_mod = importlib.import_module("tb_profiler.trace.load")  # the module: tb_profiler.trace.load is also a function
ROOT = Path(__file__).resolve().parent.parent
P = "/data/plugin/pytorch_profiler/"
_buckets = itertools.count()


@pytest.fixture(scope="module")
def s3_endpoint():
    """One server for the module; each test gets its own bucket (``bucket``)."""
    with pytest.MonkeyPatch.context() as mp, s3_server(mp) as endpoint:
        yield endpoint


class Store:
    """A place to put objects by key: an S3 bucket written with boto3 (another client than
    the s3fs one tb_profiler reads with, as a training job writing while the server
    reads), or fsspec's memory filesystem."""

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name
        if kind == "s3":
            import boto3

            self.client = boto3.client("s3")
            self.client.create_bucket(Bucket=name)
        else:
            import fsspec

            self.fs = fsspec.filesystem("memory")

    def url(self, key: str = "") -> str:
        root = "s3://" if self.kind == "s3" else "memory:///"  # as fsspec writes them back
        return f"{root}{self.name}/{key}".rstrip("/")

    def put(self, key: str, data: bytes) -> str:
        if self.kind == "s3":
            self.client.put_object(Bucket=self.name, Key=key, Body=data)
        else:
            self.fs.pipe(f"/{self.name}/{key}", data)
        return self.url(key)

    def keys(self) -> list[str]:
        if self.kind == "s3":
            return sorted(o["Key"] for o in self.client.list_objects_v2(Bucket=self.name).get("Contents", []))
        return sorted(p[len(self.name) + 2:] for p in self.fs.find(f"/{self.name}"))

    def close(self) -> None:
        if self.kind == "memory":
            self.fs.rm(f"/{self.name}", recursive=True)


@pytest.fixture
def bucket(s3_endpoint) -> Store:
    return Store("s3", f"tbp-{next(_buckets)}")


@pytest.fixture(params=["s3", "memory"])
def store(request):
    """The same checks on S3 and on memory:// (which must keep working as it did)."""
    if request.param == "s3":
        request.getfixturevalue("s3_endpoint")
    s = Store(request.param, f"tbp-{request.param}-{next(_buckets)}")
    yield s
    s.close()


def _trace(ts0: int = 1000, n: int = 3, pad: int = 0, op: str = "op") -> bytes:
    """A small Kineto trace of n cpu_op events starting at ts0 (microseconds)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::{op}{i % 7}", "pid": 1, "tid": 1, "ts": ts0 + 10 * i,
               "dur": 5, "args": {"External id": i, "pad": "x" * (pad + i % 13)}} for i in range(n)]
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


# -- 1. discovery: library, load_run, and the CLI in a subprocess -----------------------------------
def test_discovery_lists_runs_workers_and_spans_and_skips_what_it_must(store):
    gz = H100_AFTER_FIX.read_bytes()
    store.put("log/run_a/worker0.1690000000123.pt.trace.json.gz", gz)
    store.put("log/run_a/worker0.1690000000999.pt.trace.json.gz", H100_BEFORE_FIX.read_bytes())
    store.put("log/run_a/worker10.pt.trace.json", gzip.decompress(gz))
    store.put("log/run_a/worker2.pt.trace.json", gzip.decompress(gz))
    store.put("log/run_b/nested/rank-0.json.gz", V100X4.read_bytes())  # named otherwise: sniffed
    store.put("log/run_b/nested/notes.json", b'{"lr": 0.1}')
    store.put("log/run_b/nested/.w.1.pt.trace.json.gz.tmp-42", gz)  # a writer's temp: hidden
    store.put("log/run_b/nested/w.pt.trace.json.zst", b"zstd")
    store.put("logother/run_c/w.pt.trace.json.gz", gz)  # a sibling prefix: not under log/
    found = discover(store.url("log"))
    assert [r.name for r in found.runs] == ["run_a", "run_b/nested"]
    run_a = found.run("run_a")
    assert run_a.path == store.url("log/run_a")
    assert list(run_a.workers) == ["worker0", "worker2", "worker10"]  # natural order
    spans = run_a.workers["worker0"]
    assert [(s.span, s.index) for s in spans] == [("1690000000123", 1), ("1690000000999", 2)]
    assert spans[0].path == store.url("log/run_a/worker0.1690000000123.pt.trace.json.gz")
    assert spans[0].size == len(gz) and spans[0].mtime > 0
    if store.kind == "s3":  # the content tag that tells a rewrite within LastModified's second
        assert all(s.tag for s in run_a.files)
    assert list(found.run("run_b/nested").workers) == ["rank-0"]
    skipped = {s.path.rsplit("/", 1)[-1]: s.reason for s in found.skipped}
    assert set(skipped) == {"notes.json", "w.pt.trace.json.zst"}
    assert "not a Kineto trace" in skipped["notes.json"] and "'.zst'" in skipped["w.pt.trace.json.zst"]
    slash = discover(store.url("log") + "/")  # a trailing slash finds the same
    assert (slash.runs, slash.skipped) == (found.runs, found.skipped)

    run = tb_profiler.load_run(store.url("log/run_a"))
    assert run.workers == ["worker0", "worker2", "worker10"]
    t = run.trace("worker0", 1)
    assert t.source == spans[0].path and len(t.events) == len(tb_profiler.load(H100_AFTER_FIX, cache=False).events)
    assert len(run.trace("worker10").events) == len(t.events)
    with pytest.raises(ValueError, match="holds 2 runs"):
        tb_profiler.load_run(store.url("log"))


def test_cli_runs_lists_an_s3_logdir_with_only_the_environment(bucket, tmp_path):
    """`tb-profiler runs s3://...` in a fresh process: credentials and endpoint come from the
    environment (AWS_ENDPOINT_URL), as a user would set them for MinIO or any S3 store."""
    bucket.put("log/run1/w.1.pt.trace.json.gz", H100_AFTER_FIX.read_bytes())
    bucket.put("log/run1/w.2.pt.trace.json.gz", H100_BEFORE_FIX.read_bytes())
    bucket.put("log/run1/broken.pt.trace.json", b"")
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(tmp_path / "cache"))
    assert env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    proc = subprocess.run([sys.executable, "-m", "tb_profiler.cli", "runs", bucket.url("log"), "--json"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["logdir"] == bucket.url("log")
    assert [r["name"] for r in doc["runs"]] == ["run1"]
    assert [s["path"] for s in doc["runs"][0]["workers"]["w"]] == [bucket.url("log/run1/w.1.pt.trace.json.gz"),
                                                                  bucket.url("log/run1/w.2.pt.trace.json.gz")]
    assert doc["skipped"] == [{"path": bucket.url("log/run1/broken.pt.trace.json"),
                               "reason": "empty file (0 bytes): the profiler probably crashed or was killed "
                                         "while writing it"}]
    assert "skipped " + bucket.url("log/run1/broken.pt.trace.json") in proc.stderr


def test_object_names_that_could_leave_the_logdir_are_never_listed(bucket):
    """Object names are any text: '..' and empty components are reported, never followed."""
    gz = H100_AFTER_FIX.read_bytes()
    bucket.put("log/run/w.pt.trace.json.gz", gz)
    bucket.put("log/run/../../secret/w.pt.trace.json.gz", gz)
    bucket.put("log/run//x.pt.trace.json.gz", gz)
    bucket.put("log/./y.pt.trace.json.gz", gz)
    keys = bucket.keys()
    assert "log/run/../../secret/w.pt.trace.json.gz" in keys and "log/run//x.pt.trace.json.gz" in keys
    found = discover(bucket.url("log"))
    assert [r.name for r in found.runs] == ["run"]
    assert [s.path for s in found.run("run").files] == [bucket.url("log/run/w.pt.trace.json.gz")]
    reasons = {s.path: s.reason for s in found.skipped}
    assert reasons == {bucket.url("log/run/../../secret/w.pt.trace.json.gz"): DOTDOT,
                       bucket.url("log/run//x.pt.trace.json.gz"): ODD_NAME,
                       bucket.url("log/./y.pt.trace.json.gz"): ODD_NAME}


def test_sniffing_a_big_object_fetches_only_its_head(bucket, monkeypatch):
    """A JSON object not named like torch's traces is told a trace by its head: only that is
    fetched (s3fs's default read-ahead would fetch 50 MiB of each)."""
    import s3fs.core

    fetched = []
    real = s3fs.core.S3File._fetch_range

    def spy(self, start, end):
        fetched.append(end - start)
        return real(self, start, end)

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", spy)
    big = _trace(n=20000, pad=100)
    assert len(big) > 2 << 20
    bucket.put("log/run/rank-0.json", big)
    found = discover(bucket.url("log"))
    assert list(found.run("run").workers) == ["rank-0"]
    assert 0 < sum(fetched) <= 1 << 20


# -- 2. load with progress --------------------------------------------------------------------------
@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_load_from_s3_reports_download_inflate_and_decode_progress(bucket, monkeypatch, gz):
    # Small chunks, so a test-sized object arrives in several pieces.
    monkeypatch.setattr(read_mod, "_DOWNLOAD_CHUNK", 4 << 10)
    monkeypatch.setattr(read_mod, "_HEAD", 4 << 10)
    text = _trace(n=3000, pad=20)
    data = gzip.compress(text) if gz else text
    assert len(data) > 4 * (4 << 10)
    url = bucket.put("log/run/w.pt.trace.json" + (".gz" if gz else ""), data)
    calls = []
    t = tb_profiler.load(url, progress=lambda done, total: calls.append((done, total)), cache=False)
    assert len(t.events) == 3000 and t.source == url
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(set(done)) >= 4
    # The total is known from the start (a gzip object's trailer is read before it downloads):
    # its bytes, then for gzip the text inflated, then the text decoded.
    expected = len(data) + 2 * len(text) if gz else 2 * len(text)
    assert {total for _, total in calls} == {expected}
    assert calls[-1] == (expected, expected)
    assert len(data) in done  # the download's end, before inflating / decoding


def test_a_progress_callback_that_raises_breaks_nothing(bucket):
    url = bucket.put("log/run/w.pt.trace.json.gz", H100_AFTER_FIX.read_bytes())

    def boom(done, total):
        raise RuntimeError("a caller's bug")

    assert len(tb_profiler.load(url, progress=boom, cache=False).events) > 0


# -- 3. the cache -------------------------------------------------------------------------------------
def _tripwires(monkeypatch):
    """Reading or decoding a trace fails the test: a load must come from the cache."""
    def tripwire(*a, **k):
        raise AssertionError("read or decoded again: not served from the cache")

    monkeypatch.setattr(load_mod, "read_trace_bytes", tripwire)
    monkeypatch.setattr(decode_mod, "decode", tripwire)


def test_second_load_comes_from_the_cache_and_a_rewrite_is_never_served_stale(store, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    url = store.put("log/run/w.pt.trace.json", _trace(1000))
    first = tb_profiler.load(url, cache_dir=cache, background=False)
    assert first.events["ts"][0] == 1000 * 1000 and first.cache_path and Path(first.cache_path).is_file()
    with monkeypatch.context() as m:
        _tripwires(m)
        again = tb_profiler.load(url, cache_dir=cache)
        assert again.events["ts"][0] == 1000 * 1000 and again.cache_path == first.cache_path

    # Rewritten by another client at once, same size: S3's LastModified has whole seconds, so
    # only the ETag tells this version from the last.
    before = stat_key(url)
    store.put("log/run/w.pt.trace.json", _trace(2000))
    assert stat_key(url) != before and stat_key(url)[0] == before[0]
    assert tb_profiler.load(url, cache_dir=cache, background=False).events["ts"][0] == 2000 * 1000

    if store.kind == "s3":  # deterministic, whatever the clock did: the stamp carries the ETag
        etag = store.client.head_object(Bucket=store.name, Key="log/run/w.pt.trace.json")["ETag"].strip('"')
        assert stat_key(url)[1].endswith(":" + etag)

    # The folder is listed (a scan, or anything else in the process: s3fs remembers listings
    # and answers info() from them), then another client rewrites the object with a new
    # size: what is stat'ed and read is the new version, not the listing's.
    assert discover(store.url("log")).run("run").files[0].size == before[0]
    import fsspec

    fs, path = fsspec.core.url_to_fs(store.url("log/run"))
    assert [i["size"] for i in fs.ls(path, detail=True)] == [before[0]]
    store.put("log/run/w.pt.trace.json", _trace(30000, n=4))
    assert stat_key(url)[0] != before[0]
    fresh = tb_profiler.load(url, cache_dir=cache, background=False)
    assert fresh.events["ts"][0] == 30000 * 1000 and len(fresh.events) == 4
    with monkeypatch.context() as m:
        _tripwires(m)
        assert len(tb_profiler.load(url, cache_dir=cache).events) == 4


def test_remote_stamp_combines_time_and_content_tag():
    from datetime import datetime, timezone

    from tb_profiler.io.read import remote_stamp

    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    ns = int(when.timestamp() * 1e9)
    assert remote_stamp({"LastModified": when, "ETag": '"abc"', "size": 3}) == f"{ns}:abc"
    assert remote_stamp({"created": when.timestamp()}) == ns  # memory://: a time only
    assert remote_stamp({"generation": "17"}) == ":17"
    assert remote_stamp({}) == ""


# -- 4. the plugin's live refresh, 6. broken objects beside good ones -----------------------------
@pytest.fixture
def serve(tmp_path):
    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    made = []

    def _make(logdir: str):
        state = ProfilerState(logdir, reload_s=0.2, cache_dir=str(tmp_path / "cache"), jobs=1)
        app = ProfilerApp(state, standalone=True)
        made.append(app)
        state.start()
        return Client(app)

    yield _make
    for app in made:
        app.state.stop()
        app.close()


def get(client, route, expect=200):
    r = client.get(P + route)
    assert r.status_code == expect, (route, r.status_code, r.get_data()[:300])
    return json.loads(r.get_data())


def test_server_lists_runs_added_to_the_bucket_and_reloads_rewritten_objects(bucket, serve, monkeypatch):
    import dataclasses

    from tb_profiler.io import discovery

    real_discover = discovery.discover

    def timeless(logdir):
        """Discovery with every time zeroed: what a rewrite within LastModified's second looks
        like (same size, same time), made certain; the ETag is all that tells it."""
        found = real_discover(logdir)
        for r in found.runs:
            r.workers = {w: [dataclasses.replace(s, mtime=0.0) for s in spans] for w, spans in r.workers.items()}
        return found

    monkeypatch.setattr(discovery, "discover", timeless)  # the server's scan looks it up at each call
    bucket.put("log/run1/w.pt.trace.json", _trace(1000))
    c = serve(bucket.url("log"))
    assert get(c, "runs")["runs"] == ["run1"]
    assert get(c, "workers?run=run1") == ["w"]
    assert get(c, "overview?run=run1")["summary"]["num_steps"] >= 0

    bucket.put("log/run2/w.1.pt.trace.json.gz", H100_AFTER_FIX.read_bytes())  # a job writes a new run
    wait_for(lambda: get(c, "runs")["runs"] == ["run1", "run2"], "the new run listed")
    assert get(c, "workers?run=run2") == ["w"]
    assert get(c, "spans?run=run2") == ["1"]
    assert "Overview" in get(c, "views?run=run2")

    # run1 rewritten in place at the same size: the ETag tells the server, which loads the
    # new version
    def ops():
        return json.dumps(get(c, "operation/table?run=run1"))

    assert "aten::op0" in ops()
    bucket.put("log/run1/w.pt.trace.json", _trace(1000, op="zz"))
    wait_for(lambda: "aten::zz0" in ops() and "aten::op0" not in ops(), "the rewritten object loaded")
    raw = c.get(P + "trace/raw?run=run1")
    assert raw.status_code == 200 and b"aten::zz0" in gzip.decompress(raw.get_data())
    wait_for(lambda: not get(c, "status")["loading"], "loading to end")
    assert get(c, "skipped")["skipped"] == []


def test_a_broken_object_is_named_and_never_hides_the_good_ones(bucket, serve):
    good = H100_AFTER_FIX.read_bytes()
    bucket.put("log/good/w.pt.trace.json.gz", good)
    bucket.put("log/mixed/w0.pt.trace.json.gz", good)
    bucket.put("log/mixed/w1.pt.trace.json.gz", good[:10] + b"\x00garbage" * 50)  # gzip header, bad data
    bucket.put("log/sniffed/rank-0.json.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 64)  # unreadable head
    bucket.put("log/sniffed/rank-1.json.gz", V100X4.read_bytes())
    bad = bucket.url("log/mixed/w1.pt.trace.json.gz")

    with pytest.raises(TraceFormatError) as err:
        tb_profiler.load(bad, cache=False)
    assert bad in str(err.value) and "gzip" in str(err.value)
    run = tb_profiler.load_run(bucket.url("log/mixed"))
    assert run.workers == ["w0", "w1"] and len(run.trace("w0").events) > 0
    with pytest.raises(TraceFormatError, match=re.escape(bad)):
        run.trace("w1")

    found = discover(bucket.url("log"))
    assert [r.name for r in found.runs] == ["good", "mixed", "sniffed"]
    assert list(found.run("sniffed").workers) == ["rank-1"]
    [skip] = found.skipped
    assert skip.path == bucket.url("log/sniffed/rank-0.json.gz") and "not a readable gzip file" in skip.reason

    c = serve(bucket.url("log"))
    assert get(c, "runs")["runs"] == ["good", "mixed", "sniffed"]
    assert get(c, "overview?run=good")["summary"] is not None
    assert get(c, "overview?run=mixed&worker=w0")["summary"] is not None
    err = get(c, "overview?run=mixed&worker=w1", expect=404)
    assert "mixed/w1.pt.trace.json.gz" in err["error"] and bucket.name not in err["error"]
    skipped = wait_for(lambda: {s["path"]: s["reason"] for s in get(c, "skipped")["skipped"]}.get(
        "mixed/w1.pt.trace.json.gz") and get(c, "skipped")["skipped"], "the broken object listed")
    paths = {s["path"] for s in skipped}
    assert paths == {"mixed/w1.pt.trace.json.gz", "sniffed/rank-0.json.gz"}
    assert all(bucket.name not in s["reason"] for s in skipped)  # named relative to the logdir
    assert get(c, "workers?run=mixed") == ["w0"]  # the broken worker is not offered


def _timeless(real_discover):
    """Discovery with every time zeroed: what a rewrite within LastModified's second, or a
    restore that keeps times, looks like (same size, same time), made certain."""
    import dataclasses

    def discover_timeless(logdir):
        found = real_discover(logdir)
        for r in found.runs:
            r.workers = {w: [dataclasses.replace(s, mtime=0.0) for s in spans] for w, spans in r.workers.items()}
        return found

    return discover_timeless


def test_a_rewrite_keeping_size_and_time_is_new_to_the_running_and_a_restarted_server(store, serve, monkeypatch):
    """Issue 18: one single-worker run and one of two ranks (summarized), rewritten with the
    same size and (as discovery sees it) the same time: the running server serves the new
    version (loaded trace, stored answers, summaries), and so does a new server on the same
    cache with the objects rewritten again meanwhile.  S3 tells versions by their ETag;
    memory:// has no content tag, so a digest of the object's head and tail does."""
    from tb_profiler import cache_writer
    from tb_profiler.io import discovery
    from tb_profiler.plugin import app as app_mod

    monkeypatch.setattr(discovery, "discover", _timeless(discovery.discover))
    monkeypatch.setattr(app_mod, "STORE_AFTER_S", 0.0)  # every answer also kept with the trace's cache
    store.put("log/one/w.pt.trace.json", _trace(1000, op="aa"))
    for r in (0, 1):
        store.put(f"log/two/rank{r}.pt.trace.json", _trace(1000, op="rr"))

    def ops(c, query):
        return json.dumps(get(c, f"operation/table?{query}"))

    def summary_ops(c):
        state = c.application.state
        entry = [e for e in state.run_entries("two") if e.worker == "rank1"][0]
        return {n[:-1] for n in entry.summary.operators["name"]} if entry.summary is not None else set()

    c = serve(store.url("log"))
    assert "aten::aa0" in ops(c, "run=one")
    wait_for(lambda: summary_ops(c) == {"aten::rr"}, "rank1's summary", 120)
    assert "aten::rr0" in ops(c, "run=two&worker=rank1")
    assert cache_writer.drain(60)
    size = len(_trace(1000, op="aa"))
    store.put("log/one/w.pt.trace.json", _trace(1000, op="bb"))
    store.put("log/two/rank1.pt.trace.json", _trace(1000, op="ss"))
    assert all(s.size == size for r in discover(store.url("log")).runs for s in r.files)
    wait_for(lambda: "aten::bb0" in ops(c, "run=one") and "aten::aa0" not in ops(c, "run=one"),
             "the running server to serve the new version", 60)
    wait_for(lambda: summary_ops(c) == {"aten::ss"}, "the new summary", 120)
    assert "aten::ss0" in ops(c, "run=two&worker=rank1") and "aten::rr0" in ops(c, "run=two&worker=rank0")
    c.application.state.stop()
    assert cache_writer.drain(60)

    store.put("log/one/w.pt.trace.json", _trace(1000, op="cc"))
    store.put("log/two/rank1.pt.trace.json", _trace(1000, op="tt"))
    c2 = serve(store.url("log"))
    assert "aten::cc0" in ops(c2, "run=one") and "aten::bb0" not in ops(c2, "run=one")
    wait_for(lambda: summary_ops(c2) == {"aten::tt"}, "the restarted server's summary", 120)
    assert "aten::tt0" in ops(c2, "run=two&worker=rank1")


def test_a_store_without_content_tags_is_told_apart_by_head_and_tail():
    """io.read.remote_identity: the tag where the store gives one, else a digest of the first
    and last DIGEST_BYTES, read as two ranges (never the whole object)."""
    import fsspec

    from tb_profiler.io.read import DIGEST_BYTES, remote_identity

    fs = fsspec.filesystem("memory")
    big = b"{" + b" " * (5 * DIGEST_BYTES) + b"}"
    fs.pipe("/tbp-digest/a.json", big)
    fs.pipe("/tbp-digest/b.json", big[:-2] + b"x}")
    fs.pipe("/tbp-digest/c.json", big)
    read = []
    real_cat = fs.cat_file

    def counting(path, start=None, end=None, **kw):
        out = real_cat(path, start=start, end=end, **kw)
        read.append(len(out))
        return out

    fs.cat_file = counting
    try:
        ids = [remote_identity(fs, f"/tbp-digest/{n}.json", {"size": len(big)}) for n in "abc"]
        assert ids[0].startswith("#") and ids[0] != ids[1] and ids[0] == ids[2]
        assert max(read) <= DIGEST_BYTES and sum(read) == 3 * 2 * DIGEST_BYTES
        assert remote_identity(fs, "/tbp-digest/a.json", {"size": len(big), "ETag": '"e1"'}) == "e1"
        fs.pipe("/tbp-digest/s.json", b"")
        assert remote_identity(fs, "/tbp-digest/s.json", {"size": 0}).startswith("#")
    finally:
        fs.rm("/tbp-digest", recursive=True)


def test_an_unreachable_store_is_an_error_naming_the_url_not_a_traceback(s3_endpoint, monkeypatch, capsys):
    """Nothing listens at the endpoint (a closed port of 127.0.0.1): discovery raises OSError
    (what the CLI and the server report), load a TraceFormatError naming the URL."""
    from s3_server import forget_s3_filesystems

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's retries: seconds, for nothing here
    forget_s3_filesystems()
    try:
        with pytest.raises(OSError, match="cannot list it: EndpointConnectionError"):
            discover("s3://nowhere/log")
        url = "s3://nowhere/log/w.pt.trace.json.gz"
        with pytest.raises(TraceFormatError) as err:
            tb_profiler.load(url)
        assert str(err.value).startswith(url) and "cannot read" in str(err.value)
        from tb_profiler import cli

        for argv in (["info", "s3://nowhere/log"], ["summary", "s3://nowhere/log"], ["runs", "s3://nowhere/log"]):
            assert cli.main(argv) == cli.EXIT_BAD_INPUT, argv
            err_text = capsys.readouterr().err
            assert "s3://nowhere/log: " in err_text and "EndpointConnectionError" in err_text, (argv, err_text)
            assert "Traceback" not in err_text, (argv, err_text)
    finally:
        monkeypatch.undo()
        forget_s3_filesystems()


def test_summaries_of_a_run_on_s3_are_built_by_other_processes(bucket, tmp_path):
    """The summary processes open the URLs themselves, configured by the environment they
    inherit (why the README says: configure the environment, not code)."""
    import warnings

    bucket.put("log/run/rank0.pt.trace.json.gz", H100_AFTER_FIX.read_bytes())
    bucket.put("log/run/rank1.pt.trace.json.gz", H100_BEFORE_FIX.read_bytes())
    run = tb_profiler.load_run(bucket.url("log/run"), cache_dir=tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file not summarized warns
        summaries = run.summaries(jobs=2)
    assert [s.worker for s in summaries] == ["rank0", "rank1"]
    assert [s.source for s in summaries] == [bucket.url("log/run/rank0.pt.trace.json.gz"),
                                             bucket.url("log/run/rank1.pt.trace.json.gz")]


# -- 5. the writer, with a real torch.profiler profile ----------------------------------------------
@pytest.mark.parametrize("use_gzip", [True, False], ids=["gzip", "plain"])
def test_writer_publishes_real_profiles_to_s3_that_then_load(bucket, use_gzip, tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    handler = tb_profiler.tensorboard_trace_handler(bucket.url("log/run"), worker_name="w", use_gzip=use_gzip)
    x = torch.randn(8, 8)
    written = []
    for _ in range(2):  # two profiling cycles: two spans
        with profile(activities=[ProfilerActivity.CPU],
                     on_trace_ready=lambda prof: written.append(handler(prof))):
            (x @ x).relu().sum()
    suffix = ".pt.trace.json.gz" if use_gzip else ".pt.trace.json"
    keys = bucket.keys()
    assert len(keys) == 2 and all(re.fullmatch(r"log/run/w\.\d+" + re.escape(suffix), k) for k in keys), keys
    assert sorted(written) == [bucket.url(k) for k in keys]  # no temp object left behind
    run = tb_profiler.load_run(bucket.url("log/run"), cache_dir=tmp_path / "cache")
    assert run.workers == ["w"] and [s.index for s in run.spans("w")] == [1, 2]
    for span in (1, 2):
        t = run.trace("w", span)
        names = set(t.strings[t.events["name"]])
        assert "aten::matmul" in names or "aten::mm" in names
    head = read_mod.read_head(bucket.url(keys[0]), 1 << 30)
    assert b'"tbProfilerSourceRoots"' in head


def test_writer_never_creates_a_bucket_and_uploads_once(bucket, monkeypatch):
    """A bucket name with a typo is an error, not a new bucket (s3fs's makedirs creates
    buckets); on an object store the upload goes straight to the final name (atomic), with
    no copy and delete after it."""
    torch = pytest.importorskip("torch")
    import s3fs
    from torch.profiler import ProfilerActivity, profile

    def no_mv(self, *args, **kwargs):
        raise AssertionError("the object was moved after its upload")

    monkeypatch.setattr(s3fs.S3FileSystem, "mv", no_mv)
    x = torch.randn(4, 4)
    missing = f"{bucket.name}-typo"
    handler = tb_profiler.tensorboard_trace_handler(f"s3://{missing}/log", worker_name="w")
    with pytest.raises(FileNotFoundError):
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler):
            (x @ x).sum()
    buckets = [b["Name"] for b in bucket.client.list_buckets()["Buckets"]]
    assert missing not in buckets and bucket.name in buckets
    handler = tb_profiler.tensorboard_trace_handler(bucket.url("log/run"), worker_name="w")
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler):
        (x @ x).sum()
    assert len(bucket.keys()) == 1


# -- 4b. a real server process: TensorBoard and `tb-profiler serve`, pointed at s3:// ---------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_json(url: str):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return None, None


def _event_file(folder: Path) -> Path:
    """A TensorBoard event file with one scalar, as a training job writes beside its traces."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(folder)) as w:
        w.add_scalar("loss", 1.0, 0)
    [path] = folder.glob("events.out.tfevents.*")
    return path


@pytest.mark.parametrize("kind", ["tensorboard", "serve"])
def test_a_real_server_on_an_s3_logdir_lists_runs_added_later(bucket, kind, tmp_path):
    """`tensorboard --logdir s3://...` and `tb-profiler serve s3://...` as a user starts them:
    the endpoint and credentials only in the environment. TensorBoard reads its own event
    files with its own S3 support (boto3), the plugin reads the traces through s3fs."""
    from importlib.metadata import entry_points

    assert any(e.name == "pytorch_profiler" for e in entry_points(group="tensorboard_plugins")), \
        "the pytorch_profiler TensorBoard plugin is not registered (pip install -e .)"
    bucket.put("log/run1/w.1.pt.trace.json.gz", H100_AFTER_FIX.read_bytes())
    if kind == "tensorboard":
        event = _event_file(tmp_path / "events")
        bucket.put(f"log/run1/{event.name}", event.read_bytes())
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    if kind == "tensorboard":
        cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", bucket.url("log"), "--port", str(port),
               "--host", "127.0.0.1", "--reload_interval", "1"]
    else:
        cmd = [sys.executable, "-m", "tb_profiler.cli", "serve", bucket.url("log"), "--port", str(port),
               "--reload-interval", "0.5"]
    env = dict(os.environ, TB_PROFILER_CACHE_DIR=str(tmp_path / "cache"), TB_PROFILER_RELOAD_S="0.5",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path))
    try:
        def runs():
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            status, doc = _http_json(base + P + "runs")
            return doc["runs"] if status == 200 else None

        assert wait_for(runs, "the server up", timeout=60) == ["run1"]
        bucket.put("log/run2/w.1.pt.trace.json.gz", H100_BEFORE_FIX.read_bytes())
        wait_for(lambda: runs() == ["run1", "run2"], "the run added to the bucket listed")
        overview = wait_for(lambda: (r := _http_json(base + P + "overview?run=run2"))[0] == 200 and r[1],
                            "run2's overview")
        assert overview["summary"] is not None
        if kind == "tensorboard":  # TensorBoard's own scalars, read from the same bucket
            assert wait_for(lambda: _http_json(base + "/data/runs")[1], "TensorBoard's runs") == ["run1"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
