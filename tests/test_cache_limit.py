"""A bounded cache (tb_profiler.cache_limit): the cap ($TB_PROFILER_CACHE_MAX or min(20 GiB,
10 % of the free disk)), eviction (stale temp files always; then, only while over the cap,
orphans, then least recently used), what is never touched (kept paths, files that are not
entries, anything outside the folder), and `tb-profiler cache info|clear|trim`."""
from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from tb_profiler import cache as cache_mod
from tb_profiler import cache_folder
from tb_profiler import cache_limit as limit
from tb_profiler.cli import main

GiB = 1 << 30
Usage = namedtuple("Usage", "total used free")


@pytest.fixture(autouse=True)
def _no_cap_env(monkeypatch):
    monkeypatch.delenv(limit.ENV, raising=False)


def write(root: Path, name: str, nbytes: int = 1000, used: float | None = None, summary: bool = False,
          source_exists: bool = True) -> Path:
    """An entry written by cache.write_entry for a trace file tmp/<name> (removed when not
    source_exists: an orphan), last used at `used` (seconds since the epoch)."""
    src = root.parent / "traces" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("{}")
    folder = root / "summaries" if summary else root
    path = folder / cache_folder.entry_name(str(src))
    key = cache_mod.CacheKey(str(src), 2, 1, "test", 1)
    assert cache_mod.write_entry(str(path), key, {"a": np.zeros(nbytes, np.uint8)}, ["s"], b"", {})
    if not source_exists:
        src.unlink()
    if used is not None:
        os.utime(path, (used, used))
    return path


def temp_file(folder: Path, age_s: float, nbytes: int = 500) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f".tmp-{len(list(folder.iterdir()))}abc_x.tbpc"
    p.write_bytes(b"TBPCACHE" + b"\0" * (nbytes - 8))  # a writer died after the magic
    t = time.time() - age_s
    os.utime(p, (t, t))
    return p


def cap_to(monkeypatch, nbytes: int) -> None:
    monkeypatch.setenv(limit.ENV, str(nbytes))


# -- the cap ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("1048576", 1048576), ("500M", 500 << 20), ("20G", 20 * GiB), ("20g", 20 * GiB), ("1.5G", 3 * GiB // 2),
    ("64kb", 64 << 10), ("2 GiB", 2 * GiB), ("1T", 1 << 40), ("0", 0), (" 7 ", 7), ("10B", 10),
])
def test_cap_from_the_environment(monkeypatch, tmp_path, text, expected):
    monkeypatch.setenv(limit.ENV, text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cap, origin = limit.cache_max(tmp_path)
    assert cap == expected == limit.cache_max_bytes(tmp_path)
    assert limit.ENV in origin


@pytest.mark.parametrize("text", ["lots", "-5", "20X", "1e9", "nan", "inf", "G", "5 5"])
def test_garbage_cap_warns_and_uses_the_default(monkeypatch, tmp_path, text):
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(100 * GiB, 0, 50 * GiB))
    monkeypatch.setenv(limit.ENV, text)
    with pytest.warns(cache_folder.CacheWarning, match="not a size"):
        cap, origin = limit.cache_max(tmp_path)
    assert cap == 5 * GiB and "default" in origin and "not a size" in origin


def test_default_cap_is_a_tenth_of_free_space_at_most_20_gib(monkeypatch, tmp_path):
    asked = []

    def usage(path):
        asked.append(os.fspath(path))
        return Usage(10 << 40, 0, free)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    free = 50 * GiB
    cap, origin = limit.cache_max(tmp_path / "not" / "made" / "yet")
    assert cap == 5 * GiB and "10%" in origin
    assert asked == [str(tmp_path)]  # the nearest folder that exists
    free = 1 << 40
    assert limit.cache_max_bytes(tmp_path) == 20 * GiB == limit.CAP_CEILING


def test_default_cap_when_free_space_is_unknown(monkeypatch, tmp_path):
    def broken(path):
        raise OSError("no statvfs")

    monkeypatch.setattr(shutil, "disk_usage", broken)
    cap, origin = limit.cache_max(tmp_path)
    assert cap == limit.CAP_CEILING and "unknown" in origin


def test_would_fit(monkeypatch, tmp_path):
    cap_to(monkeypatch, 1000)
    assert limit.would_fit(tmp_path, 1000) and limit.would_fit(tmp_path, 0)
    assert not limit.would_fit(tmp_path, 1001)
    assert limit.would_fit(tmp_path / "summaries", 1000)
    cap_to(monkeypatch, 0)  # no caching
    assert not limit.would_fit(tmp_path, 0) and not limit.would_fit(tmp_path, 1)


