"""The published JSON schemas (docs/schemas/*.schema.json, issue 21) hold: today's answers of
every JSON route and every ``--json`` verb (tests/schema_docs.py, tests/schema_cli_docs.py:
the documents the schemas were made from, asked again of the current code) validate against
the committed files, so a field renamed, removed or retyped fails here until the schema's
version is raised and the file written again (docs/schemas/make_schemas.py). A route that is
neither asked there nor listed as answering no JSON (schema_docs.NOT_JSON) fails, and so
does a verb with --json and no schema: nothing new slips through unpublished. Other traces'
answers and the MCP tools' answers (which add schema / schema_version and the selection)
validate too."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import jsonschema
import pytest
from datafiles import H100_AFTER_FIX, TENSORLIST_OPS, V100_RUN, V100_RUN_W4
from schema_docs import CLI_SCHEMAS, NOT_JSON, collect, route_schema, schema_documents

import tb_profiler
from tb_profiler.cli.mcp import SCHEMA_VERSION, Answers
from tb_profiler.plugin import views
from tb_profiler.plugin.app import ROUTE_PARAMS

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.fixture(scope="module")
def collected(sample_logdir):
    return collect(sample_logdir)


@pytest.fixture(scope="module")
def docs(collected):
    return schema_documents(collected)


def test_every_schema_is_named_and_versioned(docs):
    files = sorted(p.name[:-len(".schema.json")] for p in SCHEMAS.glob("*.schema.json"))
    assert files == sorted(docs)
    for name in files:
        s = _schema(name)
        jsonschema.Draft202012Validator.check_schema(s)
        assert re.fullmatch(rf"tb_profiler\.{name}@\d+", s["$id"]), s["$id"]


def test_todays_answers_hold_to_the_published_schemas(docs):
    for name, answers in docs.items():
        assert answers, name
        schema = _schema(name)
        for doc in answers:
            jsonschema.validate(doc, schema)


def test_every_route_has_a_schema_or_says_why_not(collected):
    """Each route of the app is asked (its answers published under its schema) or listed in
    NOT_JSON with a reason, never both: a new route fails here until it is one or the other."""
    asked, listed = set(collected["routes"]), set(NOT_JSON)
    assert not asked & listed, asked & listed
    assert sorted(set(ROUTE_PARAMS) - asked - listed) == [], "routes with no schema and no reason"
    assert sorted((asked | listed) - set(ROUTE_PARAMS)) == [], "no such routes"
    for route in asked:
        assert (SCHEMAS / f"{route_schema(route)}.schema.json").is_file(), route
        assert all(collected["routes"][route]), route  # an empty answer would say nothing of its shape


def test_the_routes_without_a_schema_answer_no_json(collected):
    for route, (reason, _) in NOT_JSON.items():
        assert len(reason) > 20, route
        status, ctype = collected["not_json"][route]
        assert status == 200 and ctype and not ctype.startswith("application/json"), (route, status, ctype)


def _json_verbs() -> set[str]:
    """The CLI's verbs that take --json (read from its argument parser)."""
    from tb_profiler.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {verb for verb, p in sub.choices.items() if "--json" in p._option_string_actions}


def test_every_json_verb_has_its_schemas(collected):
    verbs = _json_verbs()
    assert {"runs", "info", "why", "diff", "snapshot"} <= verbs  # the parser is read right
    assert set(CLI_SCHEMAS) == verbs
    for verb, names in CLI_SCHEMAS.items():
        for name in names:
            assert collected["cli"].get(name), (verb, name)
            assert (SCHEMAS / f"{name}.schema.json").is_file(), (verb, name)


def test_a_map_keyed_by_data_and_a_deeper_tree_hold(docs):
    """The hints of make_schemas hold: another logdir's workers (status, runs --json) and a
    module tree deeper than the sample's validate; a node without its name does not."""
    status = json.loads(json.dumps(docs["status"][0]))
    run = status["runs"][0]
    run["workers"] = {"host-7:rank12": next(iter(run["workers"].values()))}
    jsonschema.validate(status, _schema("status"))
    tree = json.loads(json.dumps(next(d for d in docs["tree"] if d["nodes"])))
    node = tree["nodes"][0]
    leaf = node
    while leaf["children"]:
        leaf = leaf["children"][0]
    leaf["children"] = [json.loads(json.dumps(node))]  # the whole tree again, one level down
    jsonschema.validate(tree, _schema("tree"))
    del leaf["children"][0]["children"][0]["name"]
    with pytest.raises(jsonschema.ValidationError, match="name"):
        jsonschema.validate(tree, _schema("tree"))


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


def _evidence_steps(node: dict, where: tuple = ()):
    """(where, the step's schema) of every verdict's evidence object a schema holds."""
    for key, sub in node.get("properties", {}).items():
        if key == "evidence" and "step" in sub.get("properties", {}):
            yield where + (key,), sub["properties"]["step"]
        yield from _evidence_steps(sub, where + (key,))
    if isinstance(node.get("items"), dict):
        yield from _evidence_steps(node["items"], where + ("items",))


def test_every_verdicts_step_may_be_null():
    """The verdict names no step when its cost is one no event carries alone (diagnosis's
    _backing): wherever a schema holds the verdict's evidence, its step admits null, whatever
    the samples of one run held (a sample run whose largest cost was "Other" failed CI on the
    summary's copy of the verdict, which the samples had always filled)."""
    found = []
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        for where, step in _evidence_steps(json.loads(path.read_text())):
            found.append((path.name, where))
            assert "null" in step["type"] and "number" in step["type"], (path.name, where, step)
    assert {name for name, _ in found} >= {"overview.schema.json", "why.schema.json", "cli_summary.schema.json"}, found


def test_a_verdict_without_a_step_holds(docs):
    """An answer whose verdict names no step validates, in the overview and the summary."""
    for name in ("overview", "cli_summary"):
        for doc in docs[name]:
            doc = json.loads(json.dumps(doc))
            for one in doc.get("traces", [doc]):
                evidence = (one.get("overview") or one).get("diagnosis", {}).get("evidence")
                if evidence and "step" in evidence:
                    evidence["step"] = None
            jsonschema.validate(doc, _schema(name))
