"""How the chat-completions adapter sends its HTTP requests: toolwire's plain-HTTP client for
`http://` upstreams (`upstream/plain_http.py`), aiohttp for `https://` ones (and for every one
with `TOOLWIRE_UPSTREAM_CLIENT=aiohttp`), httpx through an injected transport (tests:
`ScriptedUpstream.in_process()`, `httpx.MockTransport`).

Why aiohttp over httpx: on the hot path the upstream client is most of what a gateway adds.
aiohttp parses HTTP in C and keeps one pool without per-request bookkeeping over every pooled
connection; httpx (httpcore + h11 + anyio) costs about twice the CPU per request and ~5 µs per
streamed chunk more (benchmarks/RESULTS.md, the floors). httpx stays for injected transports,
which are httpx's API. pyreqwest (Rust) is an opt-in: more requests per core under
concurrency, a slower lone request and more memory (benchmarks/STACK.md).

Every sender answers with the same small `Answer` surface (httpx.Response's names) and raises
httpx's exception classes for transport faults (`httpx.ConnectTimeout`, `ReadTimeout`,
`ConnectError`, `ReadError`...), so the adapter has one set of retry and error rules for all.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol, cast

import certifi
import httpx

from toolwire.errors import ConfigError


class Answer(Protocol):
    """An upstream's answer, its body not yet read. `httpx.Response` is one, so the surface is
    its names; plain_http's answer also has `ended` (its whole body is in), which the
    chat-completions adapter reads with `getattr` to skip the idle timer and the drain's
    timeout when nothing can wait (`upstream/chat_completions.py`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...  # case-insensitive `get`

    @property
    def charset_encoding(self) -> str | None: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aread(self) -> bytes: ...

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


class LazySender:
    """A sender made on its first request: aiohttp (~9 MB of a server's RSS, 85 modules) is
    loaded only by a server that sends to an `https://` upstream or asks for it by name."""

    def __init__(self, make: Callable[[], Sender]) -> None:
        self._make = make
        self._sender: Sender | None = None

    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Answer:
        if self._sender is None:
            self._sender = self._make()
        return await self._sender.send(method, url, body, headers)

    async def aclose(self) -> None:
        if self._sender is not None:
            await self._sender.aclose()


class PyreqwestSender:
    """One pooled pyreqwest client (reqwest + hyper in Rust; created on first use, in the
    running loop). `TOOLWIRE_UPSTREAM_CLIENT=pyreqwest`: measured beside aiohttp in
    benchmarks/STACK.md, not the default (see there for why)."""

    def __init__(
        self,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
    ) -> None:
        try:
            from pyreqwest.client import ClientBuilder
        except ImportError:
            raise ConfigError(
                "TOOLWIRE_UPSTREAM_CLIENT=pyreqwest needs pyreqwest: "
                "pip install 'toolwire[pyreqwest]'"
            ) from None
        with open(certifi.where(), "rb") as roots:
            pem = roots.read()
        self._builder = (
            ClientBuilder()
            .default_headers(headers)
            .connect_timeout(timedelta(seconds=connect_timeout))
            # per read, reset by each one: what aiohttp's `sock_read` is
            .read_timeout(timedelta(seconds=read_timeout))
            .max_connections(max_connections)
            .pool_idle_timeout(timedelta(seconds=60))
            .add_root_certificate_pem(pem)
            .gzip(True)
            .error_for_status(False)
        )
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Answer:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._builder.build(), loop
        builder = self._client.request(method, url)
        if headers:
            builder = builder.headers(dict(headers))
        if body is not None:
            builder = builder.body_bytes(body)
        # No read-ahead (its default is 64 KiB): a connection dropped mid-stream must surface
        # after the reads before it were handed over, not instead of them.
        request = builder.streamed_read_buffer_limit(1).build_streamed()
        # the streamed request's context: entered here, left by the answer's `aclose` (the
        # adapter holds an answer across its generators, not inside one `async with`)
        try:
            response = await request.__aenter__()
        except BaseException as exc:
            raise _reqwest_as_httpx(exc) from exc
        return _PyreqwestAnswer(request, response)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
        self._client = None


class _PyreqwestAnswer:
    __slots__ = ("_closed", "_request", "_response")

    def __init__(self, request: Any, response: Any) -> None:
        self._request = request
        self._response = response
        self._closed = False

    @property
    def status_code(self) -> int:
        return int(self._response.status)

    @property
    def headers(self) -> Mapping[str, str]:
        return cast("Mapping[str, str]", self._response.headers)

    @property
    def charset_encoding(self) -> str | None:
        _, _, charset = (self._response.get_header("content-type") or "").partition("charset=")
        return charset.split(";")[0].strip().strip('"') or None

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives (chunked framing removed, gzip undone)."""
        reader = self._response.body_reader
        try:
            while (data := await reader.read_chunk()) is not None:
                yield bytes(data)
        except BaseException as exc:
            raise _reqwest_as_httpx(exc) from exc

    aiter_bytes = aiter_raw

    async def aread(self) -> bytes:
        return b"".join([data async for data in self.aiter_raw()])

    async def aclose(self) -> None:
        # a body not read to its end drops the connection instead of pooling it
        if not self._closed:
            self._closed = True
            await self._request.__aexit__(None, None, None)


def _reqwest_as_httpx(exc: BaseException) -> BaseException:
    """A pyreqwest fault as httpx's exception for the same fault (the module's docstring)."""
    from pyreqwest import exceptions as rq

    if isinstance(exc, rq.ConnectTimeoutError) and not _in_connect(exc):
        # pyreqwest 0.15 names a wait for the answer's head a connect timeout too; only a
        # cause from hyper's connector ("client error (Connect)") says the request never left
        # (retried), else the upstream may hold it (a read timeout: never sent twice)
        return httpx.ReadTimeout(str(exc) or "read timeout")
    if isinstance(exc, rq.ConnectTimeoutError | rq.PoolTimeoutError):
        return httpx.ConnectTimeout(str(exc) or "connect timeout")
    if isinstance(exc, rq.RequestTimeoutError):
        return httpx.ReadTimeout(str(exc) or "read timeout")
    if isinstance(exc, rq.ConnectError):
        return httpx.ConnectError(str(exc))
    if isinstance(exc, rq.RequestError):
        return httpx.ReadError(f"{type(exc).__name__}: {exc}")
    return exc


def _in_connect(exc: BaseException) -> bool:
    details = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
    return any("(Connect)" in str(cause.get("message")) for cause in details.get("causes", []))


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
    if os.environ.get("TOOLWIRE_UPSTREAM_CLIENT") == "pyreqwest":
        return PyreqwestSender(
            headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_connections=max_connections,
        )

    def aiohttp_sender() -> Sender:
        from toolwire.upstream.aiohttp_sender import AiohttpSender

        return AiohttpSender(
            headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_connections=max_connections,
        )

    if os.environ.get("TOOLWIRE_UPSTREAM_CLIENT") == "aiohttp":
        return aiohttp_sender()
    from toolwire.upstream.plain_http import PlainHttpSender

    return PlainHttpSender(
        headers,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_connections=max_connections,
        fallback=LazySender(aiohttp_sender),
    )
