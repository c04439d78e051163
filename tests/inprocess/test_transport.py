"""The in-process harness itself: the streaming ASGI transport, `ScriptedUpstream.in_process()`,
and `ChatCompletionsUpstream(transport=...)`. Real sockets are not used anywhere here."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from toolwire.errors import UpstreamHTTPError, UpstreamStreamError, UpstreamTimeoutError
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream
from toolwire.testing.asgi import StreamingASGITransport
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import ModelEvent, TextDelta, ToolCallDone, TurnEnd


def request(stream: bool = True, tools: list[ToolSpec] | None = None) -> TurnRequest:
    return TurnRequest("m", [UserMessage("hi")], tools=tools or [], stream=stream)


async def run(upstream: ChatCompletionsUpstream, req: TurnRequest) -> list[ModelEvent]:
    return [event async for event in upstream.stream_turn(req)]


def text(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# -- the transport ---------------------------------------------------------------------------


async def test_chunks_reach_the_reader_while_the_app_is_still_running() -> None:
    """The reason the transport is hand-written: httpx.ASGITransport would wait for the app's
    end (here: forever) before returning anything."""
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b"second", "more_body": False})

    async with (
        httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://app") as client,
        client.stream("GET", "/") as response,
    ):
        chunks = response.aiter_raw()
        assert await anext(chunks) == b"first"
        release.set()
        assert [chunk async for chunk in chunks] == [b"second"]


async def test_a_client_hang_up_reaches_the_app_as_http_disconnect() -> None:
    seen: list[str] = []
    finished = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        seen.append((await receive())["type"])
        await send({"type": "http.response.body", "body": b"dropped", "more_body": True})
        finished.set()

    transport = StreamingASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        async with client.stream("GET", "/") as response:
            assert await anext(response.aiter_raw()) == b"a"
        await transport.wait_idle()
    assert seen == ["http.disconnect"] and finished.is_set()


async def test_an_app_failing_before_its_response_is_a_500_or_raised() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("bug")

    async with httpx.AsyncClient(
        transport=StreamingASGITransport(app), base_url="http://app"
    ) as client:
        response = await client.get("/")
    assert response.status_code == 500 and response.text == "Internal Server Error"
    strict = StreamingASGITransport(app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=strict, base_url="http://app") as client:
        with pytest.raises(RuntimeError, match="bug"):
            await client.get("/")


async def test_the_read_timeout_bounds_the_wait_for_headers() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()  # never answers

    transport = StreamingASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/", timeout=httpx.Timeout(5, read=0.01))
    await transport.wait_idle()  # the app task was cancelled, not left behind


# -- ScriptedUpstream in process -------------------------------------------------------------


async def test_in_process_upstream_plays_replies_streamed_and_whole(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Reply(text="streamed answer"), Reply(text="whole answer"))
    upstream = fake_upstream.adapter()
    assert text(await run(upstream, request())) == "streamed answer"
    assert text(await run(upstream, request(stream=False))) == "whole answer"
    await upstream.aclose()
    assert [r.body["stream"] for r in fake_upstream.chat_requests] == [True, False]
    assert fake_upstream.base_url == "http://scripted-upstream.invalid/v1"


async def test_in_process_disconnect_is_a_broken_stream_after_the_chunks_before_it(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Chunks([_chunk({"content": "half"}), _chunk({"content": "more"})], disconnect_after=1)
    )
    upstream = fake_upstream.adapter(max_retries=0)
    seen: list[ModelEvent] = []
    with pytest.raises(UpstreamStreamError, match="RemoteProtocolError"):
        async for event in upstream.stream_turn(request()):
            seen.append(event)
    await upstream.aclose()
    assert text(seen) == "half"


async def test_in_process_stream_dropped_before_its_first_event_is_retried(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Chunks([_chunk({"content": "never"})], disconnect_after=0), Reply(text="second try")
    )
    upstream = fake_upstream.adapter(initial_backoff=0.001, max_backoff=0.002)
    assert text(await run(upstream, request())) == "second try"
    await upstream.aclose()
    assert len(fake_upstream.chat_requests) == 2


async def test_in_process_read_timeout_mid_stream_is_typed(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Chunks([_chunk({"content": "a"}), _chunk({"content": "b"})], delay=30))
    upstream = fake_upstream.adapter(read_timeout=0.01, max_retries=0)
    with pytest.raises(UpstreamTimeoutError):
        await run(upstream, request())
    await upstream.aclose()


async def test_in_process_http_errors_and_models(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Body({"error": {"message": "model 'x' not found"}}, status=404))
    upstream = fake_upstream.adapter()
    with pytest.raises(UpstreamHTTPError) as info:
        await run(upstream, request())
    assert info.value.upstream_status == 404 and "model 'x' not found" in info.value.message
    assert [m["id"] for m in await upstream.list_models()] == ["scripted-model"]
    await upstream.aclose()


async def test_in_process_refused_tool_streaming_falls_back(
    fake_upstream: ScriptedUpstream,
) -> None:
    refusal = {"error": {"message": "Automatic streaming tool choice is not supported"}}
    fake_upstream.add(
        Body(refusal, status=500), Reply(tool_calls=[("get_weather", {"city": "Oslo"})])
    )
    upstream = fake_upstream.adapter()
    events = await run(upstream, request(tools=[ToolSpec("get_weather")]))
    await upstream.aclose()
    calls = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert [r.body["stream"] for r in fake_upstream.chat_requests] == [True, False]


# -- any transport ---------------------------------------------------------------------------


async def test_the_adapter_sends_through_an_injected_mock_transport() -> None:
    seen: list[httpx.Request] = []

    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        body = {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "mocked"},
                    "finish_reason": "stop",
                }
            ]
        }
        return httpx.Response(200, content=orjson.dumps(body))

    upstream = ChatCompletionsUpstream(
        "http://example.invalid/v1",
        transport=httpx.MockTransport(handle),
        api_key="sk-mock",
        headers={"X-Tenant": "blue"},
    )
    events = await run(upstream, request(stream=False))
    await upstream.aclose()
    assert text(events) == "mocked" and events[-1] == TurnEnd("stop")
    assert str(seen[0].url) == "http://example.invalid/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-mock"
    assert seen[0].headers["x-tenant"] == "blue"
