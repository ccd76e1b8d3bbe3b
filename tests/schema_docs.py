"""Real answers of tb_profiler's routes and CLI, the ones docs/schemas/*.schema.json are
made from (docs/schemas/make_schemas.py) and that tests/test_schemas.py validates against
them: the V100 ResNet50 run (tests/data) with a memory snapshot beside it, and the sample
DDP run over gloo (samples/make_all.py)."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import snapshot_fixtures as fx
from datafiles import V100_RUN

ROOT = Path(__file__).resolve().parents[1]
P = "/data/plugin/pytorch_profiler/"


def _logdir(root: Path, samples: Path) -> Path:
    d = root / "log"
    shutil.copytree(V100_RUN, d / "v100")
    fx.write(d / "v100" / "oom.pickle", fx.cuda_oom())
    fx.write(d / "v100" / "basic.pickle", fx.cuda_basic())
    for run in ("ddp_gloo", "cnn_workers0"):
        shutil.copytree(samples / run, d / run)
    return d


def _get(client, url: str) -> dict:
    deadline = time.monotonic() + 300
    while True:
        r = client.get(P + url, environ_overrides={"HTTP_HOST": "localhost"})
        if r.status_code != 202 or time.monotonic() > deadline:
            assert r.status_code == 200, (url, r.status_code, r.get_data()[:300])
            return json.loads(r.get_data())
        time.sleep(0.1)


def _cli_json(argv: list[str]) -> dict:
    from tb_profiler.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def documents(sample_logdir: Path | None = None) -> dict[str, list]:
    """{schema name: [answers]}: each schema's documents, several where one answer would
    leave a field's other shapes unseen."""
    from werkzeug.test import Client

    from tb_profiler.plugin.app import ProfilerApp
    from tb_profiler.plugin.state import ProfilerState

    with tempfile.TemporaryDirectory(prefix="tb_profiler-schemas-") as tmp:
        root = Path(tmp)
        if sample_logdir is None:
            subprocess.run([sys.executable, str(ROOT / "samples" / "make_all.py"), str(root / "samples"), "--only",
                            "ddp_gloo", "cnn_workers0"], check=True, capture_output=True)
            sample_logdir = root / "samples"
        logdir = _logdir(root, sample_logdir)
        state = ProfilerState(str(logdir), reload_s=3600, cache_dir=str(root / "cache"))
        app = ProfilerApp(state, standalone=True)
        state.start()
        try:
            assert state.wait_scanned(60)
            c = Client(app)
            v = "run=v100&worker=worker0"
            cpu = "run=cnn_workers0"
            traces = [str(next(p for p in sorted((logdir / r).iterdir()) if ".pt.trace.json" in p.name))
                      for r in ("v100", "cnn_workers0")]
            return {
                "runs": [_get(c, "runs")],
                "overview": [_get(c, f"overview?{v}&span={s}") for s in (1, 2)] + [_get(c, f"overview?{cpu}")],
                "range_stats": [_get(c, f"trace/range_stats?{v}&span=1&start_ns=0&end_ns=60000000"),
                                _get(c, f"trace/range_stats?{cpu}&start_ns=0&end_ns=5000000")],
                "event": [_get(c, f"trace/event?{v}&span=1&i={i}") for i in (5, 20000, 40000)]
                + [_get(c, f"trace/event?{cpu}&i=3")],
                "diff": [_get(c, f"diff?{v}&span=1&exp_run=v100&exp_worker=worker0&exp_span=2"),
                         _get(c, f"diff?{cpu}&exp_run=cnn_workers0")],
                "distributed_stragglers": [_get(c, "distributed/stragglers?run=ddp_gloo")],
                "snapshot_summary": [_get(c, f"snapshot/summary?run=v100&snapshot={n}") for n in ("oom.pickle",
                                                                                                "basic.pickle")],
                "why": [_cli_json(["why", t, "--json"]) for t in traces],
            }
        finally:
            state.stop()
            app.close()
