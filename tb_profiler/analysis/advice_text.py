"""What every recommendation is made of: its record (rec), where its evidence is seen in the
UI (LINKS) and the units its text is written in (fmt_ns, fmt_bytes).

Why a module of its own: the rules live in several modules (recommendations, advice_conv)
and the diagnosis and straggler sentences write the same units; they all import this one.
"""
from __future__ import annotations

__all__ = ["LINKS", "fmt_bytes", "fmt_ns", "rec"]


def fmt_ns(ns: float) -> str:
    """A duration in the unit that reads best: 41.2 ms, 350.0 us, 2.31 s."""
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
    n = float(n)
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


# Where each recommendation's evidence is seen in the UI: a view and, for the tables, the
# filter (q) or grouping (kgroup), for the Trace view the search (find), that shows the
# events it counts. One place, so the Overview,
# the CLI and agents link a finding to the same page.
LINKS: dict[str, dict[str, str]] = {
    "dataloader": {"view": "Trace", "find": "DataLoader"},
    "dataparallel": {"view": "Operator", "q": "DataParallel"},
    "nccl_backend": {"view": "Distributed"},
    "communication": {"view": "Distributed"},
    "low_utilization": {"view": "Trace"},
    "amp": {"view": "Kernel", "kgroup": "KernelNameAndOp"},
    "memory_peak": {"view": "Memory"},
    "launch_bound": {"view": "Kernel"},
    "host_sync": {"view": "Operator", "q": "aten::item"},
    "pageable_memcpy": {"view": "Trace", "find": "Memcpy"},
    "device_idle": {"view": "Trace"},
    "slow_conv": {"view": "Operator", "q": "slow_conv"},
}


def rec(rid: str, severity: str, title: str, text: str, evidence: dict, url: str | None = None,
        link: dict | None = None) -> dict:
    """A recommendation: {id, severity, title, text, evidence, url, link}."""
    return {"id": rid, "severity": severity, "title": title, "text": text, "evidence": evidence,
            "url": url, "link": {**LINKS.get(rid, {}), **(link or {})}}
