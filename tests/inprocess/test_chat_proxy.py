"""`/v1/chat/completions` (the hardening proxy) in process: a naive agent on the official client
gets clean tool calls, streaming and not, from every quirky stream of the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.inprocess_gateway import AppGateway, chat_chunks
from tests.integration.test_chat_proxy import (
    FOLLOW_UP,
    LEAK,
    WEATHER,
    WHOLE_BODY_QUIRKS,
    check_clean,
    naive_accumulate,
    tools_of,
)
from tests.integration.test_stream_corpus import CASES, load, turns_of
from toolwire.testing import Body, Chunks, Reply

STOCK = [
    {
        "type": "function",
        "function": {
            "name": "lookup_stock",
            "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "go"}]


async def test_plain_text_non_streaming(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Hello there.", reasoning="be nice"))
    completion = await gw.client.chat.completions.create(model="m", messages=USER)
    choice = completion.choices[0]
    assert choice.message.content == "Hello there." and choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert completion.usage is not None and completion.usage.total_tokens == 15
    assert gw.upstream.chat_requests[0].body["stream"] is False  # a whole body, as asked


async def test_plain_text_streaming_is_well_formed(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Streaming text, in pieces."))
    response = await gw.http.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": USER, "stream": True},
    )
    chunks, done = chat_chunks(response.content)
    assert done, "the stream ends with [DONE]"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Streaming text, in pieces."
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert gw.upstream.chat_requests[0].body["stream"] is True


@pytest.mark.parametrize("stream", [True, False])
async def test_clean_tool_calls(gw: AppGateway, stream: bool) -> None:
    gw.upstream.add(
        Reply(
            text="Checking.",
            tool_calls=[("lookup_stock", {"sku": "A-1"}), ("lookup_stock", {"sku": "B-2"})],
        )
    )
    if stream:
        chunks = [
            c
            async for c in await gw.client.chat.completions.create(
                model="m", messages=USER, tools=STOCK, stream=True
            )
        ]
        text, calls, finish = naive_accumulate(chunks)
    else:
        completion = await gw.client.chat.completions.create(model="m", messages=USER, tools=STOCK)
        message = completion.choices[0].message
        text, finish = message.content or "", completion.choices[0].finish_reason
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}  # type: ignore[union-attr]
            for c in message.tool_calls or []
        ]
    assert text == "Checking." and finish == "tool_calls"
    assert [(c["name"], orjson.loads(c["arguments"])) for c in calls] == [
        ("lookup_stock", {"sku": "A-1"}),
        ("lookup_stock", {"sku": "B-2"}),
    ]
    assert len({c["id"] for c in calls}) == 2 and all(calls[i]["id"] for i in range(2))


@pytest.mark.parametrize("quirk", sorted(WHOLE_BODY_QUIRKS))
async def test_non_streaming_quirks_come_out_clean(gw: AppGateway, quirk: str) -> None:
    message, wanted = WHOLE_BODY_QUIRKS[quirk]
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
    }
    gw.upstream.add(Body(body))
    completion = await gw.client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [
        (c.function.name, orjson.loads(c.function.arguments))  # type: ignore[union-attr]
        for c in choice.message.tool_calls or []
    ]
    assert calls == wanted
    assert all(c.id for c in choice.message.tool_calls or [])


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_corpus_through_the_proxy_streaming(gw: AppGateway, path: Path) -> None:
    """Every corpus case on a fresh in-process gateway (a refusal to stream is remembered
    for the life of a gateway, so none is shared)."""
    case = load(path)
    gw.upstream.add(*turns_of(case))
    gw.upstream.add(Reply(text=FOLLOW_UP), Reply(text=FOLLOW_UP), Reply(text=FOLLOW_UP))
    kwargs: dict[str, Any] = {"model": "m", "messages": USER, "stream": True}
    if case.get("tools"):
        kwargs["tools"] = tools_of(case)
    if "error" in case["expect"]:
        with pytest.raises(openai.APIError):
            _ = [c async for c in await gw.client.chat.completions.create(**kwargs)]
        return
    chunks = [c async for c in await gw.client.chat.completions.create(**kwargs)]
    text, calls, finish = naive_accumulate(chunks)
    check_clean(case, calls, finish, text)


async def test_leaked_call_is_retried_and_returned_as_a_real_call(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text=LEAK), Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    completion = await gw.client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Oslo?"}], tools=WEATHER
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert choice.message.tool_calls[0].function.arguments == '{"city":"Oslo"}'  # type: ignore[union-attr]
    assert "<tool_call>" not in (choice.message.content or "")


async def test_leaked_call_streaming_shows_no_markup(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text=LEAK), Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    chunks = [
        c
        async for c in await gw.client.chat.completions.create(
            model="m", messages=USER, tools=WEATHER, stream=True
        )
    ]
    text, calls, finish = naive_accumulate(chunks)
    assert "<tool_call>" not in text and text.startswith("Checking.")
    assert finish == "tool_calls" and [c["name"] for c in calls] == ["get_weather"]


async def test_leaked_calls_past_the_cap_are_a_clear_error(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text=LEAK), Reply(text=LEAK), Reply(text=LEAK))
    with pytest.raises(openai.APIStatusError) as info:
        await gw.client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Oslo?"}], tools=WEATHER
        )
    assert info.value.status_code == 422 and info.value.code == "leaked_tool_call"
    assert "tool-call parser" in info.value.message


async def test_a_malformed_call_is_re_asked_and_never_reaches_the_agent(gw: AppGateway) -> None:
    head = {"index": 0, "id": "call_bad", "type": "function"}
    broken = Chunks(
        [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    **head,
                                    "function": {
                                        "name": "get_weather",
                                        "arguments": '{"city": "Os',
                                    },
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
    )
    gw.upstream.add(broken, Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    chunks = [
        c
        async for c in await gw.client.chat.completions.create(
            model="m", messages=USER, tools=WEATHER, stream=True
        )
    ]
    _, calls, finish = naive_accumulate(chunks)
    assert finish == "tool_calls"
    assert [(c["name"], orjson.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    told = gw.upstream.chat_requests[1].body["messages"][-1]
    assert told["role"] == "tool" and "incomplete JSON" in told["content"]


async def test_history_and_parameters_pass_through(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="It is 4 °C."))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":  "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4 °C, raw \\.ts$ text"},
    ]
    completion = await gw.client.chat.completions.create(
        model="m", messages=messages, tools=WEATHER, temperature=0.1, seed=7, stop=["\n\n"]
    )
    assert completion.choices[0].message.content == "It is 4 °C."
    sent = gw.upstream.chat_requests[0].body
    assert sent["seed"] == 7 and sent["stop"] == ["\n\n"] and sent["temperature"] == 0.1
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"city":  "Oslo"}'
    assert sent["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "4 °C, raw \\.ts$ text",
    }


async def test_streaming_usage_and_done(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="hello"))
    chunks = [
        c
        async for c in await gw.client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    ]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15
    assert chunks[-1].choices == []
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"


async def test_upstream_errors_become_openai_errors(gw: AppGateway) -> None:
    gw.upstream.add(Body({"error": {"message": "model not loaded"}}, status=400))
    with pytest.raises(openai.APIStatusError) as info:
        await gw.client.chat.completions.create(model="m", messages=USER)
    assert info.value.status_code == 400 and "model not loaded" in info.value.message


async def test_a_stream_broken_mid_answer_ends_with_an_error_event(gw: AppGateway) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([chunk, chunk], disconnect_after=1))
    response = await gw.http.post(
        "/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True}
    )
    chunks, done = chat_chunks(response.content)
    assert not done
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1]) == "partial "
    assert "broke" in chunks[-1]["error"]["message"]


async def test_invalid_proxy_requests_are_400(gw: AppGateway) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await gw.client.chat.completions.create(model="m", messages=[])
    assert info.value.body["param"] == "messages"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as info:
        await gw.client.chat.completions.create(
            model="m",
            messages=USER,
            tools=[{"type": "web"}],  # type: ignore[list-item]
        )
    assert info.value.body["param"] == "tools[0]"  # type: ignore[index]
    assert not gw.upstream.chat_requests
