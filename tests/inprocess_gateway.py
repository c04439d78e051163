"""The toolwire ASGI app in process, in front of an in-process `ScriptedUpstream`: no sockets.

`app_gateway(upstream)` builds the same app `toolwire serve` builds (`compose` +
`create_app`, as `server.main.build_app` does, with the demo tools the integration gateway
loads), on an upstream adapter whose httpx transport calls the scripted app directly, and
gives a raw `httpx.AsyncClient` and the official `openai.AsyncOpenAI` client, both on a
streaming in-process transport into the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
from starlette.applications import Starlette

from toolwire.demo_tools import ALL as DEMO_TOOLS
from toolwire.loop.state import LoopSettings
from toolwire.runtime import Runtime
from toolwire.server.app import create_app
from toolwire.server.gate.security import Security
from toolwire.server.gemini.translate import GeminiSettings
from toolwire.server.main import compose
from toolwire.server.messages.translate import MessagesSettings
from toolwire.server.responses.service import ResponsesService
from toolwire.store.database import Store
from toolwire.testing import ScriptedUpstream
from toolwire.testing.asgi import StreamingASGITransport
from toolwire.tools.base import Tool
from toolwire.upstream.base import Upstream
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.fleet.router import FleetRouter

BASE = "http://127.0.0.1"


@dataclass(slots=True)
class AppGateway:
    upstream: ScriptedUpstream
    adapter: ChatCompletionsUpstream
    store: Store
    runtime: Runtime
    service: ResponsesService
    app: Starlette
    transport: StreamingASGITransport
    http: httpx.AsyncClient
    """Raw HTTP into the app; base URL is the server root (paths start with /v1/...)."""
    client: openai.AsyncOpenAI
    """The official client, in process."""

    async def idle(self) -> None:
        """Wait for work the app goes on with after its client left (a disconnect's cleanup)
        and for background responses, so their outcome is stored before asserting on it."""
        await self.transport.wait_idle()
        await asyncio.gather(*self.service.background.values(), return_exceptions=True)


@asynccontextmanager
async def app_gateway(
    upstream: ScriptedUpstream,
    db: Path | None = None,
    *,
    tools: Sequence[Tool] = tuple(DEMO_TOOLS),
    settings: LoopSettings | None = None,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    messages: MessagesSettings | None = None,
    gemini: GeminiSettings | None = None,
    fleet: FleetRouter | None = None,
    security: Security | None = None,
    **adapter_options: Any,
) -> AsyncIterator[AppGateway]:
    """`db`: a SQLite file, or None for an in-memory database. `upstream_transport` replaces the transport to the scripted upstream (e.g. one that
    holds the upstream's answer until the test lets it go); `messages`: the Anthropic door's
    settings (model names, context window), `gemini` the Gemini door's; `security`: the gate's
    settings and limits; `adapter_options` are `ChatCompletionsConfig` fields (defaults as the
    integration gateway: one retry); `fleet`: serve through this router over several model
    servers instead (`upstream` is then only the test's handle)."""
    options: dict[str, Any] = {"max_retries": 1, "initial_backoff": 0.01, "max_backoff": 0.02}
    options.update(adapter_options)
    adapter = ChatCompletionsUpstream(
        upstream.base_url, transport=upstream_transport or upstream.transport, **options
    )
    # In-memory SQLite by default (one shared connection; a third of a file's set-up time).
    store = await Store.open(f"sqlite:///{db}" if db else "sqlite:///:memory:")
    served: Upstream = fleet or adapter
    runtime = await compose(
        upstream=served,
        store=store,
        server_tools=list(tools),
        loop_settings=settings or LoopSettings(),
    )
    app = create_app(runtime, messages=messages, gemini=gemini, security=security)
    service: ResponsesService = app.state.responses
    transport = StreamingASGITransport(app)
    http = httpx.AsyncClient(transport=transport, base_url=BASE)
    client = openai.AsyncOpenAI(
        base_url=BASE + "/v1", api_key="sk-unused", max_retries=0, http_client=http
    )
    try:
        yield AppGateway(upstream, adapter, store, runtime, service, app, transport, http, client)
    finally:
        background = list(service.background.values())
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await service.replica.stop()  # the lease its first response took (`Replica.join`)
        await transport.shutdown()
        if isinstance(upstream_transport, StreamingASGITransport):
            await upstream_transport.shutdown()
        await http.aclose()
        await runtime.aclose()  # MCP sessions, the upstream stack (the fleet's, if any)
        if fleet is not None:
            await adapter.aclose()
        await store.close()


def websocket_scope(path: str = "/v1/responses") -> dict[str, Any]:
    """The ASGI scope of a WebSocket a client on loopback opens (tests drive the app with it
    as raw ASGI, to see exactly what the server takes from the socket and sends)."""
    return {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "subprotocols": [],
    }


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """Decode a Responses SSE body: each frame's `data` as JSON, checking `event:` names it."""
    events: list[dict[str, Any]] = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        data = orjson.loads(fields["data"])
        assert fields.get("event") == data["type"], frame
        events.append(data)
    return events


def chat_chunks(raw: bytes) -> tuple[list[dict[str, Any]], bool]:
    """Decode a chat-completions SSE body: the chunks, and whether it ended with [DONE]."""
    chunks: list[dict[str, Any]] = []
    done = False
    for frame in raw.decode().split("\n\n"):
        line = frame.strip()
        if not line:
            continue
        assert line.startswith("data: "), frame
        assert not done, "nothing may follow [DONE]"
        if line == "data: [DONE]":
            done = True
        else:
            chunks.append(orjson.loads(line[len("data: ") :]))
    return chunks, done


class Gate:
    """An ASGI wrapper that holds each request to the upstream until the test releases it:
    `reached` is set when a request arrives. Timing without clocks."""

    def __init__(self, upstream: ScriptedUpstream) -> None:
        self.upstream = upstream
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.transport = StreamingASGITransport(self)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.reached.set()
        await self.release.wait()
        await self.upstream(scope, receive, send)
