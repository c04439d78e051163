"""OpenAI's published OpenAPI document (the filtered copy in tests/data) as a checker of what
toolwire answers: `violations(body, "post", "/responses")` lists every way a body breaks the
schema OpenAI documents for that operation.

`document()` applies `DEVIATIONS`, the places where the document contradicts itself or what
OpenAI's API answers, each with its reason; everything else is checked as published.
"""

from __future__ import annotations

import copy
import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

FILTERED = Path(__file__).parent / "data" / "openai-openapi-toolwire.json.gz"

_NULLABLE_STRING = {"anyOf": [{"type": "string"}, {"type": "null"}]}
_ERROR_RESPONSE = {
    "type": "object",
    "properties": {"error": {"$ref": "#/components/schemas/Error"}},
    "required": ["error"],
}


def _patch(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    # An empty page has no first or last item: OpenAI's list endpoints answer `null` there
    # (toolwire does the same), the document types both ids as plain strings.
    for name in ("ConversationItemList", "ResponseItemList"):
        for field in ("first_id", "last_id"):
            schemas[name]["properties"][field] = _NULLABLE_STRING
    # Errors: nine of OpenAI's operations document the body every error has,
    # `{"error": Error}` (`ErrorResponse`); a few 404s document the bare `Error` instead, which
    # no client parses and OpenAI does not send.
    schemas.setdefault("ErrorResponse", _ERROR_RESPONSE)
    for operations in document["paths"].values():
        for operation in operations.values():
            for status, answer in operation.get("responses", {}).items():
                content = answer.get("content", {}).get("application/json", {})
                if status.startswith("4") and content.get("schema", {}).get("$ref", "").endswith(
                    "/Error"
                ):
                    content["schema"] = {"$ref": "#/components/schemas/ErrorResponse"}


DEVIATIONS = (
    "ConversationItemList/ResponseItemList first_id, last_id: null on an empty page",
    "404 bodies: ErrorResponse ({'error': Error}), not the bare Error",
)


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(gzip.decompress(FILTERED.read_bytes()))
    _patch(document)
    return document


def document() -> dict[str, Any]:
    """The filtered document with `DEVIATIONS` applied (a copy: callers may change it)."""
    return copy.deepcopy(_document())


@cache
def _registry() -> Registry:
    resource = Resource(contents=_document(), specification=DRAFT202012)
    return Registry().with_resource("urn:openai", resource)


def _pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def violations(
    body: Any,
    method: str,
    path: str,
    status: int = 200,
    media: str = "application/json",
) -> list[str]:
    """Each violation as `where: message`, the deepest first (empty: the body conforms)."""
    ref = "urn:openai#/" + _pointer(
        "paths", path, method, "responses", str(status), "content", media, "schema"
    )
    validator = Draft202012Validator({"$ref": ref}, registry=_registry())
    found = []
    for error in validator.iter_errors(body):
        leaves = [error]
        while any(leaf.context for leaf in leaves):
            leaves = [child for leaf in leaves for child in (leaf.context or [leaf])]
        for leaf in leaves:
            where = "/".join(str(part) for part in leaf.absolute_path) or "(body)"
            found.append(f"{where}: {leaf.message[:200]}")
    return found
