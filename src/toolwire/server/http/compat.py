"""Forward compatibility: the one rule every door applies to request fields (docs/server.md,
"Forward compatibility").

Clients ship weekly and send fields and values ahead of the published schemas. A strict check
on a field toolwire does not act on turns each such release into an outage (Claude Code's
`thinking.display: "updates"` did). So:

- a field toolwire **does not act on** is accepted with any value, and any new sibling field
  beside it: `Ignored[T]` keeps a value of the documented shape (for the echo) and turns any
  other into None (the default), never a 400;
- a field toolwire **acts on** is checked: an unknown value is a 400 that names the field and
  the values it knows (`unknown_value`).

Each door declares which of its fields are which in one place (its request model or its
translator); the Gemini door follows the same rule with the same helpers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

from pydantic import (
    GetJsonSchemaHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from toolwire.errors import InvalidRequestError

T = TypeVar("T")


def _or_default(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        return None


class _AnyValueSchema:
    """In `/openapi.json` an ignored field takes any value, as it does on the wire (a document
    that listed only the documented type would promise a 400 toolwire never answers)."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "description": "Not acted on by toolwire: any value is accepted; a value of the "
            "type OpenAI or Anthropic documents is echoed where the API echoes it."
        }


Ignored = Annotated[T | None, WrapValidator(_or_default), _AnyValueSchema()]
"""A request field toolwire does not act on: a value of type `T` is kept (echoed where the API
echoes it), any other value means the default (None). Never a 400."""


def unknown_value(param: str, value: object, known: Iterable[str]) -> InvalidRequestError:
    """The 400 for an unknown value of a field toolwire acts on: names the field, the value
    (shortened) and every value toolwire knows."""
    shown = repr(value) if not isinstance(value, str) else repr(value[:100])
    values = ", ".join(known)
    return InvalidRequestError(
        f"{param}: unknown value {shown}; toolwire knows {values}",
        param=param,
        code="invalid_value",
    )


def known_value(param: str, value: object, known: tuple[str, ...]) -> str:
    """`value` when it is one of `known`, else `unknown_value`'s 400."""
    if isinstance(value, str) and value in known:
        return value
    raise unknown_value(param, value, known)
