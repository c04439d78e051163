"""One live MCP client session, owned by its own task.

The official SDK's transports are anyio context managers that must be entered and left by the
same task; a pooled session outlives the request that opened it. So each connection runs in a
task of its own that enters the transport and the `ClientSession`, then waits to be told to stop;
requests use the session from wherever they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from toolwire.child_stderr import stderr_tail
from toolwire.tools.mcp.address import RefusedAddress, guarded_client_factory

# The SDK is imported when a connection opens, not with toolwire: it is ~37 MB of a server's
# memory, and most servers never speak MCP.
if TYPE_CHECKING:
    from mcp import ClientSession

Opener = Callable[[], AbstractAsyncContextManager[Any]]


class McpConnectionError(Exception):
    """The server could not be reached or did not speak MCP; the message says which and why.
    `refused`: toolwire itself refused the address (`address.py`), nothing was sent."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class McpConnection:
    def __init__(self, description: str, opener: Opener) -> None:
        self.description = description
        self._opener = opener
        self.session: ClientSession | None = None
        self.broken = False
        self.last_used = time.monotonic()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, handshake_seconds: float = 30.0) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp {self.description}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), handshake_seconds)
        except TimeoutError:
            await self.close()
            raise McpConnectionError(
                f"{self.description}: no MCP handshake within {handshake_seconds:g} s"
            ) from None

    async def _own(self, ready: asyncio.Future[None]) -> None:
        from mcp import ClientSession

        try:
            async with self._opener() as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.session = session
                    ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:  # reported to whoever waits; the connection is dead
            self.broken = True
            if not ready.done():
                error = (
                    exc
                    if isinstance(exc, McpConnectionError) and str(exc).startswith(self.description)
                    else McpConnectionError(
                        f"{self.description}: {_reason(exc)}",
                        refused=isinstance(_innermost(exc), RefusedAddress)
                        or getattr(exc, "refused", False),
                    )
                )
                ready.set_exception(error)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.broken = True
            self.session = None

    @property
    def alive(self) -> bool:
        return (
            not self.broken
            and self.session is not None
            and self._task is not None
            and not self._task.done()
        )

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5)
            except (TimeoutError, asyncio.CancelledError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an exception (the SDK wraps them in exception groups)."""
    exc = _innermost(exc)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def streamable_http_opener(url: str, headers: dict[str, str], *, guarded: bool = False) -> Opener:
    """`guarded`: every request's address checked and pinned (`address.py`)."""

    @asynccontextmanager
    async def open_streamable() -> AsyncIterator[Any]:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        factory = guarded_client_factory if guarded else create_mcp_http_client
        async with (
            factory(headers=headers) as client,
            streamable_http_client(url, http_client=client) as streams,
        ):
            yield streams

    return open_streamable


def sse_opener(url: str, headers: dict[str, str], *, guarded: bool = False) -> Opener:
    @asynccontextmanager
    async def open_sse() -> AsyncIterator[Any]:
        from mcp.client.sse import sse_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        factory = guarded_client_factory if guarded else create_mcp_http_client
        async with sse_client(url, headers=headers, httpx_client_factory=factory) as streams:
            yield streams

    return open_sse


def stdio_opener(
    command: str, args: list[str], env: dict[str, str] | None, cwd: str | None
) -> Opener:
    @asynccontextmanager
    async def open_stdio() -> AsyncIterator[Any]:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=command, args=args, env={**os.environ, **(env or {})}, cwd=cwd
        )
        # A server's stderr chatter is not ours to print, but when it dies its last lines are
        # what says why ("No module named ..."): kept in a temporary file, shown on failure.
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams
            except Exception as exc:
                tail = stderr_tail(errlog)
                if not tail:
                    raise
                raise McpConnectionError(
                    f"{_reason(exc)}; the server's stderr ended with: {tail}"
                ) from exc

    return open_stdio
