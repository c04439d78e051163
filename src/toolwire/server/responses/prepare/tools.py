"""A request's `tools` and `tool_choice`: what the model is offered, and how.

Every tool type of OpenAI's published API is accepted. `function`, `namespace` and `custom` are
caller-side tools (`loop/tool_types.py` says how the model sees them); `mcp` servers and the
configured web search run here; every other hosted type (file search, code interpreter, image
generation, computer use, …) is accepted, echoed and not offered to the model, and the response
says so (`x-toolwire-tools-not-offered`, docs/server.md). Only a type that is not in OpenAI's
list is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.config import McpServerConfig, WebSearchConfig
from toolwire.errors import InvalidRequestError
from toolwire.loop.tool_types import ClientTool, ClientTools, custom_spec, flat_name, unique_name
from toolwire.server.responses.prepare.mcp_tools import (
    McpServerUse,
    configured_use,
    redacted,
    request_use,
)
from toolwire.tools.mcp.toolset import approval_rule
from toolwire.transcript import ToolSpec

WEB_SEARCH_TYPES = frozenset(
    {"web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"}
)
HOSTED_TYPES = frozenset(
    {
        "file_search",
        "computer",
        "computer_use_preview",
        "code_interpreter",
        "programmatic_tool_calling",
        "image_generation",
        "local_shell",
        "shell",
        "tool_search",
        "apply_patch",
    }
)
"""Tools OpenAI runs (or asks the client to run through items of their own) that toolwire does
not offer: accepted, echoed, reported as not offered."""
_ALL_TYPES = ("function", "namespace", "custom", "mcp", *WEB_SEARCH_TYPES, *HOSTED_TYPES)

NOT_OFFERED_HEADER = "x-toolwire-tools-not-offered"


@dataclass(slots=True, frozen=True)
class SearchBackend:
    """The MCP tool serving a request's `web_search`: its calls are `web_search_call` items."""

    label: str
    tool: str
    query_argument: str = "query"
    search_only: bool = False
    """The server is there for the search alone: its listing is not shown (the client declared
    `web_search`, not an MCP server)."""

    def serves(self, label: str, tool: str) -> bool:
        return (self.label, self.tool) == (label, tool)


@dataclass(slots=True)
class RequestTools:
    client: ClientTools
    mcp_uses: list[McpServerUse]
    web_search: SearchBackend | None = None
    """The MCP tool serving `web_search`, when one is offered."""
    not_offered: list[str] = field(default_factory=list)
    """The types (and names) of requested tools the model is not offered."""
    echo: list[dict[str, Any]] = field(default_factory=list)

    @property
    def specs(self) -> list[ToolSpec]:
        return self.client.specs


class RecentTools:
    """The resolved tools of the last few tool lists, by their JSON: an agent sends the same
    tools every turn, and resolving them (model names, specs, the echo) cost more than the
    rest of a request's preparation. Only lists that use no MCP server and no search are kept
    (their uses are made per request); what is kept is never changed once made, so requests
    share it. At most `size` lists of at most `largest` bytes of JSON each (what is kept is
    bounded), the oldest dropped."""

    def __init__(self, size: int = 16, largest: int = 64 * 1024) -> None:
        self.size = size
        self.largest = largest
        self._kept: dict[tuple[bytes, frozenset[str]], RequestTools] = {}

    def resolve(
        self,
        tools: list[dict[str, Any]],
        mcp_configs: dict[str, McpServerConfig],
        web_search: WebSearchConfig | None,
        taken: set[str],
    ) -> RequestTools:
        """`request_tools`' answer (the configuration is the same for every call)."""
        try:
            key = (orjson.dumps(tools), frozenset(taken))
        except TypeError:  # not plain JSON: resolved (and refused) as it is
            return request_tools(tools, mcp_configs, web_search, taken)
        kept = self._kept.get(key)
        if kept is not None:
            return kept
        made = request_tools(tools, mcp_configs, web_search, taken)
        if not made.mcp_uses and made.web_search is None and len(key[0]) <= self.largest:
            if len(self._kept) >= self.size:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = made
        return made


