"""The bodies of the Conversations routes, validated at the edge. Unknown fields are ignored
(liberal in); the items themselves are checked by `normalize_input`, as Responses input is."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolwire.errors import InvalidRequestError
from toolwire.server.http.validation import validation_error

Metadata = dict[str, str]
M = TypeVar("M", bound=BaseModel)


def _metadata_limits(value: Metadata | None) -> Metadata | None:
    if value is not None:
        if len(value) > 16:
            raise ValueError("metadata may have at most 16 keys")
        for key, item in value.items():
            if len(key) > 64 or len(item) > 512:
                raise ValueError("metadata keys are at most 64 characters, values 512")
    return value


class CreateConversation(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, title="CreateConversationBody")
    metadata: Metadata | None = Field(default=None, description="At most 16 string pairs.")
    items: list[dict[str, Any]] | None = Field(default=None, description="Initial items.")

    _limits = field_validator("metadata")(_metadata_limits)


class UpdateConversation(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, title="UpdateConversationBody")
    metadata: Metadata

    _limits = field_validator("metadata")(_metadata_limits)


class AddItems(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, title="AddConversationItemsBody")
    items: list[dict[str, Any]]


def parse_body(model: type[M], body: Any) -> M:
    """`body` as `model`; a 400 naming the field when it does not fit."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        error = validation_error(exc)
        if error.param == "metadata" or (error.param or "").startswith("metadata."):
            raise InvalidRequestError(
                "metadata must map strings to strings (at most 16 keys)",
                param="metadata",
                code=error.code,
            ) from None
        raise error from None
