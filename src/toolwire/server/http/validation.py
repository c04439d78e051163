"""A pydantic `ValidationError` -> the 400 every door answers with: the first problem, its
parameter path as the API names it (`tools[0].type`), and OpenAI's error code for its kind."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from toolwire.errors import InvalidRequestError


def validation_error(exc: ValidationError) -> InvalidRequestError:
    first = exc.errors(include_url=False)[0]
    param = _param(first["loc"])
    if first["type"] == "extra_forbidden":
        return InvalidRequestError(
            f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter"
        )
    if first["type"] == "missing":
        return InvalidRequestError(
            f"Missing required parameter: '{param}'.",
            param=param,
            code="missing_required_parameter",
        )
    limit = (first.get("ctx") or {}).get("le")
    if first["type"] == "less_than_equal" and isinstance(first["input"], int) and limit is not None:
        return InvalidRequestError(  # OpenAI's words for an integer over its maximum
            f"Invalid '{param}': integer above maximum value. Expected a value <= {limit}, but "
            f"got {first['input']} instead.",
            param=param,
            code="integer_above_max_value",
        )
    return InvalidRequestError(
        f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value"
    )


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "dict", "list"})


def _param(loc: tuple[Any, ...]) -> str:
    """`("tools", 0, "dict[str,any]", "type")` -> `tools[0].type`: union tags dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier() and part not in _TYPE_TAGS:
            out += ("." if out else "") + part
    return out
