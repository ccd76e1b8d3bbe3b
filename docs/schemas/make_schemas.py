#!/usr/bin/env python
"""Writes the published JSON schemas of tb_profiler's JSON documents (docs/schemas/*.schema.json).

    python docs/schemas/make_schemas.py        # from the repository root

Why inferred once and then committed: a schema is a contract scripts and agents rely on
(issue 21). It is made from real answers (the traces in tests/data and the sample runs),
checked in, and tests/test_schemas.py validates the answers of every test run against the
committed files, so renaming or removing a field, or changing its type, fails until the
schema's version is raised and the file written again. Adding a field is allowed
(additionalProperties stays open). Each schema's ``$id`` carries its name and version; the
MCP answers carry the same as ``schema`` / ``schema_version``.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERSION = 1

# integers are numbers: a figure that is whole in one trace is fractional in another
_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}


_FIELD = re.compile(r"[a-z][a-z0-9_]*")


def _is_map(keys) -> bool:
    """An object keyed by data (operator names, device ids, "Event Sync"), not by fields:
    any key that is not a snake_case field name. Its keys are not required; its values
    share one schema."""
    return any(not _FIELD.fullmatch(k) for k in keys)


def infer(doc) -> dict:
    """A JSON schema every value like ``doc`` satisfies: types, object properties (each
    present key required; merged over several documents, the keys present in all), list
    items (the union of the elements' schemas)."""
    if isinstance(doc, dict):
        if _is_map(doc):
            values = None
            for v in doc.values():
                values = infer(v) if values is None else merge(values, infer(v))
            return {"type": "object", **({"additionalProperties": values} if values is not None else {})}
        return {"type": "object", "properties": {k: infer(v) for k, v in doc.items()}, "required": sorted(doc)}
    if isinstance(doc, list):
        items = None
        for x in doc:
            items = infer(x) if items is None else merge(items, infer(x))
        return {"type": "array", **({"items": items} if items is not None else {})}
    return {"type": _TYPES[type(doc)]}


def _types(s: dict) -> set[str]:
    t = s.get("type", [])
    return set(t if isinstance(t, list) else [t])


def merge(a: dict, b: dict) -> dict:
    """The schema of values of either schema (properties merged, required: in both)."""
    if not a or not b:  # an unconstrained side (loosen's {}) stays unconstrained
        return {}
    types = _types(a) | _types(b)
    out: dict = {"type": sorted(types) if len(types) > 1 else next(iter(types))}
    if "object" in types and ("additionalProperties" in a or "additionalProperties" in b
                              or (_is_map({**a.get("properties", {}), **b.get("properties", {})}))):
        # a map on either side (or keys that make one together): values merged, nothing required
        values = [x for x in (a.get("additionalProperties"), b.get("additionalProperties"),
                              *a.get("properties", {}).values(), *b.get("properties", {}).values()) if x is not None]
        merged = None
        for v in values:
            merged = v if merged is None else merge(merged, v)
        if merged is not None:
            out["additionalProperties"] = merged
    elif "object" in types:
        pa, pb = a.get("properties", {}), b.get("properties", {})
        out["properties"] = {k: merge(pa[k], pb[k]) if k in pa and k in pb else (pa.get(k) or pb[k])
                             for k in {**pa, **pb}}
        ra = set(a["required"]) if "required" in a else None
        rb = set(b["required"]) if "required" in b else None
        req = ra & rb if ra is not None and rb is not None else (ra if ra is not None else rb)
        out["required"] = sorted(req or ())
    if "array" in types:
        ia, ib = a.get("items"), b.get("items")
        if ia and ib:
            out["items"] = merge(ia, ib)
        elif ia or ib:
            out["items"] = ia or ib
    return out


def loosen(s: dict) -> dict:
    """A value seen only as null says nothing of its type: any value is allowed there."""
    if _types(s) == {"null"}:
        return {}
    out = dict(s)
    if "properties" in out:
        out["properties"] = {k: loosen(v) for k, v in out["properties"].items()}
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = loosen(out["additionalProperties"])
    if "items" in out:
        out["items"] = loosen(out["items"])
    return out


# Where a document's keys depend on what was asked, only these are required: why's
# analyses follow --only (the MCP why tool asks for fewer), its path and verdict are always there.
REQUIRED_ONLY = {"why": (("traces", "items"), ["path", "verdict"])}

# Objects keyed by data whose keys look like field names ("worker0", "cpu_op"): _is_map
# cannot tell them from fields, so they are named here. Their values share one schema
# and no key is required (another logdir has other workers, another trace other categories).
MAPS: dict[str, list[tuple[str, ...]]] = {
    "status": [("runs", "items", "workers")],
    "cli_runs": [("runs", "items", "workers")],
    "cli_info": [("categories",), ("categories_as_written",)],
}


# Trees whose nodes hold their children under a key: one node schema ($defs/<name>), merged
# over every depth seen, its children that same schema ($ref), so a deeper tree than the
# samples' holds to it too. {schema: [(where the top nodes are, the children's key, name)]}.
RECURSIVE: dict[str, list[tuple[tuple[str, ...], str, str]]] = {
    "tree": [(("nodes", "items"), "children", "module_node"), (("calls", "items"), "children", "module_call")],
}

# Documents printed as one object for one input and as a list of them for several (`tb-profiler
# info FILE` / `info FOLDER`): one schema for the object, and the list's items are the same.
ONE_OR_LIST = {"cli_info"}


# Fields the samples always fill that another trace leaves null: the verdict's step (no
# event carries an "Other" cost, so no step is named), and where a trace sits in its run
# when its folder cannot be listed. {schema: [(the object, its field)]}
NULLABLE: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "overview": [(("diagnosis", "evidence"), "step")],
    "cli_summary": [(("traces", "items", "overview", "diagnosis", "evidence"), "step")],
    "why": [(("traces", "items", "verdict", "evidence"), f) for f in ("step", "run", "worker", "span", "link")],
}


