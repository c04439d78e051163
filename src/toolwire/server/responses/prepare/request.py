"""The body of `POST /v1/responses`, validated at the edge: wrong types and out-of-range values
of the fields toolwire acts on become 400s naming the field.

Forward compatibility (`server/http/compat.py`, docs/server.md): the fields toolwire does not
act on are `Ignored[...]` (any value; one of the documented shape is echoed, any other means
the default), and a field OpenAI adds later is accepted and ignored. Every parameter of OpenAI's
published `CreateResponse` is accepted (docs/server.md says, per field, what toolwire does with
it). A few
sampling parameters that OpenAI's API lacks but open model servers take (`top_k`, `min_p`,
`repetition_penalty`, `seed`, …) pass through to the upstream untouched."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from toolwire.errors import InvalidRequestError
from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.http.compat import Ignored
from toolwire.server.http.validation import validation_error


class TextFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_schema", "json_object"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: StrictBool | None = None
    description: str | None = None


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    format: TextFormat = Field(default_factory=TextFormat)
    verbosity: Ignored[Literal["low", "medium", "high"]] = None


class ContextManagement(BaseModel):
    """One `context_management` entry: `compaction`, with the prompt size (tokens) past which
    the run compacts its transcript (null: only when the upstream reports its context full)."""

    model_config = ConfigDict(extra="allow")
    type: str
    compact_threshold: StrictInt | None = Field(default=None, ge=1000)


IGNORED_FIELDS = (
    "reasoning",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "prompt",
    "service_tier",
    "truncation",
    "stream_options",
    "top_logprobs",
    "moderation",
    "client_metadata",
    "text.verbosity",
)
"""`CreateResponse` fields toolwire does not act on (docs/server.md, "Request fields, one by
one"): any value is accepted; `reasoning.summary` adds summary parts whatever its value."""

SAMPLING_EXTRAS = (
    "top_k",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "stop",
    "logit_bias",
    "min_tokens",
)
"""Sampling parameters vLLM, SGLang and llama.cpp accept: passed to the upstream as given."""


class CreateResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a field OpenAI adds later: accepted, ignored

    model: str | None = None
    input: str | list[Any] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: StrictBool = True
    # OpenAI's minimum is 16 (`integer_below_min_value` below it)
    max_output_tokens: StrictInt | None = Field(default=None, le=MAX_OUTPUT_TOKENS)
    max_tool_calls: StrictInt | None = Field(default=None, ge=0)
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, str] | None = None
    store: StrictBool = True
    stream: StrictBool = False
    background: StrictBool = False
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    text: TextConfig | None = None
    include: list[str] | None = None
    context_management: list[ContextManagement] | None = Field(default=None, min_length=1)
    # -- not acted on (IGNORED_FIELDS): any value; echoed when of the documented shape
    reasoning: Ignored[dict[str, Any]] = None
    user: Ignored[str] = None
    safety_identifier: Ignored[Annotated[str, Field(max_length=64)]] = None
    prompt_cache_key: Ignored[str] = None
    prompt_cache_retention: Ignored[str] = None
    prompt_cache_options: Ignored[dict[str, Any]] = None
    prompt: Ignored[dict[str, Any]] = None
    service_tier: Ignored[str] = None
    truncation: Ignored[Literal["auto", "disabled"]] = None
    stream_options: Ignored[dict[str, Any]] = None
    top_logprobs: Ignored[Annotated[StrictInt, Field(ge=0, le=20)]] = None
    moderation: Ignored[dict[str, Any]] = None
    client_metadata: Ignored[
        dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=2048)]]
    ] = None
    """Not in the OpenAPI document, but OpenAI accepts it and Codex sends it: ignored, echoed
    within OpenAI's bounds (keys of 64 characters, values of 2048), dropped beyond them."""
    # pass-through sampling extras (SAMPLING_EXTRAS)
    top_k: StrictInt | None = None
    min_p: StrictFloat | None = None
    typical_p: StrictFloat | None = None
    repetition_penalty: StrictFloat | None = None
    presence_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    logit_bias: dict[str, StrictFloat] | None = None
    min_tokens: StrictInt | None = Field(default=None, ge=0)

    @field_validator("store", "stream", "background", "parallel_tool_calls", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        """OpenAI's schema allows null for these: it means the default."""
        if value is None:
            return cls.model_fields[info.field_name].default
        return value

    def sampling_extras(self) -> dict[str, Any]:
        fields = self.__dict__  # the validated values (`getattr` costs a class lookup each)
        return {name: value for name in SAMPLING_EXTRAS if (value := fields[name]) is not None}

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


_validate = CreateResponse.__pydantic_validator__.validate_python


def parse_create(body: Any) -> CreateResponse:
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        # the model's validator itself (`model_validate` is a Python wrapper around it)
        request: CreateResponse = _validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if request.previous_response_id and request.conversation is not None:
        raise InvalidRequestError(
            "previous_response_id and conversation cannot be used together",
            param="previous_response_id",
            code="mutually_exclusive_parameters",
        )
    for index, entry in enumerate(request.context_management or []):
        if entry.type != "compaction":
            raise InvalidRequestError(
                f"Invalid value: '{entry.type}'. Supported values are: 'compaction'.",
                param=f"context_management[{index}].type",
                code="invalid_value",
            )
    if isinstance(request.conversation, dict) and not isinstance(
        request.conversation.get("id"), str
    ):
        raise InvalidRequestError(
            "Missing required parameter: 'conversation.id'.",
            param="conversation.id",
            code="missing_required_parameter",
        )
    if request.background and not request.store:
        raise InvalidRequestError("background responses need store: true", param="background")
    if request.max_output_tokens is not None and request.max_output_tokens < 16:
        raise InvalidRequestError(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
            f"but got {request.max_output_tokens} instead.",
            param="max_output_tokens",
            code="integer_below_min_value",
        )
    return request
