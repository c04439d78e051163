"""Responses API items <-> the loop's transcript.

Items arrive here checked (`server/responses/prepare/validation/items.py` answers every 400 they can
earn): this module only says what becomes of each type and lowers them.

History (`previous_response_id`, conversations) is stored as items, the shape clients see; the
loop turns them back into a transcript here, so every surface continues a conversation the same
way. Results of caller-side tools (`function_call_output`) enter through the envelope like any
other tool result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import orjson

from toolwire.documents import DocumentError, decode_base64, is_pdf, pdf_data_url, pdf_text
from toolwire.loop.tool_types import ClientTools
from toolwire.tools.envelope import render_envelope
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.wire.chat import ChatPart
from toolwire.wire.items import ContentPart, Item, ToolOutput
from toolwire.wire.responses import new_id

ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcpl",
    "mcp_approval_request": "mcpr",
    "mcp_approval_response": "mcpa",
    "web_search_call": "ws",
    "file_search_call": "fs",
    "computer_call": "cu",
    "computer_call_output": "cuo",
    "local_shell_call": "lsh",
    "local_shell_call_output": "lsho",
    "shell_call": "sh",
    "shell_call_output": "sho",
    "apply_patch_call": "apc",
    "apply_patch_call_output": "apco",
    "image_generation_call": "ig",
    "code_interpreter_call": "ci",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
    "additional_tools": "at",
    "compaction": "cmp",
    "compaction_trigger": "cmpt",
    "program": "prg",
    "program_output": "prgo",
}
"""Every input item type of OpenAI's current API (`item_reference` is resolved before this)."""

CALL_ITEMS = {
    # call item type -> (the name the model sees it under, the field holding its arguments)
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": ("computer", "action"),
}
OUTPUT_ITEMS = {
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "computer_call_output",
}
_HOSTED = {
    # hosted calls OpenAI ran itself: (name, argument fields, result fields)
    "web_search_call": ("web_search", ("action",), ("results",)),
    "file_search_call": ("file_search", ("queries",), ("results",)),
    "code_interpreter_call": ("code_interpreter", ("code",), ("outputs",)),
    "image_generation_call": ("image_generation", (), ()),
    "tool_search_call": ("tool_search", ("arguments",), ()),
}
_DROPPED = {
    # kept in history and echoed, but nothing the model can read: opaque (encrypted) or
    # bookkeeping for tools toolwire does not run. A `compaction` item reaches this module
    # already expanded into the messages it stands for (`loop/compaction.py`).
    "compaction",
    "compaction_trigger",
    "mcp_list_tools",
    "additional_tools",
    "tool_search_output",
    "program",
    "program_output",
}

_CONSUMED = {
    # decisions, not history: `server/responses/prepare/validation/approvals.py` matches them to the
    # requests they answer
    "mcp_approval_response",
}
LOWERED = frozenset(
    {"message", "reasoning", "function_call", "custom_tool_call", "mcp_approval_request"}
    | {"mcp_call"}
    | set(CALL_ITEMS)
    | OUTPUT_ITEMS
    | set(_HOSTED)
)
"""Item types that become part of the transcript the model reads."""
KEPT = frozenset(_DROPPED | _CONSUMED)
"""Item types kept in history (and echoed) that the model does not read as such."""
RESOLVED = frozenset({"item_reference"})
"""Item types replaced by the item they name before anything else sees them."""


def disposition(kind: str) -> str | None:
    """What becomes of an accepted input item type: `lowered`, `kept` or `resolved`; None for
    a type that is refused. Every type `normalize_input` accepts has one (tested against
    OpenAI's `InputItem` schema), so no item is ever silently dropped."""
    if kind in LOWERED:
        return "lowered"
    if kind in KEPT:
        return "kept"
    if kind in RESOLVED:
        return "resolved"
    return None


IMAGE_NOT_SHOWN = "[image omitted: this model cannot see images]"


