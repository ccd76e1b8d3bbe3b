"""CUDA graph replays: the graph_id / graph_node_id columns, Trace.graphs(), torch's graph
annotations (merged into args, or a pickle beside the trace), the notes, the graphs route.

Fixtures: tests/data/cuda_graphs (tests/graph_fixtures.py, figures in its docstring).
"""
from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import time

import graph_fixtures as fx
import numpy as np
import pytest
from werkzeug.test import Client

from tb_profiler.analysis.graph_annotations import annotations_file, load_annotations
from tb_profiler.analysis.graphs import ATTRIBUTION_COLUMNS, GRAPH_COLUMNS
from tb_profiler.decode.schema import MISSING_INT
from tb_profiler.plugin.app import ProfilerApp
from tb_profiler.plugin.state import ProfilerState
from tb_profiler.api import load
from app_client import get as _get

REPLAY = fx.DATA / "replay.pt.trace.json.gz"
ANNOTATED = fx.DATA / "annotated.pt.trace.json.gz"
P = "/data/plugin/pytorch_profiler/"
NOTE_PLAIN = "graph replay: 13 kernels, 94.9 % of GPU time, cannot be attributed to operators"
WANT_GRAPHS = [{"graph_id": 1, "replays": 3, "kernels": 12, "device_ns": 51_000, "share": 51 / 59},
               {"graph_id": 2, "replays": 1, "kernels": 1, "device_ns": 5_000, "share": 5 / 59}]
WANT_ATTRIBUTION = [{"annotation": "phase_A", "graphs": 1, "kernels": 6, "device_ns": 36_000, "share": 36 / 59},
                    {"annotation": "phase_B", "graphs": 1, "kernels": 3, "device_ns": 12_000, "share": 12 / 59},
                    {"annotation": "module=decoder, op=fill", "graphs": 1, "kernels": 3, "device_ns": 3_000,
                     "share": 3 / 59}]


