"""Upstream faults: typed errors, bounded retries, timeouts, broken streams, refused streaming."""

from __future__ import annotations

import asyncio
import socket

import pytest

from toolwire.errors import (
    UpstreamConnectionError,
    UpstreamHTTPError,
    UpstreamStreamError,
    UpstreamTimeoutError,
)
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import ModelEvent, TextDelta, ToolCallDone, TurnEnd
from toolwire.upstream.retry import RetryPolicy, parse_retry_after

TOOLS = [ToolSpec("get_weather")]


@pytest.fixture(autouse=True, params=["plain", "aiohttp", "pyreqwest"])
def upstream_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every fault here on each real-socket client (`upstream/transport.py`): the plain-HTTP
    one, the default for `http://` upstreams (`upstream/plain_http.py`), aiohttp (the default
    for `https://`, and everywhere with `TOOLWIRE_UPSTREAM_CLIENT=aiohttp`) and pyreqwest, the
    opt-in Rust one (`TOOLWIRE_UPSTREAM_CLIENT=pyreqwest`)."""
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_CLIENT", request.param)
    return str(request.param)


def request(stream: bool = True, tools: list[ToolSpec] | None = None) -> TurnRequest:
    return TurnRequest("m", [UserMessage("hi")], tools=tools or [], stream=stream)


async def run(upstream: ChatCompletionsUpstream, req: TurnRequest) -> list[ModelEvent]:
    return [event async for event in upstream.stream_turn(req)]


def text(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.fixture
async def fast(scripted: ScriptedUpstream) -> ChatCompletionsUpstream:
    upstream = ChatCompletionsUpstream(scripted.base_url, initial_backoff=0.01, max_backoff=0.02)
    yield upstream
    await upstream.aclose()


@pytest.mark.parametrize("stream", [True, False])
async def test_http_error_keeps_status_and_body_and_is_not_retried(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream, stream: bool
) -> None:
    scripted.add(Body({"error": {"message": "model 'x' not found"}}, status=404))
    with pytest.raises(UpstreamHTTPError) as info:
        await run(fast, request(stream))
    assert info.value.upstream_status == 404
    assert "model 'x' not found" in (info.value.upstream_body or "")
    assert "model 'x' not found" in info.value.message
    assert len(scripted.chat_requests) == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retryable_statuses_are_retried_then_succeed(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream, status: int
) -> None:
    scripted.add(Body({"error": {"message": "busy"}}, status=status), Reply(text="ok"))
    assert text(await run(fast, request())) == "ok"
    assert len(scripted.chat_requests) == 2


async def test_retries_are_bounded(scripted: ScriptedUpstream) -> None:
    upstream = ChatCompletionsUpstream(scripted.base_url, max_retries=2, initial_backoff=0.01)
    scripted.add(*[Body({"error": {"message": "overloaded"}}, status=503) for _ in range(5)])
    with pytest.raises(UpstreamHTTPError) as info:
        await run(upstream, request())
    await upstream.aclose()
    assert info.value.upstream_status == 503
    assert len(scripted.chat_requests) == 3  # one try and two retries


async def test_retry_after_zero_is_honoured(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(
        Body({"error": {"message": "slow down"}}, status=429, headers={"retry-after": "0"})
    )
    scripted.add(Reply(text="ok"))
    assert text(await run(fast, request(stream=False))) == "ok"


async def test_retry_after_beyond_the_bound_gives_up_at_once(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(Body({"error": {"message": "quota"}}, status=429, headers={"retry-after": "3600"}))
    with pytest.raises(UpstreamHTTPError) as info:
        await run(fast, request())
    assert info.value.upstream_status == 429
    assert len(scripted.chat_requests) == 1


def test_retry_policy_reads_retry_after_and_backs_off_exponentially() -> None:
    policy = RetryPolicy(max_retries=4, initial_backoff=1.0, max_backoff=3.0)
    assert policy.delay(0, "7") == 7.0
    assert policy.delay(4) is None
    assert 0.5 <= policy.delay(0) <= 1.0  # type: ignore[operator]
    assert 1.0 <= policy.delay(1) <= 2.0  # type: ignore[operator]
    assert 1.5 <= policy.delay(3) <= 3.0  # type: ignore[operator]  # capped
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert parse_retry_after("soon") is None


async def test_connection_refused_is_retried_then_typed() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    upstream = ChatCompletionsUpstream(
        f"http://127.0.0.1:{port}/v1", max_retries=2, initial_backoff=0.01
    )
    with pytest.raises(UpstreamConnectionError) as info:
        await run(upstream, request())
    await upstream.aclose()
    assert info.value.status == 502
    assert "could not reach the upstream" in info.value.message


async def test_read_timeout_before_the_answer(scripted: ScriptedUpstream) -> None:
    upstream = ChatCompletionsUpstream(scripted.base_url, read_timeout=0.2, max_retries=0)
    scripted.add(Body({"choices": []}, delay=3))
    with pytest.raises(UpstreamTimeoutError) as info:
        await run(upstream, request(stream=False))
    await upstream.aclose()
    assert info.value.status == 504


async def test_read_timeout_mid_stream(scripted: ScriptedUpstream) -> None:
    upstream = ChatCompletionsUpstream(scripted.base_url, read_timeout=0.2, max_retries=0)
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
    scripted.add(Chunks([chunk, chunk], delay=3))
    with pytest.raises(UpstreamTimeoutError):
        await run(upstream, request())
    await upstream.aclose()


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_stream_without_done_or_finish_reason_is_an_error(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(Chunks([_chunk({"content": "The answer is"})], done=False))
    with pytest.raises(UpstreamStreamError) as info:
        await run(fast, request())
    assert "without [DONE] or a finish reason" in info.value.message


async def test_stream_with_finish_reason_but_no_done_is_complete(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(Chunks([_chunk({"content": "fine"}), _chunk({}, "stop")], done=False))
    events = await run(fast, request())
    assert text(events) == "fine"
    assert events[-1] == TurnEnd("stop")


async def test_mid_stream_disconnect_is_an_error(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(
        Chunks([_chunk({"content": "par"}), _chunk({"content": "tial"})], disconnect_after=1)
    )
    with pytest.raises(UpstreamStreamError):
        await run(fast, request())


async def test_error_event_mid_stream_is_an_error(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(Chunks([_chunk({"content": "a"}), {"error": {"message": "CUDA out of memory"}}]))
    with pytest.raises(UpstreamStreamError) as info:
        await run(fast, request())
    assert "CUDA out of memory" in info.value.message


async def test_garbage_in_the_stream_is_an_error(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(Chunks(["data: {not json\n\n"]))
    with pytest.raises(UpstreamStreamError):
        await run(fast, request())


async def test_refused_tool_streaming_falls_back_and_is_remembered(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    refusal = {"error": {"message": "Automatic streaming tool choice is not supported"}}
    scripted.add(
        Body(refusal, status=500),
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="it is cold"),
    )
    events = await run(fast, request(tools=TOOLS))
    calls = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert text(await run(fast, request(tools=TOOLS))) == "it is cold"
    assert [r.body["stream"] for r in scripted.chat_requests] == [True, False, False]
    assert fast.refuses_streamed_tools


async def test_api_key_from_env_and_extra_headers_are_sent(
    scripted: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TW_TEST_KEY", "sk-test-123")
    upstream = ChatCompletionsUpstream(
        scripted.base_url, api_key_env="TW_TEST_KEY", headers={"X-Tenant": "blue"}
    )
    scripted.add(Reply(text="ok"))
    await run(upstream, request())
    await upstream.aclose()
    headers = scripted.chat_requests[0].headers
    assert headers["authorization"] == "Bearer sk-test-123"
    assert headers["x-tenant"] == "blue"


async def test_list_models(scripted: ScriptedUpstream, fast: ChatCompletionsUpstream) -> None:
    assert [m["id"] for m in await fast.list_models()] == ["scripted-model"]


async def test_a_stream_dropped_before_its_first_event_is_retried(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(
        Chunks([_chunk({"content": "never"})], disconnect_after=0), Reply(text="second try")
    )
    assert text(await run(fast, request())) == "second try"
    assert len(scripted.chat_requests) == 2


async def test_a_stream_dropped_after_events_went_out_is_not_retried(
    scripted: ScriptedUpstream, fast: ChatCompletionsUpstream
) -> None:
    scripted.add(
        Chunks([_chunk({"content": "half"}), _chunk({"content": "more"})], disconnect_after=1)
    )
    scripted.add(Reply(text="must not be used"))
    with pytest.raises(UpstreamStreamError):
        await run(fast, request())
    assert len(scripted.chat_requests) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_an_upstream_restart_loses_no_event(stream: bool) -> None:
    """The pooled keep-alive connection dies with the old server; the next turn reaches the new
    one on the same port, whole (the regression that once sent aiohttp back to httpx)."""
    first = ScriptedUpstream([Reply(text="before the restart")]).start()
    upstream = ChatCompletionsUpstream(first.base_url, initial_backoff=0.01, max_backoff=0.02)
    try:
        assert text(await run(upstream, request(stream))) == "before the restart"
        port = first.port
        first.stop()
        second = ScriptedUpstream([Reply(text="after the restart, every word")], port=port)
        for _ in range(100):  # the port frees once the old server's connections are gone
            try:
                second.start()
                break
            except OSError:
                await asyncio.sleep(0.05)
        try:
            events = await run(upstream, request(stream))
            assert text(events) == "after the restart, every word"
            assert events[-1] == TurnEnd("stop")
        finally:
            second.stop()
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("client", ["plain", "aiohttp", "httpx", "pyreqwest"])
async def test_either_http_client_streams_and_answers(
    client: str, scripted: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plain-HTTP client by default; TOOLWIRE_UPSTREAM_CLIENT=aiohttp the general one,
    =httpx the fallback, =pyreqwest the opt-in Rust client (docs/server.md)."""
    monkeypatch.setenv("TOOLWIRE_UPSTREAM_CLIENT", client)
    scripted.add(Reply(text="streamed"), Reply(text="whole"))
    upstream = ChatCompletionsUpstream(scripted.base_url)
    try:
        assert text(await run(upstream, request(stream=True))) == "streamed"
        assert text(await run(upstream, request(stream=False))) == "whole"
        assert (
            type(upstream._sender).__name__
            == {
                "plain": "PlainHttpSender",
                "aiohttp": "AiohttpSender",
                "httpx": "HttpxSender",
                "pyreqwest": "PyreqwestSender",
            }[client]
        )
    finally:
        await upstream.aclose()
