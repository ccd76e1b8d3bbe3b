"""The trust report: what in a trace makes its figures less than exact, counted.

Why: a viewer that silently drops, clips or misattributes events shows confident numbers
that are wrong (perfetto dropped overlapping kernels for a year; pytorch #192021 lost
kernels).  ``integrity(trace)`` runs torch 2.13's own validator rules
(``integrity_rules``, same names and counts as ``torch.profiler._trace_validator``) and
ours, and says for each how many events it touches, so every view can show whether its
numbers can be trusted and which figure a finding affects.

Result: ``{"rules": {rule: count}, "findings": DataFrame, "notes": [...], "shares":
{rule: fraction}, "affects": {figure: [rules]}, "total": findings}``.  ``findings`` has
one row per torch violation (the first ``MAX_ROWS`` of each rule) and one row per
finding of ours (per stream, per step, per reason), columns ``rule``, ``count``,
``detail``, ``event`` (row of ``trace.events``, -1 for none), ``ts_ns`` (absolute ns, or
MISSING_INT) and ``share`` (NaN where no share applies).  Nothing here changes what the
other analyses compute: overlapping events are kept and drawn, never dropped.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tb_profiler.analysis.integrity_rules import FRAME_COLUMNS, MAX_ROWS, TORCH_RULES, run_torch_rules
from tb_profiler.analysis.links import launch
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.steps import in_steps, step_info
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.trace.build import DROP_REASONS
from tb_profiler.trace.categories import Kind
from tb_profiler.trace.roles import DEVICE_WORK, role_mask

__all__ = ["OUR_RULES", "RULES", "TORCH_RULES", "AFFECTS", "integrity", "with_clock_corrections"]

OUR_RULES = ("unlaunched_device_work", "outside_profiling_window", "stream_overlap", "bad_durations",
             "dropped_events", "steps_left_out", "unfinished_flows", "profiler_overhead", "clock_corrections")
RULES = (*TORCH_RULES, *OUR_RULES)
# Which shown figure each rule's findings make less exact (the views put a caveat there).
AFFECTS: dict[str, tuple[str, ...]] = {
    "step_time": ("unlaunched_device_work", "outside_profiling_window", "bad_durations", "dropped_events",
                  "steps_left_out", "profiler_overhead"),
    "idle": ("unlaunched_device_work", "outside_profiling_window", "stream_overlap", "bad_durations",
             "dropped_events", "profiler_overhead", "_check_stream_sync_overlap"),
    "launches": ("_check_gpu_kernel_causality", "unlaunched_device_work", "bad_durations", "dropped_events"),
}


def _row(rule: str, count: int, detail: str, event: int = -1, ts_ns: int = MISSING_INT,
         share: float = np.nan) -> dict:
    return {"rule": rule, "count": int(count), "detail": detail, "event": int(event), "ts_ns": int(ts_ns),
            "share": float(share)}


def _device_time(trace, mask: np.ndarray) -> int:
    dur = trace.events["dur"]
    return int(np.maximum(dur[mask], 0).sum())


def _work(trace) -> np.ndarray:
    return role_mask(trace.roles, DEVICE_WORK)


def _device_rule(trace, rule: str, mask: np.ndarray, what: str) -> tuple[int, float, list[dict]]:
    """(count, share of device time, finding rows) of the device work in ``mask``: one row
    at its first event, saying "N device events (X % of device time) <what>"."""
    n = int(mask.sum())
    total = _device_time(trace, _work(trace))
    share = _device_time(trace, mask) / total if total else 0.0
    if not n:
        return 0, share, []
    first = int(np.flatnonzero(mask)[0])
    return n, share, [_row(rule, n, f"{n} device events ({share:.1%} of device time) {what}", first,
                           trace.events["ts"][first], share)]


def unlaunched_device_work(trace) -> tuple[int, float, list[dict]]:
    """Kernels, copies and fills whose launching runtime call is not in the trace."""
    return _device_rule(trace, "unlaunched_device_work", _work(trace) & (launch(trace) < 0),
                        "have no launching runtime call in the trace (cut off by the profiling window, or the "
                        "trace was trimmed): they are charged to the step their start falls in")


def outside_window(trace) -> tuple[int, float, list[dict]]:
    """Device work that belongs to no kept ProfilerStep (before the first, after the last,
    or launched by a step left out): it counts in totals but in no per-step figure."""
    info = step_info(trace)
    if info.fallback or info.frame.empty:
        return 0, 0.0, []
    return _device_rule(trace, "outside_profiling_window", _work(trace) & ~in_steps(trace),
                        "lie outside the ProfilerStep range: they count in no step")


def stream_overlap(trace) -> tuple[int, list[dict]]:
    """Device events that start before an earlier event on the same (device, stream) ended:
    one stream runs one thing at a time, so each is a clock or recording fault.  Every
    such event is kept and drawn; the count is of such overlapping pairs (each event with
    the one it overlaps)."""
    ev = trace.events
    rows = np.flatnonzero(_work(trace) & (trace.event_streams >= 0) & (ev["dur"] > 0))
    if len(rows) < 2:
        return 0, []
    df = pd.DataFrame({"dev": trace.event_devices[rows], "stream": trace.event_streams[rows],
                       "ts": ev["ts"][rows], "end": ev["ts"][rows] + ev["dur"][rows], "row": rows})
    df = df.sort_values(["dev", "stream", "ts"], kind="stable")
    prev_end = df.groupby(["dev", "stream"], sort=False)["end"].cummax()
    prev_end = prev_end.groupby([df["dev"], df["stream"]], sort=False).shift(1)
    hit = df[(df["ts"] < prev_end).to_numpy()]
    if hit.empty:
        return 0, []
    per = hit.groupby(["dev", "stream"], sort=True).agg(count=("row", "size"), row=("row", "first"), ts=("ts", "first"))
    out = [_row("stream_overlap", c, f"device {d} stream {s}: {c} events start before the previous one on the "
                "stream ended (kept and drawn overlapping)", r, t)
           for (d, s), c, r, t in zip(per.index, per["count"], per["row"], per["ts"])][:MAX_ROWS]  # per stream
    return int(len(hit)), out


def bad_durations(trace) -> tuple[int, list[dict]]:
    """Durations the decoder could not use as written: negative, missing (read as 0), or a
    ts/end beyond ±2^62 ns (the row is dropped: no int64 time can hold it)."""
    dur = trace.events["dur"]
    parts = [(int((dur < 0).sum()), "complete events have a negative dur (drawn as written, counted as 0)"),
             (int(trace.repaired.get("dur_missing", 0)), "complete events have no usable dur: read as zero-length"),
             (int(trace.dropped.get("time_out_of_range", 0)),
              "events were dropped: " + DROP_REASONS["time_out_of_range"].replace("whose", "their"))]
    return sum(n for n, _ in parts), [_row("bad_durations", n, f"{n} {what}") for n, what in parts if n]


def dropped_events(trace) -> tuple[int, list[dict]]:
    """Rows the decoder left out for a missing or unusable ts (trace.build)."""
    n = int(trace.dropped.get("ts_missing", 0))
    return n, ([_row("dropped_events", n, f"dropped {n} events {DROP_REASONS['ts_missing']}")] if n else [])


def steps_left_out(trace) -> tuple[int, list[dict]]:
    """Trailing ProfilerStep ranges the steps table leaves out, each with its reason."""
    info = step_info(trace)
    rows = [_row("steps_left_out", 1, f"left out {d['name']}: {d['reason']}") for d in info.left_out[:MAX_ROWS]]
    return len(info.left_out), rows


def unfinished_flows(trace) -> tuple[int, list[dict]]:
    """Flow ids (per flow kind) with a single flow event: a start without its finish (or
    the reverse), an arrow the timeline cannot draw."""
    fl = trace.flows
    keep = fl["id"] != MISSING_INT if len(fl) else np.zeros(0, bool)
    if not keep.any():
        return 0, []
    df = pd.DataFrame({"kind": fl["kind"][keep], "id": fl["id"][keep], "ts": fl["ts"][keep]})
    size = df.groupby(["kind", "id"], sort=False)["ts"].transform("size")
    lone = df[(size == 1).to_numpy()]
    n = len(lone)
    if not n:
        return 0, []
    return n, [_row("unfinished_flows", n, f"{n} flows have one end only (a start without a finish, or a "
                    "finish without a start): no arrow is drawn for them", ts_ns=int(lone["ts"].iloc[0]))]


def profiler_overhead(trace) -> tuple[int, float, list[dict]]:
    """Kineto's ``overhead`` events (CUPTI buffer flushes, instrumentation): their time over
    the trace's span.  Shown, never subtracted from any figure."""
    ev = trace.events
    mask = ev["kind"] == Kind.OVERHEAD
    n = int(mask.sum())
    if not n:
        return 0, 0.0, []
    span = trace.duration_ns
    total = int(np.maximum(ev["dur"][mask], 0).sum())
    share = total / span if span else 0.0
    first = int(np.flatnonzero(mask)[0])
    return n, share, [_row("profiler_overhead", n, f"{n} profiler overhead events take {share:.2%} of the trace's span "
                           "(not subtracted from any figure)", first, ev["ts"][first], share)]


