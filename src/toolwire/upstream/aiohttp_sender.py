"""toolwire's upstream sender on aiohttp: for `https://` upstreams (toolwire's own client,
`upstream/plain_http.py`, speaks plain HTTP only) and for every upstream with
`TOOLWIRE_UPSTREAM_CLIENT=aiohttp`. Its own module so that a server whose upstreams are all
`http://` never loads aiohttp (`transport.LazySender`); `upstream/transport.py` says why
aiohttp. Its answers fit `transport.Answer` by shape: importing it would close a circle.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping

import aiohttp
import certifi
import httpx


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
    ) -> _AiohttpAnswer:
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
        """The body as it arrives (chunked framing removed, content-encoding undone): each
        time, all that aiohttp holds, as `readany` returns it (`drain_buffered` says how)."""
        content = self._response.content
        fast = _CAN_DRAIN and type(content) is aiohttp.StreamReader
        try:
            while True:
                if fast:
                    # `read(1)` waits as `readany` does; the rest comes in one piece
                    data = await content.read(1)
                    if data and content._buffer:
                        data = drain_buffered(content, data)
                else:
                    data = await content.readany()
                if not data:
                    return
                yield data
        except BaseException as exc:
            raise _as_httpx(exc) from exc

    aiter_bytes = aiter_raw

    async def aread(self) -> bytes:
        """The whole body (content-encoding undone), in one call: no generator, one buffer
        drained once."""
        try:
            return await self._response.content.read()
        except BaseException as exc:
            raise _as_httpx(exc) from exc

    async def aclose(self) -> None:
        # `release` keeps the connection when the body was read to its end, else closes it.
        self._response.release()


#: aiohttp's StreamReader fields `drain_buffered` reads and writes: its private layout, as
#: aiohttp 3.14 has it (constraints.txt); any other version reads with `readany`
_DRAIN_FIELDS = {
    *("_buffer", "_buffer_offset", "_size", "_cursor", "_http_chunk_splits"),
    *("_low_water", "_low_water_chunks", "_protocol"),
}
_CAN_DRAIN = aiohttp.__version__.startswith("3.14.") and _DRAIN_FIELDS.issubset(
    getattr(aiohttp.StreamReader, "__slots__", ())
)


def drain_buffered(content: aiohttp.StreamReader, head: bytes) -> bytes:
    """`head` and then all the body `content` holds, in one piece, its buffer emptied: what
    `readany` gives, without its cost per buffered piece. A chunked body is buffered as one
    piece per HTTP chunk (a model server sends one per SSE event), and `readany` takes them one
    by one, re-running the flow control for each (`resume_reading`, an empty parse): ~0.7 µs an
    event, a fifth of a streamed chunk's whole cost. The flow control runs here once, at the
    end, as after `readany`'s last piece: reading resumes if it had paused and the buffer is
    now under its low-water mark. aiohttp's private fields (`_CAN_DRAIN`); a test compares
    the two readers' results and states piece by piece (tests/unit/test_upstream_drain.py)."""
    buffer = content._buffer
    pieces = [head, *buffer]
    buffer.clear()
    offset = content._buffer_offset
    if offset:
        pieces[1] = pieces[1][offset:]
        content._buffer_offset = 0
    data = b"".join(pieces)
    taken = len(data) - len(head)
    content._size -= taken
    content._cursor += taken
    splits = content._http_chunk_splits
    while splits and splits[0] < content._cursor:  # chunk ends now behind the reader
        splits.popleft()
    if content._size < content._low_water and (
        splits is None or len(splits) < content._low_water_chunks
    ):
        content._protocol.resume_reading()
    return data


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
