"""Chat-completions `messages` checked before they are lowered (`loop/chat_history.py`): every
400 a message can earn, in the order the messages come, naming the exact field."""

from __future__ import annotations

from typing import Any

from toolwire.errors import InvalidRequestError


def check_chat_messages(messages: Any) -> list[dict[str, object]]:
    """The request's `messages` (the client's JSON), checked: a non-empty list of objects, each
    with a known role, string-or-parts content, tool calls that are objects with a `function`,
    and a tool result's `tool_call_id` a string."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError("messages must be a non-empty list", param="messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InvalidRequestError(f"{where} must be an object", param=where)
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer", "function"):
            _check_text(content, where)
        elif role == "user":
            if not isinstance(content, str | list):
                raise InvalidRequestError(
                    f"{where}.content must be a string or a list of parts", param=f"{where}.content"
                )
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list | tuple | dict | str):
                raise InvalidRequestError(
                    f"{where}.tool_calls must be an array", param=f"{where}.tool_calls"
                )
            for n, call in enumerate(calls):
                if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                    at = f"{where}.tool_calls[{n}]"
                    raise InvalidRequestError(f"{at} must be an object with a function", param=at)
            _check_text(content, where)
        elif role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise InvalidRequestError(
                    f"{where}.tool_call_id must be a string", param=f"{where}.tool_call_id"
                )
            _check_text(content, where)
        else:
            raise InvalidRequestError(
                f"{where}.role must be system, developer, user, assistant or tool",
                param=f"{where}.role",
            )
    return messages


def _check_text(content: object, where: str) -> None:
    if content is not None and not isinstance(content, str | list):
        raise InvalidRequestError(
            f"{where}.content must be a string or a list of parts", param=f"{where}.content"
        )
