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

from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.http.compat import known_value, unknown_value
from toolwire.server.messages.fields import expect_object, expect_string, invalid
from toolwire.server.messages.history import ThinkingSeal, messages_transcript, system_transcript
from toolwire.tools.base import Tool
from toolwire.tools.web import FETCH, SEARCH, WebTools
from toolwire.transcript import (
    ToolSpec,
)
from toolwire.upstream.base import NO_HINTS, RoutingHints, Sampling
from toolwire.upstream.model_map import map_model

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


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise invalid(f"{name}: must be a number between {low:g} and {high:g}", name)
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
    session: str | None = None,
    routes: bool = False,
) -> MessagesCall:
    """`counting`: a `count_tokens` body (no `max_tokens`, nothing runs). `routes`: the
    upstream routes over several model servers: the request carries routing hints (the
    client's `session`, the server a signed thinking block came from)."""
    body = expect_object(body, "body")
    requested = body.get("model")
    if not isinstance(requested, str) or not requested:
        raise invalid("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if not counting:
        if max_tokens is None:
            raise invalid("max_tokens: Field required", "max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise invalid("max_tokens: must be an integer of at least 1", "max_tokens")
        if max_tokens > MAX_OUTPUT_TOKENS:
            raise invalid(
                f"max_tokens: must be at most {MAX_OUTPUT_TOKENS}, got {max_tokens}", "max_tokens"
            )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    temperature = _number(body, "temperature", 0, 1)
    top_p = _number(body, "top_p", 0, 1)
    extra: dict[str, Any] = {}
    top_k = body.get("top_k")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise invalid("top_k: must be a non-negative integer", "top_k")
        extra["top_k"] = top_k
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise invalid("stop_sequences: must be a list of non-empty strings", "stop_sequences")
        if stops:
            extra["stop"] = list(stops)
    show, omit = _thinking(body.get("thinking"))  # IGNORED fields are never read
    system = system_transcript(body.get("system"))
    served: list[str] = []  # the model servers of the signed thinking blocks, in order
    transcript = messages_transcript(body.get("messages"), seal, owner, served)
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
        # Stream from the upstream only when the client streams (as the chat door does); a
        # whole answer shows no call before its end (a fleet can replace a failed turn unseen).
        settings=replace(loop_settings, stream=stream, live_calls=stream),
        routing=RoutingHints(served[-1] if served else None, session) if routes else NO_HINTS,
    )
    return MessagesCall(request, requested, stream, show, omit, list(stops or []), frozenset(web))


def _thinking(value: Any) -> tuple[bool, bool]:
    """(show reasoning, omit its text). Without `thinking`, reasoning an upstream produces
    anyway is shown: a model that needs its reasoning replayed gets it back only so. `type` is
    acted on (checked); `budget_tokens` is not, and `display` only for `omitted`: any other
    value (`summarized`, Claude Code's `updates`, whatever comes next) shows the reasoning."""
    if value is None:
        return True, False
    thinking = expect_object(value, "thinking")
    kind = known_value("thinking.type", thinking.get("type"), THINKING_TYPES)
    if kind == "disabled":
        return False, False
    return True, thinking.get("display") == "omitted"


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
        raise invalid("tools: must be a list", "tools")
    specs: list[ToolSpec] = []
    web: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(value):
        at = f"tools[{n}]"
        tool = expect_object(raw, at)
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
            raise invalid(
                f"{at}: Anthropic's server tool {label!r} is not served by toolwire"
                if served_elsewhere
                else f"{at}.type: unknown tool type {label!r}; toolwire knows custom, "
                "web_search_* and web_fetch_*",
                f"{at}.type",
            )
        if not isinstance(name, str) or not name:
            raise invalid(f"{at}.name: a non-empty string is required", f"{at}.name")
        if name in seen:
            raise invalid(f"{at}.name: tool names must be unique ({name!r})", f"{at}.name")
        seen.add(name)
        schema = expect_object(tool.get("input_schema"), f"{at}.input_schema")
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
    choice = expect_object(value, "tool_choice")
    kind = known_value("tool_choice.type", choice.get("type"), TOOL_CHOICES)
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise invalid(
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
        name = expect_string(choice.get("name"), "tool_choice.name")
        if name not in {spec.name for spec in specs}:
            raise invalid(f"tool_choice.name: no tool named {name!r} in tools", "tool_choice")
        return {"type": "function", "name": name}, parallel
    raise unknown_value("tool_choice.type", kind, TOOL_CHOICES)  # not reached
