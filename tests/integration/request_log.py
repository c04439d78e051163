"""A loopback logger between a real client and `toolwire serve`: every request the client sends
is recorded (method, path with query, headers, JSON body) and forwarded unchanged; the answer
streams back as it comes. This is how the tests see what a client release actually sends
(which fields, which values, which headers) without trusting its documentation.

It runs its own event loop in a thread, so blocking `subprocess.run` calls can drive the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

#: Request headers never forwarded (aiohttp sets its own).
_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@dataclass
class LoggedRequest:
    method: str
    path: str
    """With the query string, as sent (`/v1/messages?beta=true`)."""
    headers: dict[str, str]
    body: Any
    """The JSON body, or None."""
    status: int = 0
    """The status toolwire answered with."""


@dataclass
class RequestLog:
    """Forwards to `target` (a base URL such as `http://127.0.0.1:8080`)."""

    target: str
    requests: list[LoggedRequest] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def clear(self) -> None:
        self.requests.clear()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        logged = LoggedRequest(request.method, request.path_qs, headers, body)
        self.requests.append(logged)
        assert self._session is not None
        forwarded = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._session.request(
            request.method, self.target + request.path_qs, headers=forwarded, data=raw
        ) as answer:
            logged.status = answer.status
            response = web.StreamResponse(status=answer.status)
            for key, value in answer.headers.items():
                if key.lower() not in _HOP and key.lower() != "content-encoding":
                    response.headers[key] = value
            await response.prepare(request)
            async for piece in answer.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    @contextlib.contextmanager
    def running(self) -> Iterator[RequestLog]:
        ready = threading.Event()
        stop: list[asyncio.Event] = []
        loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/{tail:.*}", self._forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            server = site._server
            assert server is not None and server.sockets
            self.port = server.sockets[0].getsockname()[1]
            stop.append(asyncio.Event())
            ready.set()
            await stop[0].wait()
            await runner.cleanup()
            await self._session.close()

        thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
        thread.start()
        ready.wait(10)
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(stop[0].set)
            thread.join(10)
            loop.close()

    _session: aiohttp.ClientSession | None = None
