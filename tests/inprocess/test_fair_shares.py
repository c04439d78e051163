"""Fair shares (issue 39): one API key cannot take every WebSocket slot or stream of a process
(`server/gate/shares.py`), and the messages queued on all WebSockets together are bounded in
memory (`server/responses/socket.py`: stop reading, then close 1013).

The attack: a key limited to 1 request a minute opened 256 sockets and locked every other
tenant out; 16 sockets queueing 8 messages of 3 MiB each grew the process by 297 MB."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway, Gate, app_gateway
from toolwire.server.gate.limits import Limits
from toolwire.server.gate.security import Security
from toolwire.server.responses.socket import ResponsesSocket
from toolwire.testing import Reply, ScriptedUpstream

MESSAGE = 50_000  # characters of input in each queued WebSocket message
CREATE = json.dumps({"type": "response.create", "model": "m", "input": "x" * MESSAGE})
HELD = sys.getsizeof(CREATE)  # what one message holds of the budget


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[AppGateway, Gate]]:
    """A gateway whose upstream holds every call until `gate.release` is set, with small
    shares: 2 running requests and 2 sockets a key, room for 3 queued messages in all. On a
    database file: a run cancelled in the middle of a write (a client gone) is what these
    tests cause, and the in-memory database's one shared aiosqlite connection, invalidated by
    it, leaves a closing task behind that never ends."""
    upstream = ScriptedUpstream()
    upstream.default = Reply(text="ok")
    gate = Gate(upstream)
    limits = Limits(
        max_streams_per_key=2,
        max_sockets_per_key=2,
        max_socket_queue_bytes=3 * HELD,
        socket_queue_wait=0.2,
    )
    async with app_gateway(
        upstream,
        tmp_path / "t.db",
        upstream_transport=gate.transport,
        security=Security(limits=limits),
    ) as gateway:
        yield gateway, gate
        gate.release.set()


class Socket:
    """A raw ASGI WebSocket into the app: messages to send, what came back."""

    def __init__(self, gw: AppGateway, key: str) -> None:
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.closed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.refused: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.completed = 0
        self.incoming.put_nowait({"type": "websocket.connect"})
        scope = {
            "type": "websocket",
            "asgi": {"version": "3.0"},
            "scheme": "ws",
            "path": "/v1/responses",
            "raw_path": b"/v1/responses",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
            "subprotocols": [],
            "extensions": {"websocket.http.response": {}},
        }
        self.task = asyncio.create_task(gw.app(scope, self.incoming.get, self._send))

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.http.response.start" and not self.refused.done():
            self.refused.set_result(message["status"])
        elif kind == "websocket.accept" and not self.accepted.done():
            self.accepted.set_result(None)
        elif kind == "websocket.close" and not self.closed.done():
            self.closed.set_result(message.get("code", 1000))
        elif kind == "websocket.send":
            event = json.loads(message["text"])
            self.sent.append(event)
            self.completed += event["type"] == "response.completed"

    def create(self, count: int = 1) -> None:
        for _ in range(count):
            self.incoming.put_nowait({"type": "websocket.receive", "text": CREATE})

    async def leave(self) -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(self.task, 10)


async def test_one_key_cannot_take_every_socket(gated: tuple[AppGateway, Gate]) -> None:
    gw, _ = gated
    _, hog = await gw.store.keys.create("hog", rpm=1)
    _, other = await gw.store.keys.create("other")
    held = [Socket(gw, hog) for _ in range(2)]
    for socket in held:
        await asyncio.wait_for(socket.accepted, 5)
    refused = Socket(gw, hog)
    assert await asyncio.wait_for(refused.refused, 5) == 429
    theirs = Socket(gw, other)  # another tenant still gets in
    theirs.create()
    await _until(lambda: len(theirs.sent) > 0)
    assert not theirs.refused.done()
    for socket in (*held, theirs):
        await socket.leave()
    again = Socket(gw, hog)  # a socket given back is a slot free again
    await asyncio.wait_for(again.accepted, 5)
    assert not again.refused.done()
    await again.leave()


async def test_one_key_cannot_take_every_stream(gated: tuple[AppGateway, Gate]) -> None:
    gw, gate = gated
    _, hog = await gw.store.keys.create("hog")
    _, other = await gw.store.keys.create("other")
    body = {"model": "m", "input": "hi", "stream": True}

    async def open_stream(key: str) -> Any:
        request = gw.http.build_request(
            "POST", "/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}
        )
        return await gw.http.send(request, stream=True)

    running = [await open_stream(hog) for _ in range(2)]
    refused = await open_stream(hog)
    theirs = await open_stream(other)
    assert [r.status_code for r in running] == [200, 200]
    assert refused.status_code == 429
    error = json.loads(await refused.aread())["error"]
    assert error["code"] == "rate_limit_exceeded" and "max_streams_per_key" in error["message"]
    assert refused.headers["retry-after"] == "1"
    assert theirs.status_code == 200
    gate.release.set()
    for answer in (*running, theirs):
        raw = await answer.aread()
        assert b"response.completed" in raw, raw[-1500:]
    await gw.transport.wait_idle()  # the requests have ended (their slots given back)
    again = await open_stream(hog)
    assert again.status_code == 200  # the slots came back
    assert b"response.completed" in await again.aread()


async def test_queued_websocket_messages_are_bounded_across_sockets(
    gated: tuple[AppGateway, Gate],
) -> None:
    """Room for 3 messages in all: the first socket's running response and its 2 queued take
    it; its 4th message waits unread; a second socket's message finds no room and the socket
    closes with 1013 (try again later). Once the responses run, every message of the first
    socket is answered, in order, and the room is free again."""
    async with asyncio.timeout(60):  # a hang here is a failure with its traceback
        await _bounded_across_sockets(*gated)


async def _bounded_across_sockets(gw: AppGateway, gate: Gate) -> None:
    _, key = await gw.store.keys.create("team")
    _, other = await gw.store.keys.create("other")
    door = _door(gw)
    first = Socket(gw, key)
    first.create(4)
    await asyncio.wait_for(gate.reached.wait(), 5)  # its first response is running
    await _until(lambda: door.queued.held == 3 * HELD)  # room taken
    second = Socket(gw, other)
    second.create()
    assert await asyncio.wait_for(second.closed, 5) == 1013
    assert door.queued.held <= door.queued.limit
    gate.release.set()
    await _until(lambda: first.completed == 4)
    await first.leave()
    await second.leave()
    assert door.queued.held == 0


def _door(gw: AppGateway) -> ResponsesSocket:
    for route in gw.app.routes:
        endpoint = getattr(route, "endpoint", None)
        owner = getattr(endpoint, "__self__", None)
        if isinstance(owner, ResponsesSocket):
            return owner
    raise AssertionError("no WebSocket route")


async def _until(condition: Any, seconds: float = 10) -> None:
    """Let the app run until `condition` holds (at most `seconds`)."""
    for _ in range(int(seconds * 100)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")
