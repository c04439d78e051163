"""Responses API items <-> the loop's transcript.

History (`previous_response_id`, conversations) is stored as items, the shape clients see; the
loop turns them back into a transcript here, so every surface continues a conversation the same
way. Results of caller-side tools (`function_call_output`) enter through the envelope like any
other tool result.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.errors import InvalidRequestError, NotFoundError
from toolwire.loop.tool_schema import check_tool_definition
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
from toolwire.wire.responses import new_id

_ITEM_PREFIX = {
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

_CALLS = {
    # call item type -> (the name the model sees it under, the field holding its arguments)
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": ("computer", "action"),
}
_OUTPUTS = {
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
    "reasoning",
    "compaction",
    "compaction_trigger",
    "mcp_list_tools",
    "additional_tools",
    "tool_search_output",
    "program",
    "program_output",
}

_CONSUMED = {
    # decisions, not history: `loop/approvals.py` matches them to the requests they answer
    "mcp_approval_response",
}
LOWERED = frozenset(
    {"message", "function_call", "custom_tool_call", "mcp_approval_request", "mcp_call"}
    | set(_CALLS)
    | _OUTPUTS
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
        if item.get("type") is None:
            item["type"] = "item_reference" if set(item) <= {"id", "type"} else "message"
        kind = item["type"]
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
        elif kind == "custom_tool_call":
            _require_str(item, ("call_id", "name", "input"), where)
        elif kind in _OUTPUTS:
            _require_str(item, ("call_id",), where)
            output = item.get("output")
            if (output is not None and not isinstance(output, str | list | dict)) or (
                isinstance(output, list) and not all(isinstance(part, dict) for part in output)
            ):
                raise InvalidRequestError(
                    f"{where}.output must be a string or a list of content parts",
                    param=f"{where}.output",
                )
            if kind in ("function_call_output", "custom_tool_call_output"):
                if not isinstance(output, str | list):
                    raise InvalidRequestError(
                        f"{where}.output must be a string or a list of content parts",
                        param=f"{where}.output",
                    )
                if isinstance(output, list):
                    item["output"] = [_part_as_resource(part) for part in output]
                item.setdefault("status", "completed")
            else:
                _check_call_output(kind, output, f"{where}.output")
        elif kind in _CALLS:
            _require_str(item, ("call_id",), where)
            _require_object(item, _CALLS[kind][1], where)
            if kind in ("shell_call", "local_shell_call"):
                _check_shell_action(item["action"], f"{where}.action")
        elif kind == "compaction":
            _require_str(item, ("encrypted_content",), where)
        elif kind == "mcp_approval_response":
            _require_str(item, ("approval_request_id",), where)
            if not isinstance(item.get("approve"), bool):
                raise InvalidRequestError(
                    f"{where}.approve must be a boolean", param=f"{where}.approve"
                )
        elif kind == "item_reference":
            _require_str(item, ("id",), where)
            items.append(item)
            continue
        elif kind in ("additional_tools", "tool_search_output"):
            _check_tool_list(item.get("tools"), f"{where}.tools")
        elif kind == "mcp_list_tools":
            _require_str(item, ("server_label",), where)
            _check_listed_tools(item.get("tools"), f"{where}.tools")
        elif kind in ("mcp_call", "mcp_approval_request"):
            _require_str(item, ("name",), where)
            _optional_str(item, ("arguments", "output", "error", "server_label"), where)
        elif disposition(kind) is None:
            raise InvalidRequestError(
                f"Invalid value: '{kind}'. {where}.type must be one of: "
                f"{', '.join([*_ITEM_PREFIX, 'item_reference'])}.",
                param=f"{where}.type",
                code="invalid_value",
            )
        item.setdefault("id", new_id(_ITEM_PREFIX.get(kind, "item")))
        items.append(_as_resource(item))
    return items


def _as_resource(item: dict[str, Any]) -> dict[str, Any]:
    """An input item in the shape OpenAI returns it: its document lets an input item leave out
    or null fields that the returned item (`ConversationItem`, `ItemResource`) must carry, so
    they are filled here, once, before the item is stored and echoed."""
    if item.get("status", "") is None:
        item["status"] = "completed"  # every item status enum has it
    for name in _NEVER_NULL_WHEN_RETURNED:
        if name in item and item[name] is None:
            del item[name]
    kind = item["type"]
    if kind in _CALL_RESOURCE_DEFAULTS:
        for name, value in _CALL_RESOURCE_DEFAULTS[kind].items():
            item.setdefault(name, value)
    if kind == "shell_call" and isinstance(item.get("action"), dict):
        item["action"] = {"timeout_ms": None, "max_output_length": None, **item["action"]}
    return item


# Optional in a returned item but, unlike in an input item, never null there.
_NEVER_NULL_WHEN_RETURNED = ("acknowledged_safety_checks", "name", "namespace")

# Fields the returned shape requires (nullable or with one sensible value) that the input
# shape of the same item may omit. `execution`: an item sent back as input without it came
# from the client's own history, so the client ran it.
_CALL_RESOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    "shell_call": {"status": "completed", "environment": None},
    "computer_call": {"status": "completed", "pending_safety_checks": []},
    "computer_call_output": {"status": "completed"},
    "local_shell_call": {"status": "completed"},
    "tool_search_call": {"status": "completed", "call_id": None, "execution": "client"},
    "tool_search_output": {"status": "completed", "call_id": None, "execution": "client"},
    "shell_call_output": {"status": "completed", "max_output_length": None},
    "apply_patch_call_output": {"status": "completed"},
}


def resolve_references(
    items: list[dict[str, Any]], history: list[dict[str, Any]], param: str = "input"
) -> list[dict[str, Any]]:
    """`item_reference`s replaced by the items they name, looked up in the history this
    request continues (a previous response's or a conversation's items)."""
    if not any(item.get("type") == "item_reference" for item in items):
        return items
    known = {item.get("id"): item for item in history}
    out = []
    for position, item in enumerate(items):
        if item.get("type") != "item_reference":
            out.append(item)
            continue
        found = known.get(item["id"])
        if found is None:
            raise NotFoundError(
                f"Item with id '{item['id']}' not found.",
                param=f"{param}[{position}]",
            )
        out.append(found)
    return out


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
        return [_text_part(text_type, content)]
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
            parts.append(_text_part(text_type if kind == "text" else kind, part["text"], part))
        elif kind in ("input_image", "input_file", "input_audio", "refusal"):
            _optional_str(part, _PART_STRINGS, f"{where}[{index}]")
            parts.append(_part_as_resource(part))
        else:
            raise InvalidRequestError(
                f"{where}[{index}].type {kind!r} is not a content part type "
                "(input_text, output_text, input_image, input_file, input_audio, refusal)",
                param=f"{where}[{index}].type",
                code="invalid_value",
            )
    return parts


# Content part fields that are strings (or null) wherever they appear (found by schemathesis:
# a boolean `file_id` was stored and returned).
_PART_STRINGS = ("file_id", "image_url", "filename", "file_data", "file_url", "detail", "refusal")

# Content part fields that may be null in an input part but are left out, never null, in the
# part OpenAI returns (`InputFileContent`, `InputImageContent`, `InputTextContent`).
_PART_NEVER_NULL = ("filename", "file_data", "file_url", "prompt_cache_breakpoint")


def _part_as_resource(part: dict[str, Any]) -> dict[str, Any]:
    """A content part as OpenAI returns it (see `_PART_NEVER_NULL`); an image's `detail`,
    optional on input, is always there (`auto`, the default)."""
    part = {k: v for k, v in part.items() if not (v is None and k in _PART_NEVER_NULL)}
    if part.get("type") == "input_image" and part.get("detail") is None:
        part["detail"] = "auto"
    return part


def _text_part(kind: str, text: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """A text part as OpenAI returns it: an `output_text` always carries its `annotations` and
    `logprobs` lists (its input shape may leave them out)."""
    part = _part_as_resource({**(given or {}), "type": kind, "text": text})
    if kind == "output_text":
        for name in ("annotations", "logprobs"):
            if part.get(name) is None:
                part[name] = []
    return part


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


def _check_call_output(kind: str, output: Any, where: str) -> None:
    """The `output` of a built-in tool's call, in the one shape OpenAI takes for that tool."""
    if kind == "computer_call_output":
        if not isinstance(output, dict) or output.get("type") != "computer_screenshot":
            raise InvalidRequestError(
                f"{where} must be a computer_screenshot object", param=f"{where}.type"
            )
        _optional_str(output, ("image_url", "file_id"), where)
    elif kind == "local_shell_call_output" and not isinstance(output, str):
        raise InvalidRequestError(f"{where} must be a string", param=where)
    elif kind == "shell_call_output" and not isinstance(output, list):
        raise InvalidRequestError(f"{where} must be a list of output chunks", param=where)
    elif kind == "apply_patch_call_output" and not isinstance(output, str | None):
        raise InvalidRequestError(f"{where} must be a string", param=where)