class Hostile:
    """Unpickling it would run a command (creating the marker file)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _records(df) -> list[dict]:
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in df.to_dict("records")]


def _close(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want), got
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if k != "share"} == {k: v for k, v in w.items() if k != "share"}
        assert g["share"] == pytest.approx(w["share"])


@pytest.fixture(scope="module")
def replay():
    return load(str(REPLAY), cache=False)


@pytest.fixture(scope="module")
def annotated():
    return load(str(ANNOTATED), cache=False)


def _torch_pickle(path) -> None:
    """The annotations pickle as torch holds them: get_kernel_annotations()'s defaultdict."""
    from torch.cuda import _graph_annotations as ga

    ga.clear_kernel_annotations()
    try:
        ann = ga.get_kernel_annotations()
        for key, value in fx.ANNOTATIONS.items():
            ann[key].extend(value)
        with open(path, "wb") as f:
            pickle.dump(ann, f)
    finally:
        ga.clear_kernel_annotations()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Runs: plain (the replay), merged (annotate_trace's output), pkl (the replay with the
    pickle beside it, named as torch names it), hostile (a pickle that would run code)."""
    root = tmp_path_factory.mktemp("graphs") / "log"
    for run, src in (("plain", REPLAY), ("merged", ANNOTATED), ("pkl", REPLAY), ("hostile", REPLAY)):
        (root / run).mkdir(parents=True)
        shutil.copy(src, root / run / "000000.1700000000.pt.trace.json.gz")
    _torch_pickle(root / "pkl" / "kernel_annotations_rank0_1700000000.pkl")
    marker = root / "hostile" / "ran"
    (root / "hostile" / "kernel_annotations_rank0_1.pkl").write_bytes(pickle.dumps(Hostile(str(marker))))
    return root


def test_the_committed_fixtures_are_the_generators_output():
    assert json.loads(gzip.decompress(REPLAY.read_bytes())) == fx.replay_trace()
    assert json.loads(gzip.decompress(ANNOTATED.read_bytes())) == fx.annotated_trace()


def test_graph_columns_by_hand(replay):
    ev = replay.events
    names = replay.str(ev["name"])
    gid, node = ev["graph_id"], ev["graph_node_id"]
    gemm = np.flatnonzero(names == "gemm_kernel")
    assert gid[gemm].tolist() == [1, 1, 1] and node[gemm].tolist() == [(1 << 32) | 1] * 3
    fill = np.flatnonzero(names == "Memset (Device)")
    assert gid[fill].tolist() == [1] * 3 and node[fill].tolist() == [(1 << 32) | 4] * 3
    assert node[names == "g2_kernel"].tolist() == [(2 << 32) | 1]
    eager = np.flatnonzero(names == "eager_add_kernel")
    assert gid[eager].tolist() == [MISSING_INT] and node[eager].tolist() == [MISSING_INT]
    assert (gid[names == "cudaGraphLaunch"] == MISSING_INT).all()


def test_without_annotations_a_plain_note(replay):
    out = replay.graphs()
    assert list(out["graphs"].columns) == GRAPH_COLUMNS
    _close(_records(out["graphs"]), WANT_GRAPHS)
    assert list(out["attribution"].columns) == ATTRIBUTION_COLUMNS and out["attribution"].empty
    assert (out["kernels"], out["device_ns"], out["annotated"]) == (13, 56_000, 0)
    assert out["notes"] == [NOTE_PLAIN]
    assert NOTE_PLAIN in replay.launches()["notes"]
    ops = replay.kernels("op").set_index("name")["op"]
    assert ops["gemm_kernel"] is None and ops["eager_add_kernel"] == "aten::add"


def test_annotations_merged_into_args(annotated):
    out = annotated.graphs()
    _close(_records(out["graphs"]), WANT_GRAPHS)
    _close(_records(out["attribution"]), WANT_ATTRIBUTION)
    assert out["annotations"] == {"file": None, "from_args": 4}
    assert out["notes"] == [("graph replay: 13 kernels, 94.9 % of GPU time: 12 attributed by torch's graph "
                             "annotations; 1 kernel (8.5 % of GPU time) has none and cannot be attributed to "
                             "operators")]
    ops = annotated.kernels("op").set_index("name")
    assert ops.loc["gemm_kernel", "op"] == "phase_A" and ops.loc["relu_kernel", "op"] == "phase_A"
    assert ops.loc["g2_kernel", "op"] is None and ops.loc["eager_add_kernel", "op"] == "aten::add"
    assert ops.loc["gemm_kernel", "graph_calls"] == 3


def test_the_pickle_beside_the_trace_as_torch_writes_it(logdir):
    path = logdir / "pkl" / "000000.1700000000.pt.trace.json.gz"
    assert annotations_file(str(path)) == str(logdir / "pkl" / "kernel_annotations_rank0_1700000000.pkl")
    assert annotations_file(str(logdir / "pkl" / "rank_less.pt.trace.json.gz")) is None  # no leading rank digits
    trace = load(str(path), cache=False)
    out = trace.graphs()
    _close(_records(out["attribution"]), WANT_ATTRIBUTION)
    assert out["annotations"]["file"].endswith("kernel_annotations_rank0_1700000000.pkl")
    assert trace.kernels("op").set_index("name").loc["gemm_kernel", "op"] == "phase_A"
    # the same file given explicitly to a trace without one beside it
    _close(_records(load(str(REPLAY), cache=False).graphs(annotations=out["annotations"]["file"])["attribution"]),
           WANT_ATTRIBUTION)


def test_a_hostile_pickle_is_refused_without_running_anything(logdir):
    bad = logdir / "hostile" / "kernel_annotations_rank0_1.pkl"
    trace = load(str(logdir / "hostile" / "000000.1700000000.pt.trace.json.gz"), cache=False)
    out = trace.graphs()
    assert not (logdir / "hostile" / "ran").exists()
    assert out["attribution"].empty and out["annotated"] == 0
    assert out["notes"][0].startswith(f"graph annotations {bad}: refused, it names posix.system")
    assert out["notes"][1] == NOTE_PLAIN


@pytest.mark.parametrize("data, problem", [
    (pickle.dumps(["not", "a", "dict"]), "malformed, a list where torch writes a dict"),
    (b"\x80\x04garbage", "not a readable pickle"),
    (pickle.dumps({1: [{"str": "x"}], "k": [1]}), "1 entries are not {int toolsId"),
    (pickle.dumps(eval), "refused, it names builtins.eval"),
])
def test_malformed_pickles_give_a_note_naming_the_file(tmp_path, data, problem):
    path = tmp_path / "kernel_annotations_rank0_x.pkl"
    path.write_bytes(data)
    _, notes = load_annotations(str(path))
    assert notes and notes[0].startswith(f"graph annotations {path}: ") and problem in notes[0], notes


def test_symlinked_pickle_leading_out_of_the_folder_is_skipped(tmp_path):
    outside = tmp_path / "outside.pkl"
    outside.write_bytes(pickle.dumps({1: [{"str": "x"}]}))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kernel_annotations_rank0_a.pkl").symlink_to(outside)
    assert annotations_file(str(tmp_path / "run" / "000000.t.pt.trace.json")) is None


def test_torch_layout_one_level_up_is_found_inside_the_root_only(tmp_path):
    """torch's layout (_find_annotations_pkl): traces/step_N/<rank>.*.json.gz, the pickle in traces/."""
    step = tmp_path / "traces" / "step_000000000014"
    step.mkdir(parents=True)
    trace = step / "000000.1700000000.pt.trace.json.gz"
    shutil.copy(REPLAY, trace)
    pkl = tmp_path / "traces" / "kernel_annotations_rank0_1700000000.pkl"
    _torch_pickle(pkl)
    assert annotations_file(str(trace)) == str(pkl)  # a file opened from Python: its neighbours are the user's
    assert annotations_file(str(trace), root=str(tmp_path / "traces")) == str(pkl)
    assert annotations_file(str(trace), root=str(step)) is None  # the server's logdir is step_N: never above it
    (step / "kernel_annotations_rank0_0.pkl").write_bytes(pickle.dumps({}))
    assert annotations_file(str(trace)) == str(step / "kernel_annotations_rank0_0.pkl")  # its own folder first


