"""Lowering toolwire's transcript and tools into chat-completions request JSON."""

from __future__ import annotations

from typing import Any

from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Transcript,
    UserMessage,
)


def chat_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """Only the canonical fields per role: some servers (llama-cpp-python) reject any other."""
    messages: list[dict[str, Any]] = []
    for message in transcript:
        if isinstance(message, ToolMessage):
            messages.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )
        elif isinstance(message, AssistantMessage):
            # content is always a string: llama-cpp-python rejects null next to tool_calls
            out: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                out["tool_calls"] = [_call_json(call) for call in message.tool_calls]
            messages.append(out)
        elif isinstance(message, UserMessage):
            messages.append({"role": "user", "content": message.content})
        elif isinstance(message, SystemMessage):
            messages.append({"role": "system", "content": message.text})
    return messages


def call_arguments_text(call: ToolCall) -> str:
    """What to echo as the call's arguments.

    Text that was already valid JSON goes back byte for byte; recovered arguments go back as the
    object we understood; unrecoverable ones as `{}` (servers such as vLLM parse history
    arguments and would reject the request), the raw text being shown to the model in the
    error result instead.
    """
    return call.arguments_json() if call.ok else "{}"


def _call_json(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call_arguments_text(call)},
    }


def chat_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        if tool.strict is not None:
            function["strict"] = tool.strict
        out.append({"type": "function", "function": function})
    return out


def chat_tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    """Responses-style `{"type": "function", "name": f}` becomes the chat shape."""
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice
