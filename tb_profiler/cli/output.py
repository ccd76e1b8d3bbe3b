"""What every command prints with: exit codes, errors on stderr, JSON on stdout, text
tables in the UI's units, and the escaping of untrusted text (names and paths from
traces and file names).

Why a module of its own: every command module (runs, why, diff, ...) prints through
these, so a table, a duration or a size reads the same in every command.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


class _Escaped:
    """A text stream that writes control, format and separator characters (but newlines
    and tabs) as escapes (_printable): for output that holds untrusted text."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write("\n".join("\t".join(_printable(p) for p in line.split("\t"))
                                     for line in text.split("\n")))
        return len(text)

    def __getattr__(self, name: str):  # flush, fileno, encoding, isatty, buffer ...
        return getattr(self._stream, name)


def _printable(text: str) -> str:
    """text with control, format and separator characters and undecodable bytes (lone
    surrogates) written as escapes (\\x1b, \\u202e, \\udcff): a file name must not move the
    cursor, recolor or reorder the terminal, or break print()."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "".join(out)


def _error(message: str) -> None:
    print(f"tb-profiler: {message}", file=sys.stderr)


def _print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _print_table(title: str, rows: list[dict], columns: Sequence[str]) -> None:
    if not rows:
        return
    print(f"  {title}:")
    cells = [[_cell(c, r.get(c)) for c in columns] for r in rows]
    headers = [c.removesuffix("_ns").replace("_ns_", "_").replace("_", " ") for c in columns]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    widths[0] = min(widths[0], 60)
    print("    " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths))))
    for row in cells:
        print("    " + "  ".join(v[:w].ljust(w) if i == 0 else v.rjust(w)
                                  for i, (v, w) in enumerate(zip(row, widths))))


def _cell(column: str, value: Any) -> str:
    """A table cell in the UI's units: times from the trace's start in µs, durations in
    the unit that reads best, shares and percentages as %, sizes in KiB/MiB/GiB."""
    if value is None:
        return "-"
    if column.endswith("_pct"):
        return _pct(value)
    if column.endswith("_share"):
        return _pct(100 * value)
    if column == "start_ns" or column.endswith("_start_ns"):
        return f"{value / 1e3:,.3f} µs"
    if column == "ns" or column.endswith("_ns") or "_ns_" in column:
        return _duration(value)
    if column.endswith("bytes") and isinstance(value, (int, float)):
        return _size(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _duration(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


__all__ = ["EXIT_BAD_INPUT", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "_Escaped", "_cell", "_duration", "_error", "_pct", "_print_json", "_print_table", "_printable", "_size"]
