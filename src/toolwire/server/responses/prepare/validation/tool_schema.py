"""Tool definitions carried by items (`additional_tools`, `tool_search_output`) checked against
OpenAI's own `Tool` schema.

The loop never offers these tools to the model, but it stores and returns them, so a definition
OpenAI would refuse must be refused here too (a 400 naming the field), not echoed back in a shape
no client can parse. The schema is OpenAI's (`data/openai_tool_schema.json`, MIT, made by
`tests/fuzz/filter_openai_document.py --tool-schema`) and is checked with `jsonschema`: fifty
nested definitions are not worth restating as pydantic models that would drift from it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from toolwire.errors import InvalidRequestError

if TYPE_CHECKING:  # imported when first needed: most requests carry no such items
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@cache
def _schema() -> dict[str, Any]:
    data = resources.files("toolwire.server.responses.prepare.validation").joinpath(
        "data/openai_tool_schema.json"
    )
    text = data.read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _branches() -> dict[str, Draft202012Validator]:
    """One validator per tool `type`: the `Tool` branch that declares it (a `oneOf` error
    would only say that no branch matched)."""
    from jsonschema import Draft202012Validator

    schema = _schema()
    definitions = schema["components"]["schemas"]
    out: dict[str, Draft202012Validator] = {}
    for branch in definitions["Tool"]["oneOf"]:
        name = branch["$ref"].rsplit("/", 1)[1]
        declared = definitions[name].get("properties", {}).get("type", {})
        types = declared.get("enum") or ([declared["const"]] if "const" in declared else [])
        for kind in types:
            out.setdefault(kind, Draft202012Validator({**schema, "$ref": branch["$ref"]}))
    return out


def check_tool_definition(tool: dict[str, Any], where: str) -> None:
    """Raise a 400 naming the first field of `tool` that OpenAI's `Tool` schema refuses."""
    from jsonschema.exceptions import best_match

    branches = _branches()
    validator = branches.get(tool.get("type"))  # type: ignore[arg-type]
    if validator is None:
        raise InvalidRequestError(
            f"Invalid value: {str(tool.get('type'))[:100]!r}. {where}.type must be one of: "
            f"{', '.join(sorted(branches))}.",
            param=f"{where}.type",
            code="invalid_value",
        )
    error = best_match(validator.iter_errors(tool))
    if error is None:
        return
    leaf = _leaf(error)
    path = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in leaf.absolute_path
    )
    raise InvalidRequestError(
        f"Invalid tool definition at {where}{path}: {leaf.message[:300]}",
        param=f"{where}{path}",
    )


def _leaf(error: ValidationError) -> ValidationError:
    """The most specific cause inside a `oneOf` / `anyOf`."""
    from jsonschema.exceptions import best_match

    while error.context:
        deeper = best_match(error.context)
        if deeper is None:
            break
        error = deeper
    return error
