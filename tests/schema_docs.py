"""Real answers of tb_profiler's routes and CLI, the ones docs/schemas/*.schema.json are
made from (docs/schemas/make_schemas.py) and that tests/test_schemas.py validates against
them (issue 21: every JSON route and every ``--json`` verb has a published schema).

The logdir: the V100 ResNet50 run (tests/data; a GPU trace) with two memory snapshots and
a pickle that is not one beside it, the sample runs ``ddp_gloo_2ranks`` (two ranks over gloo) and
``cnn_dataloader_0workers`` (a CPU trace) of samples/make_all.py, and the fixture traces of the views
that only some traces feed: torch.compile's kernels (tests/compiled_fixture.py), CUDA graph
replays (tests/graph_fixtures.py), a trust report with findings (tests/integrity_fixtures.py),
device counters (tests/kineto_fields_fixtures.py) and a run whose only file cannot be read.
A route whose fields depend on the trace is asked of the GPU and the CPU trace both, so a
schema requires only the keys every answer has. The CLI's answers: tests/schema_cli_docs.py.

This module is also the one place that says which routes have no schema (``NOT_JSON``) and
how routes and verbs are named as schemas (``route_schema``, ``CLI_SCHEMAS``).
"""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import snapshot_fixtures as fx
from datafiles import DATA, V100_RUN

if TYPE_CHECKING:
    from werkzeug.test import Client

ROOT = Path(__file__).resolve().parents[1]
P = "/data/plugin/pytorch_profiler/"
SAMPLE_RUNS = ("ddp_gloo_2ranks", "cnn_dataloader_0workers")

# Routes that answer no JSON document, so no schema: {route: (why, a query that answers 200)}.
# tests/test_schemas.py asks each one and checks that its answer is indeed not JSON.
NOT_JSON: dict[str, tuple[str, str]] = {
    "trace/raw": (("the trace file itself, gzipped, as a download (application/gzip): its format is "
                   "Kineto's Chrome trace JSON, not a document of this API"), "run=v100&worker=worker0&span=1"),
}
# Static files (the frontend bundle, its assets) are not routes: ProfilerApp.routes does not
# hold them, they are served by r_static for any other path, and their bytes are the bundle's.

# Route schemas keep the names version 1 published them under (the MCP tools answer with the
# same names); every other route's schema is named after the route, "/" written "_".
_ROUTE_NAMES = {"trace/range_stats": "range_stats", "trace/event": "event"}

# The schemas of each CLI verb's --json output: "cli_<verb>", but why's kept its version 1
# name (the MCP why tool answers with it); cache prints one document for info and another
# for clear and trim. No verb prints a route's document unchanged (see docs/schemas/README.md).
CLI_SCHEMAS: dict[str, tuple[str, ...]] = {
    "runs": ("cli_runs",), "info": ("cli_info",), "summary": ("cli_summary",), "summarize": ("cli_summarize",),
    "why": ("why",), "compiled": ("cli_compiled",), "cache": ("cli_cache", "cli_cache_clear"),
    "diff": ("cli_diff",), "snapshot": ("cli_snapshot",),
}


def route_schema(route: str) -> str:
    """The name of a route's schema (docs/schemas/<name>.schema.json)."""
    return _ROUTE_NAMES.get(route, route.replace("/", "_"))


def _logdir(root: Path, samples: Path) -> Path:
    """The logdir every route is asked of (see the module docstring)."""
    d = root / "log"
    shutil.copytree(V100_RUN, d / "v100")
    fx.write(d / "v100" / "oom.pickle", fx.cuda_oom())
    fx.write(d / "v100" / "basic.pickle", fx.cuda_basic())
    (d / "v100" / "other.pkl").write_bytes(pickle.dumps([1, 2], protocol=4))  # skipped: not a snapshot
    for run in SAMPLE_RUNS:
        shutil.copytree(samples / run, d / run)
    shutil.copytree(DATA / "compiled" / "run", d / "compiled")  # with Inductor's provenance files
    for run, src in (("graphs", DATA / "cuda_graphs" / "annotated.pt.trace.json.gz"),
                     ("trust", DATA / "integrity" / "ours.json.gz"),
                     ("counters", DATA / "kineto_fields" / "counters.json.gz")):
        (d / run).mkdir()
        shutil.copy(src, d / run / "worker0.1.pt.trace.json.gz")
    (d / "broken").mkdir()
    (d / "broken" / "worker0.1.pt.trace.json").write_text('{"traceEvents": [')  # cannot be read
    return d


def _get(client: Client, url: str) -> Any:
    """The JSON answer of P + url, asked again while it is 202 (loading); asserts a 200."""
    deadline = time.monotonic() + 300
    while True:
        r = client.get(P + url, environ_overrides={"HTTP_HOST": "localhost"})
        if r.status_code != 202 or time.monotonic() > deadline:
            assert r.status_code == 200, (url, r.status_code, r.get_data()[:300])
            return json.loads(r.get_data())
        time.sleep(0.1)


