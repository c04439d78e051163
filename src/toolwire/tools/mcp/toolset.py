"""An MCP server's tools as toolwire `Tool`s, with the approval rule of OpenAI's `mcp` tool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
from pydantic import BaseModel, ConfigDict

from toolwire.errors import InvalidRequestError
from toolwire.scrub import Scrubber
from toolwire.tools.base import Tool, ToolArgumentsError
from toolwire.tools.mcp.connection import McpConnectionError, _reason
from toolwire.tools.mcp.pool import McpPool, McpServerSpec
from toolwire.tools.mcp.results import render_content
from toolwire.trace_context import trace_headers
from toolwire.transcript import ToolSpec
from toolwire.wire.items import McpListedTool

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
        self.input_schema: dict[str, object] = dict(
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
    def parameters(self) -> dict[str, object]:
        return self.input_schema

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    def validate(self, arguments: dict[str, object]) -> BaseModel:
        """The server validates fully; here only what the schema makes obvious: required keys."""
        required = self.input_schema.get("required")  # a JSON Schema: any JSON
        names = (
            [key for key in required if isinstance(key, str)] if isinstance(required, list) else []
        )
        missing = [key for key in names if key not in arguments]
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
            scrub = self.server.scrubber.text
            raise McpCallError(
                scrub(
                    f"the MCP server '{self.server.label}' failed during the call: {_reason(exc)}"
                )
            ) from None
        if not isinstance(result, types.CallToolResult):
            raise McpCallError(
                f"the MCP server '{self.server.label}' answered {type(result).__name__}"
            )
        scrubber = self.server.scrubber
        if result.is_error:
            text = render_content(result.content) or "the tool reported an error"
            raise McpCallError(await scrubbed(scrubber, text))
        if scrubber:  # the server's own credentials out of what it answered
            content = [await _scrubbed_block(scrubber, block) for block in result.content]
            result = result.model_copy(update={"content": content})
        return result

    def render(self, output: Any) -> str:
        from mcp import types

        return (
            render_content(output.content)
            if isinstance(output, types.CallToolResult)
            else str(output)
        )


#: Text longer than this is scrubbed on a worker thread: the event loop's thread gets the
#: interpreter back every few milliseconds meanwhile (`toolwire/scrub.py` costs ~0.1 s a MiB).
OFF_LOOP_SCRUB_CHARS = 64 * 1024


async def scrubbed(scrubber: Scrubber, text: str) -> str:
    if len(text) > OFF_LOOP_SCRUB_CHARS:
        return await asyncio.to_thread(scrubber.text, text)
    return scrubber.text(text)


async def _scrubbed_block(scrubber: Scrubber, block: Any) -> Any:
    """A content block with the text it carries scrubbed (a text block, an embedded text
    resource); other blocks are shown as one line each (`results.py`), not their data."""
    from mcp import types

    if isinstance(block, types.TextContent):
        return block.model_copy(update={"text": await scrubbed(scrubber, block.text)})
    if isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.TextResourceContents
    ):
        text = await scrubbed(scrubber, block.resource.text)
        return block.model_copy(
            update={"resource": block.resource.model_copy(update={"text": text})}
        )
    return block


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


def tool_listing(tool: types.Tool, scrubber: Scrubber | None = None) -> McpListedTool:
    """A tool as the `mcp_list_tools` item shows it (the server's credentials scrubbed from
    what it wrote: the listing is stored and relayed)."""
    annotations = (
        tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
    )
    description = tool.description
    schema: dict[str, Any] = dict(tool.input_schema)
    if scrubber:
        description = None if description is None else scrubber.text(description)
        encoded = orjson.dumps(schema).decode()
        cleaned = scrubber.text(encoded)
        if cleaned != encoded:
            try:
                schema = orjson.loads(cleaned)
            except orjson.JSONDecodeError:
                schema = {"type": "object", "properties": {}}
    return {
        "name": tool.name,
        "description": description,
        "input_schema": schema,
        "annotations": annotations,
    }


def definition_from_listing(entry: McpListedTool) -> types.Tool:
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
    listing: list[McpListedTool] | None = None
    call_timeout: float = 60.0

    @property
    def label(self) -> str:
        return self.spec.label

    async def list_tools(self) -> list[McpListedTool]:
        """The server's tools (those allowed), as `mcp_list_tools` shows them."""
        scrubber = self.spec.scrubber
        try:
            definitions = await list_server_tools(self.pool, self.spec)
        except McpConnectionError:
            raise  # its words are scrubbed already (`pool.py`)
        except Exception as exc:  # the server's own words may quote its credentials
            raise McpCallError(scrubber.text(_reason(exc))) from None
        return [tool_listing(d, scrubber) for d in definitions if self._allows(d.name)]

    def tools(self, listing: list[McpListedTool]) -> list[McpTool]:
        return [
            McpTool(
                self.spec, self.pool, definition_from_listing(entry), self.rule, self.call_timeout
            )
            for entry in listing
            if self._allows(entry["name"])
        ]

    def _allows(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed
