"""The trace model: one trace file as columnar numpy tables (see DESIGN.md, "The trace model").

    trace = load("worker0.pt.trace.json.gz")
    trace.events["ts"], trace.events.df(), trace.steps, trace.devices, trace.args(i)

This is the data only; ``tb_profiler.load`` gives ``tb_profiler.api.Trace``, the same
tables with the analyses as methods, and ``tb_profiler.load_run`` a Run (tb_profiler.api).
"""
from tb_profiler.trace.categories import KIND_NAMES, Kind
from tb_profiler.trace.devices import Device
from tb_profiler.trace.load import load
from tb_profiler.trace.model import Trace
from tb_profiler.trace.table import Table

__all__ = ["load", "Trace", "Table", "Kind", "KIND_NAMES", "Device"]