def _not_json(client: Client) -> dict[str, tuple[int, str]]:
    """{route: (status, Content-Type)} of each NOT_JSON route's example query."""
    out = {}
    for route, (_, query) in NOT_JSON.items():
        r = client.get(f"{P}{route}?{query}", environ_overrides={"HTTP_HOST": "localhost"})
        out[route] = (r.status_code, r.headers.get("Content-Type", ""))
        r.close()
    return out


def route_answers(client: Client) -> dict[str, list]:
    """{route: [answers]}: every JSON route, asked as the page asks it. Where one answer
    would leave a field's other shapes unseen (a GPU and a CPU trace, a list empty in one
    and not in the other, a null), several."""
    v = "run=v100&worker=worker0&span=1"
    cpu, dist = "run=cnn_dataloader_0workers", "run=ddp_gloo_2ranks"
    traces = (v, cpu)  # a per-trace route: the GPU and the CPU trace

    def ask(route: str, *queries: str) -> list:
        return [_get(client, f"{route}?{q}" if q else route) for q in queries]

    def each(route: str, extra: str = "") -> list:
        return ask(route, *(f"{t}{extra}" for t in traces))

    out: dict[str, list] = {
        # discovery
        "runs": ask("runs", ""),
        "skipped": ask("skipped", ""),
        "views": ask("views", "run=v100", cpu, dist),
        "workers": ask("workers", "run=v100", dist, f"{dist}&view=Distributed"),
        "spans": ask("spans", "run=v100&worker=worker0", dist),
        # per trace
        "overview": ask("overview", v, "run=v100&worker=worker0&span=2", cpu),
        "trace/range_stats": ask("trace/range_stats", f"{v}&start_ns=0&end_ns=60000000",
                                 f"{cpu}&start_ns=0&end_ns=5000000"),
        "trace/event": ask("trace/event", *(f"{v}&i={i}" for i in (5, 20000, 40000)), f"{cpu}&i=3"),
        "operation": each("operation") + each("operation", "&group_by=OperationAndInputShape&top=3"),
        "operation/table": each("operation/table") + each("operation/table", "&group_by=OperationAndStack"),
        "kernel": each("kernel", "&top=5"),
        "kernel/table": each("kernel/table") + each("kernel/table", "&group_by=Kernel"),
        "kernel/tc_pie": each("kernel/tc_pie"),
        "memory": each("memory") + ask("memory", f"{v}&device=CPU&start_ns=0&end_ns=100000000"),
        "memory_curve": each("memory_curve", "&max_points=100"),
        "memory_events": each("memory_events", "&limit=20"),
        "module": each("module"),
        "tree": each("tree") + ask("tree", f"{cpu}&step=7"),
        "trace": each("trace", "&start_ns=0&end_ns=200000000&width=800&max_events=2000"),
        "trace/search": each("trace/search", "&q=conv&limit=5") + ask("trace/search", f"{cpu}&q=zzz_none"),
        "idle": each("idle"),
        "launches": each("launches"),
        "steps/outliers": each("steps/outliers") + ask("steps/outliers", f"{v}&factor_pct=101"),
        "memcpy": each("memcpy", "&bins=20"),
        "annotations": each("annotations"),
        "queue": each("queue"),
        "roofline": each("roofline"),
        "critical_path": each("critical_path") + ask("critical_path", f"{v}&step=6"),
        "diff": [_get(client, f"diff?{v}&exp_run=v100&exp_worker=worker0&exp_span=2"),
                 _get(client, f"diff?{cpu}&exp_run=cnn_dataloader_0workers")] + ask("diff", f"{dist}&exp_run=ddp_gloo_2ranks&exp_span=1"),
        "diffnode": ask("diffnode", f"{v}&exp_run=v100&exp_worker=worker0&exp_span=2&path=",
                        f"{cpu}&exp_run=cnn_dataloader_0workers&exp_span=1&path=",
                        f"{cpu}&exp_run=cnn_dataloader_0workers&exp_span=1&path=TinyResNet_0"),
        # what only some traces have: the fixture runs, and a trace without it
        "kernel_counters": ask("kernel_counters", "run=counters", v),
        "compiled_kernels": ask("compiled_kernels", "run=compiled", v),
        "integrity": ask("integrity", "run=trust", v, cpu),
        "graphs": ask("graphs", "run=graphs", v),
        # distributed (the two ranks of ddp_gloo_2ranks)
        "trace/ranks": ask("trace/ranks", f"{dist}&width=300&max_events=500",
                           f"{dist}&workers=rank1&start_ns=0&end_ns=5000000"),
        **{r: ask(r, dist) for r in ("distributed/gpuinfo", "distributed/overlap", "distributed/waittime",
                                     "distributed/commops", "distributed/ranks", "distributed/matrix",
                                     "distributed/stragglers")},
        "distributed/instances": ask("distributed/instances", f"{dist}&limit=3", f"{dist}&sort=bytes&offset=1"),
    }
    out["operation/stack"] = _operator_stacks(client, v, cpu)
    out.update(_snapshot_answers(client, v))
    out["status"] = ask("status", "")  # last: every file loaded or failed by now
    return out