def _check_shell_action(action: dict[str, Any], where: str) -> None:
    """A shell call's action as OpenAI types it: its command list of strings, its limits
    integers (found by schemathesis: a float `max_output_length` was stored and returned)."""
    for name in ("commands", "command"):
        commands = action.get(name)
        if commands is not None and (
            not isinstance(commands, list) or not all(isinstance(c, str) for c in commands)
        ):
            raise InvalidRequestError(
                f"{where}.{name} must be an array of strings", param=f"{where}.{name}"
            )
    for name in ("timeout_ms", "max_output_length"):
        value = action.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidRequestError(f"{where}.{name} must be an integer", param=f"{where}.{name}")


def _require_object(item: dict[str, Any], name: str, where: str) -> None:
    if not isinstance(item.get(name), dict):
        raise InvalidRequestError(f"{where}.{name} must be an object", param=f"{where}.{name}")


def _check_tool_list(tools: Any, where: str) -> None:
    """Tool definitions carried by an item: objects naming their `type`, each as OpenAI's `Tool`
    schema requires (the loop never offers them to the model, but stores and returns them)."""
    if not isinstance(tools, list):
        raise InvalidRequestError(f"{where} must be an array of tools", param=where)
    for position, tool in enumerate(tools):
        at = f"{where}[{position}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise InvalidRequestError(f"{at} must be a tool with a type", param=f"{at}.type")
        check_tool_definition(tool, at)


