"""``tb-profiler mcp LOGDIR`` (issue 21) driven by the MCP Python SDK's own client over stdio.

The server is the real command in a subprocess; each tool's answer must be the JSON the
route or CLI gives for the same question (the overview route's document, why --json's
verdict, the diff route's deltas, the range and the event the Trace view shows), under its
schema name and version, and a run the logdir lacks must come back as an error naming the
runs that exist.
"""
from __future__ import annotations

import json
import shutil
import sys
import threading

import anyio
import pytest
from datafiles import V100_RUN, V100_RUN_W4
from mcp import Client, StdioServerParameters

import tb_profiler
from tb_profiler.analysis.diagnosis import diagnosis
from tb_profiler.cli.mcp import SCHEMA_VERSION, Answers
from tb_profiler.plugin import views

TOOLS = {"runs", "overview", "why", "diff", "range_stats", "event"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mcp_logdir")
    shutil.copytree(V100_RUN, d / "w0")
    shutil.copytree(V100_RUN_W4, d / "w4")
    return d


def _call_all(logdir, cache_dir, calls: list[tuple[str, dict]]) -> tuple[set[str], list]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "tb_profiler.cli", "mcp", str(logdir),
                                                                  "--cache-dir", str(cache_dir)])

    async def go():
        async with Client(params, read_timeout_seconds=300) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            out = []
            for name, args in calls:
                res = await client.call_tool(name, args)
                text = "".join(getattr(c, "text", "") for c in res.content)
                out.append((res.is_error, text))
            return tools, out

    # in a thread of its own: an earlier test (Playwright's sync API) may leave an event loop
    # running on this one, and anyio.run refuses to start inside it
    out: list = []
    failed: list = []

    def run() -> None:
        try:
            out.append(anyio.run(go))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(600)
    if failed:
        raise failed[0]
    assert out, "the MCP client did not finish in 600 s"
    return out[0]


def test_the_sdk_client_gets_the_routes_answers(logdir, tmp_path):
    calls = [("runs", {}), ("overview", {"run": "w0", "span": 1}), ("why", {"run": "w0", "span": 1, "only": "idle"}),
             ("diff", {"run": "w0", "exp_run": "w4"}), ("range_stats", {"run": "w0", "span": 1, "start_us": 0, "end_us": 50_000}),
             ("event", {"run": "w0", "i": 5}), ("overview", {"run": "nope"})]
    tools, answers = _call_all(logdir, tmp_path / "cache", calls)
    assert tools == TOOLS
    docs = [json.loads(text) if not err else text for err, text in answers]
    runs, ov, why, diff, rng, ev, missing = docs
    assert runs["schema"] == "tb_profiler.runs" and runs["schema_version"] == SCHEMA_VERSION
    assert [r["run"] for r in runs["runs"]] == ["w0", "w4"] and runs["runs"][0]["workers"]["worker0"] == [1, 2]

    run = tb_profiler.load_run(logdir / "w0", cache_dir=tmp_path / "cache")
    t = run.trace(span=1)
    assert ov["schema"] == "tb_profiler.overview" and ov["span"] == 1
    want = json.loads(json.dumps(views.overview(t, 1)))
    assert {k: ov[k] for k in want} == want
    assert ov["diagnosis"]["sentence"] == diagnosis(t)["sentence"]
    assert list(why)[:4] == ["schema", "schema_version", "run", "span"] and why["verdict"]["finding"] == ov[
        "diagnosis"]["sentence"]
    assert diff["schema"] == "tb_profiler.diff" and "breakdown" in json.dumps(diff)
    assert rng["schema"] == "tb_profiler.range_stats"
    assert rng["rows"] == json.loads(json.dumps(views.range_stats(t, 0, 50_000_000)))["rows"]
    assert ev["event"]["i"] == 5
    assert answers[-1][0] and "run 'nope' not found; runs: w0, w4" in missing


def test_answers_refuse_names_outside_the_logdir(logdir, tmp_path):
    a = Answers(logdir, cache_dir=str(tmp_path / "cache"))
    for bad in ("../w0", str(logdir / "w0"), "w0/..", ""):
        with pytest.raises(ValueError, match="not found; runs: w0, w4"):
            a.overview(bad)
    with pytest.raises(ValueError, match="worker 'x' not found in run 'w0'; workers: worker0"):
        a.overview("w0", worker="x")
