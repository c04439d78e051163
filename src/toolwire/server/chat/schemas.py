"""The body of `POST /v1/chat/completions`, validated at the edge.

Forward compatibility (`server/http/compat.py`, docs/server.md): parameters toolwire does not
handle itself are kept and passed to the upstream as sent (`extra="allow"`), whatever their
value, so only the ones it reads are typed (and checked) here. The messages' own shape is checked
where they become a transcript (`loop/chat_history.py`), with the same `param` paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolwire.errors import InvalidRequestError
from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.http.compat import Ignored
from toolwire.server.http.validation import validation_error


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    include_usage: bool | None = None
    include_obfuscation: Ignored[bool] = None


class ChatMessage(BaseModel):
    """One message; its content and tool calls are checked where it becomes a transcript."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, title="CreateChatCompletionRequest")

    model: str | None = Field(
        default=None, description="Optional when the server has a default model."
    )
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    function_call: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    response_format: dict[str, Any] | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="Only 1 is supported.")


#: Token fields over `MAX_OUTPUT_TOKENS` keep pydantic's (OpenAI's) wording, naming the bound.
_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
#: Fields whose errors keep the wording the chat door had before it validated through a model.
_LEGACY = {
    "n": "only n=1 is supported",
    "max_tokens": "max_tokens must be a positive integer",
    "max_completion_tokens": "max_tokens must be a positive integer",
    "temperature": "temperature must be a number between 0 and 2",
    "top_p": "top_p must be a number between 0 and 1",
    "messages": "messages must be a non-empty list",
}


def check_chat_body(body: Any) -> dict[str, Any]:
    """The body, unchanged, once it fits `ChatCompletionRequest`; else a 400 naming the field."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    if _plainly_valid(body):
        return body
    try:
        ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        error = validation_error(exc)
        legacy = _LEGACY.get(error.param or "")
        over = error.code == "integer_above_max_value" and error.param in _TOKEN_FIELDS
        if legacy is not None and not over:
            param = "max_tokens" if error.param == "max_completion_tokens" else error.param
            raise InvalidRequestError(legacy, param=param, code="invalid_value") from None
        raise error from None
    return body


def _optional(kind: type) -> Callable[[Any], bool]:
    return lambda value: value is None or type(value) is kind


_optional_bool = _optional(bool)


def _optional_list_of_dicts(value: Any) -> bool:
    return value is None or (type(value) is list and all(type(entry) is dict for entry in value))


def _optional_str_or_dict(value: Any) -> bool:
    return value is None or type(value) is str or type(value) is dict


def _number_within(low: float, high: float) -> Callable[[Any], bool]:
    return lambda value: (
        value is None or ((type(value) is float or type(value) is int) and low <= value <= high)
    )


def _int_within(low: int, high: int) -> Callable[[Any], bool]:
    return lambda value: value is None or (type(value) is int and low <= value <= high)


def _stream_options(value: Any) -> bool:
    return value is None or (
        type(value) is dict
        and value.keys() <= {"include_usage"}
        and _optional_bool(value.get("include_usage"))  # by type: 1 == True
    )


def _messages(value: Any) -> bool:
    return (
        type(value) is list
        and len(value) > 0
        and all(
            type(message) is dict
            and type(message.get("role")) is str
            and _content(message.get("content"))
            for message in value
        )
    )


def _content(value: Any) -> bool:
    return value is None or type(value) is str or _optional_list_of_dicts(value)


#: For each typed field of `ChatCompletionRequest`, a check that accepts only values the model
#: plainly accepts (exact types, bounds): a body passing all of them is valid without building
#: the model (~15 µs of a proxied request); anything else, valid or not, is the model's to
#: judge, so no error and no verdict differs (a property test checks it never accepts what
#: the model refuses, and that every field of the model has its check here).
_PLAIN_CHECKS: dict[str, Callable[[Any], bool]] = {
    "model": _optional(str),
    "messages": _messages,
    "tools": _optional_list_of_dicts,
    "functions": _optional_list_of_dicts,
    "tool_choice": _optional_str_or_dict,
    "function_call": _optional_str_or_dict,
    "parallel_tool_calls": _optional_bool,
    "stream": _optional_bool,
    "stream_options": _stream_options,
    "temperature": _number_within(0, 2),
    "top_p": _number_within(0, 1),
    "max_tokens": _int_within(1, MAX_OUTPUT_TOKENS),
    "max_completion_tokens": _int_within(1, MAX_OUTPUT_TOKENS),
    "response_format": _optional(dict),
    "n": _int_within(1, 1),
}


def _plainly_valid(body: dict[str, Any]) -> bool:
    if "messages" not in body:
        return False
    checks = _PLAIN_CHECKS
    for name, value in body.items():
        check = checks.get(name)
        if check is not None and not check(value):
            return False
    return True