def test_the_server_reads_no_pickle_above_its_logdir(tmp_path):
    step = tmp_path / "traces" / "step_1"
    (step / "run").mkdir(parents=True)
    shutil.copy(REPLAY, step / "run" / "000000.1700000000.pt.trace.json.gz")
    _torch_pickle(step / "kernel_annotations_rank0_1700000000.pkl")  # inside the logdir (step_1): read
    _torch_pickle(tmp_path / "traces" / "kernel_annotations_rank0_1700000000.pkl")  # above it: never
    state = ProfilerState(str(step / "run"), cache_dir=str(tmp_path / "cache"), reload_s=60, jobs=1)
    state.start()
    try:
        client = Client(ProfilerApp(state, standalone=True))
        out = _get(client, "graphs?run=" + _first_run(client))
        assert out["attribution"] == [] and out["annotations"]["file"] is None, out["annotations"]
    finally:
        state.stop()
    state = ProfilerState(str(step), cache_dir=str(tmp_path / "cache2"), reload_s=60, jobs=1)
    state.start()
    try:
        client = Client(ProfilerApp(state, standalone=True))
        out = _get(client, "graphs?run=run")
        _close(out["attribution"], WANT_ATTRIBUTION)
        assert out["annotations"]["file"] == "kernel_annotations_rank0_1700000000.pkl"  # relative to the logdir
    finally:
        state.stop()


def _first_run(client) -> str:
    end = time.monotonic() + 60
    while True:
        runs = json.loads(client.get(P + "runs").get_data())["runs"]
        if runs:
            return runs[0]
        assert time.monotonic() < end
        time.sleep(0.1)




def test_the_graphs_route(logdir, tmp_path):
    state = ProfilerState(str(logdir), cache_dir=str(tmp_path / "cache"), reload_s=60, jobs=1)
    state.start()
    try:
        client = Client(ProfilerApp(state, standalone=True))
        plain = _get(client, "graphs?run=plain")
        _close(plain["graphs"], WANT_GRAPHS)
        assert (plain["attribution"], plain["notes"], plain["device_word"]) == ([], [NOTE_PLAIN], "GPU")
        assert (plain["kernels"], plain["graphs_total"]) == (13, 2)
        # the Operator view's table says the same, where the replay's time is not charged
        assert _get(client, "operation/table?run=plain&group_by=Operation")["notes"] == [NOTE_PLAIN]
        merged = _get(client, "operation/table?run=merged&group_by=Operation")["notes"]
        assert merged == _get(client, "graphs?run=merged")["notes"] and "12 attributed by torch's" in merged[-1]
        for run in ("merged", "pkl"):
            _close(_get(client, f"graphs?run={run}")["attribution"], WANT_ATTRIBUTION)
        hostile = _get(client, "graphs?run=hostile")
        assert hostile["notes"][0].startswith("graph annotations hostile/kernel_annotations_rank0_1.pkl: refused")
        assert str(logdir) not in json.dumps(hostile)  # no server path reaches a client
        assert not (logdir / "hostile" / "ran").exists()
        assert client.get(P + "graphs?run=plain&path=/etc/passwd").status_code == 400
    finally:
        state.stop()