def _text(content: list[ContentPart]) -> str:
    return "".join(p.get("text", "") for p in content if isinstance(p.get("text"), str))


def _user_content(content: list[ContentPart]) -> str | list[ChatPart]:
    if all(p.get("type") in ("input_text", "output_text") for p in content):
        return _text(content)
    parts: list[ChatPart] = []
    for part in content:
        media = media_part(part)
        if media is not None:
            parts.append(media)
        elif isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    return parts


def file_text(data: str, name: str) -> str:
    """A file part's data as the text the model reads: a PDF (a base64 data URL, or base64
    with a PDF's header, as the Responses and chat APIs carry it) its text, page by page; any
    other file a one-line note."""
    try:
        pdf = pdf_data_url(data) if data.startswith("data:") else None
        if pdf is None and data and not data.startswith(("data:", "http://", "https://")):
            raw = decode_base64(data)
            pdf = raw if is_pdf(raw) else None
        if pdf is not None:
            return pdf_text(pdf, name)
    except DocumentError as exc:
        return f"[file {name} attached: {exc}]"
    return f"[file {name} attached: its content cannot be shown to this model]"


def media_part(part: ContentPart) -> ChatPart | None:
    """An image or file content part (Responses shape) as a chat-completions part: an image
    becomes an `image_url` part; a file that is an image too; any other file a one-line note,
    since chat-completions servers take no files."""
    kind = part.get("type")
    if kind == "input_image":
        url = part.get("image_url") or part.get("file_id") or ""
        return {
            "type": "image_url",
            "image_url": {"url": url, "detail": part.get("detail") or "auto"},
        }
    if kind == "input_file":
        data = part.get("file_data") or part.get("file_url") or ""
        name = part.get("filename") or part.get("file_id") or "file"
        if isinstance(data, str) and data.startswith("data:image/"):
            return {"type": "image_url", "image_url": {"url": data, "detail": "auto"}}
        return {"type": "text", "text": file_text(data if isinstance(data, str) else "", name)}
    if kind == "input_audio":
        return {"type": "text", "text": "[audio attached: it cannot be played to this model]"}
    return None


def _output_content(output: ToolOutput) -> tuple[str, list[ChatPart]]:
    """A tool output (text, or content parts) -> its text, and its images and files as
    chat-completions parts for the model to see after the result."""
    if isinstance(output, str):
        return output, []
    if not isinstance(output, dict | list):
        return "", []
    parts: list[object] = [output] if isinstance(output, dict) else list(output)
    texts: list[str] = []
    media: list[ChatPart] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        converted = media_part(cast(ContentPart, part))
        if converted is None:
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") in ("computer_screenshot",) and part.get("image_url"):
                media.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
            else:
                texts.append(orjson.dumps(part).decode())
        elif converted["type"] == "text":
            texts.append(converted["text"])
        else:
            media.append(converted)
    if media:
        texts.append(f"[{len(media)} image(s) returned: shown after this result]")
    return "\n".join(texts), media


UNANSWERED_APPROVAL = (
    "not run: the call waited for approval and no decision for it was given (or its approval "
    "had already been used)"
)


