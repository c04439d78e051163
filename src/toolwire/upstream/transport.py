"""How the chat-completions adapter sends its HTTP requests: aiohttp over real sockets, httpx
through an injected transport (tests: `ScriptedUpstream.in_process()`, `httpx.MockTransport`).

Why aiohttp by default: on the hot path the upstream client is most of what a gateway adds.
aiohttp parses HTTP in C and keeps one pool without per-request bookkeeping over every pooled
connection; httpx (httpcore + h11 + anyio) costs about twice the CPU per request and ~5 µs per
streamed chunk more (benchmarks/RESULTS.md, the floors). httpx stays for injected transports,
which are httpx's API.

Both senders answer with the same small `Answer` surface (httpx.Response's names), and both
raise httpx's exception classes for transport faults (`httpx.ConnectTimeout`, `ReadTimeout`,
`ConnectError`, `ReadError`...), so the adapter has one set of retry and error rules for both.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

import aiohttp
import certifi
import httpx


class Answer(Protocol):
    """An upstream's answer, its body not yet read."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...  # case-insensitive `get`

    @property
    def charset_encoding(self) -> str | None: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Sender(Protocol):
    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Answer: ...

    async def aclose(self) -> None: ...


class HttpxSender:
    """Requests through an injected httpx transport (every request; limits and TLS do not apply
    to it, timeouts go in each request's extensions as httpx does)."""

    def __init__(
        self, headers: dict[str, str], timeout: httpx.Timeout, transport: httpx.AsyncBaseTransport
    ) -> None:
        self.client = httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport)

    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Answer:
        request = self.client.build_request(method, url, content=body, headers=headers)
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


class AiohttpSender:
    """One pooled aiohttp session (created on first use, in the running loop: aiohttp binds a
    session to its loop)."""

    def __init__(
        self,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
    ) -> None:
        self._headers = headers
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=read_timeout
        )
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tls: ssl.SSLContext | None = None

    def _session_now(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            if self._tls is None:
                self._tls = ssl.create_default_context(cafile=certifi.where())
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=60.0,
                ssl=self._tls,
                ttl_dns_cache=60,
            )
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=self._timeout,
                connector=connector,
                auto_decompress=True,
                raise_for_status=False,
            )
            self._loop = loop
        return self._session

    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Answer:
        session = self._session_now()
        try:
            response = await session.request(method, url, data=body, headers=headers)
        except BaseException as exc:
            raise _as_httpx(exc) from exc
        return _AiohttpAnswer(response)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


class _AiohttpAnswer:
    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status_code(self) -> int:
        return self._response.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    @property
    def charset_encoding(self) -> str | None:
        return self._response.charset

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives (chunked framing removed, content-encoding undone)."""
        content = self._response.content
        try:
            while True:
                data = await content.readany()
                if not data:
                    return
                yield data
        except BaseException as exc:
            raise _as_httpx(exc) from exc

    aiter_bytes = aiter_raw

    async def aclose(self) -> None:
        # `release` keeps the connection when the body was read to its end, else closes it.
        self._response.release()


def _as_httpx(exc: BaseException) -> BaseException:
    """An aiohttp fault as httpx's exception for the same fault (see the module's docstring);
    anything else (cancellation, our own errors) unchanged."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(str(exc) or "connect timeout")
    if isinstance(exc, aiohttp.ServerTimeoutError):  # sock_read: no byte for read_timeout
        return httpx.ReadTimeout(str(exc) or "read timeout")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(exc))
    if isinstance(exc, aiohttp.ClientError | ConnectionError):
        name = type(exc).__name__
        return httpx.ReadError(f"{name}: {exc}" if str(exc) else name)
    return exc


def sender(
    headers: dict[str, str],
    *,
    connect_timeout: float,
    read_timeout: float,
    max_connections: int,
    transport: httpx.AsyncBaseTransport | None,
) -> Sender:
    if transport is None and os.environ.get("TOOLWIRE_UPSTREAM_CLIENT") == "httpx":
        # httpx's own pool on real sockets: a fallback should aiohttp misbehave with a server
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=60.0,
        )
        tls = ssl.create_default_context(cafile=certifi.where())
        transport = httpx.AsyncHTTPTransport(limits=limits, verify=tls)
    if transport is not None:
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        return HttpxSender(headers, timeout, transport)
    return AiohttpSender(
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_connections=max_connections,
    )
