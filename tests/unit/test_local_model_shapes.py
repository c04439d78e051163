"""The managed model's request shapes and the adapter's handling of what it answers: pure, no
model (the e2e tests run the real one)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from toolwire.errors import UpstreamStreamError
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream, strip_traceback
from toolwire.upstream.events import ModelEvent, TextDelta, ToolCallDone
from toolwire.upstream.llama_child import render_prompt, rewrite_body


def test_tool_results_are_rendered_for_the_model() -> None:
    prompt = render_prompt(
        [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "temperature_c: 4"},
        ],
        None,
        True,
    )
    assert 'functions.get_weather:\n{"city":"Oslo"}' in prompt
    assert "The result of get_weather:\ntemperature_c: 4" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_required_offers_no_message_route() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert "message:" not in render_prompt([{"role": "user", "content": "x"}], tools, False)
    assert "message:" in render_prompt([{"role": "user", "content": "x"}], tools, True)


def test_json_schema_response_format_becomes_llama_cpp_shape() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = rewrite_body(
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    )
    assert body["response_format"] == {"type": "json_object", "schema": schema}
    assert rewrite_body({"response_format": {"type": "text"}}) == {
        "response_format": {"type": "text"}
    }


def test_upstream_tracebacks_never_reach_the_message() -> None:
    text = (
        '1 validation error: bad type\n\n  File "/x/llama_cpp/server/app.py", line 376, in f\n'
        "    POST /v1/chat/completions"
    )
    assert strip_traceback(text) == "1 validation error: bad type"
    assert strip_traceback("Traceback (most recent call last):\n  x") == (
        "the upstream failed (details withheld)"
    )
    assert strip_traceback("plain") == "plain"


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def _run(body: bytes, request: TurnRequest) -> list[ModelEvent]:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, stream=httpx.ByteStream(body)))
    upstream = ChatCompletionsUpstream("http://model.test/v1", max_retries=0, transport=transport)
    try:
        return [event async for event in upstream.stream_turn(request)]
    finally:
        await upstream.aclose()


async def test_a_cut_text_stream_is_never_a_complete_answer() -> None:
    # llama-cpp-python's interrupt: some text, then [DONE], no finish reason
    body = _sse(_chunk({"role": "assistant", "content": ""}), _chunk({"content": "The wea"}))
    request = TurnRequest(model="m", transcript=[UserMessage("hi")])
    with pytest.raises(UpstreamStreamError, match="cut off"):
        await _run(body, request)


async def test_parallel_tool_calls_false_keeps_the_first_call() -> None:
    calls = [
        {"index": i, "id": f"c{i}", "type": "function",
         "function": {"name": "f", "arguments": json.dumps({"n": i})}}
        for i in range(2)
    ]  # fmt: skip
    body = _sse(_chunk({"role": "assistant", "tool_calls": calls}), _chunk({}, "tool_calls"))
    tools = [ToolSpec("f")]
    request = TurnRequest(
        model="m", transcript=[UserMessage("hi")], tools=tools, parallel_tool_calls=False
    )
    done = [e.call for e in await _run(body, request) if isinstance(e, ToolCallDone)]
    assert [c.id for c in done] == ["c0"]
    request.parallel_tool_calls = None
    done = [e.call for e in await _run(body, request) if isinstance(e, ToolCallDone)]
    assert [c.id for c in done] == ["c0", "c1"]


async def test_a_finished_stream_stands() -> None:
    body = _sse(_chunk({"role": "assistant", "content": "Hi"}), _chunk({}, "stop"))
    events = await _run(body, TurnRequest(model="m", transcript=[UserMessage("hi")]))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi"]
