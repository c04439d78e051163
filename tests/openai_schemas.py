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

from jsonschema import Draft202012Validator, ValidationError
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
    # A `computer_call_output` may be sent `in_progress` (its input status is
    # `FunctionCallItemStatus`) but is never returned so (`ComputerCallOutputStatus`): what a
    # client sent is kept, so the returned status takes the input's values too.
    status = schemas["ComputerCallOutputStatus"]
    status["enum"] = [*status["enum"], "in_progress"]
    _map_discriminators(document, document)


def _branch_value(document: dict[str, Any], branch: dict[str, Any], name: str) -> str | None:
    """The one value a `oneOf` branch allows its discriminator property (`type`)."""
    schemas = document["components"]["schemas"]
    while "$ref" in branch:
        branch = schemas[branch["$ref"].rsplit("/", 1)[1]]
    for part in [branch, *branch.get("allOf", [])]:
        while "$ref" in part:
            part = schemas[part["$ref"].rsplit("/", 1)[1]]
        prop = part.get("properties", {}).get(name, {})
        values = prop.get("enum") or ([prop["const"]] if "const" in prop else [])
        if len(values) == 1 and isinstance(values[0], str):
            return values[0]
    return None


def _map_discriminators(document: dict[str, Any], node: Any) -> None:
    """A discriminator with no `mapping` means, by OpenAPI's rule, "the value is the schema's
    name" (`FunctionShellCall`), which no OpenAI object says (`shell_call`): each branch's own
    `type` value is made the mapping; where a branch has none, the discriminator is dropped
    (the `oneOf` still checks the value)."""
    if isinstance(node, dict):
        discriminator = node.get("discriminator")
        if isinstance(discriminator, dict) and "mapping" not in discriminator:
            branches = node.get("oneOf") or node.get("anyOf") or []
            name = discriminator["propertyName"]
            values = [_branch_value(document, branch, name) for branch in branches]
            if branches and all(values) and all("$ref" in branch for branch in branches):
                refs = [branch["$ref"] for branch in branches]
                discriminator["mapping"] = dict(zip(values, refs, strict=True))
            else:
                del node["discriminator"]
        for value in node.values():
            _map_discriminators(document, value)
    elif isinstance(node, list):
        for value in node:
            _map_discriminators(document, value)


DEVIATIONS = (
    "ConversationItemList/ResponseItemList first_id, last_id: null on an empty page",
    "404 bodies: ErrorResponse ({'error': Error}), not the bare Error",
    "computer_call_output status: in_progress, as its input allows",
    "discriminators without a mapping: each branch's own type value as the mapping",
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
        for leaf in _leaves(error):
            where = "/".join(str(part) for part in leaf.absolute_path) or "(body)"
            found.append(f"{where}: {leaf.message[:200]}")
    return found


def _leaves(error: ValidationError) -> list[ValidationError]:
    """The errors under a `oneOf`/`anyOf`, from the branches for the value's own `type` only
    (the others say just "wrong type"); the error itself when no branch is for that type."""
    if not error.context:
        return [error]
    branches: dict[Any, list[ValidationError]] = {}
    for child in error.context:
        branches.setdefault(child.schema_path[0], []).append(child)
    depth = len(error.absolute_path) + 1

    def other_type(children: list[ValidationError]) -> bool:
        return any(
            len(child.absolute_path) == depth
            and child.absolute_path[-1] == "type"
            and child.validator in ("enum", "const")
            for child in children
        )

    own = [children for children in branches.values() if not other_type(children)]
    if not own:
        return [error]
    return [leaf for children in own for child in children for leaf in _leaves(child)]
