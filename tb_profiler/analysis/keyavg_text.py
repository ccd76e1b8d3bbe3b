"""The text of torch's ``key_averages().table()``, laid out from key_averages' rows.

Why apart from keyavg: the rows are an analysis (the CLI's JSON and the notebook use
them as a DataFrame); this is one renderer of them, and it follows
``torch.autograd.profiler_util._build_table`` line for line so the text can be diffed
against what a user printed live: the same columns (device, memory, input shapes,
source location), widths, rounding, sort (stable, largest first) and footer.
"""
from __future__ import annotations

import numpy as np

_DEVICE_NAMES = {"CUDA": "CUDA", "ROCm": "CUDA", "XPU": "XPU", "MTIA": "MTIA", "HPU": "HPU"}
_COL_WIDTH, _SPACING = 12, 2


def format_time(us: float) -> str:
    """torch's _format_time: 1.234s, 1.234ms or 1.234us."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_share(part: float, whole: float) -> str:
    """torch's _format_time_share."""
    return "NaN" if whole == 0 else f"{part * 100.0 / whole:.2f}%"


def format_memory(nbytes: int) -> str:
    """torch's _format_memory: 1.50 GB / MB / KB, else bytes."""
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes * 1.0 / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes * 1.0 / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes * 1.0 / kb:.2f} KB"
    return f"{int(nbytes)} B"


def device_header(trace) -> str:
    """The word torch's table uses for this trace's device (CUDA, XPU, MTIA, ...): its
    ``use_device.upper()``, "None" when no device was profiled."""
    kinds = trace.device_kinds
    if not kinds:
        return "None"
    return _DEVICE_NAMES.get(kinds[0], kinds[0].upper())


def _trim_path(path: str, width: int) -> str:
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def _sorted(avg, key: str | None):
    """torch's ``sorted(events, key=attr, reverse=True)``: stable, ties in first-call order."""
    if key is None or not len(avg):
        return avg
    values = avg[key].to_numpy(np.float64)
    return avg.iloc[np.argsort(-values, kind="stable")]


def render(trace, avg, key: str | None, row_limit: int = 10, max_name_column_width: int = 55,
           max_shapes_column_width: int = 80, max_src_column_width: int = 75) -> str:
    """The table text for key_averages rows ``avg`` sorted by ``key`` (None: as given)."""
    if not len(avg):
        return ""
    avg = _sorted(avg, key)
    dev_name = device_header(trace)
    profile_memory = bool(trace.metadata.get("profile_memory"))
    has_dev = bool((avg["self_device_time_total"] > 0).any())
    has_dev_mem = dev_name != "None" and bool((avg["self_device_memory_usage"] > 0).any())
    has_shapes = "input_shapes" in avg and bool((avg["input_shapes"] != "[]").any())
    stacks = [s for s in avg["stack"] if len(s)] if "stack" in avg else []
    name_w = min(int(avg["name"].str.len().max()) + 4, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_dev:
        headers += [f"Self {dev_name}", f"Self {dev_name} %", f"{dev_name} total", f"{dev_name} time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if has_dev_mem:
            headers += [f"{dev_name} Mem", f"Self {dev_name} Mem"]
    headers.append("# of Calls")
    widths, align = [name_w] + [_COL_WIDTH] * (len(headers) - 1), [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(min(int(avg["input_shapes"].str.len().max()) + 4, max_shapes_column_width))
        align.append(">")
    src_w = 0
    if stacks:
        src_w = min(max(len(f) for s in stacks for f in s) + 4, max_src_column_width)
        headers.append("Source Location")
        widths.append(src_w)
        align.append("<")
    fmt = "".join("{: " + a + str(w) + "}" + " " * _SPACING for a, w in zip(align, widths))
    sep = "".join("-" * w + " " * _SPACING for w in widths)
    sums = _footer_sums(avg)
    lines = [sep, fmt.format(*headers), sep]
    for r in avg.head(max(row_limit, 0) if row_limit >= 0 else len(avg)).itertuples(index=False):
        values = _row(r, max_name_column_width, has_dev, profile_memory, has_dev_mem, sums)
        if has_shapes:
            values.append(str(r.input_shapes)[:widths[len(values)]])
        if stacks:
            values.append(_trim_path(r.stack[0], src_w) if len(r.stack) else "")
        lines.append(fmt.format(*values))
        if stacks:
            empty = [""] * (len(headers) - 1)
            lines += [fmt.format(*empty, _trim_path(f, src_w)) for f in list(r.stack)[1:]]
            lines.append(fmt.format(*empty, ""))
    lines += [sep, f"Self CPU time total: {format_time(sums[0])}"]
    if has_dev:
        lines.append(f"Self {dev_name} time total: {format_time(sums[1])}")
    return "\n".join(lines) + "\n"


def _footer_sums(avg) -> tuple[float, float]:
    """torch's running sums (in row order, from 0) of self CPU time, and of self device
    time over device events that are not annotations."""
    cpu = np.cumsum(np.r_[0.0, avg["self_cpu_time_total"].to_numpy(np.float64)])[-1]
    is_dev = (avg["device"] & ~avg["user_annotation"]).to_numpy(bool)
    dev = np.cumsum(np.r_[0.0, avg["self_device_time_total"].to_numpy(np.float64)[is_dev]])[-1]
    return float(cpu), float(dev)


def _row(r, max_name_w: int, has_dev: bool, profile_memory: bool, has_dev_mem: bool, sums) -> list:
    name = r.name if len(r.name) < max_name_w - 3 else r.name[:max_name_w - 3] + "..."
    total_pct = 0 if r.is_async else format_share(r.cpu_time_total, sums[0])
    values = [name, format_share(r.self_cpu_time_total, sums[0]), format_time(r.self_cpu_time_total),
              total_pct, format_time(r.cpu_time_total), format_time(r.cpu_time)]
    if has_dev:
        values += [format_time(r.self_device_time_total), format_share(r.self_device_time_total, sums[1]),
                   format_time(r.device_time_total), format_time(r.device_time)]
    if profile_memory:
        values += [format_memory(r.cpu_memory_usage), format_memory(r.self_cpu_memory_usage)]
        if has_dev_mem:
            values += [format_memory(r.device_memory_usage), format_memory(r.self_device_memory_usage)]
    values.append(r.count)
    return values


__all__ = ["device_header", "format_memory", "format_share", "format_time", "render"]
