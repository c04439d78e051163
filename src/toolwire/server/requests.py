"""The body of `POST /v1/responses`, validated at the edge: wrong types and out-of-range values
become 400s naming the field; unknown parameters are refused, as OpenAI does."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolwire.errors import InvalidRequestError


class TextFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_schema", "json_object"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None
    description: str | None = None


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: TextFormat = Field(default_factory=TextFormat)
    verbosity: Literal["low", "medium", "high"] | None = None


class CreateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    input: str | list[Any]
    instructions: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, str] | None = None
    store: bool = True
    stream: bool = False
    background: bool = False
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    text: TextConfig | None = None
    reasoning: dict[str, Any] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    stream_options: dict[str, Any] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            if len(value) > 16:
                raise ValueError("at most 16 metadata keys")
            for key, item in value.items():
                if len(key) > 64 or len(item) > 512:
                    raise ValueError("metadata keys are at most 64 characters, values 512")
        return value

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, dict):
            value = self.conversation.get("id")
            return value if isinstance(value, str) else None
        return self.conversation


def parse_create(body: Any) -> CreateResponse:
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        request = CreateResponse.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if request.previous_response_id and request.conversation is not None:
        raise InvalidRequestError(
            "previous_response_id and conversation cannot be used together",
            param="previous_response_id",
            code="mutually_exclusive_parameters",
        )
    if request.background and not request.store:
        raise InvalidRequestError("background responses need store: true", param="background")
    return request


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