def request_tools(
    tools: list[dict[str, Any]],
    mcp_configs: dict[str, McpServerConfig],
    web_search: WebSearchConfig | None,
    taken: set[str],
) -> RequestTools:
    """`taken`: names already offered (server tools), so client tools never shadow them."""
    client: list[ClientTool] = []
    uses: list[McpServerUse] = []
    echo: list[dict[str, Any]] = []
    not_offered: list[str] = []
    search: SearchBackend | None = None
    searches: list[str] = []
    backend = mcp_configs.get(web_search.server) if web_search is not None else None
    names = set(taken)
    for index, entry in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(entry, dict):
            raise InvalidRequestError(f"{where} must be an object", param=where)
        kind = entry.get("type")
        if kind == "mcp":
            use = request_use(entry, index, mcp_configs)
            if any(u.spec.label == use.spec.label for u in uses):
                raise InvalidRequestError(
                    f"{where}: server_label {use.spec.label!r} is used twice",
                    param=f"{where}.server_label",
                )
            uses.append(use)
            echo.append(redacted(entry))
        elif kind == "function":
            client.append(_function(entry, where, None, names))
            echo.append(_echo_function(entry))
        elif kind == "custom":
            client.append(_custom(entry, where, None, names))
            echo.append(entry)
        elif kind == "namespace":
            namespace = entry.get("name")
            inner = entry.get("tools")
            if not isinstance(namespace, str) or not namespace:
                raise InvalidRequestError(
                    f"{where}.name must be a non-empty string", param=f"{where}.name"
                )
            if not isinstance(inner, list) or not inner:
                raise InvalidRequestError(
                    f"{where}.tools must be a non-empty list of function or custom tools",
                    param=f"{where}.tools",
                )
            for position, tool in enumerate(inner):
                at = f"{where}.tools[{position}]"
                sub = tool.get("type") if isinstance(tool, dict) else None
                if sub == "function":
                    client.append(_function(tool, at, entry, names))
                elif sub == "custom":
                    client.append(_custom(tool, at, entry, names))
                else:
                    raise InvalidRequestError(
                        f"{at}.type must be function or custom", param=f"{at}.type"
                    )
            echo.append(
                {
                    **entry,
                    "tools": [_echo_function(t) if t["type"] == "function" else t for t in inner],
                }
            )
        elif kind in WEB_SEARCH_TYPES:
            echo.append(entry)
            (searches if backend is not None else not_offered).append(str(kind))
        elif kind in HOSTED_TYPES:
            echo.append(entry)
            not_offered.append(str(kind))
        else:
            raise InvalidRequestError(
                f"Invalid value: {kind!r}. {where}.type must be one of: {', '.join(_ALL_TYPES)}.",
                param=f"{where}.type",
                code="invalid_value",
            )
    labels = {use.spec.label for use in uses}
    for config in mcp_configs.values():
        if config.default and config.label not in labels:
            uses.append(configured_use(config))
    if searches and web_search is not None and backend is not None:
        alone = _add_search_backend(uses, backend, web_search.tool)
        search = SearchBackend(backend.label, web_search.tool, web_search.query_argument, alone)
    return RequestTools(ClientTools.of(client), uses, search, not_offered, echo)


def _add_search_backend(uses: list[McpServerUse], backend: McpServerConfig, tool: str) -> bool:
    """Make the search tool of `backend` available; True when the server is there for the
    search alone (its listing is then not shown: the client declared `web_search`, not MCP)."""
    for use in uses:
        if use.spec.label == backend.label:
            if use.allowed is not None:
                use.allowed = use.allowed | {tool}
            return False
    use = configured_use(backend)
    use.allowed = frozenset({tool})
    use.rule = approval_rule("never", "web_search")  # OpenAI's web search asks no approval
    uses.append(use)
    return True


