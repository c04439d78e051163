"""The hardening proxy: the foundation corpus replayed through `/v1/chat/completions` comes out
clean for a naive client, streaming and not; leaked calls are recovered; errors are clear."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.integration.conftest import Gateway, running_gateway
from tests.integration.test_stream_corpus import CASES, load, turns_of
from toolwire.testing import Body, Reply

FOLLOW_UP = "I could not make that call."


def tools_of(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": n, "parameters": {"type": "object", "properties": {}}},
        }
        for n in case.get("tools", [])
    ]


def naive_accumulate(chunks: list[Any]) -> tuple[str, list[dict[str, str]], str | None]:
    """What a simple agent does with a stream: concatenate by index, trust what it sees."""
    text = ""
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in chunks:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for delta in choice.delta.tool_calls or []:
            slot = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += delta.id or ""
            if delta.function:
                slot["name"] += delta.function.name or ""
                slot["arguments"] += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    return text, [calls[i] for i in sorted(calls)], finish


def check_clean(
    case: dict[str, Any], calls: list[dict[str, str]], finish: str | None, text: str
) -> None:
    expect = case["expect"]
    declared = set(case.get("tools", []))
    wanted = [c for c in expect["calls"] if "parse_error" not in c]
    if wanted:
        assert finish == "tool_calls"
        assert [(c["name"], orjson.loads(c["arguments"])) for c in calls] == [
            (w["name"], w["arguments"]) for w in wanted
        ]
    else:
        assert calls == [] and finish in ("stop", "length")
    for call in calls:
        assert call["name"] in declared
        assert isinstance(orjson.loads(call["arguments"]), dict)
    ids = [c["id"] for c in calls]
    assert all(ids) and len(set(ids)) == len(ids)
    if any("parse_error" in c for c in expect["calls"]) and not wanted:
        assert text.endswith(FOLLOW_UP)  # the model was told, and answered


@pytest.fixture
def gw_for(gw: Gateway, tmp_path: Path) -> Any:
    """The shared gateway, or a fresh one for cases whose server refuses to stream: the
    gateway remembers a refusal for the rest of its life, as it should."""

    @contextmanager
    def pick(case: dict[str, Any]) -> Iterator[Gateway]:
        if case["variant"] == "streaming refused":
            with running_gateway(tmp_path / "fresh.db") as fresh:
                yield fresh
        else:
            yield gw

    return pick


def script(gw: Gateway, case: dict[str, Any]) -> None:
    gw.upstream.add(*turns_of(case))
    gw.upstream.add(Reply(text=FOLLOW_UP), Reply(text=FOLLOW_UP), Reply(text=FOLLOW_UP))


WHOLE_BODY_QUIRKS = {
    # llama-cpp-python: a legacy function_call whose name ends in ':' beside the real call
    "legacy_colon_beside_tool_calls": (
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
            "function_call": {"name": "get_weather:", "arguments": '{"city": "Paris"}'},
        },
        [("get_weather", {"city": "Paris"})],
    ),
    # Ollama-native through proxies: arguments as an object, no id
    "object_arguments_no_id": (
        {
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        [("get_weather", {"city": "Oslo"})],
    ),
    # double-encoded arguments, stray punctuation in the name, finish_reason "stop"
    "double_encoded_and_stop": (
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": " get_weather. ",
                        "arguments": '"{\\"city\\": \\"Rome\\"}"',
                    },
                }
            ],
        },
        [("get_weather", {"city": "Rome"})],
    ),
}


@pytest.mark.parametrize("quirk", sorted(WHOLE_BODY_QUIRKS))
def test_non_streaming_quirks_come_out_clean(gw: Gateway, quirk: str) -> None:
    """A non-streaming agent gets a non-streaming upstream call; whole bodies go through the
    same assembler as streams."""
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
    weather = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    completion = gw.client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], tools=weather
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [
        (c.function.name, orjson.loads(c.function.arguments))
        for c in choice.message.tool_calls or []
    ]
    assert calls == wanted
    assert all(c.id for c in choice.message.tool_calls or [])
    assert gw.upstream.chat_requests[0].body["stream"] is False


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_corpus_through_the_proxy_streaming(gw_for: Any, path: Path) -> None:
    case = load(path)
    with gw_for(case) as gw:
        replay_streaming(gw, case)


def replay_streaming(gw: Gateway, case: dict[str, Any]) -> None:
    script(gw, case)
    kwargs: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
    }
    if case.get("tools"):
        kwargs["tools"] = tools_of(case)
    if "error" in case["expect"]:
        with pytest.raises(openai.APIError):
            list(gw.client.chat.completions.create(**kwargs))
        return
    text, calls, finish = naive_accumulate(list(gw.client.chat.completions.create(**kwargs)))
    check_clean(case, calls, finish, text)


WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
LEAK = (
    'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
)


def test_leaked_calls_past_the_cap_are_a_clear_error(gw: Gateway) -> None:
    gw.upstream.add(Reply(text=LEAK), Reply(text=LEAK), Reply(text=LEAK))
    with pytest.raises(openai.APIStatusError) as info:
        gw.client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Oslo?"}], tools=WEATHER
        )
    # 422, not a 5xx: the official client would retry a 502 and triple the model calls.
    assert info.value.status_code == 422
    assert info.value.code == "leaked_tool_call"
    assert "tool-call parser" in info.value.message
    assert len(gw.upstream.chat_requests) == 3


def test_history_and_parameters_pass_through(gw: Gateway) -> None:
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
    completion = gw.client.chat.completions.create(
        model="m",
        messages=messages,
        tools=WEATHER,
        temperature=0.1,
        seed=7,
        stop=["\n\n"],
        stream_options=None,
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