# -- use ------------------------------------------------------------------------------------
def test_mark_used_sets_the_time_eviction_orders_by_and_never_raises(tmp_path):
    root = tmp_path / "cache"
    p = write(root, "a", used=1_000_000)
    before = time.time()
    limit.mark_used(p)
    assert os.stat(p).st_mtime >= before - 1
    [item] = limit.inventory(root)
    assert item.used == os.stat(p).st_mtime
    limit.mark_used(tmp_path / "missing.tbpc")
    limit.mark_used("bad\0path")
    limit.mark_used(None)  # type: ignore[arg-type]


# -- eviction -------------------------------------------------------------------------------
def test_least_recently_used_go_first_until_under_the_cap(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    paths = {n: write(root, n, used=now - age) for n, age in (("c", 300), ("a", 100), ("d", 400), ("b", 200))}
    size = os.path.getsize(paths["a"])
    cap_to(monkeypatch, 2 * size)
    assert limit.enforce(root) == [str(paths["d"]), str(paths["c"])]
    assert sorted(p.name for p in root.iterdir()) == sorted(paths[n].name for n in "ab")
    assert limit.enforce(root) == []  # under the cap now


def test_mark_used_protects_an_entry(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    old, new = write(root, "old", used=now - 500), write(root, "new", used=now - 100)
    limit.mark_used(old)
    cap_to(monkeypatch, os.path.getsize(old))
    assert limit.enforce(root) == [str(new)]


def test_incoming_bytes_count(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    a, b = write(root, "a", used=now - 200), write(root, "b", used=now - 100)
    size = os.path.getsize(a)
    cap_to(monkeypatch, 2 * size)
    assert limit.enforce(root) == []
    assert limit.enforce(root, incoming=size) == [str(a)]
    # an entry bigger than the cap is never written (would_fit): nothing is evicted for it
    assert limit.enforce(root, incoming=3 * size) == [] and b.exists()


def test_orphans_go_first_but_only_when_room_is_needed(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    old = write(root, "old", used=now - 900)
    orphan = write(root, "gone", used=now - 10, source_exists=False)  # used just now, but its trace is gone
    size = os.path.getsize(old)
    cap_to(monkeypatch, 2 * size)
    assert limit.enforce(root) == [] and orphan.exists()  # room: a trace on a mount that is down keeps its entry
    assert limit.enforce(root, incoming=size) == [str(orphan)] and old.exists()


def test_unreadable_entry_counts_as_an_orphan(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    old = write(root, "old", used=now - 900)
    broken = write(root, "broken", used=now - 10)
    broken.write_bytes(b"garbage" * 200)
    cap_to(monkeypatch, os.path.getsize(old))
    assert limit.enforce(root) == [str(broken)] and old.exists()


def test_stale_temp_files_go_fresh_ones_stay(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    write(root, "a")
    stale = temp_file(root, age_s=limit.STALE_TEMP_SECONDS + 60)
    stale_summary = temp_file(root / "summaries", age_s=3600)
    fresh = temp_file(root, age_s=5)  # a writer still writing
    cap_to(monkeypatch, 1 << 30)  # plenty of room: stale temp files go anyway
    assert sorted(limit.enforce(root)) == sorted([str(stale), str(stale_summary)])
    assert fresh.exists()
    cap_to(monkeypatch, 0)  # over the cap: every entry goes, a fresh temp file never
    assert len(limit.enforce(root)) == 1 and fresh.exists()


def test_fresh_temp_files_are_not_counted(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    a = write(root, "a")
    temp_file(root, age_s=1, nbytes=10_000)  # about to become an entry its writer accounts for
    cap_to(monkeypatch, os.path.getsize(a))
    assert limit.enforce(root) == [] and a.exists()


def test_keep_is_honoured(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    oldest, middle, newest = (write(root, n, used=now - age) for n, age in (("x", 300), ("y", 200), ("z", 100)))
    cap_to(monkeypatch, os.path.getsize(oldest))
    removed = limit.enforce(root, keep=(str(oldest), str(root / ".." / "cache" / newest.name)))
    assert removed == [str(middle)] and oldest.exists() and newest.exists()
    orphan_kept = write(root, "o", source_exists=False)  # written first: with a cap of 0 nothing is written
    cap_to(monkeypatch, 0)
    assert str(orphan_kept) not in limit.enforce(root, keep=(str(orphan_kept),)) and orphan_kept.exists()


def test_files_that_are_not_entries_are_never_touched(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    entry = write(root, "a", used=time.time() - 100)
    outside = tmp_path / "precious.tbpc"
    outside.write_bytes(b"mine")
    (root / "notes.tbpc").write_bytes(b"not an entry")                      # a .tbpc not named as an entry
    (root / "notes.txt").write_text("mine")
    link = root / ("link." + "0" * 32 + ".tbpc")                            # named like one, but a symlink
    link.symlink_to(outside)
    (root / "other").mkdir()
    hidden = write(root / "other", "b")                                     # an entry of another folder
    copied = root / "summaries" / "summaries" / entry.name                  # below summaries/: not the cache's
    copied.parent.mkdir(parents=True)
    shutil.copy(entry, copied)
    cap_to(monkeypatch, 0)
    assert limit.enforce(root) == [str(entry)]
    assert limit.inventory(root) == []
    for p in (outside, root / "notes.tbpc", root / "notes.txt", link, hidden, copied):
        assert p.exists() or p.is_symlink(), p
    assert outside.read_bytes() == b"mine"


def test_summaries_entries_are_counted_and_evicted(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    col = write(root, "a", used=now - 100)
    s_old = write(root, "a", used=now - 900, summary=True)
    s_new = write(root, "b", used=now - 10, summary=True)
    items = limit.inventory(root)
    assert {i.kind for i in items} == {"columns", "summary"} and len(items) == 3
    cap_to(monkeypatch, os.path.getsize(col) + os.path.getsize(s_new))
    # the folder of a summary entry stands for its cache folder: what write_entry can pass
    assert limit.enforce(s_old.parent) == [str(s_old)]
    assert col.exists() and s_new.exists()
    assert limit.cache_root(s_old.parent) == str(root)


def test_races_are_harmless(monkeypatch, tmp_path):
    """A file removed by someone else after the listing is no longer counted (nothing more
    is evicted for it); one used since the listing is left alone."""
    root = tmp_path / "cache"
    now = time.time()
    a, b, c = (write(root, n, used=now - age) for n, age in (("a", 300), ("b", 200), ("c", 100)))
    listed = limit.inventory

    def inventory_then_race(folder=None):
        out = listed(folder)
        a.unlink()             # another process evicted it
        limit.mark_used(b)     # another process just read it
        return out

    monkeypatch.setattr(limit, "inventory", inventory_then_race)
    cap_to(monkeypatch, 2 * os.path.getsize(a))
    assert limit.enforce(root) == []      # a's bytes are gone already: room enough
    assert b.exists() and c.exists()
    monkeypatch.setattr(limit, "inventory", listed)  # write_entry makes room too: no race, and room enough
    cap_to(monkeypatch, 1 << 30)
    a = write(root, "a", used=now - 300)
    monkeypatch.setattr(limit, "inventory", inventory_then_race)
    cap_to(monkeypatch, os.path.getsize(a))
    assert limit.enforce(root) == [str(c)]  # a vanished again (not counted as removed), b was used since: kept
    assert b.exists()
    monkeypatch.setattr(limit, "inventory", listed)
    assert limit.enforce(root) == []


def test_missing_folder(tmp_path):
    assert limit.enforce(tmp_path / "nope") == [] and limit.inventory(tmp_path / "nope") == []


@pytest.mark.parametrize("source", ["/t/w.pt.trace.json", "/t/\u00e9\u4e2d \U0001f600.json", "/t/dir/", "", "s3://b/k.json.gz",
                                    "/t/" + "x" * 300])
def test_every_entry_name_is_recognised(source):
    """The name shape eviction trusts is the one cache_folder.entry_name makes."""
    assert limit._ENTRY_NAME.search(cache_folder.entry_name(source)) and not limit.is_temp(cache_folder.entry_name(source))


# -- the command line ---------------------------------------------------------------------------
def test_cli_info_shows_cap_total_orphans_and_stale_temp_files(monkeypatch, tmp_path, capsys):
    root = tmp_path / "cache"
    a = write(root, "a")
    write(root, "gone", source_exists=False)
    write(root, "s", summary=True)
    temp_file(root, age_s=3600, nbytes=700)
    temp_file(root, age_s=1)
    monkeypatch.setenv(limit.ENV, "1M")
    assert main(["cache", "info", "--cache-dir", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cap"]["bytes"] == 1 << 20 and limit.ENV in doc["cap"]["origin"]
    assert doc["cap"]["counted_bytes"] == 3 * os.path.getsize(a) and doc["cap"]["over"] is False
    assert doc["stale_temp"] == {"files": 1, "bytes": 700}
    assert doc["orphans"]["entries"] == 1 and doc["summaries"]["entries"] == 1
    assert main(["cache", "info", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "cap              1.0 MiB  ($TB_PROFILER_CACHE_MAX=1M)" in out and "stale temp files      1" in out


def test_cli_clear_also_removes_stale_temp_files(tmp_path, capsys):
    root = tmp_path / "cache"
    keep = write(root, "keep")
    gone = write(root, "gone", source_exists=False)
    stale, fresh = temp_file(root, age_s=3600), temp_file(root, age_s=1)
    (root / "notes.txt").write_text("mine")
    assert main(["cache", "clear", "--orphans", "--cache-dir", str(root)]) == 0
    assert "removed 1 orphaned entry and 1 stale temp file" in capsys.readouterr().out
    assert keep.exists() and not gone.exists() and not stale.exists() and fresh.exists()
    assert main(["cache", "clear", "--cache-dir", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["removed"] == 1 and doc["files"][0]["path"] == str(keep)
    assert fresh.exists() and (root / "notes.txt").exists()


def test_cli_trim_evicts_down_to_the_cap(monkeypatch, tmp_path, capsys):
    root = tmp_path / "cache"
    now = time.time()
    a, b, c = (write(root, n, used=now - age) for n, age in (("a", 300), ("b", 200), ("c", 100)))
    size = os.path.getsize(a)
    monkeypatch.setenv(limit.ENV, str(size))
    assert main(["cache", "trim", "--cache-dir", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in doc["files"]] == [str(a), str(b)]
    assert doc["freed_bytes"] == 2 * size and doc["bytes_after"] == size and doc["cap"]["bytes"] == size
    assert main(["cache", "trim", "--cache-dir", str(root)]) == 0
    assert "removed 0 entries, freed 0 B" in capsys.readouterr().out
    monkeypatch.setenv(limit.ENV, "0")
    assert main(["cache", "trim", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "removed 1 entry" in out and "least recently used" in out and str(c) in out


def test_cli_uses_the_cache_dir_from_the_environment(monkeypatch, tmp_path, capsys):
    root = tmp_path / "envcache"
    write(root, "a")
    monkeypatch.setenv("TB_PROFILER_CACHE_DIR", str(root))
    monkeypatch.setenv(limit.ENV, "0")
    assert main(["cache", "trim", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 1


def test_cli_escapes_control_characters_in_paths(monkeypatch, tmp_path, capsys):
    root = tmp_path / "cache\x1b[2J"
    write(root, "evil\x1b]0;owned\x07\nname\u202e.json")
    assert main(["cache", "info", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\\x1b" in out and "\\u202e" in out
    assert "evil\\x1b]0;owned\\x07\\x0aname" in out
    monkeypatch.setenv(limit.ENV, "0")
    assert main(["cache", "trim", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "removed 1 entry" in out and "\\x1b[2J" in out



def test_old_orphans_go_even_with_room(monkeypatch, tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    recent = write(root, "gone-lately", used=now - 3600, source_exists=False)
    stale = write(root, "gone-long-ago", used=now - limit.ORPHAN_GRACE_SECONDS - 60, source_exists=False)
    cap_to(monkeypatch, 1 << 30)
    assert limit.enforce(root) == [str(stale)]
    assert recent.exists()  # a trace folder that is away for a while keeps its entries


def test_loads_keep_the_cache_under_its_cap(monkeypatch, tmp_path):
    """Traces loaded one after another: the folder never exceeds the cap, the last used stay."""
    from datafiles import V100X4, read_bytes

    from tb_profiler.trace import load

    text = read_bytes(V100X4)
    root = tmp_path / "cache"
    paths = []
    for i in range(4):
        p = tmp_path / f"w{i}.pt.trace.json.gz"
        p.write_bytes(__import__("gzip").compress(text))
        paths.append(p)
    load(paths[0], cache_dir=root).cache_path
    one = sum(f.stat().st_size for f in root.glob("*.tbpc"))
    monkeypatch.setenv(limit.ENV, str(int(2.5 * one)))
    for p in paths[1:]:
        assert load(p, cache_dir=root).cache_path
        assert sum(f.stat().st_size for f in root.glob("*.tbpc")) <= 2.5 * one
    names = sorted(f.name.split(".")[0] for f in root.glob("*.tbpc"))
    assert names == ["w2", "w3"]
    monkeypatch.setenv(limit.ENV, "0")  # no caching at all
    t = load(paths[0], cache_dir=root)
    assert t.cache_path is None and not t.from_cache
