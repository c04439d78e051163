"""Responses input items checked, once, before anything runs: every 400 an item can earn
(its type, its id, its fields' types, a reference to an item this history lacks, an output
answering no call) is raised here, in OpenAI's error shape, naming the exact field. What comes
out are `Item`s in the shape OpenAI returns them; `loop/items.py` lowers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from toolwire.errors import InvalidRequestError, NotFoundError
from toolwire.loop.items import CALL_ITEMS, ITEM_PREFIX, OUTPUT_ITEMS, disposition
from toolwire.server.responses.prepare.validation.tool_schema import check_tool_definition
from toolwire.wire.items import ContentPart, Item
from toolwire.wire.responses import new_id


def normalize_input(value: str | list[Any], param: str = "input") -> list[Item]:
    """Input as a string or items (the client's JSON) -> `Item`s with a `type` and an `id`,
    validated: what the checks below let through has the shape `Item` names."""
    if isinstance(value, str):
        return [_message("user", [{"type": "input_text", "text": value}])]
    items: list[Item] = []
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
        elif kind in OUTPUT_ITEMS:
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
        elif kind in CALL_ITEMS:
            _require_str(item, ("call_id",), where)
            _require_object(item, CALL_ITEMS[kind][1], where)
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
            items.append(cast(Item, item))
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
                f"{', '.join([*ITEM_PREFIX, 'item_reference'])}.",
                param=f"{where}.type",
                code="invalid_value",
            )
        item.setdefault("id", new_id(ITEM_PREFIX.get(kind, "item")))
        items.append(_as_resource(item))
    return items


def _as_resource(item: dict[str, object]) -> Item:
    """An input item in the shape OpenAI returns it: its document lets an input item leave out
    or null fields that the returned item (`ConversationItem`, `ItemResource`) must carry, so
    they are filled here, once, before the item is stored and echoed."""
    if item.get("status", "") is None:
        item["status"] = "completed"  # every item status enum has it
    for name in _NEVER_NULL_WHEN_RETURNED:
        if name in item and item[name] is None:
            del item[name]
    kind = str(item["type"])
    if kind in _CALL_RESOURCE_DEFAULTS:
        for name, value in _CALL_RESOURCE_DEFAULTS[kind].items():
            item.setdefault(name, value)
    action = item.get("action")
    if kind == "shell_call" and isinstance(action, dict):
        item["action"] = {"timeout_ms": None, "max_output_length": None, **action}
    return cast(Item, item)  # checked by `normalize_input`


# Optional in a returned item but, unlike in an input item, never null there.
_NEVER_NULL_WHEN_RETURNED = ("acknowledged_safety_checks", "name", "namespace")

# Fields the returned shape requires (nullable or with one sensible value) that the input
# shape of the same item may omit. `execution`: an item sent back as input without it came
# from the client's own history, so the client ran it.
_CALL_RESOURCE_DEFAULTS: dict[str, dict[str, object]] = {
    "shell_call": {"status": "completed", "environment": None},
    "computer_call": {"status": "completed", "pending_safety_checks": []},
    "computer_call_output": {"status": "completed"},
    "local_shell_call": {"status": "completed"},
    "tool_search_call": {"status": "completed", "call_id": None, "execution": "client"},
    "tool_search_output": {"status": "completed", "call_id": None, "execution": "client"},
    "shell_call_output": {"status": "completed", "max_output_length": None},
    "apply_patch_call_output": {"status": "completed"},
}


def resolve_references(items: list[Item], history: list[Item], param: str = "input") -> list[Item]:
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


def _message(role: str, content: list[ContentPart]) -> Item:
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": role,
        "content": content,
        "status": "completed",
    }


def _content_parts(content: Any, role: str, where: str) -> list[ContentPart]:
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


def _part_as_resource(part: Mapping[str, object]) -> ContentPart:
    """A content part as OpenAI returns it (see `_PART_NEVER_NULL`); an image's `detail`,
    optional on input, is always there (`auto`, the default)."""
    kept = {k: v for k, v in part.items() if not (v is None and k in _PART_NEVER_NULL)}
    if kept.get("type") == "input_image" and kept.get("detail") is None:
        kept["detail"] = "auto"
    return cast(ContentPart, kept)  # a part `_content_parts` checked


def _text_part(kind: str, text: str, given: Mapping[str, object] | None = None) -> ContentPart:
    """A text part as OpenAI returns it: an `output_text` always carries its `annotations` and
    `logprobs` lists (its input shape may leave them out)."""
    part = _part_as_resource({**(given or {}), "type": kind, "text": text})
    if kind == "output_text":
        if part.get("annotations") is None:
            part["annotations"] = []
        if part.get("logprobs") is None:
            part["logprobs"] = []
    return part


def _check_type_and_id(item: dict[str, object], where: str) -> None:
    """`type` is a string; `id`, when given (not null), is a non-empty string."""
    if not isinstance(item["type"], str):
        raise InvalidRequestError(f"{where}.type must be a string", param=f"{where}.type")
    if item.get("id") is None:
        item.pop("id", None)
    elif not isinstance(item["id"], str) or not item["id"]:
        raise InvalidRequestError(f"{where}.id must be a non-empty string", param=f"{where}.id")


def _optional_str(item: Mapping[str, object], fields: tuple[str, ...], where: str) -> None:
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


def _check_shell_action(action: Mapping[str, object], where: str) -> None:
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


def _require_object(item: Mapping[str, object], name: str, where: str) -> None:
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


def _require_str(item: Mapping[str, object], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if not isinstance(item.get(name), str):
            raise InvalidRequestError(f"{where}.{name} must be a string", param=f"{where}.{name}")


def check_outputs_answer_calls(history: list[Item], input_items: list[Item]) -> None:
    """400 for a tool output in the input that answers no call in the history or earlier in
    the input, as OpenAI refuses it ("No tool call found for function call output …"): the
    model would read a result of a call it never made. Skipped when the items hold a
    compaction, whose opaque window may hold the call."""
    if not any(item.get("type") in OUTPUT_ITEMS for item in input_items):
        return  # no output to answer a call: the history need not be walked
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
        elif kind in OUTPUT_ITEMS and item.get("call_id") not in calls:
            noun = kind.removesuffix("_output").replace("_", " ")
            raise InvalidRequestError(
                f"No tool call found for {noun} output with call_id {item.get('call_id')}.",
                param=f"input[{index}]",
            )


_CALL_TYPES = frozenset({"function_call", "custom_tool_call", *CALL_ITEMS})
