"""``tb-profiler cache info|clear|trim``: what the cache folder holds (decoded columns,
summaries), its size cap, and clearing or trimming it.

Why a module of its own: the only command about the cache folder itself
(tb_profiler.cache, tb_profiler.cache_limit) rather than traces.
"""
from __future__ import annotations

import argparse
import time

from tb_profiler.cli.output import EXIT_OK, _print_json, _printable, _size


def add_parser(sub) -> None:
    """The verb cache."""
    cache = sub.add_parser("cache", help="what the cache folder holds (decoded columns, summaries), its size cap, "
                                         "and clearing or trimming it")
    cache.add_argument("action", choices=("info", "clear", "trim"),
                       help="info: entries, sizes, cap, orphans, stale temp files; clear: remove entries and stale "
                            "temp files; trim: evict (orphans, then least recently used) down to the cap")
    cache.add_argument("--orphans", action="store_true", help="clear: only entries whose trace file is gone "
                                                              "(and stale temp files)")
    cache.add_argument("--cache-dir", help="cache folder (default: $TB_PROFILER_CACHE_DIR or ~/.cache/tb_profiler)")
    cache.add_argument("--json", action="store_true", help="print JSON")
    cache.set_defaults(func=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from tb_profiler import cache as _cache
    from tb_profiler import cache_limit as _limit

    folder = _cache.cache_dir(args.cache_dir)
    if args.action in ("clear", "trim"):
        gone = _limit.clear(folder, orphans_only=args.orphans) if args.action == "clear" else _limit.evict(folder)
        entries = [r for r in gone if r.reason != "stale temp"]
        temps = [r for r in gone if r.reason == "stale temp"]
        doc = {"folder": folder, "removed": len(entries), "freed_bytes": sum(r.nbytes for r in gone),
               "stale_temp_removed": len(temps),
               "files": [{"path": r.path, "bytes": r.nbytes, "reason": r.reason} for r in gone]}
        if args.action == "trim":
            cap, origin = _limit.cache_max(folder)
            doc["cap"] = {"bytes": cap, "origin": origin}
            doc["bytes_after"] = sum(i.nbytes for i in _limit.inventory(folder) if not i.temp)
        if args.json:
            _print_json(doc)
            return EXIT_OK
        what = "orphaned " if args.orphans and args.action == "clear" else ""
        temp = (f" and {len(temps)} stale temp file{'' if len(temps) == 1 else 's'}") if temps else ""
        print(f"{_printable(folder)}: removed {len(entries)} {what}entr{'y' if len(entries) == 1 else 'ies'}{temp}, "
              f"freed {_size(doc['freed_bytes'])}")
        if args.action == "trim":
            print(f"  now {_size(doc['bytes_after'])} of a {_size(doc['cap']['bytes'])} cap "
                  f"({_printable(doc['cap']['origin'])})")
            for r in gone:
                print(f"  {_size(r.nbytes):>10}  {r.reason:<20} {_printable(r.path)}")
        return EXIT_OK
    found = _cache.entries(folder)
    items = _limit.inventory(folder)
    now = time.time()
    stale = [i for i in items if i.temp and now - i.used > _limit.STALE_TEMP_SECONDS]
    counted = sum(i.nbytes for i in items if not i.temp)
    cap, origin = _limit.cache_max(folder)
    kinds = {k: [e for e in found if e.kind == k] for k in ("columns", "summary")}
    orphans = [e for e in found if e.orphan and not _limit.is_temp(e.path)]  # a temp file has no source yet
    doc = {"folder": folder, "entries": len(found), "bytes": sum(e.nbytes for e in found),
           "columns": {"entries": len(kinds["columns"]), "bytes": sum(e.nbytes for e in kinds["columns"])},
           "summaries": {"entries": len(kinds["summary"]), "bytes": sum(e.nbytes for e in kinds["summary"])},
           "orphans": {"entries": len(orphans), "bytes": sum(e.nbytes for e in orphans)},
           "cap": {"bytes": cap, "origin": origin, "counted_bytes": counted, "over": counted > cap},
           "stale_temp": {"files": len(stale), "bytes": sum(i.nbytes for i in stale)},
           "largest": [{"source": e.source, "kind": e.kind, "bytes": e.nbytes, "orphan": e.orphan}
                       for e in sorted(found, key=lambda e: -e.nbytes)[:10]]}
    if args.json:
        _print_json(doc)
        return EXIT_OK
    print(f"{_printable(folder)}: {doc['entries']} entries, {_size(doc['bytes'])}")
    share = f"{counted / cap:.0%} of" if cap else "over" if counted else "at"
    print(f"  cap              {_size(cap)}  ({_printable(origin)}); "
          f"entries use {_size(counted)}, {share} the cap{' (`tb-profiler cache trim`)' if counted > cap else ''}")
    print(f"  decoded columns  {doc['columns']['entries']:>6}  {_size(doc['columns']['bytes'])}")
    print(f"  summaries        {doc['summaries']['entries']:>6}  {_size(doc['summaries']['bytes'])}")
    print(f"  orphaned         {doc['orphans']['entries']:>6}  {_size(doc['orphans']['bytes'])}"
          "  (trace gone: `tb-profiler cache clear --orphans`)")
    print(f"  stale temp files {doc['stale_temp']['files']:>6}  {_size(doc['stale_temp']['bytes'])}"
          "  (a writer that died: removed by clear and trim)")
    for e in doc["largest"]:
        source = _printable(e["source"]) if e["source"] is not None else "(not an entry)"
        print(f"  {_size(e['bytes']):>10}  {e['kind']:<8} {source}{'  [orphan]' if e['orphan'] else ''}")
    return EXIT_OK


__all__ = ["add_parser", "cmd_cache"]
