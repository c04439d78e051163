"""Gemini's schemas -> JSON Schema, for the upstream and for the loop's argument checks.

Gemini takes a function's parameters (and a structured answer's shape) two ways: `parameters` /
`responseSchema`, in its OpenAPI-3.0 subset (`type` from the `Type` enum, upper case:
`OBJECT`, `STRING`...; `nullable`; `propertyOrdering`), and `parametersJsonSchema` /
`responseJsonSchema`, JSON Schema. Gemini itself reads upper-case type names in both (Gemini
CLI sends `"type": "OBJECT"` inside `responseJsonSchema`), while a chat-completions server's
guided decoding and the loop's validator read JSON Schema only. Each rewrite here has one
meaning: type names in lower case, `nullable: true` as a `"null"` type, Gemini-only keywords
(`propertyOrdering`, `example`) dropped, and the limits its `Schema` types int64 (`minItems`,
`maxLength`...) as numbers: the proto JSON mapping writes an int64 as a string (`"minItems":
"1"`, as Google's JS SDK types them), which JSON Schema refuses, so a tool declared so would go
unchecked. Hand-written: no library converts this dialect.
"""

from __future__ import annotations

from collections.abc import Mapping

_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
_DROPPED = frozenset({"propertyOrdering", "example", "nullable"})
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames")
_INT64 = frozenset(
    {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"}
)


def json_schema(schema: Mapping[str, object]) -> dict[str, object]:
    """`schema` (either dialect) as JSON Schema. Values that are not schemas where a schema is
    expected are kept as they are (the loop's validator reports them)."""
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key == "type":
            out[key] = _type(value)
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {
                name: json_schema(sub) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [json_schema(sub) if isinstance(sub, Mapping) else sub for sub in value]
        elif key in _SCHEMA_VALUES and isinstance(value, Mapping):
            out[key] = json_schema(value)
        elif key in _INT64 and isinstance(value, str) and value.isascii() and value.isdigit():
            out[key] = int(value)  # int64 in proto JSON: `"1"` means 1
        else:
            out[key] = value
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str) and kind != "null":
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        enum = out.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]
    if out.get("type") is None and "type" in out:
        del out["type"]  # TYPE_UNSPECIFIED: no constraint
    return out


def _type(value: object) -> object:
    if isinstance(value, str):
        if value.upper() == "TYPE_UNSPECIFIED":
            return None
        return value.lower() if value.upper() in _TYPES else value
    if isinstance(value, list):
        return [v.lower() if isinstance(v, str) and v.upper() in _TYPES else v for v in value]
    return value
