"""Responses API items <-> the loop's transcript.

History (`previous_response_id`, conversations) is stored as items, the shape clients see; the
loop turns them back into a transcript here, so every surface continues a conversation the same
way. Results of caller-side tools (`function_call_output`) enter through the envelope like any
other tool result.
"""

from __future__ import annotations

from typing import Any

from toolwire.errors import InvalidRequestError
from toolwire.tools.envelope import render_envelope
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.wire.responses import new_id

_ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcpl",
    "mcp_approval_request": "mcpr",
    "mcp_approval_response": "mcpa",
}


def normalize_input(value: str | list[Any], param: str = "input") -> list[dict[str, Any]]:
    """Input as a string or items -> items with a `type` and an `id`, validated."""
    if isinstance(value, str):
        return [_message("user", [{"type": "input_text", "text": value}])]
    items: list[dict[str, Any]] = []
    for position, raw in enumerate(value):
        where = f"{param}[{position}]"
        if not isinstance(raw, dict):
            raise InvalidRequestError(f"{where} must be an object", param=where)
        item = dict(raw)
        kind = item.setdefault("type", "message")
        _check_type_and_id(item, where)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidRequestError(
                    f"{where}.role must be user, assistant, system or developer",
                    param=f"{where}.role",
                )
            item["content"] = _content_parts(item.get("content"), role, f"{where}.content")
            item.setdefault("status", "completed")
        elif kind == "function_call":
            _require_str(item, ("call_id", "name", "arguments"), where)
            item.setdefault("status", "completed")
        elif kind == "function_call_output":
            _require_str(item, ("call_id",), where)
            output = item.get("output")
            if not isinstance(output, str | list) or (
                isinstance(output, list) and not all(isinstance(part, dict) for part in output)
            ):
                raise InvalidRequestError(
                    f"{where}.output must be a string", param=f"{where}.output"
                )
            item.setdefault("status", "completed")
        elif kind == "mcp_approval_response":
            _require_str(item, ("approval_request_id",), where)
            if not isinstance(item.get("approve"), bool):
                raise InvalidRequestError(
                    f"{where}.approve must be a boolean", param=f"{where}.approve"
                )
        elif kind in ("mcp_call", "mcp_approval_request"):
            _require_str(item, ("name",), where)
            _optional_str(item, ("arguments", "output", "error", "server_label"), where)
        elif kind not in _ITEM_PREFIX:
            raise InvalidRequestError(
                f"{where}.type {kind!r} is not supported; supported: {', '.join(_ITEM_PREFIX)}",
                param=f"{where}.type",
            )
        item.setdefault("id", new_id(_ITEM_PREFIX.get(kind, "item")))
        items.append(item)
    return items


def _message(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": role,
        "content": content,
        "status": "completed",
    }


def _content_parts(content: Any, role: str, where: str) -> list[dict[str, Any]]:
    text_type = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        return [{"type": text_type, "text": content}]
    if not isinstance(content, list):
        raise InvalidRequestError(f"{where} must be a string or a list of parts", param=where)
    parts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            if not isinstance(part.get("text"), str):
                raise InvalidRequestError(
                    f"{where}[{index}].text must be a string", param=f"{where}[{index}].text"
                )
            parts.append({**part, "type": text_type if kind == "text" else kind})
        elif kind == "input_image" or kind == "refusal":
            parts.append(part)
        else:
            raise InvalidRequestError(
                f"{where}[{index}].type {kind!r} is not supported "
                "(input_text, output_text, input_image)",
                param=f"{where}[{index}].type",
            )
    return parts


def _check_type_and_id(item: dict[str, Any], where: str) -> None:
    """`type` is a string; `id`, when given (not null), is a non-empty string."""
    if not isinstance(item["type"], str):
        raise InvalidRequestError(f"{where}.type must be a string", param=f"{where}.type")
    if item.get("id") is None:
        item.pop("id", None)
    elif not isinstance(item["id"], str) or not item["id"]:
        raise InvalidRequestError(f"{where}.id must be a non-empty string", param=f"{where}.id")


def _optional_str(item: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if item.get(name) is not None and not isinstance(item[name], str):
            raise InvalidRequestError(f"{where}.{name} must be a string", param=f"{where}.{name}")


def _require_str(item: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if not isinstance(item.get(name), str):
            raise InvalidRequestError(f"{where}.{name} must be a string", param=f"{where}.{name}")


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in content if isinstance(p.get("text"), str))


def _user_content(content: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(p.get("type") in ("input_text", "output_text") for p in content):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "input_image":
            url = part.get("image_url") or part.get("file_id") or ""
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": url, "detail": part.get("detail", "auto")},
                }
            )
        elif isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    return parts


UNANSWERED_APPROVAL = (
    "not run: the call waited for approval and no decision for it was given (or its approval "
    "had already been used)"
)


def items_to_transcript(
    items: list[dict[str, Any]], answering: frozenset[str] = frozenset()
) -> Transcript:
    """Stored or input items -> the transcript the model sees.

    An `mcp_approval_request` becomes the call it asks about. Unless its id is in `answering`
    (the loop is about to run or deny it), it gets a result saying it did not run, so every
    call in the transcript has its result.
    """
    transcript: Transcript = []
    names: dict[str, str] = {}
    answered = {item.get("approval_request_id") for item in items if item.get("type") == "mcp_call"}

    def open_assistant() -> AssistantMessage:
        last = transcript[-1] if transcript else None
        if isinstance(last, AssistantMessage):
            return last
        message = AssistantMessage()
        transcript.append(message)
        return message

    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            content = item.get("content") or []
            if role == "assistant":
                message = open_assistant()
                if message.tool_calls:  # text after calls starts a new turn
                    message = AssistantMessage()
                    transcript.append(message)
                message.text += _text(content)
            elif role in ("system", "developer"):
                transcript.append(SystemMessage(_text(content)))
            else:
                transcript.append(UserMessage(_user_content(content)))
        elif kind == "function_call":
            if item.get("status") == "incomplete":
                continue  # streamed live, then found malformed: it never ran, nothing answers it
            call = call_from_item(item["call_id"], item["name"], item.get("arguments", ""))
            names[call.id] = call.name
            open_assistant().tool_calls.append(call)
        elif kind == "function_call_output":
            call_id = item["call_id"]
            name = names.get(call_id, "function")
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output or [])
            transcript.append(
                ToolMessage(call_id, name, render_envelope(name, ok=True, output=text))
            )
        elif kind == "mcp_approval_request":
            request_id = item["id"]
            if request_id in answered:
                continue  # its mcp_call item carries the call and its result
            call = call_from_item(request_id, item["name"], item.get("arguments", ""))
            open_assistant().tool_calls.append(call)
            if request_id not in answering:
                envelope = render_envelope(call.name, ok=False, error=UNANSWERED_APPROVAL)
                transcript.append(ToolMessage(call.id, call.name, envelope))
        elif kind == "mcp_call":
            call_id = item.get("approval_request_id") or item.get("id") or new_id("call")
            call = call_from_item(call_id, item["name"], item.get("arguments", ""))
            open_assistant().tool_calls.append(call)
            error = item.get("error")
            envelope = render_envelope(
                call.name, ok=not error, output=item.get("output") or "", error=error or ""
            )
            transcript.append(ToolMessage(call.id, call.name, envelope))
    return transcript


def call_from_item(call_id: str, name: str, arguments: str) -> ToolCall:
    import orjson

    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, None, arguments, "arguments are not a JSON object")
    return ToolCall(call_id, name, parsed, arguments)
