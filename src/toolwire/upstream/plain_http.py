"""The upstream client for plain-HTTP model servers (`http://`, how vLLM, SGLang, llama.cpp,
Ollama and LMDeploy are served next to a gateway): HTTP/1.1 on the event loop's own transports,
answers parsed by httptools (llhttp in C, the parser uvicorn serves toolwire's own requests
with). `https://` upstreams go to aiohttp (`upstream/transport.py`), TLS and all.

Why by hand: under callgrind, aiohttp's general-purpose client was ~460k instructions of a
proxied chat request, as much as the whole uvicorn + aiohttp forward that is the benchmark's
floor, and a third of toolwire's request (benchmarks/MISSED.md). What a gateway asks of its
upstream client is one shape: send a body in hand on a pooled keep-alive connection, read the
answer as it arrives. No cookies, redirects, proxies, auth flows or multipart, which is most of
what a general client does per request. This module does that one shape and nothing else.

What it keeps of aiohttp's behaviour (the adapter's retry and error rules rely on it, and
`tests/integration/test_upstream_faults.py` runs every fault on each client):
- faults as httpx's exception classes: a refused or failed connect `ConnectError`, no
  connection in `connect_timeout` `ConnectTimeout`, no byte of the answer for `read_timeout`
  while one is awaited `ReadTimeout`, a connection lost or an answer that is not HTTP
  `ReadError`;
- one pool of at most `max_connections` connections (a request past it waits for one, within
  `connect_timeout`); a connection goes back to it only when its answer was read to its end and
  the server keeps it alive; idle ones are closed after `KEEPALIVE` seconds;
- back-pressure: the socket stops being read while `HIGH_WATER` bytes of the answer wait for
  the reader, as aiohttp's stream reader does;
- `content-encoding` gzip (its members one after another) and deflate (zlib-wrapped or raw)
  undone, `INFLATE_STEP` bytes at a time (toolwire asks for none: `accept-encoding:
  identity`).

And what a server that is broken or hostile must not get from it (each tested in
`tests/integration/test_plain_http.py`): an interim answer (100, 103) is skipped, never taken
for the answer, so no request reads another's; bytes after an answer close the connection;
an answer's head, chunk framing and trailers are bounded (`MAX_HEAD_BYTES`, 256 headers); a
connection goes back to the pool only read to its end, with its request all sent and its
socket reading; framing and connection headers (`_FRAMING`) are this client's to write.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httptools
import httpx

#: Idle pooled connections are closed after this long (aiohttp's `keepalive_timeout` here).
KEEPALIVE = 60.0
#: Answer bytes held for the reader before the socket stops being read.
HIGH_WATER = 256 * 1024
#: The most an answer's status line and headers may take (aiohttp's bound is 8 KiB a line):
#: the parser holds a header until it ends, so a server that never ends one is cut off.
MAX_HEAD_BYTES = 64 * 1024

_Key = tuple[str, int]
#: Headers about the connection and the body's framing: this client writes its own (`host`,
#: `content-length`), and a configured one of these would make the server read the request
#: otherwise than it is sent.
_FRAMING = (
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "expect",
    "upgrade",
    "te",
    "trailer",
    "host",
)
#: The most gzip or deflate output produced in one step: a small compressed answer may stand
#: for gigabytes, so it is inflated in pieces, each one read (and bounded) by the adapter.
INFLATE_STEP = 64 * 1024
#: gzip members read one after another in one answer, at most.
MAX_GZIP_MEMBERS = 64


class PlainHttpSender:
    """`send` for `http://` URLs on its own pool; any other URL through `fallback` (aiohttp),
    made on first use."""

    def __init__(
        self,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
        fallback: Any,
    ) -> None:
        self._headers = {name.lower(): value for name, value in headers.items()}
        self._headers.setdefault("accept-encoding", "identity")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._most = max_connections
        self._fallback = fallback
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[_Key, bytes]] = {}
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> Any:
        if not url.startswith("http://"):
            return await self._fallback.send(method, url, body, headers)
        key, head = self._head(method, url, headers)
        if body is None:
            message = head + b"\r\n" if method == "GET" else head + b"content-length: 0\r\n\r\n"
        else:
            message = b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
        connection = self._pooled(key) or await self._connection(key)
        try:
            return await connection.exchange(message)
        except BaseException:
            self.release(connection, False)
            raise

    async def aclose(self) -> None:
        self._closed = True
        for connection in [*self._idle, *self._busy]:
            connection.close()
        self._idle.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        await self._fallback.aclose()

    # -- the request's head -----------------------------------------------------------------

    def _head(self, method: str, url: str, headers: Mapping[str, str] | None) -> tuple[_Key, bytes]:
        """The request line and headers, without `content-length`: made once per method, URL
        and header set (the adapter sends a few fixed sets; a trace context's varies, so the
        table is cleared when it grows)."""
        extra = tuple(headers.items()) if headers else ()
        found = self._heads.get((method, url, extra))
        if found is not None:
            return found
        parsed = httpx.URL(url)
        host = parsed.host
        if not host:
            raise httpx.UnsupportedProtocol(f"no host in the upstream URL {url!r}")
        port = parsed.port or 80
        target = parsed.raw_path.decode("ascii")
        merged = dict(self._headers)
        merged.update((name.lower(), value) for name, value in extra)
        for name in _FRAMING:  # this client frames the request itself: one body, one length
            merged.pop(name, None)
        named = f"[{host}]" if ":" in host else host  # an IPv6 address
        merged["host"] = named if parsed.port is None else f"{named}:{port}"
        lines = [f"{method} {target} HTTP/1.1\r\n"]
        for name, value in merged.items():
            if any(c in name or c in value for c in "\r\n\0"):
                raise ValueError(f"the upstream header {name!r} holds a line break")
            lines.append(f"{name}: {value}\r\n")
        try:
            head = "".join(lines).encode("latin-1")
        except UnicodeEncodeError as exc:
            raise ValueError(f"an upstream header is not Latin-1 text: {exc}") from None
        found = ((host, port), head)
        if len(self._heads) >= 64:
            self._heads.clear()
        self._heads[(method, url, extra)] = found
        return found

    # -- the pool ---------------------------------------------------------------------------

    def _pooled(self, key: _Key) -> _Connection | None:
        """An idle pooled connection to `key` still fit for use (now in use), or None; any
        other idle one it finds on the way is closed. Not a coroutine: most requests find one."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a pool is bound to its loop (tests run several)
            self._idle.clear()
            self._busy.clear()
            self._waiters.clear()
            self._opening = 0
            self._sweeper = None
            self._loop = loop
        idle = self._idle
        while idle:
            connection = idle.pop()
            if connection.key == key and connection.usable(loop.time()):
                self._busy.add(connection)
                return connection
            connection.close()
        return None

    async def _connection(self, key: _Key) -> _Connection:
        """A pooled connection to `key`, or a new one; past `max_connections`, the first to be
        released, within `connect_timeout`."""
        pooled = self._pooled(key)
        if pooled is not None:
            return pooled
        loop = asyncio.get_running_loop()
        if len(self._busy) + self._opening >= self._most:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(self.connect_timeout):
                    await waiter
            except BaseException as exc:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # the turn it was given goes to the next in line
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                if isinstance(exc, TimeoutError):
                    raise httpx.ConnectTimeout(
                        f"no upstream connection came free in {self.connect_timeout:g} s "
                        f"({self._most} in use)"
                    ) from None
                raise
            return await self._connection(key)
        self._opening += 1
        try:
            connection = await self._open(loop, key)
        except BaseException:
            self._wake_one()  # the place it held in the pool is free again
            raise
        finally:
            self._opening -= 1
        self._busy.add(connection)
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())
        return connection

    async def _open(self, loop: asyncio.AbstractEventLoop, key: _Key) -> _Connection:
        host, port = key
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, key), host, port
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} in {self.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        return connection

    def release(self, connection: _Connection, reusable: bool) -> None:
        """The answer is done with: the connection back to the pool (or to the first request
        waiting for one), or closed."""
        self._busy.discard(connection)
        if reusable and not self._closed and self._loop is connection.loop:
            connection.idle_since = connection.loop.time()
            self._idle.append(connection)
        else:
            connection.close()
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _sweep(self) -> None:
        """While the pool holds connections: an awaited answer that sent nothing for
        `read_timeout` fails with `ReadTimeout`, an idle connection past `KEEPALIVE` is closed.
        One timer for the pool, not one per request."""
        period = max(0.01, min(1.0, self.read_timeout / 8))
        loop = asyncio.get_running_loop()
        while self._busy or self._idle:
            await asyncio.sleep(period)
            now = loop.time()
            for connection in list(self._busy):
                connection.check_timeout(now, self.read_timeout)
            if self._idle and now - self._idle[0].idle_since > KEEPALIVE:
                keep = [c for c in self._idle if now - c.idle_since <= KEEPALIVE]
                for connection in self._idle:
                    if now - connection.idle_since > KEEPALIVE:
                        connection.close()
                self._idle[:] = keep
        if self._sweeper is asyncio.current_task():
            self._sweeper = None


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one exchange at a time, its answer's bytes held for the
    reader (`_PlainAnswer`)."""

    def __init__(self, pool: PlainHttpSender, key: _Key) -> None:
        self.pool = pool
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser: Any = httptools.HttpResponseParser(self)  # one per connection, reused
        self.expecting = False  # a request is out and its answer not yet whole
        self.closed = False
        self.idle_since = 0.0
        self._active = 0.0  # loop time of the last byte in, or of the wait's start
        self._answer: asyncio.Future[_PlainAnswer] | None = None
        self._reading: asyncio.Future[None] | None = None  # a reader waits for body bytes
        self._names: list[bytes] = []
        self._values: list[bytes] = []
        self.body: list[bytes] = []
        self.held = 0
        self.paused = False
        self.done = False
        self.headers_done = False
        self.keep_alive = False
        self.interim = False  # a 1xx answer is being read: the real one follows it
        self._framing = 0  # bytes of heads, chunk framing and trailers since the last body
        self._body_seen = 0
        self.error: BaseException | None = None

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.expecting:  # bytes with no request out: not a server to keep talking to
            self.close()
            return
        self._active = self.loop.time()
        seen = self._body_seen
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if isinstance(cause, _TooManyHeaders):
                problem = "has more than 256 headers"
            elif isinstance(cause, _Unasked):
                problem = "was followed by bytes nobody asked for"
            else:
                problem = f"is not valid HTTP/1.1: {exc}"
            self._fail(httpx.ReadError(f"the upstream's answer {problem}"))
            self.close()
            return
        # What is not body (a head, chunk framing, trailers) is held by the parser until its
        # line ends: bounded, whether it comes before the body or after it (a trailer).
        self._framing += len(data) - (self._body_seen - seen)
        if self._framing > MAX_HEAD_BYTES + 65536 and self.expecting:
            self._fail(
                httpx.ReadError(f"the upstream's answer head is larger than {MAX_HEAD_BYTES} bytes")
            )
            self.close()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.expecting:
            return
        if self.headers_done and self._delimited_by_close():
            self.on_message_complete()
            return
        cause = f": {exc}" if exc else ""
        self._fail(httpx.ReadError(f"the upstream closed the connection mid-answer{cause}"))

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if not self.expecting:  # a message after the answer (pipelined by a broken server)
            raise _Unasked  # the parser stops: the connection is closed, never reused
        self._names, self._values = [], []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._names.append(name)
        self._values.append(value)
        if len(self._names) > 256:
            raise _TooManyHeaders  # the parser stops: `HttpParserCallbackError`

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # interim (100 Continue, 103 Early Hints): the answer follows
            self.interim = True
            return
        self.headers_done = True
        self.keep_alive = bool(self.parser.should_keep_alive())  # reset once the answer ends
        answer = _PlainAnswer(self, status, self._names, self._values)
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.held += len(body)
        self._body_seen += len(body)
        self._framing = 0
        if self.held > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.done = True
        self.expecting = False
        self._wake()

    # -- the exchange -----------------------------------------------------------------------

    async def exchange(self, message: bytes) -> _PlainAnswer:
        """Write the request; the answer once its head is in."""
        self.expecting = True
        self._framing = 0
        self._names, self._values, self.body = [], [], []
        self.done, self.headers_done, self.error = False, False, None
        self.taken()  # a previous answer refused unread may have paused the socket
        answer: asyncio.Future[_PlainAnswer] = self.loop.create_future()
        self._answer = answer
        self._active = self.loop.time()
        assert self.transport is not None
        self.transport.write(message)
        try:
            return await answer
        finally:
            self._answer = None

    def usable(self, now: float) -> bool:
        transport = self.transport
        return (
            not self.closed
            and transport is not None
            and not transport.is_closing()
            and now - self.idle_since <= KEEPALIVE
        )

    def check_timeout(self, now: float, limit: float) -> None:
        if (self._answer is not None or self._reading is not None) and now - self._active > limit:
            self._fail(httpx.ReadTimeout(f"the upstream sent nothing for {limit:g} s"))
            self.close()

    async def wait_body(self) -> None:
        """Until more of the body, its end or a fault."""
        self._active = self.loop.time()
        self._reading = waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self._reading = None

    def taken(self) -> None:
        """The reader took what was held: read the socket again if it had stopped."""
        self.held = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def reusable(self) -> bool:
        """Read to its end, kept alive, and the request all sent (an answer that came before
        the request was written, a 413 say, leaves the rest of it on the wire)."""
        return (
            self.done
            and self.error is None
            and not self.closed
            and self.keep_alive
            and self.transport is not None
            and self.transport.get_write_buffer_size() == 0
        )

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        waiter = self._reading
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self.done:  # the answer is whole: what follows it fails no reader
            return
        if self.error is None:
            self.error = error
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(error)
        waiter = self._reading
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def _delimited_by_close(self) -> bool:
        """An answer with neither a length nor chunks ends when the server closes."""
        names = [name.lower() for name in self._names]
        return b"content-length" not in names and b"transfer-encoding" not in names


class _TooManyHeaders(Exception):
    pass


class _Unasked(Exception):
    pass


class _Headers(Mapping[str, str]):
    """An answer's headers, case-insensitive (the adapter reads `headers.get(name)`)."""

    __slots__ = ("_map",)

    def __init__(self, names: list[bytes], values: list[bytes]) -> None:
        found: dict[str, str] = {}
        for name, value in zip(names, values, strict=True):
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            found[key] = f"{found[key]}, {text}" if key in found else text
        self._map = found

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:
        return self._map.get(name.lower(), default)

    def __iter__(self) -> Any:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)


