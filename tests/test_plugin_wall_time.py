"""Wall-clock time of a trace's origin: modern Kineto counts ts from baseTimeNanoseconds."""
from __future__ import annotations

import datetime
import os

from datafiles import V100_TRACE as V100

import tb_profiler
from tb_profiler.plugin.timeline import origin, wall_origin


def test_torch2_trace_wall_time_is_when_it_was_written(sample_traces):
    path = sample_traces[0]
    trace = tb_profiler.load(path, cache=False)
    assert trace.base_time_ns  # torch 2.13 writes it
    # The trace was written right after its events: within a few minutes of the file's mtime.
    assert abs(wall_origin(trace) / 1e9 - os.path.getmtime(path)) < 600


def test_old_trace_counts_from_the_epoch():
    trace = tb_profiler.load(V100, cache=False)
    assert trace.base_time_ns is None and wall_origin(trace) == origin(trace)
    assert datetime.datetime.fromtimestamp(wall_origin(trace) / 1e9, datetime.timezone.utc).year == 2021