@per_trace
def integrity(trace) -> dict:
    """The trust report of one trace (module docstring); memoized per trace."""
    counts, torch_frame = run_torch_rules(trace)
    shares: dict[str, float] = {}
    rows: list[dict] = []
    for rule, fn in (("unlaunched_device_work", unlaunched_device_work), ("outside_profiling_window", outside_window),
                     ("profiler_overhead", profiler_overhead)):
        counts[rule], shares[rule], found = fn(trace)
        rows += found
    for rule, fn in (("stream_overlap", stream_overlap), ("bad_durations", bad_durations),
                     ("dropped_events", dropped_events), ("steps_left_out", steps_left_out),
                     ("unfinished_flows", unfinished_flows)):
        counts[rule], found = fn(trace)
        rows += found
    counts["clock_corrections"] = 0
    ours = pd.DataFrame(rows, columns=FRAME_COLUMNS)
    frames = [f for f in (torch_frame, ours) if len(f)]
    findings = pd.concat(frames, ignore_index=True) if frames else ours
    findings = findings.astype({"count": np.int64, "event": np.int64, "ts_ns": np.int64, "share": np.float64})
    rules = {r: int(counts.get(r, 0)) for r in RULES}
    return {"rules": rules, "findings": findings, "notes": _notes(trace, rules), "shares": shares,
            "affects": {fig: [r for r in rs if rules[r]] for fig, rs in AFFECTS.items()},
            "total": sum(rules.values())}


