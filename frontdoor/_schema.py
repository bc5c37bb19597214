"""A small JSON Schema check for tool-call arguments: types, required keys, properties, items, enum.

It only says "invalid" when it is sure: keywords it does not know (`$ref`,
`pattern`, `format`, ...) are ignored, so a call a full validator accepts is
never flagged (tests compare it with `jsonschema` both ways on a table).
"""

from __future__ import annotations

__all__ = ["schema_problem"]


def _is(value, kind) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True  # a type this check does not know: not its call


def _same(a, b) -> bool:
    """JSON equality: true is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _kind(value) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        type(None): "null",
        int: "integer",
        float: "number",
    }.get(type(value), type(value).__name__)


def schema_problem(schema, value, path: str = "arguments") -> str | None:
    """Why `value` violates `schema`, or None when it does not (or this check cannot tell)."""
    if schema is False:
        return f"{path}: not allowed"
    if not isinstance(schema, dict) or "$ref" in schema:
        return None
    kinds = schema.get("type")
    if isinstance(kinds, (str, list)):
        wanted = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(value, k) for k in wanted):
            return f"{path}: expected {'/'.join(map(str, wanted))}, got {_kind(value)}"
    if isinstance(schema.get("enum"), list) and not any(_same(value, e) for e in schema["enum"]):
        return f"{path}: not one of the allowed values"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{path}: not the allowed value"
    for sub in schema.get("allOf") or ():
        if problem := schema_problem(sub, value, path):
            return problem
    for key in ("anyOf", "oneOf"):  # oneOf checked as anyOf: never flag what a full validator might accept
        options = schema.get(key)
        if isinstance(options, list) and options and all(schema_problem(s, value, path) for s in options):
            return f"{path}: matches none of {key}"
    if isinstance(value, dict):
        return _object_problem(schema, value, path)
    if isinstance(value, list) and isinstance(schema.get("items"), (dict, bool)):
        for i, item in enumerate(value):
            if problem := schema_problem(schema["items"], item, f"{path}[{i}]"):
                return problem
    return None


def _object_problem(schema: dict, value: dict, path: str) -> str | None:
    for key in schema.get("required") or ():
        if isinstance(key, str) and key not in value:
            return f"{path}: missing required key {key!r}"
    props = schema.get("properties")
    if not isinstance(props, dict):
        props = {}
    for key, sub in props.items():
        if key in value and (problem := schema_problem(sub, value[key], f"{path}.{key}")):
            return problem
    extra = schema.get("additionalProperties")
    if "patternProperties" in schema or extra is None or extra is True:
        return None
    for key in value.keys() - props.keys():
        if problem := schema_problem(extra, value[key], f"{path}.{key}"):
            return problem if extra is not False else f"{path}: unexpected key {key!r}"
    return None