def as_nullable(node: dict, field: str) -> None:
    """Lets an object's field (in place) be null as well as what the samples held."""
    prop = node["properties"][field]
    types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    prop["type"] = sorted(set(types) | {"null"})


def _at(schema: dict, where: tuple[str, ...]) -> dict:
    """The node of ``schema`` at ``where``: property names, and "items" for a list's elements."""
    node = schema
    for step in where:
        node = node["properties"][step] if step in node.get("properties", {}) else node[step]
    return node


def as_map(node: dict) -> None:
    """Makes an object's schema (in place) that of a map: its properties' schemas merged
    into additionalProperties, nothing required."""
    values = None
    for v in [*node.pop("properties", {}).values(), *([node["additionalProperties"]]
                                                      if "additionalProperties" in node else [])]:
        values = v if values is None else merge(values, v)
    node.pop("required", None)
    if values is not None:
        node["additionalProperties"] = values


def as_recursive(schema: dict, where: tuple[str, ...], key: str, ref: str) -> None:
    """Makes the node at ``where`` (in place) a $ref to $defs/<ref>: its schema and its
    descendants' (under ``key``) merged, whose ``key`` items refer to itself."""
    node = _at(schema, where)
    merged, level = None, node
    while level:
        props = dict(level.get("properties", {}))
        below = props.pop(key, {}).get("items")
        flat = {**level, "properties": props}
        merged = flat if merged is None else merge(merged, flat)
        level = below
    merged["properties"][key] = {"type": "array", "items": {"$ref": f"#/$defs/{ref}"}}
    schema.setdefault("$defs", {})[ref] = merged
    node.clear()
    node["$ref"] = f"#/$defs/{ref}"


def write(name: str, docs: list) -> Path:
    """Infers ``name``'s schema from ``docs`` (merged, loosened, the hints above applied)
    and writes docs/schemas/<name>.schema.json."""
    if name in ONE_OR_LIST:
        docs = [one for d in docs for one in (d if isinstance(d, list) else [d])]
    schema = None
    for d in docs:
        schema = infer(d) if schema is None else merge(schema, infer(d))
    for where in MAPS.get(name, ()):
        as_map(_at(schema, where))
    schema = loosen(schema)
    if name in REQUIRED_ONLY:
        where, keep = REQUIRED_ONLY[name]
        _at(schema, where)["required"] = keep
    for where, field in NULLABLE.get(name, ()):
        as_nullable(_at(schema, where), field)
    for where, key, ref in RECURSIVE.get(name, ()):
        as_recursive(schema, where, key, ref)
    if name in ONE_OR_LIST:
        schema = {**schema, "type": ["array", "object"], "items": dict(schema)}
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"tb_profiler.{name}@{VERSION}",
              "title": f"tb_profiler {name} (version {VERSION})", **schema}
    path = HERE / f"{name}.schema.json"
    path.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
    return path


def main() -> None:
    """Writes every schema from the answers tests/schema_docs.py gathers (a schema whose
    answers are gone stays on disk: tests/test_schemas.py fails until it is removed)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from schema_docs import documents  # the same answers tests/test_schemas.py validates

    for name, docs in sorted(documents().items()):
        print(write(name, docs))


if __name__ == "__main__":
    main()
