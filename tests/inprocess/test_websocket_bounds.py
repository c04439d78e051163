"""A WebSocket client cannot make the server buffer without bound: while a response runs,
the socket reads at most `QUEUED` + 2 messages (the running one, the queue, the one waiting to
be queued); the rest stay with the client (its sends back up, as on any full socket).

Driven as raw ASGI, so that what the server took from the socket is counted exactly."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.inprocess_gateway import Gate, app_gateway, websocket_scope
from toolwire.server.responses.socket import QUEUED
from toolwire.testing import Reply, ScriptedUpstream

SENT = 10


async def test_a_socket_reads_a_bounded_number_of_messages_ahead() -> None:
    upstream = ScriptedUpstream()
    gate = Gate(upstream)  # holds the running response at the upstream until released
    async with app_gateway(upstream, upstream_transport=gate.transport) as gw:
        upstream.add(*(Reply(text=f"answer {i}") for i in range(SENT)))
        create = json.dumps({"type": "response.create", "model": "m", "input": "hi"})
        offered = [{"type": "websocket.connect"}] + [
            {"type": "websocket.receive", "text": create} for _ in range(SENT)
        ]
        taken = 0
        leave = asyncio.Event()
        completed: list[dict[str, Any]] = []
        all_done = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal taken
            if taken < len(offered):
                taken += 1
                return offered[taken - 1]
            await leave.wait()
            return {"type": "websocket.disconnect", "code": 1000}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.send":
                event = json.loads(message["text"])
                if event["type"] == "response.completed":
                    completed.append(event)
                    if len(completed) == SENT:
                        all_done.set()

        served = asyncio.create_task(gw.app(websocket_scope(), receive, send))
        await asyncio.wait_for(gate.reached.wait(), 10)  # the first response is running
        for _ in range(200):  # let the reader take all it will (loop turns, not time)
            await asyncio.sleep(0)
        read_ahead = taken - 1  # the connect is not a message
        gate.release.set()
        await asyncio.wait_for(all_done.wait(), 30)  # nothing was lost: all answered in turn
        leave.set()
        await asyncio.wait_for(served, 10)
    assert read_ahead == QUEUED + 2, read_ahead
    assert [e["response"]["output"][0]["content"][0]["text"] for e in completed] == [
        f"answer {i}" for i in range(SENT)
    ]