def items_to_transcript(
    items: list[Item],
    answering: frozenset[str] = frozenset(),
    tools: ClientTools | None = None,
) -> Transcript:
    """Stored or input items -> the transcript the model sees.

    An `mcp_approval_request` becomes the call it asks about. Unless its id is in `answering`
    (the loop is about to run or deny it), it gets a result saying it did not run, so every
    call in the transcript has its result. Calls of namespaced and `custom` tools go under the
    names the model is offered them by (`tools`). Calls of tools OpenAI ran (web search, file
    search, …) become a call and its result; opaque items (encrypted reasoning, compaction)
    are kept in history but are nothing the model can read.
    """
    transcript: Transcript = []
    names: dict[str, str] = {}
    declared = tools or ClientTools()
    answered = {item.get("approval_request_id") for item in items if item.get("type") == "mcp_call"}

    def open_assistant() -> AssistantMessage:
        last = transcript[-1] if transcript else None
        if isinstance(last, AssistantMessage):
            return last
        message = AssistantMessage()
        transcript.append(message)
        return message

    def add_call(call: ToolCall) -> None:
        names[call.id] = call.name
        open_assistant().tool_calls.append(call)

    def add_result(call_id: str, text: str, media: list[ChatPart], ok: bool = True) -> None:
        name = names.get(call_id, "function")
        envelope = render_envelope(name, ok=ok, output=text if ok else "", error="" if ok else text)
        transcript.append(ToolMessage(call_id, name, envelope, media))

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
        elif kind == "reasoning":
            text = reasoning_text(item)
            if text:
                message = open_assistant()
                if message.text or message.tool_calls:  # reasoning opens the next turn
                    message = AssistantMessage()
                    transcript.append(message)
                message.reasoning += text
        elif kind == "function_call":
            if item.get("status") == "incomplete":
                continue  # streamed live, then found malformed: it never ran, nothing answers it
            name = declared.model_name("function", item.get("namespace"), item["name"])
            add_call(call_from_item(item["call_id"], name, item.get("arguments", "")))
        elif kind == "custom_tool_call":
            name = declared.model_name("custom", item.get("namespace"), item["name"])
            freeform = {"input": item.get("input", "")}
            add_call(ToolCall(item["call_id"], name, freeform, orjson.dumps(freeform).decode()))
        elif kind in CALL_ITEMS:
            name, field_name = CALL_ITEMS[kind]
            arguments = cast(Mapping[str, object], item).get(field_name)
            add_call(_call_of(item["call_id"], name, arguments))
        elif kind in OUTPUT_ITEMS:
            call_id = item["call_id"]
            output = item.get("output")
            if kind == "shell_call_output" and isinstance(output, list):
                output = orjson.dumps(output).decode()
            text, media = _output_content(output)
            add_result(call_id, text, media, ok=item.get("status") != "failed")
        elif kind in _HOSTED:
            name, argument_fields, result_fields = _HOSTED[kind]
            call_id = item.get("id") or new_id("call")
            fields = cast(Mapping[str, object], item)  # the fields `_HOSTED` names, by name
            arguments = {f: fields[f] for f in argument_fields if fields.get(f) is not None}
            add_call(_call_of(call_id, name, arguments))
            results = {f: fields[f] for f in result_fields if fields.get(f) is not None}
            status = item.get("status") or "completed"
            text = orjson.dumps(results).decode() if results else f"{name} {status}"
            add_result(call_id, text, [], ok=status != "failed")
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
                call.name, ok=not error, output=str(item.get("output") or ""), error=error or ""
            )
            transcript.append(ToolMessage(call.id, call.name, envelope))
        elif kind not in KEPT and kind not in RESOLVED:
            # every accepted type is lowered or kept (`disposition`): one that is neither is a
            # bug here, never an item to lose quietly
            raise ValueError(f"no lowering for input item type {kind!r}")
    return transcript


def reasoning_text(item: Item) -> str:
    """A reasoning item's readable text: its `reasoning_text` content, else its summary
    (encrypted content is nothing the model reads back)."""
    fields: Mapping[str, object] = item
    for field_name, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = fields.get(field_name)
        if isinstance(parts, list):
            texts = [
                p["text"]
                for p in parts
                if isinstance(p, dict)
                and p.get("type") == part_type
                and isinstance(p.get("text"), str)
            ]
            if texts:
                return "\n".join(texts)
    return ""


def _call_of(call_id: str, name: str, arguments: Any) -> ToolCall:
    if isinstance(arguments, dict):
        return ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode())
    wrapped = {"value": arguments} if arguments is not None else {}
    return ToolCall(call_id, name, wrapped, orjson.dumps(wrapped).decode())


def call_from_item(call_id: str, name: str, arguments: str) -> ToolCall:
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, None, arguments, "arguments are not a JSON object")
    return ToolCall(call_id, name, parsed, arguments)
