"""`StreamingASGITransport`: an httpx transport that calls an ASGI app in process and streams.

Hand-written because `httpx.ASGITransport` runs the app to its end and buffers the whole body
before it returns the response: a streamed answer arrives all at once, `response.created`
cannot be seen before the model answers, a client cannot hang up mid-stream, and a scripted
delay is paid before the first byte instead of between chunks. Here the app runs as a task;
the response is returned as soon as the app sends `http.response.start`, and each body chunk
is handed to the reader the moment the app sends it.

What a client on a real socket would see is kept:
- an app that fails after the response started is a dropped connection: the reader gets
  `httpx.RemoteProtocolError` (what httpx raises when a server closes mid-body), with the
  app's exception as its `__cause__`;
- an app that fails before it started a response is a 500 (as uvicorn answers), or the
  exception itself with `raise_app_exceptions=True`;
- the request's `read` timeout (`httpx.Timeout`) bounds the wait for the headers and for each
  chunk, raising `httpx.ReadTimeout`, as httpcore does on a socket;
- closing the response early is a client disconnect: the app's `receive()` answers
  `http.disconnect` and its later `send()`s are dropped, as uvicorn does (ASGI spec 2.3, the
  version uvicorn declares, so Starlette's `StreamingResponse` listens for the disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

Message = MutableMapping[str, Any]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


class _Exchange:
    """One request/response exchange between a client and the app task."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Message | BaseException | None] = asyncio.Queue()
        self.disconnected = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class _StreamingBody(httpx.AsyncByteStream):
    def __init__(self, exchange: _Exchange, read_timeout: float | None) -> None:
        self._exchange = exchange
        self._timeout = read_timeout
        self._finished = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._finished:
            message = await _next(self._exchange, self._timeout)
            if message is None or isinstance(message, BaseException):
                self._finished = True
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    "(the in-process app ended mid-response)"
                ) from message
            if message["type"] != "http.response.body":
                continue
            body = message.get("body", b"")
            if not message.get("more_body", False):
                self._finished = True
            if body:
                yield body

    async def aclose(self) -> None:
        # A hang-up: the app learns it from `receive()` and goes on to its end, as on a server.
        self._finished = True
        self._exchange.disconnected.set()


async def _next(exchange: _Exchange, read_timeout: float | None) -> Message | BaseException | None:
    try:
        async with asyncio.timeout(read_timeout):
            return await exchange.messages.get()
    except TimeoutError:
        raise httpx.ReadTimeout("timed out reading from the in-process app") from None


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Call `app` in process, streaming its response. Use as
    `httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://app")`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        raise_app_exceptions: bool = False,
        client: tuple[str, int] = ("127.0.0.1", 123),
    ) -> None:
        self.app = app
        self.raise_app_exceptions = raise_app_exceptions
        self.client = client
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": self.client,
            "root_path": "",
            "extensions": {},
        }
        exchange = _Exchange()
        request_sent = False

        async def receive() -> Message:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await exchange.disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if exchange.disconnected.is_set():
                return  # uvicorn drops what an app sends after the client left
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                exchange.disconnected.set()  # uvicorn: receive() answers disconnect once done
            exchange.messages.put_nowait(message)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except asyncio.CancelledError:
                exchange.messages.put_nowait(None)
                raise
            except BaseException as exc:
                exchange.messages.put_nowait(exc)
                if not isinstance(exc, Exception):
                    raise
            else:
                exchange.messages.put_nowait(None)

        exchange.task = task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

        try:
            start = await _next(exchange, read_timeout)
            while isinstance(start, dict) and start["type"] != "http.response.start":
                start = await _next(exchange, read_timeout)
        except BaseException:
            exchange.disconnected.set()
            task.cancel()
            raise
        if start is None or isinstance(start, BaseException):
            if isinstance(start, BaseException) and self.raise_app_exceptions:
                raise start
            return httpx.Response(
                500,
                headers=[(b"content-type", b"text/plain; charset=utf-8")],
                content=b"Internal Server Error",
                request=request,
            )
        return httpx.Response(
            start["status"],
            headers=list(start.get("headers", [])),
            stream=_StreamingBody(exchange, read_timeout),
            request=request,
        )

    async def wait_idle(self) -> None:
        """Wait until every app task this transport started has ended (e.g. the work an app
        does after its client hung up)."""
        while pending := [task for task in self._tasks if not task.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def shutdown(self) -> None:
        """Cancel app tasks still running. (`aclose`, which every httpx client sharing this
        transport calls when it closes, leaves them alone, as closing one client does not stop
        a server.)"""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
