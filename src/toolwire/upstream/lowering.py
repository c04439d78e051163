"""Lowering toolwire's transcript and tools into chat-completions request JSON."""

from __future__ import annotations

from typing import cast

from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Transcript,
    UserMessage,
)
from toolwire.wire.chat import ChatFunctionSpec, ChatMessage, ChatPart, ChatTool, ChatToolCall

IMAGE_NOT_SHOWN = "[image omitted: this model cannot see images]"


def chat_messages(
    transcript: Transcript, *, vision: bool = True, reasoning_field: str | None = None
) -> list[ChatMessage]:
    """Only the canonical fields per role: some servers (llama-cpp-python) reject any other.
    The one exception is an assistant turn's reasoning, under `reasoning_field` when given
    (`reasoning_content` for vLLM, SGLang and DeepSeek; `reasoning` for servers that write it
    there): interleaved-thinking models refuse a tool-call turn that comes back without it.

    Images a tool returned cannot ride on a `tool` message (most servers take only text
    there): for a vision upstream they follow the turn's results as one user message that
    names the calls; a text-only upstream (`vision=False`) reads a one-line note instead, as it
    does for images in user messages."""
    messages: list[ChatMessage] = []
    pending: list[ChatPart] = []  # images of the current run of tool messages

    def flush() -> None:
        if pending:
            messages.append({"role": "user", "content": list(pending)})
            pending.clear()

    for message in transcript:
        if not isinstance(message, ToolMessage):
            flush()
        if isinstance(message, ToolMessage):
            content = message.content
            images = [part for part in message.attachments if part.get("type") == "image_url"]
            if images and vision:
                pending.append(
                    {
                        "type": "text",
                        "text": f"Image(s) returned by the tool call {message.call_id} "
                        f"({message.name}):",
                    }
                )
                pending.extend(images)
            elif images:
                content += "\n" + "\n".join(IMAGE_NOT_SHOWN for _ in images)
            messages.append({"role": "tool", "tool_call_id": message.call_id, "content": content})
        elif isinstance(message, AssistantMessage):
            # content is always a string: llama-cpp-python rejects null next to tool_calls
            out: ChatMessage = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                out["tool_calls"] = [_call_json(call) for call in message.tool_calls]
            if reasoning_field and message.reasoning:
                # the field this upstream reads reasoning from: learned or configured, at run time
                cast(dict[str, object], out)[reasoning_field] = message.reasoning
            messages.append(out)
        elif isinstance(message, UserMessage):
            messages.append({"role": "user", "content": _user_parts(message.content, vision)})
        elif isinstance(message, SystemMessage):
            messages.append({"role": "system", "content": message.text})
    flush()
    return messages


def _user_parts(content: str | list[ChatPart], vision: bool) -> str | list[ChatPart]:
    if vision or isinstance(content, str):
        return content
    return [
        {"type": "text", "text": IMAGE_NOT_SHOWN} if part.get("type") == "image_url" else part
        for part in content
    ]


def call_arguments_text(call: ToolCall) -> str:
    """What to echo as the call's arguments.

    Text that was already valid JSON goes back byte for byte; recovered arguments go back as the
    object we understood; unrecoverable ones as `{}` (servers such as vLLM parse history
    arguments and would reject the request), the raw text being shown to the model in the
    error result instead.
    """
    return call.arguments_json() if call.ok else "{}"


def _call_json(call: ToolCall) -> ChatToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call_arguments_text(call)},
    }


def chat_tools(tools: list[ToolSpec], *, strict: bool = True) -> list[ChatTool]:
    """`strict`: pass each tool's `strict` flag on (the upstream enforces it:
    `upstream/strict.py`); False drops it, and the gateway's check enforces the schema."""
    out: list[ChatTool] = []
    for tool in tools:
        function: ChatFunctionSpec = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        if strict and tool.strict is not None:
            function["strict"] = tool.strict
        out.append({"type": "function", "function": function})
    return out


def chat_tool_choice(choice: str | dict[str, object] | None) -> str | dict[str, object] | None:
    """Responses-style `{"type": "function", "name": f}` becomes the chat shape (a choice is
    the client's JSON, checked at the door: `object` values)."""
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice
