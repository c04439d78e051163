"""A small MCP server for the tests, built with the official SDK (`MCPServer`, formerly FastMCP).

python tests/mcp_servers/demo_server.py stdio
python tests/mcp_servers/demo_server.py http PORT [REQUIRED_BEARER_TOKEN]
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.secret_forms import encodings

server = MCPServer("toolwire-test-server")
CALLS_LOG = os.environ.get("DEMO_MCP_LOG")


def _log(line: str) -> None:
    if CALLS_LOG:
        with open(CALLS_LOG, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    _log(f"add {a} {b}")
    return str(a + b)


@server.tool()
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    _log(f"delete_file {path}")
    return f"deleted {path}"


@server.tool()
def snapshot() -> list[Any]:
    """A picture and a resource."""
    return [
        types.TextContent(type="text", text="a chart:"),
        types.ImageContent(type="image", data="iVBORw0KGgoAAAANSUhEUg==", mime_type="image/png"),
    ]


@server.tool()
def crash() -> str:
    """Kills the server in the middle of the call."""
    _log("crash")
    os._exit(3)


def _presented(ctx: Context) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return str(headers.get("authorization", "")).removeprefix("Bearer ")


@server.tool()
def echo_credentials(ctx: Context) -> str:
    """Answers with the token it was called with, in every form (a server that leaks it)."""
    token = _presented(ctx)
    return "\n".join(f"{form}: {text}" for form, text in encodings(token).items())


@server.tool()
def reject_credentials(ctx: Context) -> types.CallToolResult:
    """Fails, quoting the token it was called with in every form."""
    text = "bad token " + " / ".join(encodings(_presented(ctx)).values())
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def main() -> None:
    transport = sys.argv[1]
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn
    from starlette.types import Receive, Scope, Send

    port = int(sys.argv[2])
    if transport == "sse":
        uvicorn.run(server.sse_app(), host="127.0.0.1", port=port, log_level="warning")
        return
    token = sys.argv[3] if len(sys.argv) > 3 else None
    app = server.streamable_http_app()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