def _notes(trace, rules: dict[str, int]) -> list[str]:
    """What the report cannot tell from one trace, and what a count does not say."""
    notes = ["clock corrections between ranks: none for a single trace (the Distributed view's clock table "
             "gives each rank's shift, analysis.clock)"]
    if step_info(trace).fallback:
        notes.append("no ProfilerStep#N events: outside_profiling_window is not checked")
    if not any(rules[r] for r in TORCH_RULES):
        notes.append("torch.profiler._trace_validator's rules all pass")
    return notes


def with_clock_corrections(report: dict, clock: pd.DataFrame) -> dict:
    """The report of one trace of a run, with the run's clock corrections (the clock table
    of ``distributed_from_summaries``: one shift per rank, put every rank on one time axis):
    a finding per rank whose shift is not zero. A new dict; ``report`` is not changed."""
    shifted = clock[clock["clock_offset_ns"].fillna(0).to_numpy() != 0] if len(clock) else clock
    rows = [_row("clock_corrections", 1, f"rank {int(r.rank)} ({r.worker}) shifted by {int(r.clock_offset_ns)} ns "
                 f"({r.clock_method}) to share the run's time axis") for r in shifted.itertuples()]
    rules = {**report["rules"], "clock_corrections": len(rows)}
    findings = report["findings"][report["findings"]["rule"] != "clock_corrections"]
    if rows:
        findings = pd.concat([findings, pd.DataFrame(rows, columns=FRAME_COLUMNS)], ignore_index=True)
    notes = [n for n in report["notes"] if not n.startswith("clock corrections between ranks")]
    notes.append(f"clock corrections between ranks: {len(rows)} of {len(clock)} ranks shifted (the Distributed "
                 "view's clock table)")
    return {**report, "rules": rules, "findings": findings, "notes": notes,
            "affects": {fig: [r for r in rs if rules[r]] for fig, rs in AFFECTS.items()},
            "total": sum(rules.values())}


MAX_FINDINGS = 500  # finding rows sent as JSON (the total is always sent)


def integrity_json(trace, limit: int = MAX_FINDINGS) -> dict:
    """The report as plain JSON data (``tb-profiler info --json``, the ``integrity`` route):
    rules, the first ``limit`` findings as rows (``findings_total``: all of them), shares,
    affects, notes, total.  Times stay absolute ns (the route rebases them)."""
    from tb_profiler.analysis.jsonable import to_jsonable

    rep = integrity(trace)
    found = rep["findings"]
    rows = to_jsonable(found.head(limit))
    for r in rows:  # at most `limit` rows
        if r["ts_ns"] == MISSING_INT:
            r["ts_ns"] = None
        if r["event"] < 0:
            r["event"] = None
    return {"rules": dict(rep["rules"]), "findings": rows, "findings_total": int(len(found)),
            "shares": to_jsonable(rep["shares"]), "affects": to_jsonable(rep["affects"]),
            "notes": list(rep["notes"]), "total": int(rep["total"])}
