"""`EventStreamResponse` (server/http/streaming.py): Starlette's `StreamingResponse` without its
task group: the same messages, the body streamed from the request's own task, a disconnect
stopping the body and ending the response quietly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

from toolwire.server.http.streaming import EventStreamResponse

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}
HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


async def _chunks(tasks: list[asyncio.Task[Any] | None]) -> AsyncIterator[bytes]:
    for chunk in (b"event: a\ndata: {}\n\n", b"event: b\ndata: {}\n\n"):
        tasks.append(asyncio.current_task())
        yield chunk


async def _sent(response: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await never.wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await response(SCOPE, receive, send)
    return messages


async def test_it_sends_what_starlettes_streaming_response_sends() -> None:
    ours = await _sent(EventStreamResponse(_chunks([]), headers=HEADERS))
    theirs = await _sent(
        StreamingResponse(_chunks([]), media_type="text/event-stream", headers=HEADERS)
    )
    assert ours == theirs
    assert (b"content-type", b"text/event-stream; charset=utf-8") in ours[0]["headers"]


async def test_the_body_is_streamed_from_the_requests_own_task() -> None:
    tasks: list[asyncio.Task[Any] | None] = []
    await _sent(EventStreamResponse(_chunks(tasks)))
    assert tasks == [asyncio.current_task()] * 2


async def test_a_disconnect_stops_the_body_and_ends_the_response_quietly() -> None:
    stopped = asyncio.Event()
    sent: list[dict[str, Any]] = []
    left = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            await asyncio.Event().wait()  # the run waits on its upstream
            yield b"data: 2\n\n"
        finally:
            stopped.set()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body"):
            left.set()  # the client leaves after the first chunk

    await asyncio.wait_for(EventStreamResponse(body())(SCOPE, receive, send), 5)
    assert stopped.is_set()
    assert [m.get("body") for m in sent] == [None, b"data: 1\n\n"]
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_stream_that_ends_soon_makes_no_watcher_task() -> None:
    """The disconnect is watched for only once the stream has run `WATCH_AFTER` seconds (a
    task made and cancelled per response costs more than most streams last)."""
    before = len(asyncio.all_tasks())
    seen: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        seen.append(len(asyncio.all_tasks()))
        yield b"data: 1\n\n"

    await _sent(EventStreamResponse(body()))
    assert seen == [before]


async def test_a_disconnect_while_sending_still_closes_the_body_before_returning() -> None:
    """The cancellation can land in `send` (a slow client), not in the body: its `finally`
    runs before the response returns, not whenever the generator is collected."""
    closed = asyncio.Event()
    left = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            while True:
                yield b"data: x\n\n"
        finally:
            closed.set()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            left.set()
            await asyncio.Event().wait()  # the client reads nothing more: the send blocks

    response = EventStreamResponse(body())
    await asyncio.wait_for(response(SCOPE, receive, send), 5)
    assert closed.is_set()


async def test_a_cancellation_from_elsewhere_is_not_swallowed_by_a_disconnect() -> None:
    """A shutdown cancelling the request as its client leaves: the response does not end as
    if only the client had left."""

    async def body() -> AsyncIterator[bytes]:
        while True:
            yield b"data: x\n\n"
            await asyncio.sleep(0.01)

    async def serve() -> None:
        async def receive() -> dict[str, Any]:
            await asyncio.sleep(0.3)  # after WATCH_AFTER: the watcher is listening
            request.cancel()  # the server shuts down in the same pass
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            pass

        await EventStreamResponse(body())(SCOPE, receive, send)

    request = asyncio.get_running_loop().create_task(serve())
    try:
        await asyncio.wait_for(request, 5)
    except asyncio.CancelledError:
        return
    raise AssertionError("the shutdown's cancellation was swallowed")
