"""Pooled MCP connections, one per (server, credentials), closed after sitting idle.

The pool key holds a digest of the credentials, never the credentials themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field

from toolwire.scrub import Scrubber
from toolwire.tools.mcp.connection import (
    McpConnection,
    McpConnectionError,
    Opener,
    sse_opener,
    stdio_opener,
    streamable_http_opener,
)
from toolwire.tools.mcp.redact import credential_scrubber, redact_url, redact_urls


@dataclass(slots=True, frozen=True)
class McpServerSpec:
    """Where an MCP server is and how to reach it. Exactly one of `url` and `command`."""

    label: str
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    cwd: str | None = None
    trusted: bool = False
    """True for servers from toolwire's own config; a request's `server_url` is not: its
    address is checked (`address.py`) and its errors say nothing of what answered."""

    @property
    def where(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()

    @property
    def shown(self) -> str:
        """`where`, safe to show: credentials in a URL are redacted."""
        return redact_url(self.url) if self.url else self.where

    @property
    def scrubber(self) -> Scrubber:
        """Takes this server's credentials, in every form, out of what it answers."""
        return credential_scrubber(self.url, self.headers, self.env)

    def key(self) -> tuple[str, str]:
        secret = "\n".join(f"{k.lower()}={v}" for k, v in sorted(self.headers.items()))
        digest = hashlib.sha256(
            (secret + "\n" + repr(sorted(self.env.items()))).encode()
        ).hexdigest()
        return (self.where, digest)


class McpPool:
    """`allow_private_urls`: request-supplied servers may be on loopback, private and
    link-local addresses (the operator's `mcp_allow_private_urls`)."""

    def __init__(self, idle_seconds: float = 300.0, *, allow_private_urls: bool = False) -> None:
        self.idle_seconds = idle_seconds
        self.allow_private_urls = allow_private_urls
        self._connections: dict[tuple[str, str], McpConnection] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def acquire(self, spec: McpServerSpec) -> McpConnection:
        await self._expire()
        key = spec.key()
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            connection = self._connections.get(key)
            if connection is not None and connection.alive:
                connection.last_used = time.monotonic()
                return connection
            if connection is not None:
                await connection.close()
            connection = await self._connect(spec)
            self._connections[key] = connection
            return connection

    async def _connect(self, spec: McpServerSpec) -> McpConnection:
        try:
            return await self._open(spec)
        except McpConnectionError as exc:
            if not spec.trusted and not exc.refused:
                # Whatever answered (or did not) stays unsaid: no remote body, and no telling
                # a closed port from an open one that is not an MCP server.
                raise McpConnectionError(
                    f"MCP server '{spec.label}' at {spec.shown}: could not connect, or it did "
                    "not answer as an MCP server"
                ) from None
            # the libraries' messages may quote the URL, credentials and all
            message = spec.scrubber.text(redact_urls(str(exc)))
            raise McpConnectionError(message, refused=exc.refused) from None

    async def _open(self, spec: McpServerSpec) -> McpConnection:
        description = f"MCP server '{spec.label}' at {spec.shown}"
        if spec.command:
            return await _started(
                description, stdio_opener(spec.command, list(spec.args), spec.env, spec.cwd)
            )
        assert spec.url is not None
        guarded = not spec.trusted and not self.allow_private_urls
        if spec.url.rstrip("/").endswith("/sse"):
            return await _started(description, sse_opener(spec.url, spec.headers, guarded=guarded))
        try:
            return await _started(
                description, streamable_http_opener(spec.url, spec.headers, guarded=guarded)
            )
        except McpConnectionError as streamable_error:
            if streamable_error.refused:
                raise
            try:
                return await _started(
                    description, sse_opener(spec.url, spec.headers, guarded=guarded)
                )
            except McpConnectionError:
                raise streamable_error from None

    def discard(self, spec: McpServerSpec) -> None:
        """Forget a connection that failed mid-call; the next use reconnects."""
        connection = self._connections.pop(spec.key(), None)
        if connection is not None:
            asyncio.get_running_loop().create_task(connection.close())

    async def _expire(self) -> None:
        now = time.monotonic()
        for key, connection in list(self._connections.items()):
            if not connection.alive or now - connection.last_used > self.idle_seconds:
                del self._connections[key]
                await connection.close()

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()


async def _started(description: str, opener: Opener) -> McpConnection:
    connection = McpConnection(description, opener)
    await connection.start()
    return connection