class _PlainAnswer:
    """The `Answer` surface (`upstream/transport.py`) over one connection's answer."""

    __slots__ = ("_connection", "_inflater", "_refused", "_released", "headers", "status_code")

    def __init__(
        self, connection: _Connection, status: int, names: list[bytes], values: list[bytes]
    ) -> None:
        self._connection = connection
        self.status_code = status
        self.headers = _Headers(names, values)
        self._released = False
        encoding = self.headers.get("content-encoding", "identity").strip().lower()
        self._inflater: _Inflater | None = None
        self._refused: str | None = None
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflater = _Inflater(gzip=encoding != "deflate")
        elif encoding not in ("identity", ""):
            self._refused = (
                f"the upstream's content-encoding {encoding!r} is not one toolwire reads "
                "(gzip, deflate)"
            )

    @property
    def charset_encoding(self) -> str | None:
        _, _, charset = self.headers.get("content-type", "").partition("charset=")
        return charset.split(";")[0].strip().strip('"') or None

    @property
    def ended(self) -> bool:
        """The body's end is in: what is left of it is read without waiting on the network
        (the adapter drains it after `[DONE]` with no timer then)."""
        return self._connection.done

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives, all that is held in one piece each time."""
        while (data := await self._next()) is not None:
            if data:
                yield data

    aiter_bytes = aiter_raw

    async def aread(self) -> bytes:
        """The whole body, in one call (no generator); when it is all in and plain, taken as
        it is (what `_next` would give, without its calls)."""
        connection = self._connection
        if (
            connection.done
            and connection.error is None
            and self._inflater is None
            and self._refused is None
        ):
            pieces = connection.body
            if not pieces:
                return b""
            connection.body = []
            connection.taken()
            return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        parts: list[bytes] = []
        while (data := await self._next()) is not None:
            parts.append(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _next(self) -> bytes | None:
        """What the connection holds (decoded; possibly empty), once some is there; None at
        the end of the body."""
        connection = self._connection
        if self._refused is not None:
            raise httpx.ReadError(self._refused)
        inflater = self._inflater
        while True:
            if connection.error is not None:
                raise connection.error
            if inflater is not None and (out := self._inflated(inflater.step)):
                return out
            if connection.body:
                pieces = connection.body
                connection.body = []
                connection.taken()
                data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                if inflater is None:
                    return data
                inflater.feed(data)
                continue
            if connection.done:
                if inflater is not None:
                    self._inflated(inflater.finish)
                return None
            await connection.wait_body()

    def _inflated(self, step: Any) -> bytes:
        try:
            return bytes(step())
        except zlib.error as exc:
            error = httpx.ReadError(f"the upstream's compressed answer is corrupt: {exc}")
            self._connection._fail(error)
            raise error from exc

    async def aclose(self) -> None:
        """Back to the pool when the answer was read to its end, else the connection closes."""
        if not self._released:
            self._released = True
            connection = self._connection
            connection.pool.release(connection, connection.reusable())

    def __del__(self) -> None:
        # dropped without `aclose` (a caller's bug): its connection must not hold a pool slot
        # for good, as the pool would stall once `max_connections` were held so; on the
        # connection's loop (the collector may run this on any thread)
        if not self._released:
            self._released = True
            connection = self._connection
            with contextlib.suppress(Exception):
                if _running_loop() is connection.loop:
                    connection.pool.release(connection, False)
                elif not connection.loop.is_closed():
                    connection.loop.call_soon_threadsafe(connection.pool.release, connection, False)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Inflater:
    """A gzip body (its members one after another) or a deflate one (zlib-wrapped or raw, as
    servers send both), inflated at most `INFLATE_STEP` bytes at a time: what a few compressed
    bytes stand for is never held at once, and the adapter's size bound reads it piece by
    piece."""

    __slots__ = ("_gzip", "_members", "_more", "_tail", "_z")

    def __init__(self, *, gzip: bool) -> None:
        self._gzip = gzip
        self._z: Any = None
        self._tail = b""  # compressed bytes not inflated yet
        self._more = False  # the last step stopped at its bound
        self._members = 0

    def feed(self, data: bytes) -> None:
        self._tail = self._tail + data if self._tail else data

    def step(self) -> bytes:
        """Up to `INFLATE_STEP` bytes inflated from what was fed; empty when it needs more."""
        while self._tail or self._more:
            if self._z is None:
                if not self._tail:
                    self._more = False
                    return b""
                self._z = zlib.decompressobj(self._wbits())
            out: bytes = self._z.decompress(self._tail, INFLATE_STEP)
            self._tail = self._z.unconsumed_tail
            self._more = len(out) == INFLATE_STEP
            if self._z.eof:
                self._more = False  # an ended stream holds no more output
                rest = self._z.unused_data
                if self._gzip and rest:  # the next member
                    self._tail = rest + self._tail
                    self._z = None
                else:
                    self._tail = b""  # past a deflate stream's end: nothing of the answer
            if out:
                return out
        return b""

    def finish(self) -> bytes:
        """At the body's end: nothing may be left (a stream cut short is an error)."""
        if self._tail or self._more or (self._z is not None and not self._z.eof):
            raise zlib.error("the compressed answer ended early")
        return b""

    def _wbits(self) -> int:
        if self._gzip:
            self._members += 1
            if self._members > MAX_GZIP_MEMBERS:
                raise zlib.error(f"more than {MAX_GZIP_MEMBERS} gzip members")
            return zlib.MAX_WBITS | 16
        # a zlib header's first byte says method 8 (deflate) in its low bits; else raw
        return zlib.MAX_WBITS if self._tail[0] & 0x0F == 8 else -zlib.MAX_WBITS
