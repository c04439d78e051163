"""The Messages door in `/openapi.json`: its request bodies, answers and error, as models.

They describe what `translate.py` accepts (which checks each field by hand, so that what Claude
Code sends ahead of the published schema is tolerated): open where the door is open (content
blocks, `thinking`, `metadata`, extra fields), bounded where it refuses (`max_tokens`,
`temperature`, `top_p`, `top_k`, roles, `tool_choice`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.http.openapi import API, ApiSpec, Operation


class ContentBlockParam(BaseModel):
    """A content block: `text`, `image` (base64 or URL), `document` (text, or a PDF: its text),
    `tool_use`, `tool_result` (string or blocks, `is_error`), `thinking`, `redacted_thinking`.
    `cache_control` is accepted on any of them."""

    model_config = ConfigDict(extra="allow", title="AnthropicContentBlockParam")
    type: str


class MessageParam(BaseModel):
    model_config = ConfigDict(extra="allow", title="AnthropicMessageParam")
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlockParam]


class TextBlockParam(BaseModel):
    model_config = ConfigDict(extra="allow", title="AnthropicTextBlockParam")
    type: Literal["text"]
    text: str


class ToolParam(BaseModel):
    """A custom tool (`type` absent or `custom`); `defer_loading` tools are not offered to the
    model until loaded. Anthropic's server tools (`web_search_...`) are refused by name."""

    model_config = ConfigDict(extra="allow", title="AnthropicToolParam")
    name: str = Field(min_length=1)
    input_schema: dict[str, Any]
    description: str | None = None
    type: str | None = None
    defer_loading: bool | None = None


class ToolChoice(BaseModel):
    model_config = ConfigDict(extra="allow", title="AnthropicToolChoice")
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class CountTokensRequest(BaseModel):
    """`POST /v1/messages/count_tokens`: a Messages request without `max_tokens`."""

    model_config = ConfigDict(extra="allow", title="AnthropicCountTokensRequest")
    model: str = Field(min_length=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[TextBlockParam] | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoice | None = None
    thinking: dict[str, Any] | None = None


class MessagesRequest(CountTokensRequest):
    """`POST /v1/messages`. Fields toolwire does not act on (`metadata`, `output_config`,
    `context_management`, `cache_control`, `thinking.budget_tokens`, `thinking.display`,
    any field a later client adds) take any value: `translate.IGNORED`, docs/server.md
    "Forward compatibility"."""

    model_config = ConfigDict(extra="allow", title="AnthropicMessagesRequest")
    max_tokens: int = Field(ge=1, le=MAX_OUTPUT_TOKENS)
    stream: bool | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stop_sequences: list[str] | None = None
    metadata: Any = None


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow", title="AnthropicUsage")
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class MessageObject(BaseModel):
    """The assistant's message: `text`, `tool_use` (repaired `input`) and `thinking` (with
    a signature toolwire issued) blocks."""

    model_config = ConfigDict(extra="allow", title="AnthropicMessage")
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlockParam]
    stop_reason: (
        Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn"]
        | None
    )
    stop_sequence: str | None
    usage: Usage


class MessageStreamEvent(BaseModel):
    """One stream event (`event: TYPE` then `data: JSON`): `message_start`,
    `content_block_start` / `_delta` (`text_delta`, `input_json_delta`, `thinking_delta`,
    `signature_delta`) / `_stop`, `message_delta`, `message_stop`, `ping`, `error`."""

    model_config = ConfigDict(extra="allow", title="AnthropicMessageStreamEvent")
    type: Literal[
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    ]


class CountTokensResponse(BaseModel):
    """The prompt's tokens, by the counter compaction uses (the upstream's tokenizer where it
    has one)."""

    model_config = ConfigDict(extra="allow", title="AnthropicCountTokensResponse")
    input_tokens: int


class AnthropicErrorObject(BaseModel):
    model_config = ConfigDict(extra="allow", title="AnthropicErrorObject")
    type: Literal[
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    ]
    message: str


class AnthropicError(BaseModel):
    """Every error on the Messages door: `{"type": "error", "error": {type, message}}`."""

    model_config = ConfigDict(extra="allow", title="AnthropicError")
    type: Literal["error"]
    error: AnthropicErrorObject


class Root(BaseModel):
    model_config = ConfigDict(extra="allow", title="Root")
    status: Literal["ok"]


_ERRORS = (404, 422, 424, 429, 502, 504, 529)
OPERATIONS = (
    Operation(
        "post",
        "/v1/messages",
        "createMessage",
        "Anthropic Messages: run the tool loop (Claude Code's door)",
        "Anthropic",
        MessageObject,
        body=MessagesRequest,
        stream_event=MessageStreamEvent,
        errors=_ERRORS,
        error=AnthropicError,
        description=(
            "Anthropic's Messages API (also with `?beta=true`); keys as `x-api-key` or "
            '`Authorization: Bearer`. With `"stream": true` the answer is '
            "`text/event-stream`, one `event: TYPE` / `data: JSON` frame per event. Errors are "
            "Anthropic's shape. See docs/anthropic.md."
        ),
    ),
    Operation(
        "post",
        "/v1/messages/count_tokens",
        "countMessageTokens",
        "Anthropic Messages: count a request's input tokens",
        "Anthropic",
        CountTokensResponse,
        body=CountTokensRequest,
        errors=(429, 502, 504, 529),
        error=AnthropicError,
    ),
    Operation(
        "get", "/", "root", "Reachability (Claude Code's HEAD /)", "Server", Root, public=True
    ),
    Operation(
        "get",
        "/api/hello",
        "hello",
        "Reachability (Claude Code's HEAD /api/hello)",
        "Server",
        Root,
        public=True,
    ),
)


def register(spec: ApiSpec = API) -> None:
    """Register the door's operations (once per spec)."""
    spec.ensure(*OPERATIONS)
