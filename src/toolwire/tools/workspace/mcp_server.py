"""toolwire's workspace tools as an MCP server (the official `mcp` SDK, low-level `Server`).

Each tool call answers with one text content block: the tool's rendered text, exactly what
the model would read inside toolwire's envelope (`output:`). Failures (bad arguments, a path
outside the root, a tool error, a timeout) are `isError` results whose text says what to do.
Approval (`exec`) is the MCP host's job: MCP clients ask their user before calling tools, and
the tool annotations say which ones change things.

Run it as `toolwire mcp-serve --root DIR [--http --port P] [--allow-write] [--allow-exec]`, or
`python -m toolwire.tools.workspace.mcp_server` with the same options.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from toolwire.tools.base import Tool, ToolArgumentsError
from toolwire.tools.envelope import sanitize
from toolwire.tools.workspace.common import WorkspaceTool
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.toolset import workspace_tools
from toolwire.tools.workspace.workspace import Workspace

SERVER_NAME = "toolwire-workspace"
DEFAULT_TIMEOUT = 120.0


def _version() -> str:
    try:
        return version("toolwire")
    except PackageNotFoundError:
        return "0"


def _describe(tool: Tool) -> types.Tool:
    read_only = not isinstance(tool, WorkspaceTool) or tool.read_only
    annotations = types.ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=False if read_only else tool.name != "create_file",
        idempotent_hint=read_only,
        open_world_hint=tool.name == "exec",
    )
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.parameters,
        annotations=annotations,
    )


async def call_tool(tool: Tool, arguments: dict[str, object]) -> types.CallToolResult:
    """Validate, run (bounded by the tool's timeout) and render; any failure is an error
    result carrying a message, never a protocol error."""
    try:
        validated = tool.validate(arguments)
        seconds = tool.timeout if tool.timeout is not None else DEFAULT_TIMEOUT
        output = await asyncio.wait_for(tool.run(validated), seconds)
        text, failed = tool.render(output), False
    except (ToolArgumentsError, WorkspaceError) as exc:  # already worded for the model
        text, failed = str(exc), True
    except TimeoutError:
        text, failed = f"{tool.name} timed out", True
    except Exception as exc:  # a tool's failure is the caller's information
        text, failed = f"{type(exc).__name__}: {exc}", True
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=sanitize(text))], is_error=failed
    )


def build_server(workspace: Workspace, tools: Sequence[Tool] | None = None) -> Server[Any]:
    """A low-level MCP `Server` exposing `tools` (default: `workspace_tools(workspace)`)."""
    by_name = {t.name: t for t in (tools if tools is not None else workspace_tools(workspace))}
    listed = [_describe(t) for t in by_name.values()]

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            available = ", ".join(by_name)
            message = f"unknown tool {params.name!r}; available tools: {available}"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=message)], is_error=True
            )
        return await call_tool(tool, params.arguments or {})

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=(
            "File and search tools over one directory; paths are relative to it. Outputs are "
            "plain text: read_file shows `cat -n` lines, grep `path:line:text` lines."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(workspace: Workspace) -> None:
    """Serve the workspace tools over stdio until the client closes stdin."""
    server = build_server(workspace)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    workspace: Workspace,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    path: str = "/mcp",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the workspace tools over streamable HTTP at `http://host:port/mcp`.

    Port 0 picks a free port; `on_ready` gets the endpoint URL once the socket is listening
    (connections made from then on wait in the backlog until the app is up).
    """
    import uvicorn

    app = build_server(workspace).streamable_http_app(streamable_http_path=path, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if family == socket.AF_INET6 else host
    if on_ready is not None:
        on_ready(f"http://{shown_host}:{bound_port}{path}")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m toolwire.tools.workspace.mcp_server --root DIR [--http] ...`."""
    parser = argparse.ArgumentParser(
        prog="toolwire mcp-serve", description="Serve toolwire's workspace tools over MCP."
    )
    parser.add_argument("--root", required=True, help="the directory the tools work in")
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--allow-write", action="store_true", help="enable edit/create tools")
    parser.add_argument("--allow-exec", action="store_true", help="enable the exec tool")
    args = parser.parse_args(argv)
    workspace = Workspace(args.root, allow_write=args.allow_write, allow_exec=args.allow_exec)
    if workspace.allow_exec:
        sandbox = workspace.sandbox
        print(f"toolwire mcp-serve: exec runs {sandbox.describe()}", file=sys.stderr, flush=True)
    if args.http:

        def announce(url: str) -> None:
            print(f"toolwire mcp-serve: streamable HTTP on {url}", file=sys.stderr, flush=True)

        asyncio.run(serve_http(workspace, args.host, args.port, on_ready=announce))
    else:
        asyncio.run(serve_stdio(workspace))


if __name__ == "__main__":
    main()
