"""A stream's idle timeout (`upstream/chat_completions.py` `_until`): one timer for the stream,
which ends a read awaited past the deadline and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from toolwire.errors import UpstreamTimeoutError
from toolwire.transcript import UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream, _until
from toolwire.upstream.events import TextDelta


async def reads(*gaps: float) -> AsyncIterator[bytes]:
    for index, gap in enumerate(gaps):
        await asyncio.sleep(gap)
        yield b"%d" % index


async def collect(chunks: AsyncIterator[bytes], idle: float, slow: float = 0) -> list[bytes]:
    clock = asyncio.get_running_loop().time
    deadline = [clock() + idle]
    seen = []
    async for raw in _until(chunks, deadline, idle):
        seen.append(raw)
        deadline[0] = clock() + idle  # as the adapter moves it on each event
        await asyncio.sleep(slow)  # the consumer's own work
    return seen


async def test_a_read_awaited_past_the_deadline_is_the_idle_timeout() -> None:
    with pytest.raises(UpstreamTimeoutError) as caught:
        await collect(reads(0, 0.01, 10), idle=0.1)
    assert caught.value.code == "upstream_idle_timeout"


async def test_reads_within_the_deadline_all_arrive() -> None:
    assert await collect(reads(0.02, 0.02, 0.02, 0.02), idle=1.0) == [b"0", b"1", b"2", b"3"]


async def test_a_slow_consumer_is_not_timed_out_while_it_works() -> None:
    """Only an awaited read counts: the consumer's own time between reads is its own."""
    assert await collect(reads(0, 0, 0), idle=0.05, slow=0.12) == [b"0", b"1", b"2"]


async def test_another_cancellation_goes_on_as_a_cancellation() -> None:
    task = asyncio.ensure_future(collect(reads(0, 5), idle=10))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_timer_is_gone_once_the_stream_ends() -> None:
    assert await collect(reads(0), idle=0.05) == [b"0"]
    await asyncio.sleep(0.15)  # a timer left behind would cancel this task now


async def test_a_turn_closes_its_reads_itself() -> None:
    """Left to the loop's finalizer hook, the reads' generator would be closed by a task of its
    own, one a streamed turn (~1.5% of a /v1/responses request)."""
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'

    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield body + b"data: [DONE]\n\n"

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=Stream())

    upstream = ChatCompletionsUpstream("http://mock/v1", transport=httpx.MockTransport(answer))
    request = TurnRequest("m", [UserMessage("hi")], stream=True)
    try:
        before = asyncio.all_tasks()
        batches = [batch async for batch in upstream.stream_turn_batches(request)]
        await asyncio.sleep(0)  # the hook makes its task on the next turn of the loop
        assert asyncio.all_tasks() == before
    finally:
        await upstream.aclose()
    assert any(isinstance(event, TextDelta) for batch in batches for event in batch)
