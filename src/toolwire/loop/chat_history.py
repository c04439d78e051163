"""Chat-completions messages (what agents send to `/v1/chat/completions`) -> the transcript.

The proxy surface hands the whole conversation in every request; this turns it into the loop's
transcript. The messages arrive checked (`server/chat/validation.py` answers every 400). Tool
results and assistant arguments pass through untouched: the calling agent owns them.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.loop.items import file_text
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)


def _text(content: Any) -> str:
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
    return ""  # not reached: content was checked


def _user_content(content: Any) -> Any:
    """A user message's content as sent, but `file` parts: a chat-completions server reads
    none, so a PDF becomes its text and any other file a one-line note (`loop/items.py`)."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    if not any(isinstance(p, dict) and p.get("type") == "file" for p in content):
        return content
    parts: list[Any] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "file":
            file: dict[str, Any] = part["file"] if isinstance(part.get("file"), dict) else {}
            data = file.get("file_data")
            name = file.get("filename") or file.get("file_id") or "file"
            text = file_text(data if isinstance(data, str) else "", str(name))
            parts.append({"type": "text", "text": text})
        else:
            parts.append(part)
    return parts


def chat_to_transcript(messages: list[dict[str, Any]]) -> Transcript:
    """Checked messages (`server/chat/validation.py`) -> the transcript."""
    transcript: Transcript = []
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            transcript.append(SystemMessage(content if type(content) is str else _text(content)))
        elif role == "user":
            transcript.append(
                UserMessage(content if type(content) is str else _user_content(content))
            )
        elif role == "assistant":
            calls = [_call(call) for call in message.get("tool_calls") or []]
            legacy = message.get("function_call")
            if isinstance(legacy, dict) and not calls:
                calls.append(_call({"id": f"call_legacy_{index}", "function": legacy}))
            # interleaved-thinking models need their reasoning back on tool-call turns
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            transcript.append(
                AssistantMessage(
                    _text(content),
                    calls,
                    reasoning if isinstance(reasoning, str) else "",
                )
            )
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            transcript.append(ToolMessage(call_id, message.get("name") or "", _text(content)))
        elif role == "function":
            name = message.get("name") or ""
            transcript.append(ToolMessage(f"call_legacy_{index - 1}", name, _text(content)))
    return transcript


def _call(call: dict[str, Any]) -> ToolCall:
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