def _check_listed_tools(tools: Any, where: str) -> None:
    """`mcp_list_tools.tools`: each a `name`, an `input_schema` object and, when given, a
    `description` string and an `annotations` object, as OpenAI requires."""
    if not isinstance(tools, list):
        raise InvalidRequestError(f"{where} must be an array", param=where)
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequestError(f"{where}[{position}] must be an object", param=where)
        at = f"{where}[{position}]"
        _require_str(tool, ("name",), at)
        _optional_str(tool, ("description",), at)
        _require_object(tool, "input_schema", at)
        if tool.get("annotations") is not None:
            _require_object(tool, "annotations", at)


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
        media = media_part(part)
        if media is not None:
            parts.append(media)
        elif isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    return parts


def media_part(part: dict[str, Any]) -> dict[str, Any] | None:
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
        return {
            "type": "text",
            "text": f"[file {name} attached: its content cannot be shown to this model]",
        }
    if kind == "input_audio":
        return {"type": "text", "text": "[audio attached: it cannot be played to this model]"}
    return None


def _output_content(output: Any) -> tuple[str, list[dict[str, Any]]]:
    """A tool output (text, or content parts) -> its text, and its images and files as
    chat-completions parts for the model to see after the result."""
    if isinstance(output, str):
        return output, []
    if isinstance(output, dict):
        output = [output]
    if not isinstance(output, list):
        return "", []
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for part in output:
        if not isinstance(part, dict):
            continue
        converted = media_part(part)
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
    items: list[dict[str, Any]],
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

    def add_result(call_id: str, text: str, media: list[dict[str, Any]], ok: bool = True) -> None:
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
        elif kind == "function_call":
            if item.get("status") == "incomplete":
                continue  # streamed live, then found malformed: it never ran, nothing answers it
            name = declared.model_name("function", item.get("namespace"), item["name"])
            add_call(call_from_item(item["call_id"], name, item.get("arguments", "")))
        elif kind == "custom_tool_call":
            name = declared.model_name("custom", item.get("namespace"), item["name"])
            freeform = {"input": item.get("input", "")}
            add_call(ToolCall(item["call_id"], name, freeform, orjson.dumps(freeform).decode()))
        elif kind in _CALLS:
            name, field_name = _CALLS[kind]
            arguments = item.get(field_name)
            add_call(_call_of(item["call_id"], name, arguments))
        elif kind in _OUTPUTS:
            call_id = item["call_id"]
            output = item.get("output")
            if kind == "shell_call_output" and isinstance(output, list):
                output = orjson.dumps(output).decode()
            text, media = _output_content(output)
            add_result(call_id, text, media, ok=item.get("status") != "failed")
        elif kind in _HOSTED:
            name, argument_fields, result_fields = _HOSTED[kind]
            call_id = item.get("id") or new_id("call")
            arguments = {f: item[f] for f in argument_fields if item.get(f) is not None}
            add_call(_call_of(call_id, name, arguments))
            results = {f: item[f] for f in result_fields if item.get(f) is not None}
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
                call.name, ok=not error, output=item.get("output") or "", error=error or ""
            )
            transcript.append(ToolMessage(call.id, call.name, envelope))
        elif kind not in KEPT and kind not in RESOLVED:
            # every accepted type is lowered or kept (`disposition`): one that is neither is a
            # bug here, never an item to lose quietly
            raise ValueError(f"no lowering for input item type {kind!r}")
    return transcript


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


def check_outputs_answer_calls(
    history: list[dict[str, Any]], input_items: list[dict[str, Any]]
) -> None:
    """400 for a tool output in the input that answers no call in the history or earlier in
    the input, as OpenAI refuses it ("No tool call found for function call output …"): the
    model would read a result of a call it never made. Skipped when the items hold a
    compaction, whose opaque window may hold the call."""
    calls: set[str] = set()
    for item in history:
        kind = item.get("type")
        if kind == "compaction":
            return
        if kind in _CALL_TYPES and isinstance(item.get("call_id"), str):
            calls.add(item["call_id"])
    for index, item in enumerate(input_items):
        kind = item.get("type")
        if kind == "compaction":
            return
        if kind in _CALL_TYPES and isinstance(item.get("call_id"), str):
            calls.add(item["call_id"])
        elif kind in _OUTPUTS and item.get("call_id") not in calls:
            noun = kind.removesuffix("_output").replace("_", " ")
            raise InvalidRequestError(
                f"No tool call found for {noun} output with call_id {item.get('call_id')}.",
                param=f"input[{index}]",
            )


_CALL_TYPES = frozenset({"function_call", "custom_tool_call", *_CALLS})
