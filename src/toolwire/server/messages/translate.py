"""A Messages request -> the loop's `LoopRequest`.

Hand-written rather than a pydantic model: Claude Code sends fields and block types ahead of the
published schema (`context_management`, `output_config`, `display`, `defer_loading`, `system`
messages inside `messages[]`), which must be tolerated, while what toolwire cannot do must be
refused by name with a 400 that says why. The door's forward-compatibility rule
(`server/http/compat.py`, docs/server.md) lives here: the fields in `IGNORED` (and any field not
read below) take any value; the fields read below are checked, an unknown value of one naming
the values known (`known_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire.documents import DocumentError, decode_base64, pdf_text
from toolwire.errors import InvalidRequestError
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.sealed import ReasoningSeal
from toolwire.server.http.compat import known_value, unknown_value
from toolwire.server.messages.server_tools import server_tool_history
from toolwire.tools.base import Tool
from toolwire.tools.web import FETCH, SEARCH, WebTools
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Transcript,
    UserMessage,
)
from toolwire.upstream.base import Sampling
from toolwire.upstream.model_map import map_model
from toolwire.wire.chat import ChatPart

BILLING_PREFIX = "x-anthropic-billing-header"
"""Claude Code's attribution block, first in `system` and different per version and entry
point: moved after the stable system text so the prompt's cacheable prefix stays the same."""

TIERS = ("opus", "sonnet", "haiku")

#: Anthropic's own tools (run on Anthropic's servers, or with schemas only Claude knows):
#: refused by name, since toolwire neither serves them on this door nor can describe them.
#: (`web_search_*` and `web_fetch_*` are served: `tools/web.py`.)
SERVER_TOOL_PREFIXES = (
    "code_execution_",
    "bash_",
    "text_editor_",
    "computer_",
    "memory_",
    "tool_search_tool_",
    "mcp_toolset",
)


IGNORED = (
    "metadata",
    "output_config",
    "context_management",
    "cache_control",
    "service_tier",
    "container",
    "inference_geo",
    "thinking.budget_tokens",
    "thinking.display",
)
"""Fields toolwire does not act on (or, for `thinking.display`, acts on one value of:
`omitted`; any other means the default): any value, any type, never a 400. Sent nowhere:
open servers have no common field for a thinking budget or an effort."""

THINKING_TYPES = ("enabled", "adaptive", "disabled")
USER_BLOCKS = ("text", "image", "document", "search_result", "tool_result")
ASSISTANT_BLOCKS = (
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
)
TOOL_CHOICES = ("auto", "any", "tool", "none")


@dataclass(slots=True, frozen=True)
class MessagesSettings:
    """How the door maps requested models, and what it knows of the upstream's window."""

    models: Mapping[str, str] = field(default_factory=dict)
    """Requested name (`claude-sonnet-4-5`) or tier (`opus`, `sonnet`, `haiku`, `default`) ->
    upstream model. Unmapped names go to the server's default model (`--model`)."""
    context_window: int | None = None
    """The upstream's context window in tokens: `max_tokens` is capped to what is left of it,
    and a prompt that does not fit is refused as Anthropic refuses one ("prompt is too long")."""
    web: WebTools = field(default_factory=WebTools)
    """What serves Anthropic's `web_search` / `web_fetch` server tools (`tools/web.py`)."""
    ping_interval: float = 10.0
    """Seconds without an event after which a stream sends `ping` (the model is slow to start,
    or a server-side tool runs), so proxies and clients do not take the quiet for a dead
    connection."""

    def upstream_model(self, requested: str, default: str | None) -> str:
        return map_model(requested, self.models, TIERS, default)


class ThinkingSeal(ReasoningSeal):
    """Signatures of `thinking` blocks (`sealed.py` `ReasoningSeal`): a block coming back in
    history is replayed to the upstream from its signature, so a forged or altered block (or
    one signed for another key, or by Anthropic) carries no reasoning: it is dropped, never
    replayed. With `display: "omitted"` the text is not shown, yet still goes back to the
    upstream."""

    def __init__(self, secret: bytes) -> None:
        super().__init__(secret, label=b"toolwire anthropic thinking v1")


