"""Step-time breakdown: where each nanosecond of a step went, counted once.

Why priorities: a step's time is spent on many things at once (a kernel runs while the
host launches the next one). The overview's bar must add up to the step, so each ns is
given to the highest-priority category active then, in torch-tb-profiler's order:
Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other.

How, without a loop over events: let U_c be the union of category c's intervals. The time
of category c is |U_0 ∪ .. ∪ U_c| - |U_0 ∪ .. ∪ U_{c-1}| inside the step, so we merge
the cumulative unions once (sort + running maximum of ends) and measure each one over
every step with prefix sums and searchsorted.

Categories (events of any thread or device):
- Kernel: kernels, but those of collectives (nccl*/rccl* names, or launched by a
  communication op) which are Communication;
- Memcpy, Memset: gpu_memcpy, gpu_memset;
- Communication: collective kernels, and host ops named nccl:*, gloo:*, ... (collective_comm);
- Runtime: runtime/driver API calls (cudaLaunchKernel, ...);
- DataLoader: ``enumerate(DataLoader)#...__next__`` and ``enumerate(DataPipe)#...`` as
  cpu_op (PyTorch 1.x) or user_annotation (PyTorch 2.x; torch-tb-profiler 0.4.3 drops
  those and shows 0);
- CPU Exec: other cpu_op and user_annotation events (ProfilerStep#N itself excluded);
  python_function events are not counted, as in torch-tb-profiler;
- Other: the rest of the step.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tb_profiler.analysis.communication import comm_calls, comm_kernels
from tb_profiler.analysis.intervals import covered_in, merge_intervals
from tb_profiler.analysis.memo import per_trace
from tb_profiler.analysis.shared import name_map
from tb_profiler.analysis.steps import steps_frame, valid_times
from tb_profiler.trace.roles import HOST_WORK, Role, role_mask
from tb_profiler.trace.strings import map_string_ids

CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "communication": "Communication",
          "runtime": "Runtime", "dataloader": "DataLoader", "cpu_exec": "CPU Exec", "other": "Other"}
NS_COLUMNS = [c + "_ns" for c in CATEGORIES]
PCT_COLUMNS = [c + "_pct" for c in CATEGORIES]

_DATALOADER_RE = re.compile(r"enumerate\(DataLoader\w*\)#.*\.__next__\Z|enumerate\(DataPipe\)#")
_STEP_RE = re.compile(r"ProfilerStep#\d+\Z")


# -- which events are what --------------------------------------------------------------------

@per_trace
def category_masks(trace) -> dict[str, np.ndarray]:
    """Boolean mask over events per category (without "other"), valid times only."""
    roles = trace.roles
    ok = valid_times(trace)
    host = role_mask(roles, HOST_WORK) | _legacy_python(trace)
    is_dl = name_map(trace, lambda s: bool(_DATALOADER_RE.match(s)), among=host)  # host names only
    comm_host = comm_calls(trace)
    kernel = roles == Role.COMPUTE
    comm_kernel = comm_kernels(trace)
    is_step = name_map(trace, lambda s: bool(_STEP_RE.match(s)), among=host)  # only ever used within host
    return {
        "kernel": ok & kernel & ~comm_kernel,
        "memcpy": ok & (roles == Role.MEMCPY),
        "memset": ok & (roles == Role.MEMSET),
        "communication": ok & (comm_kernel | comm_host),
        "runtime": ok & (roles == Role.RUNTIME),
        "dataloader": ok & is_dl,
        "cpu_exec": ok & host & ~is_dl & ~comm_host & ~is_step,
    }


def _legacy_python(trace) -> np.ndarray:
    """Events of the PyTorch 1.8 "Python" category (host work, unlike python_function)."""
    cats = trace.events["cat"]
    return map_string_ids(cats, trace.strings, lambda s: s.strip().lower() == "python", bool, False)


@per_trace
def cumulative_unions(trace) -> list[tuple[np.ndarray, np.ndarray]]:
    """Merged union of categories 0..c, for c in priority order (without "other")."""
    ev = trace.events
    ts, end = ev["ts"], ev["ts"] + ev["dur"]
    masks = category_masks(trace)
    out = []
    ms = me = np.zeros(0, dtype=np.int64)
    for cat in CATEGORIES[:-1]:  # seven categories, not events
        m = masks[cat]
        ms, me = merge_intervals(np.concatenate([ms, ts[m]]), np.concatenate([me, end[m]]))
        out.append((ms, me))
    return out


# -- the breakdown --------------------------------------------------------------------------

def breakdown(trace) -> pd.DataFrame:
    """Per step and on average: ns per category (each ns once), int64.

    Columns: step, name, kernel_ns, memcpy_ns, memset_ns, communication_ns, runtime_ns,
    dataloader_ns, cpu_exec_ns, other_ns, total_ns (= the step's duration). The last row
    is the average over steps (step -1, name "average"): its total is the mean step
    rounded to the ns, and its parts add up exactly to that total (each part's mean
    rounded down or up, see ``_average_row``). Empty when the trace has no steps.
    """
    return _breakdown(trace).copy()


@per_trace
def _breakdown(trace) -> pd.DataFrame:
    st = steps_frame(trace)
    cols = ["step", "name"] + NS_COLUMNS + ["total_ns"]
    if st.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in cols})
    lo = st["start_ns"].to_numpy()
    hi = st["end_ns"].to_numpy()
    covered = [covered_in(ms, me, lo, hi) for ms, me in cumulative_unions(trace)]
    data = {"step": st["step"].to_numpy(), "name": st["name"].to_numpy(object)}
    prev = np.zeros(len(st), dtype=np.int64)
    for cat, cov in zip(CATEGORIES[:-1], covered):
        data[cat + "_ns"] = cov - prev
        prev = cov
    data["other_ns"] = (hi - lo) - prev
    data["total_ns"] = hi - lo
    avg = _average_row(data)
    avg.update(step=-1, name="average")
    # the steps and the average row below them, built once (no concat, no per-column casts)
    return pd.DataFrame({c: np.append(data[c], avg[c]) if c == "name" else
                         np.append(data[c], avg[c]).astype(np.int64) for c in cols})


def _average_row(frame: dict[str, np.ndarray]) -> dict[str, int]:
    """The average step in whole ns, its parts adding up exactly to its total.

    The total is the mean step duration rounded to the nearest ns (half to even). Each
    part is first its mean rounded down; the ns those floors leave short of the total (at
    most one per part) go, one each, to the parts with the largest remainders of their
    exact means (sum % steps), ties to the higher-priority category. So every part is
    its exact mean rounded down or up, never further off, and the parts sum to the total."""
    n = len(frame["total_ns"])
    total = int(np.rint(frame["total_ns"].sum(dtype=np.float64) / n))  # as pandas' mean: a float sum over n
    sums = [int(frame[c].sum()) for c in NS_COLUMNS]  # Python ints: exact
    floors = [s // n for s in sums]
    rems = [s % n for s in sums]
    short = total - sum(floors)  # in [0, len(NS_COLUMNS)]: the parts' means sum to the mean step
    for i in sorted(range(len(sums)), key=lambda i: -rems[i])[:max(short, 0)]:
        floors[i] += 1
    avg = dict(zip(NS_COLUMNS, floors))
    avg["total_ns"] = total
    return avg


def breakdown_percent(frame: pd.DataFrame) -> pd.DataFrame:
    """The breakdown as percent of each row's total (kernel_pct, ..., other_pct); 0 for an
    empty step."""
    total = frame["total_ns"].to_numpy(dtype=np.float64)
    safe = np.where(total > 0, total, 1.0)
    pct = {cat + "_pct": np.where(total > 0, 100.0 * frame[cat + "_ns"].to_numpy() / safe, 0.0) for cat in CATEGORIES}
    return pd.DataFrame({"step": frame["step"], "name": frame["name"], **pct})  # one construction


def average(trace) -> dict[str, int]:
    """The average row as {category: ns, ..., "total": ns}; {} without steps."""
    return dict(_average(trace))


@per_trace
def _average(trace) -> dict[str, int]:
    frame = _breakdown(trace)
    if frame.empty:
        return {}
    return {**{c: int(frame[c + "_ns"].to_numpy()[-1]) for c in CATEGORIES}, "total": int(frame["total_ns"].to_numpy()[-1])}
