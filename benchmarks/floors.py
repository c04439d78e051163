"""Floors: the least a Python gateway built like toolwire can add, measured by the same harness.

A bare app (no logic) on an HTTP server, in one of these client modes:

- `bare`: reads the request and answers from pre-encoded bytes; no upstream. The server's own
  cost per request.
- `httpx`: forwards the client's body unchanged (JSON or stream, as the client asked) on a
  pooled `httpx.AsyncClient`, reads the whole upstream answer, and answers with pre-encoded
  bytes. The server plus the httpx client: no SSE decoding, no JSON parsing, no loop.
- `aiohttp`: the same with a pooled `aiohttp.ClientSession` (C HTTP parser, no anyio layer): how
  toolwire's upstream client is built (`upstream/transport.py`).
- `plain`: the same with toolwire's own client for `http://` upstreams
  (`upstream/plain_http.py`, httptools on the loop's transports): the floor of a gateway built
  as toolwire now is (the targets stay ratios to the `aiohttp` floor, as issue #38 defines them).
- `httpx-aiohttp`: httpx's API over aiohttp (`httpx_aiohttp.AiohttpTransport`).
- `pyreqwest`, `pyqwest`: Rust HTTP clients (reqwest + hyper on their own Tokio runtime threads,
  results handed to the event loop).

on one of these servers (`--server`):

- `uvicorn`: uvicorn + httptools on uvloop, as `toolwire serve` runs (`server/main.py`);
- `uvicorn-asyncio`: the same on the stdlib event loop (the floor of the runs before issue #38);
- `granian-asgi`: granian's Rust HTTP server calling the same ASGI callable, embedded in this
  process's uvloop loop (`granian.server.embed`, as toolwire would run it: its own workers);
- `granian-rsgi`: granian with its own interface (RSGI: `protocol()` for the body,
  `response_bytes` / `response_stream`), no ASGI message dicts at all.

`--relay` (or a model name containing `relay`): a streamed answer is relayed as the upstream sends it, one server write per SSE event
(what toolwire's live deltas cost a server), instead of answering from pre-encoded bytes after
the whole upstream stream was read. The answer is the same tool call the mock sends (JSON, a
4-frame SSE stream, or the relayed stream itself), so the harness's checks pass.

Run with the project's venv; aiohttp comes from `benchmarks/.pip-extras` and granian and the
Rust clients from `benchmarks/.stack-extras` (appended to sys.path; `stacks.py` creates them).

    .venv/bin/python benchmarks/floors.py --mode aiohttp --server granian-asgi --upstream http://127.0.0.1:9100/v1 --port 9400
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE / ".pip-extras"))  # aiohttp when the project venv lacks it
sys.path.append(str(HERE / ".stack-extras"))  # granian, pyreqwest, pyqwest (stacks.py)
sys.path.insert(0, str(HERE))

from mock_upstream import (  # noqa: E402
    LONG_TOOL_NAME,
    SHORT_ARGS,
    TOOL_NAME,
    completion_body,
    long_arguments,
)

STREAM_RE = re.compile(rb'"stream"\s*:\s*true')
MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"]*)"')
MODES = ("bare", "httpx", "aiohttp", "plain", "httpx-aiohttp", "pyreqwest", "pyqwest")
SERVERS = ("uvicorn", "uvicorn-asyncio", "granian-asgi", "granian-rsgi")
HEALTH = b'{"status":"ok"}'


def answers(chunks: int) -> dict[tuple[bool, bool], bytes]:
    """(long?, stream?) -> body."""
    long_args = long_arguments(chunks - 4)[0]
    out = {}
    base = {
        "id": "chatcmpl-floor",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "mock",
    }

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        doc = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    for is_long, args in ((False, SHORT_ARGS), (True, long_args)):
        name = LONG_TOOL_NAME if is_long else TOOL_NAME  # as the mock names them
        out[(is_long, False)] = completion_body("mock", args, name=name)

        call = {
            "index": 0,
            "id": "call_mock_0001",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        out[(is_long, True)] = (
            frame({"role": "assistant", "content": ""})
            + frame({"tool_calls": [call]})
            + frame({}, "tool_calls")
            + b"data: [DONE]\n\n"
        )
    return out


class Forwarder:
    """The client's body, unchanged, to the upstream on one pooled client; the answer's reads
    as they arrive."""

    def __init__(self, mode: str, upstream: str) -> None:
        self.mode = mode
        self.url = upstream.rstrip("/") + "/chat/completions"
        self.client: Any = None
        self._opening: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Once, whoever asks first (RSGI has no lifespan in an embedded server)."""
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        await self._opening

    async def _open(self) -> None:
        mode = self.mode
        if mode == "httpx-aiohttp":
            import httpx
            from httpx_aiohttp import AiohttpTransport

            limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
            self.client = httpx.AsyncClient(timeout=60, transport=AiohttpTransport(limits=limits))
        elif mode == "httpx":
            import httpx

            self.client = httpx.AsyncClient(
                timeout=60,
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
            )
        elif mode == "aiohttp":
            import aiohttp

            self.client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
        elif mode == "plain":
            sys.path.insert(0, str(HERE.parent / "src"))  # this checkout's toolwire
            from toolwire.upstream.plain_http import PlainHttpSender

            self.client = PlainHttpSender(
                {}, connect_timeout=60, read_timeout=60, max_connections=256, fallback=None
            )
        elif mode == "pyreqwest":
            from pyreqwest.client import ClientBuilder

            self.client = ClientBuilder().max_connections(256).build()
        elif mode == "pyqwest":
            from pyqwest import Client, HTTPTransport

            self.client = Client(HTTPTransport(enable_otel=False))

    async def close(self) -> None:
        if self.client is None:
            return
        if self.mode in ("httpx", "httpx-aiohttp"):
            await self.client.aclose()
        elif self.mode in ("aiohttp", "pyreqwest"):
            await self.client.close()

    async def reads(self, body: bytes, stream: bool) -> AsyncIterator[bytes]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if self.client is None:
            await self.open()
        mode, client = self.mode, self.client
        if mode in ("httpx", "httpx-aiohttp"):
            request = client.build_request("POST", self.url, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                async for data in response.aiter_raw():
                    yield data
            finally:
                await response.aclose()
        elif mode == "aiohttp":
            async with client.post(self.url, data=body, headers=headers) as response:
                async for data in response.content.iter_any():
                    yield data
        elif mode == "plain":
            answer = await client.send("POST", self.url, body, headers)
            try:
                async for data in answer.aiter_raw():
                    yield data
            finally:
                await answer.aclose()
        elif mode == "pyreqwest":
            request = client.post(self.url).headers(headers).body_bytes(body).build_streamed()
            async with request as response:
                reader = response.body_reader  # a property
                while (data := await reader.read_chunk()) is not None:
                    yield bytes(data)
        elif mode == "pyqwest":
            async with client.stream("POST", self.url, headers, body) as response:
                async for data in response.content:
                    yield bytes(data)


class _NoFallback:
    async def aclose(self) -> None:
        pass


def events(reads: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Whole SSE events (`...\\n\\n`) out of the upstream's reads."""

    async def cut() -> AsyncIterator[bytes]:
        rest = b""
        async for data in reads:
            parts = (rest + data).split(b"\n\n")
            rest = parts.pop()
            for part in parts:
                yield part + b"\n\n"
        if rest:
            yield rest

    return cut()


def classify(body: bytes, relay: bool) -> tuple[bool, bool, bool]:
    """(long?, stream?, relayed?): a model named `...relay...` asks for the relay too."""
    found = MODEL_RE.search(body)
    model = found.group(1) if found else b""
    stream = STREAM_RE.search(body) is not None
    return b"stream" in model, stream, stream and (relay or b"relay" in model)


def make_asgi_app(forwarder: Forwarder, chunks: int, relay: bool) -> Any:
    bodies = answers(chunks)
    bare = forwarder.mode == "bare"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await forwarder.open()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await forwarder.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"].endswith("/health"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": HEALTH})
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(parts)
        is_long, stream, relayed = classify(body, relay)
        kind = b"text/event-stream" if stream else b"application/json"
        start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        if relayed and not bare:
            await send(start)
            async for event in events(forwarder.reads(body, stream)):
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        if not bare:
            async for _ in forwarder.reads(body, stream):
                pass
        await send(start)
        await send({"type": "http.response.body", "body": bodies[(is_long, stream)]})

    return app