@dataclass(slots=True)
class MessagesCall:
    request: LoopRequest
    model: str
    """The name the client asked for: echoed in the answer, as Anthropic does."""
    stream: bool
    show_thinking: bool
    """Whether upstream reasoning becomes `thinking` blocks (not with `thinking: disabled`)."""
    omit_thinking: bool
    """`display: "omitted"`: thinking blocks carry their signature but no text."""
    stop_sequences: list[str] = field(default_factory=list)
    web_tools: frozenset[str] = frozenset()
    """Anthropic server tools the request declared that toolwire serves (`web_search`,
    `web_fetch`): run inside the loop, shown as `server_tool_use` and result blocks."""


def _invalid(message: str, param: str | None = None) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{where}: expected an object", where)
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where}: expected a string", where)
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _invalid(f"{name}: must be a number between {low:g} and {high:g}", name)
    return float(value)


def translate(
    body: Any,
    *,
    settings: MessagesSettings,
    default_model: str | None,
    seal: ThinkingSeal,
    owner: str | None,
    server_tools: list[Tool],
    loop_settings: LoopSettings,
    counting: bool = False,
) -> MessagesCall:
    """`counting`: a `count_tokens` body (no `max_tokens`, nothing runs)."""
    body = _obj(body, "body")
    requested = body.get("model")
    if not isinstance(requested, str) or not requested:
        raise _invalid("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if not counting:
        if max_tokens is None:
            raise _invalid("max_tokens: Field required", "max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _invalid("max_tokens: must be an integer of at least 1", "max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("stream: must be a boolean", "stream")
    temperature = _number(body, "temperature", 0, 1)
    top_p = _number(body, "top_p", 0, 1)
    extra: dict[str, Any] = {}
    top_k = body.get("top_k")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise _invalid("top_k: must be a non-negative integer", "top_k")
        extra["top_k"] = top_k
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise _invalid("stop_sequences: must be a list of non-empty strings", "stop_sequences")
        if stops:
            extra["stop"] = list(stops)
    show, omit = _thinking(body.get("thinking"))  # IGNORED fields are never read
    system = _system(body.get("system"))
    transcript = _messages(body.get("messages"), seal, owner)
    specs, web = _tools(body.get("tools"), _referenced_tools(body["messages"]))
    tool_choice, parallel = _tool_choice(body.get("tool_choice"), specs)
    model = settings.upstream_model(requested, default_model)
    request = LoopRequest(
        model=model,
        input=system + transcript,
        tools=[*server_tools, *(settings.web.tool(name) for name in web)],
        client_tools=specs,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        sampling=Sampling(
            temperature=temperature,
            top_p=top_p,
            max_output_tokens=max_tokens,
            extra_body=extra or None,
        ),
        # Stream from the upstream only when the client streams (as the chat door does).
        settings=replace(loop_settings, stream=stream),
    )
    return MessagesCall(request, requested, stream, show, omit, list(stops or []), frozenset(web))


def _thinking(value: Any) -> tuple[bool, bool]:
    """(show reasoning, omit its text). Without `thinking`, reasoning an upstream produces
    anyway is shown: a model that needs its reasoning replayed gets it back only so. `type` is
    acted on (checked); `budget_tokens` is not, and `display` only for `omitted`: any other
    value (`summarized`, Claude Code's `updates`, whatever comes next) shows the reasoning."""
    if value is None:
        return True, False
    thinking = _obj(value, "thinking")
    kind = known_value("thinking.type", thinking.get("type"), THINKING_TYPES)
    if kind == "disabled":
        return False, False
    return True, thinking.get("display") == "omitted"


def _text_blocks(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _invalid(f"{where}: expected a string or a list of text blocks", where)
    texts = []
    for n, block in enumerate(value):
        block = _obj(block, f"{where}[{n}]")
        if block.get("type") != "text":
            raise _invalid(f"{where}[{n}].type: only text blocks are allowed here", where)
        texts.append(_string(block.get("text"), f"{where}[{n}].text"))
    return texts


def _system(value: Any) -> Transcript:
    if value is None:
        return []
    texts = _text_blocks(value, "system")
    billing = [t for t in texts if t.startswith(BILLING_PREFIX)]
    stable = [t for t in texts if not t.startswith(BILLING_PREFIX)]
    text = "\n\n".join([*stable, *billing])
    return [SystemMessage(text)] if text else []


def _messages(value: Any, seal: ThinkingSeal, owner: str | None) -> Transcript:
    if not isinstance(value, list) or not value:
        raise _invalid("messages: must be a non-empty list", "messages")
    transcript: Transcript = []
    names: dict[str, str] = {}  # tool_use id -> tool name, for the results that answer them
    for index, raw in enumerate(value):
        where = f"messages[{index}]"
        message = _obj(raw, where)
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _invalid(f"{where}.content: expected a string or a list of blocks", where)
        blocks = [_obj(b, f"{where}.content[{n}]") for n, b in enumerate(content)]
        if role == "user":
            transcript.extend(_user(blocks, where, names))
        elif role == "assistant":
            transcript.append(_assistant(blocks, where, names, seal, owner))
        elif role == "system":
            # Claude Code sends these mid-conversation; many chat templates accept a system
            # message only first, so the text joins the user turn it sits beside.
            text = "\n\n".join(_text_blocks(content, f"{where}.content"))
            last = transcript[-1] if transcript else None
            if isinstance(last, UserMessage):
                parts = _parts(last.content)
                parts.append({"type": "text", "text": text})
                last.content = parts
            else:
                transcript.append(UserMessage([{"type": "text", "text": text}]))
        else:
            raise _invalid(f"{where}.role: must be user, assistant or system", f"{where}.role")
    return transcript


def _parts(content: str | list[ChatPart]) -> list[ChatPart]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> Transcript:
    """Tool results first (each a tool message, as chat-completions servers expect right after
    the calls), then the rest of the turn as one user message."""
    results: Transcript = []
    parts: list[ChatPart] = []
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        kind = block.get("type")
        if kind == "tool_result":
            results.append(_tool_result(block, at, names))
        else:
            parts.extend(_user_part(block, at))
    if parts:
        results.append(UserMessage(parts))
    return results


def _user_part(block: dict[str, Any], at: str) -> list[ChatPart]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text", "text": _string(block.get("text"), f"{at}.text")}]
    if kind == "image":
        return [{"type": "image_url", "image_url": {"url": _image_url(block, at)}}]
    if kind == "document":
        return [{"type": "text", "text": _document_text(block, at)}]
    if kind == "search_result":  # a client-supplied search result: its text, with its source
        texts = _text_blocks(block.get("content"), f"{at}.content")
        title, source = block.get("title"), block.get("source")
        head = f"[search result: {title} <{source}>]\n" if title or source else ""
        return [{"type": "text", "text": head + "\n".join(texts)}]
    if kind in ASSISTANT_BLOCKS:
        raise _invalid(f"{at}.type: {kind} blocks belong in assistant messages", f"{at}.type")
    raise unknown_value(f"{at}.type", kind, USER_BLOCKS)


def _image_url(block: dict[str, Any], at: str) -> str:
    source = _obj(block.get("source"), f"{at}.source")
    kind = source.get("type")
    if kind == "base64":
        media = _string(source.get("media_type"), f"{at}.source.media_type")
        if media not in ("image/jpeg", "image/png", "image/gif", "image/webp"):
            raise _invalid(
                f"{at}.source.media_type: must be image/jpeg, image/png, image/gif or image/webp",
                f"{at}.source.media_type",
            )
        return f"data:{media};base64,{_string(source.get('data'), f'{at}.source.data')}"
    if kind == "url":
        url = _string(source.get("url"), f"{at}.source.url")
        if not url.startswith(("https://", "http://")):
            raise _invalid(f"{at}.source.url: must be an http(s) URL", f"{at}.source.url")
        return url
    raise _invalid(
        f"{at}.source.type: {kind!r} is not served here (base64 or url; toolwire has no Files API)",
        f"{at}.source.type",
    )


def _document_text(block: dict[str, Any], at: str) -> str:
    """Plain-text documents reach any upstream as text; a base64 PDF (what Claude Code's Read
    sends for a `.pdf`) as its text, page by page (`toolwire/documents.py`). toolwire fetches
    no document for a caller (`url`) and has no Files API (`file`): a 400 that says so."""
    source = _obj(block.get("source"), f"{at}.source")
    kind = source.get("type")
    title = block.get("title") if isinstance(block.get("title"), str) else None
    head = f"[document: {title}]\n" if title else ""
    if kind == "text":
        return head + _string(source.get("data"), f"{at}.source.data")
    if kind == "content":
        return head + "\n".join(_text_blocks(source.get("content"), f"{at}.source.content"))
    if kind == "base64":
        data = _string(source.get("data"), f"{at}.source.data")
        try:
            return pdf_text(decode_base64(data), title)
        except DocumentError as exc:
            raise _invalid(f"{at}: the document cannot be read: {exc}", f"{at}.source") from None
    if kind == "url":
        raise _invalid(
            f"{at}.source: toolwire does not fetch documents for a caller; send the PDF as "
            "base64 (source.type: base64)",
            f"{at}.source.type",
        )
    if kind == "file":
        raise _invalid(f"{at}.source: toolwire has no Files API", f"{at}.source.type")
    raise unknown_value(f"{at}.source.type", kind, ("base64", "text", "content", "url", "file"))


def _tool_result(block: dict[str, Any], at: str, names: dict[str, str]) -> ToolMessage:
    call_id = _string(block.get("tool_use_id"), f"{at}.tool_use_id")
    content = block.get("content")
    texts: list[str] = []
    images: list[ChatPart] = []
    if content is None:
        pass
    elif isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for n, part in enumerate(content):
            part = _obj(part, f"{at}.content[{n}]")
            if part.get("type") == "image":
                url = _image_url(part, f"{at}.content[{n}]")
                images.append({"type": "image_url", "image_url": {"url": url}})
            elif part.get("type") == "tool_reference":  # a tool search's answer (Claude Code)
                texts.append(f"[tool loaded: {part.get('tool_name')}]")
            else:
                texts.extend(p["text"] for p in _user_part(part, f"{at}.content[{n}]"))
    else:
        raise _invalid(f"{at}.content: expected a string or a list of blocks", f"{at}.content")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise _invalid(f"{at}.is_error: must be a boolean", f"{at}.is_error")
    text = "\n".join(texts)
    if is_error:
        text = "Error: " + text if text else "Error: the tool failed"
    return ToolMessage(call_id, names.get(call_id, ""), text, images)


def _assistant(
    blocks: list[dict[str, Any]],
    where: str,
    names: dict[str, str],
    seal: ThinkingSeal,
    owner: str | None,
) -> AssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(_string(block.get("text"), f"{at}.text"))
        elif kind == "tool_use":
            call_id = _string(block.get("id"), f"{at}.id")
            name = _string(block.get("name"), f"{at}.name")
            arguments = _obj(block.get("input"), f"{at}.input")
            names[call_id] = name
            calls.append(
                ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode(), index=n)
            )
        elif kind == "thinking":
            _string(block.get("thinking"), f"{at}.thinking")
            replayed = seal.open(block.get("signature"), owner)
            if replayed:  # a block toolwire did not sign for this key is dropped
                reasoning.append(replayed)
        elif kind == "redacted_thinking":
            _string(block.get("data"), f"{at}.data")  # never issued here: nothing to replay
        elif kind in ("server_tool_use", "web_search_tool_result", "web_fetch_tool_result"):
            texts.extend(server_tool_history(block))  # what toolwire's server tools answered
        else:
            raise unknown_value(f"{at}.type", kind, ASSISTANT_BLOCKS)
    return AssistantMessage("".join(texts), calls, "\n".join(reasoning))


def _referenced_tools(messages: list[Any]) -> frozenset[str]:
    """The tools a tool search loaded: a `tool_reference` block in a tool result names one
    (Claude Code's ToolSearch answers so, and keeps `defer_loading` on the tool it loaded)."""
    names: set[str] = set()
    for message in messages:
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            content = block.get("content") if block.get("type") == "tool_result" else None
            for part in content if isinstance(content, list) else ():
                if part.get("type") == "tool_reference" and isinstance(part.get("tool_name"), str):
                    names.add(part["tool_name"])
    return frozenset(names)


def _tools(value: Any, loaded: frozenset[str] = frozenset()) -> tuple[list[ToolSpec], list[str]]:
    """The client's tools, and the Anthropic server tools toolwire serves that it declared
    (`web_search_*`, `web_fetch_*`: run inside the loop by `tools/web.py`). A `defer_loading`
    tool is offered once a tool search loaded it (`loaded`), as Anthropic's API does."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        raise _invalid("tools: must be a list", "tools")
    specs: list[ToolSpec] = []
    web: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(value):
        at = f"tools[{n}]"
        tool = _obj(raw, at)
        kind = tool.get("type")
        name = tool.get("name")
        if isinstance(kind, str) and kind.startswith(("web_search_", "web_fetch_")):
            served = SEARCH if kind.startswith("web_search_") else FETCH
            if served not in web:
                web.append(served)  # max_uses, allowed_domains, ...: not acted on
            continue
        if kind not in (None, "custom"):
            label = kind if isinstance(kind, str) else repr(kind)
            served_elsewhere = any(label.startswith(p) for p in SERVER_TOOL_PREFIXES)
            raise _invalid(
                f"{at}: Anthropic's server tool {label!r} is not served by toolwire"
                if served_elsewhere
                else f"{at}.type: unknown tool type {label!r}; toolwire knows custom, "
                "web_search_* and web_fetch_*",
                f"{at}.type",
            )
        if not isinstance(name, str) or not name:
            raise _invalid(f"{at}.name: a non-empty string is required", f"{at}.name")
        if name in seen:
            raise _invalid(f"{at}.name: tool names must be unique ({name!r})", f"{at}.name")
        seen.add(name)
        schema = _obj(tool.get("input_schema"), f"{at}.input_schema")
        if tool.get("defer_loading") is True and name not in loaded:
            continue  # loaded later through the client's tool search: not offered yet
        description = tool.get("description")
        specs.append(
            ToolSpec(
                name,
                description if isinstance(description, str) else "",
                schema,
                tool.get("strict") if isinstance(tool.get("strict"), bool) else None,
            )
        )
    return specs, web


def _tool_choice(value: Any, specs: list[ToolSpec]) -> tuple[str | dict[str, Any] | None, Any]:
    if value is None:
        return None, None
    choice = _obj(value, "tool_choice")
    kind = known_value("tool_choice.type", choice.get("type"), TOOL_CHOICES)
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise _invalid(
            "tool_choice.disable_parallel_tool_use: must be a boolean",
            "tool_choice.disable_parallel_tool_use",
        )
    parallel = False if disable else None
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", None
    if kind == "tool":
        name = _string(choice.get("name"), "tool_choice.name")
        if name not in {spec.name for spec in specs}:
            raise _invalid(f"tool_choice.name: no tool named {name!r} in tools", "tool_choice")
        return {"type": "function", "name": name}, parallel
    raise unknown_value("tool_choice.type", kind, TOOL_CHOICES)  # not reached
