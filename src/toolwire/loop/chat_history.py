"""Chat-completions messages (what agents send to `/v1/chat/completions`) -> the transcript.

The proxy surface hands the whole conversation in every request; this turns it into the loop's
transcript. Tool results and assistant arguments pass through untouched: the calling agent owns
them.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.errors import InvalidRequestError
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    raise InvalidRequestError(
        f"{where}.content must be a string or a list of parts", param=f"{where}.content"
    )


def chat_to_transcript(messages: Any) -> Transcript:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError("messages must be a non-empty list", param="messages")
    transcript: Transcript = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InvalidRequestError(f"{where} must be an object", param=where)
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            transcript.append(SystemMessage(_text(content, where)))
        elif role == "user":
            if not isinstance(content, str | list):
                raise InvalidRequestError(
                    f"{where}.content must be a string or a list of parts", param=f"{where}.content"
                )
            transcript.append(UserMessage(content))
        elif role == "assistant":
            calls = [
                _call(call, f"{where}.tool_calls[{n}]")
                for n, call in enumerate(message.get("tool_calls") or [])
            ]
            legacy = message.get("function_call")
            if isinstance(legacy, dict) and not calls:
                calls.append(
                    _call(
                        {"id": f"call_legacy_{index}", "function": legacy}, f"{where}.function_call"
                    )
                )
            # interleaved-thinking models need their reasoning back on tool-call turns
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            transcript.append(
                AssistantMessage(
                    _text(content, where),
                    calls,
                    reasoning if isinstance(reasoning, str) else "",
                )
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise InvalidRequestError(
                    f"{where}.tool_call_id must be a string", param=f"{where}.tool_call_id"
                )
            transcript.append(
                ToolMessage(call_id, message.get("name") or "", _text(content, where))
            )
        elif role == "function":
            name = message.get("name") or ""
            transcript.append(ToolMessage(f"call_legacy_{index - 1}", name, _text(content, where)))
        else:
            raise InvalidRequestError(
                f"{where}.role must be system, developer, user, assistant or tool",
                param=f"{where}.role",
            )
    return transcript


def _call(call: Any, where: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise InvalidRequestError(f"{where} must be an object with a function", param=where)
    function = call["function"]
    raw = function.get("arguments", "")
    if not isinstance(raw, str):
        raw = orjson.dumps(raw).decode()
    try:
        parsed = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        parsed = None
    arguments = parsed if isinstance(parsed, dict) else None
    return ToolCall(
        str(call.get("id") or ""),
        str(function.get("name") or ""),
        arguments,
        raw,
        None if arguments is not None else "arguments are not a JSON object",
    )