def _operator_stacks(client: Client, v: str, cpu: str) -> list:
    """operation/stack of an operator with call stacks (the CPU sample records them), by
    name and by name and input shape, and of one without (the V100 run has none)."""
    rows = _get(client, f"operation/table?{cpu}&group_by=OperationAndInputShape")["rows"]
    op = next(r for r in rows if r["name"] == "aten::convolution_backward")
    return [_get(client, f"operation/stack?{cpu}&op_name=aten::convolution_backward"),
            _get(client, f"operation/stack?{cpu}&group_by=OperationAndInputShape&op_name={op['name']}"
                         f"&input_shape={quote(op['input_shape'])}"),
            _get(client, f"operation/stack?{v}&op_name=aten::conv2d")]


def _snapshot_answers(client: Client, v: str) -> dict[str, list]:
    """The snapshot routes over the OOM and the plain snapshot, at the peak and at a time;
    snapshot/operator at a time the V100 trace covers and at one it does not."""
    snaps = [f"run=v100&snapshot={n}" for n in ("oom.pickle", "basic.pickle")]
    a, b = _get(client, f"snapshot/summary?{snaps[1]}")["time_range_us"]
    mid = (a + b) // 2

    def each(route: str, extra: str = "") -> list:
        return [_get(client, f"{route}?{s}{extra}") for s in snaps]

    outside = _get(client, f"snapshot/operator?{v}&time_us=0")
    inside = int(outside["trace_start_us"]) + 100_000  # 100 ms in: ResNet50's operators run there
    return {
        "snapshots": [_get(client, "snapshots?run=v100")],
        "snapshot/summary": each("snapshot/summary"),
        "snapshot/timeline": each("snapshot/timeline", "&max_points=20") + each(
            "snapshot/timeline", f"&device=0&start_us={a}&end_us={mid}&max_points=10"),
        "snapshot/at": each("snapshot/at") + each("snapshot/at", f"&device=0&time_us={mid}"),
        "snapshot/ooms": each("snapshot/ooms"),
        "snapshot/live": each("snapshot/live", "&top=5") + each("snapshot/live", f"&device=0&time_us={mid}"),
        "snapshot/operator": [outside, _get(client, f"snapshot/operator?{v}&time_us={inside}")],
    }


def collect(sample_logdir: Path | None = None) -> dict[str, Any]:
    """{"routes": {route: [answers]}, "not_json": {route: (status, Content-Type)},
    "cli": {schema name: [answers]}}: everything asked once (the server's logdir and the
    CLI's files are built in a temporary folder). Without ``sample_logdir`` (a folder
    samples/make_all.py wrote), the two sample runs are written first (about 15 s)."""
    from schema_cli_docs import cli_answers
    from werkzeug.test import Client

    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    with tempfile.TemporaryDirectory(prefix="tb_profiler-schemas-") as tmp:
        root = Path(tmp)
        if sample_logdir is None:
            subprocess.run([sys.executable, str(ROOT / "samples" / "make_all.py"), str(root / "samples"), "--only",
                            *SAMPLE_RUNS], check=True, capture_output=True)
            sample_logdir = root / "samples"
        logdir = _logdir(root, sample_logdir)
        cache = root / "cache"
        state = ProfilerState(str(logdir), reload_s=3600, cache_dir=str(cache))
        app = ProfilerApp(state, standalone=True)
        state.start()
        try:
            assert state.wait_scanned(60)
            client = Client(app)
            routes, not_json = route_answers(client), _not_json(client)
        finally:
            state.stop()
            app.close()
        return {"routes": routes, "not_json": not_json, "cli": cli_answers(logdir, root, cache)}


def schema_documents(collected: dict[str, Any]) -> dict[str, list]:
    """{schema name: [answers]} of what ``collect`` gathered."""
    out: dict[str, list] = {}
    for route, answers in collected["routes"].items():
        out.setdefault(route_schema(route), []).extend(answers)
    for name, answers in collected["cli"].items():
        out.setdefault(name, []).extend(answers)
    return out


def documents(sample_logdir: Path | None = None) -> dict[str, list]:
    """{schema name: [answers]}: each schema's documents (docs/schemas/make_schemas.py)."""
    return schema_documents(collect(sample_logdir))