def _function(
    entry: dict[str, Any], where: str, namespace: dict[str, Any] | None, names: set[str]
) -> ClientTool:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(f"{where}.name must be a non-empty string", param=f"{where}.name")
    parameters = entry.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise InvalidRequestError(
            f"{where}.parameters must be a JSON schema object", param=f"{where}.parameters"
        )
    description = entry.get("description") or ""
    prefix = namespace.get("name") if namespace is not None else None
    if namespace is not None and namespace.get("description"):
        description = f"{namespace['description']}\n\n{description}".strip()
    model_name = _model_name(prefix, name, names, where)
    spec = ToolSpec(model_name, description, parameters, entry.get("strict"))
    return ClientTool(spec, name, "function", prefix)


def _custom(
    entry: dict[str, Any], where: str, namespace: dict[str, Any] | None, names: set[str]
) -> ClientTool:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(f"{where}.name must be a non-empty string", param=f"{where}.name")
    fmt = entry.get("format") or {"type": "text"}
    syntax = definition = None
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        syntax, definition = fmt.get("syntax"), fmt.get("definition")
        if not isinstance(syntax, str) or not isinstance(definition, str):
            raise InvalidRequestError(
                f"{where}.format needs a syntax (lark, regex) and a definition",
                param=f"{where}.format",
            )
    prefix = namespace.get("name") if namespace is not None else None
    model_name = _model_name(prefix, name, names, where)
    spec = custom_spec(model_name, entry.get("description") or "", syntax, definition)
    return ClientTool(spec, name, "custom", prefix, syntax, definition)


def _model_name(namespace: str | None, name: str, names: set[str], where: str) -> str:
    wanted = flat_name(namespace, name)
    if namespace is None and wanted in names:
        raise InvalidRequestError(
            f"{where}.name {name!r} is declared twice (or shadows a server tool)",
            param=f"{where}.name",
        )
    return unique_name(wanted, names)


def _echo_function(entry: dict[str, Any]) -> dict[str, Any]:
    """A function tool as the response echoes it: `strict` and `parameters` are required."""
    return {
        "description": None,
        **entry,
        "strict": entry.get("strict"),
        "parameters": entry.get("parameters"),
    }


def tool_choice(
    choice: str | dict[str, Any], tools: RequestTools, server_names: set[str]
) -> str | dict[str, Any]:
    """OpenAI's `tool_choice` variants -> what the upstream is asked: a mode, or one function
    by the name the model knows it under; `web_search` its backend's tool when one serves
    it. Hosted types that are not offered mean `auto`."""
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise InvalidRequestError(
                f"Invalid value: {choice!r}. tool_choice must be auto, none or required.",
                param="tool_choice",
                code="invalid_value",
            )
        return choice
    kind = choice.get("type")
    if not isinstance(kind, str):
        raise InvalidRequestError(
            f"Invalid type for 'tool_choice.type': expected a string, got {type(kind).__name__}.",
            param="tool_choice.type",
            code="invalid_type",
        )
    if kind == "function" or kind == "custom":
        name = choice.get("name")
        if not isinstance(name, str):
            raise InvalidRequestError("tool_choice.name must be a string", param="tool_choice")
        model_name = tools.client.model_name(
            "custom" if kind == "custom" else "function", None, name
        )
        if model_name not in tools.client and model_name not in server_names:
            raise InvalidRequestError(
                f"tool_choice names an unknown tool {name!r}", param="tool_choice"
            )
        return {"type": "function", "name": model_name}
    if kind == "allowed_tools":
        return "required" if choice.get("mode") == "required" else "auto"
    if kind == "mcp":
        name = choice.get("name")
        return {"type": "function", "name": name} if isinstance(name, str) else "required"
    if kind in WEB_SEARCH_TYPES and tools.web_search is not None:
        return {"type": "function", "name": tools.web_search.tool}
    if (
        kind in WEB_SEARCH_TYPES
        or kind in HOSTED_TYPES
        or kind
        in (
            "computer_use",
            "programmatic_tool_calling",
        )
    ):
        return "auto"
    raise InvalidRequestError(
        f"Invalid value: {kind!r}. tool_choice.type is not a tool choice type.",
        param="tool_choice.type",
        code="invalid_value",
    )
