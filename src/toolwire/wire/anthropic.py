"""Anthropic's Messages API shapes (`/v1/messages`): pure data and codecs, no decisions.

The request is read by `server/messages/translate.py`; what is built here is what goes out: the
message object, the stream's named SSE events (`event: NAME` + `data: JSON`), and the error
body `{"type": "error", "error": {"type", "message"}}`. Shapes follow Anthropic's API
reference and the official SDK's types (`anthropic.types`).
"""

from __future__ import annotations

import secrets
from typing import Literal, TypedDict

import orjson

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn"]


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class ContentBlock(TypedDict, total=False):
    """A content block of the message (`text`, `thinking`, `redacted_thinking`, `tool_use`,
    `server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`)."""

    type: str
    text: str
    thinking: str
    signature: str
    data: str
    id: str
    name: str
    input: dict[str, object]
    """A tool call's arguments: arbitrary JSON."""
    citations: list[object] | None
    tool_use_id: str
    content: object
    """A server tool's result: a list of results, or an error / fetch object."""


class BlockDelta(TypedDict, total=False):
    type: str
    text: str
    thinking: str
    signature: str
    partial_json: str


class Message(TypedDict):
    id: str
    type: str
    role: str
    model: str
    content: list[ContentBlock]
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: Usage


class ErrorDetail(TypedDict):
    type: str
    message: str


class ErrorBody(TypedDict):
    type: str
    error: ErrorDetail


class MessageDelta(TypedDict):
    stop_reason: StopReason | None
    stop_sequence: str | None


class Event(TypedDict, total=False):
    """A stream event: `type` (also the SSE event's name), then the fields it carries."""

    type: str
    message: Message
    index: int
    content_block: ContentBlock
    delta: BlockDelta | MessageDelta
    usage: Usage
    error: ErrorDetail


#: Anthropic's error type for each HTTP status it uses; any other 4xx is an invalid request,
#: any other 5xx an `api_error`.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "invalid_request_error" if status < 500 else "api_error"


def error_body(status: int, message: str) -> ErrorBody:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def message_id() -> str:
    return "msg_" + secrets.token_hex(12)


def usage(input_tokens: int, output_tokens: int, cache_read: int = 0) -> Usage:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache_read,
    }


def message(
    msg_id: str,
    model: str,
    content: list[ContentBlock],
    stop_reason: StopReason | None,
    use: Usage,
    stop_sequence: str | None = None,
) -> Message:
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": use,
    }


# -- stream events ------------------------------------------------------------------------


def frame(payload: Event | ErrorBody) -> bytes:
    """One SSE event: Anthropic names each event after its `type`."""
    name = str(payload["type"]).encode()
    return b"event: " + name + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


PING = frame({"type": "ping"})
MESSAGE_STOP = frame({"type": "message_stop"})


def message_start(message_object: Message) -> bytes:
    return frame({"type": "message_start", "message": message_object})


def block_start(index: int, block: ContentBlock) -> bytes:
    return frame({"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: BlockDelta) -> bytes:
    return frame({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return frame({"type": "content_block_stop", "index": index})


def text_delta(index: int, text: str) -> bytes:
    return block_delta(index, {"type": "text_delta", "text": text})


def thinking_delta(index: int, text: str) -> bytes:
    return block_delta(index, {"type": "thinking_delta", "thinking": text})


def signature_delta(index: int, signature: str) -> bytes:
    return block_delta(index, {"type": "signature_delta", "signature": signature})


def input_json_delta(index: int, partial: str) -> bytes:
    return block_delta(index, {"type": "input_json_delta", "partial_json": partial})


def message_delta(
    stop_reason: StopReason | None, use: Usage, stop_sequence: str | None = None
) -> bytes:
    return frame(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": use,
        }
    )


def error_event(status: int, message_text: str) -> bytes:
    return frame(error_body(status, message_text))


class ModelInfo(TypedDict):
    type: str
    id: str
    display_name: str
    created_at: str


class ModelList(TypedDict):
    """`GET /v1/models` in Anthropic's shape."""

    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None
