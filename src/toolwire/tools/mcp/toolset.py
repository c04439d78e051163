"""An MCP server's tools as toolwire `Tool`s, with the approval rule of OpenAI's `mcp` tool."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict

from toolwire.errors import InvalidRequestError
from toolwire.tools.base import Tool, ToolArgumentsError
from toolwire.tools.mcp.connection import _reason
from toolwire.tools.mcp.pool import McpPool, McpServerSpec
from toolwire.tools.mcp.results import render_content
from toolwire.trace_context import trace_headers
from toolwire.transcript import ToolSpec

if TYPE_CHECKING:  # the SDK is imported on use: see tools/mcp/connection.py
    from mcp import types

ApprovalRule = Callable[[str], bool]


class McpCallError(Exception):
    """The server failed the call (an `isError` result, or the connection died)."""


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


def approval_rule(value: Any, param: str) -> ApprovalRule:
    """`"always"` (OpenAI's default), `"never"`, `{"never": {"tool_names": [...]}}`,
    `{"always": {"tool_names": [...]}}`."""
    if value is None or value == "always":
        return lambda name: True
    if value == "never":
        return lambda name: False
    if isinstance(value, dict) and len(value) == 1:
        ((mode, rule),) = value.items()
        names = rule.get("tool_names") if isinstance(rule, dict) else None
        if (
            mode in ("always", "never")
            and isinstance(names, list)
            and all(isinstance(n, str) for n in names)
        ):
            listed = frozenset(names)
            if mode == "never":
                return lambda name: name not in listed
            return lambda name: name in listed
    raise InvalidRequestError(
        'require_approval must be "always", "never", {"never": {"tool_names": [...]}} or '
        '{"always": {"tool_names": [...]}}',
        param=param,
    )


class McpTool(Tool):
    Arguments = _AnyArguments

    def __init__(
        self,
        server: McpServerSpec,
        pool: McpPool,
        definition: types.Tool,
        rule: ApprovalRule,
        timeout: float = 60.0,
    ) -> None:
        self.server = server
        self.pool = pool
        self.name = definition.name
        self.description = definition.description or ""
        self.input_schema: dict[str, Any] = dict(
            definition.input_schema or {"type": "object", "properties": {}}
        )
        self.timeout = timeout
        self.needs_approval = lambda arguments: rule(self.name)
        self._rule = rule

    def may_require_approval(self) -> bool:
        return self._rule(self.name)

    @property
    def server_label(self) -> str:
        return self.server.label

    @property
    def parameters(self) -> dict[str, Any]:
        return self.input_schema

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """The server validates fully; here only what the schema makes obvious: required keys."""
        required = self.input_schema.get("required") or []
        missing = [key for key in required if key not in arguments]
        if missing:
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: missing required {', '.join(missing)}. "
                f"Expected JSON schema: {self.input_schema}"
            )
        return _AnyArguments.model_validate(arguments)

    async def run(self, arguments: BaseModel) -> types.CallToolResult:
        from mcp import types

        connection = await self.pool.acquire(self.server)
        session = connection.session
        if session is None:
            raise McpCallError(f"the MCP server '{self.server.label}' is not connected")
        try:
            traced = trace_headers()  # observe/: W3C trace context in `_meta`, when tracing is on
            result = await session.call_tool(
                self.name,
                arguments.model_dump(),
                read_timeout_seconds=self.timeout,
                meta=cast("types.RequestParamsMeta", dict(traced)) if traced else None,
            )
        except Exception as exc:
            self.pool.discard(self.server)
            raise McpCallError(
                f"the MCP server '{self.server.label}' failed during the call: {_reason(exc)}"
            ) from None
        if not isinstance(result, types.CallToolResult):
            raise McpCallError(
                f"the MCP server '{self.server.label}' answered {type(result).__name__}"
            )
        if result.is_error:
            raise McpCallError(render_content(result.content) or "the tool reported an error")
        return result

    def render(self, output: Any) -> str:
        from mcp import types

        return (
            render_content(output.content)
            if isinstance(output, types.CallToolResult)
            else str(output)
        )


async def list_server_tools(pool: McpPool, server: McpServerSpec) -> list[types.Tool]:
    connection = await pool.acquire(server)
    assert connection.session is not None
    from mcp import types

    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await connection.session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def tool_listing(tool: types.Tool) -> dict[str, Any]:
    """A tool as the `mcp_list_tools` item shows it."""
    annotations = (
        tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
    )
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": annotations,
    }


def definition_from_listing(entry: dict[str, Any]) -> types.Tool:
    from mcp import types

    return types.Tool(
        name=entry["name"],
        description=entry.get("description"),
        input_schema=entry.get("input_schema") or {"type": "object", "properties": {}},
    )


@dataclass(slots=True)
class McpToolset:
    """One MCP server's tools as one run uses them.

    `listing` is set when this conversation already listed the server (its `mcp_list_tools`
    item is in the history): the run reuses it instead of listing again, as OpenAI does.
    """

    spec: McpServerSpec
    pool: McpPool
    rule: ApprovalRule
    allowed: frozenset[str] | None = None
    listing: list[dict[str, Any]] | None = None
    call_timeout: float = 60.0

    @property
    def label(self) -> str:
        return self.spec.label

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools (those allowed), as `mcp_list_tools` shows them."""
        definitions = await list_server_tools(self.pool, self.spec)
        return [tool_listing(d) for d in definitions if self._allows(d.name)]

    def tools(self, listing: list[dict[str, Any]]) -> list[McpTool]:
        return [
            McpTool(
                self.spec, self.pool, definition_from_listing(entry), self.rule, self.call_timeout
            )
            for entry in listing
            if self._allows(entry["name"])
        ]

    def _allows(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed
