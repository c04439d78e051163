"""Filter OpenAI's OpenAPI document (github.com/openai/openai-openapi, MIT licence) down to the
operations toolwire serves, with the components they reference.

    python tests/fuzz/filter_openai_document.py openapi.json COMMIT > tests/data/openai-openapi-toolwire.json

With `--tool-schema`, instead: OpenAI's `Tool` schema and what it references, the JSON Schema
toolwire checks tool definitions carried by items against (`server/responses/prepare/validation/tool_schema.py`):

    python tests/fuzz/filter_openai_document.py --tool-schema openapi.json COMMIT \
        > src/toolwire/server/responses/prepare/validation/data/openai_tool_schema.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

SERVED = {
    "/responses": ["post"],
    "/responses/{response_id}": ["get", "delete"],
    "/responses/{response_id}/cancel": ["post"],
    "/responses/{response_id}/input_items": ["get"],
    "/conversations": ["post"],
    "/conversations/{conversation_id}": ["get", "post", "delete"],
    "/conversations/{conversation_id}/items": ["get", "post"],
    "/conversations/{conversation_id}/items/{item_id}": ["get", "delete"],
    "/chat/completions": ["post"],
    "/models": ["get"],
}


def refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/"):
            found.add(ref)
        for value in node.values():
            found |= refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= refs(value)
    return found


def filtered(document: dict[str, Any], commit: str) -> dict[str, Any]:
    paths = {
        path: {m: op for m, op in document["paths"][path].items() if m in methods}
        for path, methods in SERVED.items()
    }
    keep: set[str] = set()
    todo = refs(paths)
    while todo:
        ref = todo.pop()
        if ref in keep:
            continue
        keep.add(ref)
        _, _, kind, name = ref.split("/", 3)
        todo |= refs(document["components"][kind][name])
    components: dict[str, dict[str, Any]] = {}
    for ref in sorted(keep):
        _, _, kind, name = ref.split("/", 3)
        components.setdefault(kind, {})[name] = document["components"][kind][name]
    return {
        "openapi": document["openapi"],
        "info": {
            **document["info"],
            "x-source": f"https://github.com/openai/openai-openapi/blob/{commit}/openapi.json",
            "x-licence": "MIT, Copyright (c) OpenAI; filtered to the operations toolwire serves",
        },
        "servers": [{"url": "/v1"}],
        "paths": paths,
        "components": components,
    }


def tool_schema(document: dict[str, Any], commit: str) -> dict[str, Any]:
    """`Tool` and its references, as a JSON Schema whose `$ref`s resolve inside it."""
    schemas = document["components"]["schemas"]
    keep: set[str] = set()
    todo = {"#/components/schemas/Tool"}
    while todo:
        ref = todo.pop()
        if ref not in keep:
            keep.add(ref)
            todo |= refs(schemas[ref.rsplit("/", 1)[1]])
    names = sorted(ref.rsplit("/", 1)[1] for ref in keep)
    return {
        "$comment": (
            f"From https://github.com/openai/openai-openapi/blob/{commit}/openapi.json "
            "(MIT, Copyright (c) OpenAI): the Tool schema and what it references."
        ),
        "$ref": "#/components/schemas/Tool",
        "components": {"schemas": {name: schemas[name] for name in names}},
    }


if __name__ == "__main__":
    arguments = sys.argv[1:]
    build = filtered
    if arguments and arguments[0] == "--tool-schema":
        build = tool_schema
        arguments = arguments[1:]
    with open(arguments[0]) as source:
        print(json.dumps(build(json.load(source), arguments[1]), separators=(",", ":")))
