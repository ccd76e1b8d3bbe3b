"""The published JSON schemas (docs/schemas/*.schema.json, issue 21) hold: today's answers of
the routes and the CLI (tests/schema_docs.py: the documents the schemas were made from,
asked again of the current code) validate against the committed files, so a field renamed,
removed or retyped fails here until the schema's version is raised and the file written
again (docs/schemas/make_schemas.py). Other traces' answers and the MCP tools' answers
(which add schema / schema_version and the selection) validate too."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from datafiles import H100_AFTER_FIX, TENSORLIST_OPS, V100_RUN, V100_RUN_W4
from schema_docs import documents

import tb_profiler
from tb_profiler.mcp_server import SCHEMA_VERSION, Answers
from tb_profiler.plugin import views

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.fixture(scope="module")
def docs(sample_logdir):
    return documents(sample_logdir)


def test_every_schema_is_named_and_versioned(docs):
    files = sorted(p.name[:-len(".schema.json")] for p in SCHEMAS.glob("*.schema.json"))
    assert files == sorted(docs)
    for name in files:
        s = _schema(name)
        jsonschema.Draft202012Validator.check_schema(s)
        assert re.fullmatch(rf"tb_profiler\.{name}@\d+", s["$id"]), s["$id"]


def test_todays_answers_hold_to_the_published_schemas(docs):
    for name, answers in docs.items():
        schema = _schema(name)
        for doc in answers:
            jsonschema.validate(doc, schema)


def test_a_renamed_field_fails():
    """The check has teeth: the overview without its diagnosis's sentence is refused."""
    doc = json.loads(json.dumps(views.overview(tb_profiler.load(H100_AFTER_FIX), 1), default=str))
    jsonschema.validate(doc, _schema("overview"))
    doc["diagnosis"]["verdict"] = doc["diagnosis"].pop("sentence")
    with pytest.raises(jsonschema.ValidationError, match="sentence"):
        jsonschema.validate(doc, _schema("overview"))


def test_other_traces_and_the_mcp_tools_hold_too(tmp_path):
    import shutil

    for path in (H100_AFTER_FIX, TENSORLIST_OPS):
        doc = json.loads(json.dumps(views.overview(tb_profiler.load(path), 1), default=str))
        jsonschema.validate(doc, _schema("overview"))
    shutil.copytree(V100_RUN, tmp_path / "log" / "w0")
    shutil.copytree(V100_RUN_W4, tmp_path / "log" / "w4")
    a = Answers(tmp_path / "log", cache_dir=str(tmp_path / "cache"))
    for name, doc in (("runs", a.runs()), ("overview", a.overview("w0")), ("why", a.why("w0")),
                      ("diff", a.diff("w0", "w4")), ("range_stats", a.range_stats("w0", 0, 60_000)),
                      ("event", a.event("w0", 5))):
        doc = json.loads(json.dumps(doc))
        assert doc["schema"] == f"tb_profiler.{name}" and doc["schema_version"] == SCHEMA_VERSION
        assert _schema(name)["$id"] == f"tb_profiler.{name}@{SCHEMA_VERSION}"
        schema = _schema(name)
        if name == "why":  # one trace's document: an item of the CLI's {"traces": [...]}
            schema = {**schema["properties"]["traces"]["items"], "$schema": schema["$schema"]}
        if name != "runs":  # the MCP runs tool lists workers and spans; the route lists names
            jsonschema.validate(doc, schema)