def make_rsgi_app(forwarder: Forwarder, chunks: int, relay: bool) -> Any:
    bodies = answers(chunks)
    bare = forwarder.mode == "bare"
    json_headers = [("content-type", "application/json")]
    sse_headers = [("content-type", "text/event-stream")]

    class App:
        async def __rsgi__(self, scope: Any, protocol: Any) -> None:
            if scope.path.endswith("/health"):
                protocol.response_bytes(200, json_headers, HEALTH)
                return
            body = await protocol()
            is_long, stream, relayed = classify(body, relay)
            headers = sse_headers if stream else json_headers
            if relayed and not bare:
                transport = protocol.response_stream(200, headers)
                async for event in events(forwarder.reads(body, stream)):
                    await transport.send_bytes(event)
                return
            if not bare:
                async for _ in forwarder.reads(body, stream):
                    pass
            protocol.response_bytes(200, headers, bodies[(is_long, stream)])

    return App()


def serve(server: str, port: int, build: Callable[[], Any]) -> None:
    import uvloop

    if server.startswith("uvicorn"):
        import uvicorn

        config = uvicorn.Config(build(), host="127.0.0.1", port=port, log_level="warning")
        running = uvicorn.Server(config).serve()
        if server == "uvicorn-asyncio":
            asyncio.run(running)
            return
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(running)
        return
    from granian.constants import Interfaces
    from granian.log import LogLevels
    from granian.server.embed import Server

    async def main() -> None:
        interface = Interfaces.RSGI if server == "granian-rsgi" else Interfaces.ASGI
        embedded = Server(
            build(),
            address="127.0.0.1",
            port=port,
            interface=interface,
            log_level=LogLevels.warning,
            websockets=False,
        )
        await embedded.serve()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--server", choices=SERVERS, default="uvicorn")
    parser.add_argument("--relay", action="store_true", help="relay streams event by event")
    parser.add_argument("--upstream", default="http://127.0.0.1:9100/v1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=500)
    args = parser.parse_args()
    forwarder = Forwarder(args.mode, args.upstream)
    make = make_rsgi_app if args.server == "granian-rsgi" else make_asgi_app
    serve(args.server, args.port, lambda: make(forwarder, args.chunks, args.relay))


if __name__ == "__main__":
    main()
