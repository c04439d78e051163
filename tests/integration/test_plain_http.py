"""The plain-HTTP upstream client (`upstream/plain_http.py`) against real servers on loopback:
its pool, its bounds and its reading of answers a model server or a proxy in front of one may
send. The faults the adapter turns into typed errors and retries run on every client in
`test_upstream_faults.py`."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from toolwire.upstream.plain_http import HIGH_WATER, PlainHttpSender

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A loopback server answering each request with `answer(n)` (its bytes), counting its
    connections."""

    def __init__(self, answer: Callable[[int], bytes | None], *, close_after: bool = False):
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_client = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = self.answer(len(self.requests))
                if answer is None:  # never answer
                    await reader.read()
                    self.closed_by_client.set()
                    return
                writer.write(answer)
                await writer.drain()
                if self.close_after:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client.set()
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/v1/chat/completions"
        finally:
            self.server.close()


def ok(body: bytes = b'{"ok":true}', *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    return head + b"".join(extra) + b"content-length: %d\r\n\r\n" % len(body) + body


class NoFallback:
    async def send(self, *args: Any) -> Any:
        raise AssertionError("an http:// URL went to the general client")

    async def aclose(self) -> None:
        pass


def sender(**options: Any) -> PlainHttpSender:
    settings = {"connect_timeout": 2.0, "read_timeout": 5.0, "max_connections": 8}
    settings.update(options)
    return PlainHttpSender({"authorization": "Bearer k"}, fallback=NoFallback(), **settings)


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Until `condition` holds (polled), failing past `within` seconds: no fixed sleep."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.005)


async def read_error(answer: bytes, match: str, *, close_after: bool = False) -> None:
    """One request answered with `answer` ends in a `ReadError` saying `match`."""
    server = Server(lambda n: answer, close_after=close_after)
    client = sender()
    async with server.running() as url:
        with pytest.raises(httpx.ReadError, match=match):
            await fetch(client, url)
    await client.aclose()


async def fetch(client: PlainHttpSender, url: str, body: bytes = b"{}") -> tuple[int, bytes]:
    answer = await client.send("POST", url, body, {"content-type": "application/json"})
    try:
        return answer.status_code, b"".join([piece async for piece in answer.aiter_raw()])
    finally:
        await answer.aclose()


async def test_sequential_requests_share_one_connection_and_send_what_was_asked() -> None:
    server = Server(lambda n: ok(b'{"n":%d}' % n))
    client = sender()
    async with server.running() as url:
        answers = [await fetch(client, url, b'{"q":%d}' % i) for i in range(5)]
    await client.aclose()
    assert answers == [(200, b'{"n":%d}' % (i + 1)) for i in range(5)]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nauthorization: Bearer k\r\n" in first
    assert b"\r\ncontent-type: application/json\r\n" in first
    assert b"\r\ncontent-length: 7\r\n" in first and first.endswith(b'{"q":0}')
    assert b"\r\nhost: 127.0.0.1:" in first


async def test_an_answer_that_closes_the_connection_is_not_reused() -> None:
    server = Server(lambda n: ok(b"{}", b"connection: close\r\n"), close_after=True)
    client = sender()
    async with server.running() as url:
        assert [await fetch(client, url) for _ in range(3)] == [(200, b"{}")] * 3
    await client.aclose()
    assert server.connections == 3


async def test_a_connection_the_server_dropped_while_idle_is_not_used_again() -> None:
    server = Server(lambda n: ok(), close_after=True)  # says keep-alive, closes anyway
    client = sender()
    async with server.running() as url:
        for _ in range(2):
            assert await fetch(client, url) == (200, b'{"ok":true}')
            await until(lambda: all(c.closed for c in client._idle))  # the close reached it
    await client.aclose()
    assert server.connections == 2


async def test_a_gzip_answer_is_read_as_text_and_an_unknown_encoding_is_an_error() -> None:
    packed = gzip.compress(b'{"text":"hello"}')
    server = Server(
        lambda n: (
            ok(packed, b"content-encoding: gzip\r\n")
            if n == 1
            else ok(b"xx", b"content-encoding: zstd\r\n")
        )
    )
    client = sender()
    async with server.running() as url:
        assert await fetch(client, url) == (200, b'{"text":"hello"}')
        with pytest.raises(httpx.ReadError, match="content-encoding 'zstd'"):
            await fetch(client, url)
    await client.aclose()
    assert b"\r\naccept-encoding: identity\r\n" in server.requests[0]


async def test_an_answer_without_a_length_ends_when_the_server_closes() -> None:
    server = Server(lambda n: b"HTTP/1.1 200 OK\r\n\r\nall of it", close_after=True)
    client = sender()
    async with server.running() as url:
        assert await fetch(client, url) == (200, b"all of it")
    await client.aclose()


async def test_an_answer_cut_short_is_an_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhalf"
    await read_error(cut, "closed the connection mid-answer", close_after=True)


async def test_a_head_that_never_ends_is_cut_off() -> None:
    endless = b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * (400 * 1024)
    await read_error(endless, "head is larger than")


async def test_too_many_headers_is_an_error() -> None:
    server = Server(lambda n: ok(b"{}", *[b"x-h%d: v\r\n" % i for i in range(300)]))
    client = sender()
    async with server.running() as url:
        with pytest.raises(httpx.ReadError, match="more than 256 headers"):
            await fetch(client, url)
    await client.aclose()


async def test_no_answer_within_the_read_timeout_is_a_read_timeout() -> None:
    server = Server(lambda n: None)
    client = sender(read_timeout=0.3)
    async with server.running() as url:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await fetch(client, url)
        assert time.monotonic() - started < 3
        await asyncio.wait_for(server.closed_by_client.wait(), 2)
    await client.aclose()


async def test_past_max_connections_a_request_waits_for_a_free_one() -> None:
    server = Server(lambda n: ok(b'{"n":%d}' % n))
    client = sender(max_connections=1, connect_timeout=0.3)
    async with server.running() as url:
        held = await client.send("POST", url, b"{}", None)  # its body not read: still busy
        waiting = asyncio.ensure_future(fetch(client, url))
        with pytest.raises(httpx.ConnectTimeout, match="no upstream connection came free"):
            await waiting
        later = asyncio.ensure_future(fetch(client, url))
        await until(lambda: len(client._waiters) == 1)  # it waits for the held connection
        assert [piece async for piece in held.aiter_raw()] == [b'{"n":1}']
        await held.aclose()
        assert await later == (200, b'{"n":2}')
    await client.aclose()
    assert server.connections == 1


async def test_a_request_cancelled_while_waiting_closes_its_connection() -> None:
    server = Server(lambda n: None if n == 1 else ok())
    client = sender()
    async with server.running() as url:
        task = asyncio.ensure_future(fetch(client, url))
        await until(lambda: len(server.requests) == 1)  # in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(server.closed_by_client.wait(), 2)
        assert await fetch(client, url) == (200, b'{"ok":true}')
    await client.aclose()
    assert server.connections == 2


async def test_an_unread_answer_holds_a_bounded_amount() -> None:
    big = b"x" * (8 * 1024 * 1024)
    server = Server(lambda n: ok(big))
    client = sender()
    async with server.running() as url:
        answer = await client.send("POST", url, b"{}", None)
        connection = answer._connection
        await until(lambda: connection.paused)  # the server writes on; nobody reads
        assert connection.held <= HIGH_WATER + 1024 * 1024  # the mark, and reads in flight
        whole = await answer.aread()  # reading again once it is taken
        await answer.aclose()
    await client.aclose()
    assert whole == big


async def test_a_header_with_a_line_break_is_refused() -> None:
    client = sender()
    with pytest.raises(ValueError, match="line break"):
        await client.send("POST", "http://127.0.0.1:9/x", b"{}", {"x-bad": "a\r\nhost: evil"})


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 here")
async def test_an_ipv6_upstream_is_named_in_brackets() -> None:
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        await reader.readexactly(2)
        writer.write(ok())
        await writer.drain()
        writer.close()

    try:
        server = await asyncio.start_server(handle, "::1", 0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = server.sockets[0].getsockname()[1]
    client = sender()
    try:
        assert await fetch(client, f"http://[::1]:{port}/v1/x") == (200, b'{"ok":true}')
    finally:
        server.close()
        await client.aclose()
    assert b"\r\nhost: [::1]:%d\r\n" % port in seen[0]


async def test_an_https_url_goes_to_the_general_client() -> None:
    sent: list[str] = []

    class Fallback:
        async def send(self, method: str, url: str, body: Any, headers: Any) -> str:
            sent.append(url)
            return "answered by aiohttp"

        async def aclose(self) -> None:
            sent.append("closed")

    client = PlainHttpSender(
        {}, connect_timeout=1, read_timeout=1, max_connections=1, fallback=Fallback()
    )
    assert await client.send("POST", "https://api.example/v1/x", b"{}", None) == (
        "answered by aiohttp"
    )
    await client.aclose()
    assert sent == ["https://api.example/v1/x", "closed"]


async def test_an_answer_dropped_unclosed_gives_its_connection_back() -> None:
    """A caller that drops an answer without `aclose` must not hold a pool slot for good."""
    server = Server(lambda n: ok(b'{"n":%d}' % n))
    client = sender(max_connections=1, connect_timeout=0.5)
    async with server.running() as url:
        answer = await client.send("POST", url, b"{}", None)
        del answer  # never read, never closed
        assert await fetch(client, url) == (200, b'{"n":2}')
    await client.aclose()


async def test_an_interim_answer_is_skipped_and_no_request_gets_another_ones_answer() -> None:
    """A 100 Continue or 103 Early Hints before the answer (RFC 9110: a client must accept
    them unasked) is not the answer: read as one, the real answer would reach the next
    request on the pooled connection."""
    server = Server(
        lambda n: (
            b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
            + ok(b"answer %d" % n, b"x-n: %d\r\n" % n)
        )
    )
    client = sender()
    async with server.running() as url:
        assert [await fetch(client, url) for _ in range(3)] == [
            (200, b"answer 1"),
            (200, b"answer 2"),
            (200, b"answer 3"),
        ]
    await client.aclose()


async def test_bytes_after_the_answer_are_not_read_as_part_of_it_nor_reused() -> None:
    server = Server(lambda n: ok(b"hello") + b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nEVIL!")
    client = sender()
    async with server.running() as url:
        assert await fetch(client, url) == (200, b"hello")
        assert await fetch(client, url) == (200, b"hello")
    await client.aclose()
    assert server.connections == 2  # the first one was not trusted again


async def test_a_compressed_answer_is_inflated_in_bounded_pieces() -> None:
    """A few compressed bytes may stand for gigabytes: never held whole."""
    big = b"a" * (32 * 1024 * 1024)
    server = Server(lambda n: ok(gzip.compress(big), b"content-encoding: gzip\r\n"))
    client = sender()
    async with server.running() as url:
        answer = await client.send("POST", url, b"{}", None)
        sizes = [len(piece) async for piece in answer.aiter_raw()]
        await answer.aclose()
    await client.aclose()
    assert sum(sizes) == len(big)
    assert max(sizes) <= 64 * 1024


async def test_gzip_members_and_raw_deflate_are_read_as_aiohttp_reads_them() -> None:
    import zlib

    members = gzip.compress(b"first|") + gzip.compress(b"second")
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated = raw.compress(b"raw deflate") + raw.flush()
    server = Server(
        lambda n: (
            ok(members, b"content-encoding: gzip\r\n")
            if n == 1
            else ok(deflated, b"content-encoding: deflate\r\n")
        )
    )
    client = sender()
    async with server.running() as url:
        assert await fetch(client, url) == (200, b"first|second")
        assert await fetch(client, url) == (200, b"raw deflate")
    await client.aclose()


async def test_a_failed_connect_frees_its_place_for_the_next_request_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once closed
    client = sender(max_connections=1, connect_timeout=30)
    url = f"http://127.0.0.1:{port}/v1/x"
    results = await asyncio.gather(fetch(client, url), fetch(client, url), return_exceptions=True)
    await client.aclose()
    # the second did not wait out connect_timeout (a ConnectTimeout): it was let in and refused
    assert all(type(r) is httpx.ConnectError for r in results), results


async def test_an_endless_trailer_is_cut_off() -> None:
    endless = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-t: "
        + b"a" * (400 * 1024)
    )
    await read_error(endless, "head is larger than")


async def test_an_answer_refused_unread_leaves_its_connection_readable() -> None:
    """Past the high-water mark the socket stops being read; a connection pooled so would
    never read its next answer."""
    server = Server(lambda n: ok(b"x" * (HIGH_WATER + 44 * 1024)) if n == 1 else ok(b"small"))
    client = sender(read_timeout=1)
    async with server.running() as url:
        answer = await client.send("POST", url, b"{}", None)
        await until(lambda: answer._connection.done)  # all of it arrived; nobody read it
        assert answer._connection.paused
        await answer.aclose()
        assert await fetch(client, url) == (200, b"small")
    await client.aclose()


async def test_framing_headers_from_the_configuration_are_not_sent() -> None:
    server = Server(lambda n: ok())
    client = PlainHttpSender(
        {"transfer-encoding": "chunked", "connection": "close", "x-team": "a"},
        connect_timeout=1,
        read_timeout=1,
        max_connections=1,
        fallback=NoFallback(),
    )
    async with server.running() as url:
        assert await fetch(client, url, b"{}") == (200, b'{"ok":true}')
    await client.aclose()
    head = server.requests[0].lower()
    assert b"transfer-encoding" not in head and b"connection:" not in head
    assert b"x-team: a" in head and b"content-length: 2" in head


async def test_a_pooled_connection_and_a_whole_body_are_taken_without_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The common request: an idle pooled connection taken as it is (no coroutine of the
    pool's), and a body all in read as it is (no `_next`): the same bytes either way."""
    server = Server(lambda n: ok(b'{"n":%d}' % n))
    client = sender()
    async with server.running() as url:
        assert await fetch(client, url, b"{}") == (200, b'{"n":1}')

        async def no_wait(*_: Any) -> Any:
            raise AssertionError("waited")

        monkeypatch.setattr(PlainHttpSender, "_connection", no_wait)
        answer = await client.send("POST", url, b"{}", None)
        await until(lambda: answer._connection.done)  # type: ignore[attr-defined]
        monkeypatch.setattr(type(answer), "_next", no_wait)
        assert (answer.status_code, await answer.aread()) == (200, b'{"n":2}')
        await answer.aclose()
    await client.aclose()
    assert server.connections == 1


async def test_a_stream_all_in_is_read_and_drained_without_a_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream's whole body in one read: as `ended` says nothing can wait, the adapter reads
    it with no idle timer (`_until`) and drains it after `[DONE]` (so the connection goes back
    to the pool) with no `asyncio.timeout`; the connection is reused all the same."""
    from toolwire.transcript import UserMessage
    from toolwire.upstream import chat_completions
    from toolwire.upstream.base import TurnRequest
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    def no_timer(*_: Any) -> Any:
        raise AssertionError("an idle timer for a body all in")

    monkeypatch.setattr(chat_completions, "_until", no_timer)

    events = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    server = Server(lambda n: head + b"\r\n" + body)
    timers: list[str] = []
    timeout = asyncio.timeout

    def spied(delay: float | None) -> Any:
        timers.append(sys._getframe(1).f_code.co_name)
        return timeout(delay)

    monkeypatch.setattr(asyncio, "timeout", spied)
    async with server.running() as url:
        upstream = ChatCompletionsUpstream(url.removesuffix("/chat/completions"))
        request = TurnRequest(model="m", transcript=[UserMessage("x")], stream=True)
        for _ in range(2):
            texts = [getattr(e, "text", None) async for e in upstream.stream_turn(request)]
            assert "hi" in texts
        await upstream.aclose()
    assert "_drain" not in timers
    assert server.connections == 1
