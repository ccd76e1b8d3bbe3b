"""The trace model: one trace file as columnar numpy tables (see DESIGN.md, "The trace model").

    trace = load("worker0.pt.trace.json.gz")
    trace.events["ts"], trace.events.df(), trace.steps, trace.devices, trace.args(i)
"""
from tb_profiler.trace.categories import KIND_NAMES, Kind
from tb_profiler.trace.devices import Device
from tb_profiler.trace.load import load
from tb_profiler.trace.model import Trace
from tb_profiler.trace.run import Run, load_run
from tb_profiler.trace.table import Table

__all__ = ["load", "load_run", "Run", "Trace", "Table", "Kind", "KIND_NAMES", "Device"]
