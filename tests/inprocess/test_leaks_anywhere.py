"""A call written as text with prose after it, or in the reasoning, on every door: the client
sees the prose before the call and then the real call; never the markup, never the prose the
model wrote after its call (an answer invented before any result came back).

Doors: chat completions (JSON and stream), Responses (JSON and SSE, through the official
client), Anthropic Messages (JSON and stream). WebSocket mode: tests/integration/
test_responses_websocket.py::test_a_leak_with_prose_after_it_is_re_asked_unseen.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.inprocess.test_messages import assemble, events_of
from tests.inprocess_gateway import AppGateway
from toolwire.testing import Reply

LEAK = (
    "Let me check.\n"
    '<tool_call>\n{"name": "forecast", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    "It is sunny in Oslo, 21 degrees."
)
SIBLINGS = (
    "Both cities:\n"
    '<function_call>{"name": "forecast", "arguments": {"city": "Oslo"}}</function_call>\n'
    "and\n"
    '<function_call>{"name": "forecast", "arguments": {"city": "Rome"}}</function_call>'
)
REASONING = (
    "The user wants Oslo's weather.\n<tool_call>\n<function=forecast>\n"
    "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>\nNow I wait for it."
)
MARKUP = ("<tool_call>", "<function", "sunny", '"name"')
CALL = Reply(tool_calls=[("forecast", {"city": "Oslo"})])
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}
USER = [{"role": "user", "content": "Weather in Oslo?"}]


def _clean(seen: str) -> None:
    for bit in MARKUP:
        assert bit not in seen, seen


async def chat(gw: AppGateway, stream: bool) -> tuple[str, list[str], str]:
    """(text shown, call names, reasoning shown) through the official client."""
    tools: Any = [{"type": "function", "function": {"name": "forecast", "parameters": PARAMETERS}}]
    if not stream:
        done = await gw.client.chat.completions.create(model="m", messages=USER, tools=tools)
        message = done.choices[0].message
        names = [c.function.name for c in message.tool_calls or []]  # type: ignore[union-attr]
        return message.content or "", names, getattr(message, "reasoning_content", "") or ""
    text, reasoning, names = "", "", []
    async for chunk in await gw.client.chat.completions.create(
        model="m", messages=USER, tools=tools, stream=True
    ):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
            names += [
                c.function.name
                for c in choice.delta.tool_calls or []
                if c.function and c.function.name
            ]
    return text, names, reasoning


async def responses(gw: AppGateway, stream: bool) -> tuple[str, list[str], str]:
    tools: Any = [{"type": "function", "name": "forecast", "parameters": PARAMETERS}]
    if not stream:
        done = await gw.client.responses.create(model="m", input="Weather in Oslo?", tools=tools)
        output = [item.model_dump() for item in done.output]
    else:
        deltas, output = "", []
        async for event in await gw.client.responses.create(
            model="m", input="Weather in Oslo?", tools=tools, stream=True
        ):
            if event.type in ("response.output_text.delta", "response.reasoning_text.delta"):
                deltas += event.delta
            elif event.type == "response.completed":
                output = [item.model_dump() for item in event.response.output]
        _clean(deltas)
    text = "".join(
        part.get("text", "")
        for item in output
        if item["type"] == "message"
        for part in item["content"]
    )
    reasoning = json.dumps([item for item in output if item["type"] == "reasoning"])
    names = [item["name"] for item in output if item["type"] == "function_call"]
    return text, names, reasoning


async def messages(gw: AppGateway, stream: bool) -> tuple[str, list[str], str]:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": USER,
        "tools": [{"name": "forecast", "input_schema": PARAMETERS}],
        "stream": stream,
    }
    answer = await gw.http.post("/v1/messages", json=body)
    message = assemble(events_of(answer.content)) if stream else answer.json()
    text = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
    names = [b["name"] for b in message["content"] if b["type"] == "tool_use"]
    thinking = "".join(b.get("thinking", "") for b in message["content"] if b["type"] == "thinking")
    return text, names, thinking


DOORS = {"chat": chat, "responses": responses, "messages": messages}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("door", list(DOORS))
async def test_prose_after_a_leaked_call_is_never_shown(
    gw: AppGateway, door: str, stream: bool
) -> None:
    gw.upstream.add(Reply(text=LEAK), CALL)
    text, names, _ = await DOORS[door](gw, stream)
    _clean(text)
    assert text.strip() == "Let me check."
    assert names == ["forecast"]
    assert len(gw.upstream.chat_requests) == 2  # re-asked once, hidden


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("door", list(DOORS))
async def test_sibling_blocks_are_all_removed(gw: AppGateway, door: str, stream: bool) -> None:
    gw.upstream.add(Reply(text=SIBLINGS), CALL)
    text, names, _ = await DOORS[door](gw, stream)
    _clean(text)
    assert "function_call" not in text and "and" not in text.split("Both cities:")[-1]
    assert names == ["forecast"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("door", ["chat", "responses"])
async def test_a_call_written_in_the_reasoning_is_recovered_unseen(
    gw: AppGateway, door: str, stream: bool
) -> None:
    """Qwen3.5/3.6 behind a reasoning parser: the call in `reasoning_content`, no content."""
    gw.upstream.add(Reply(reasoning=REASONING), CALL)
    text, names, reasoning = await DOORS[door](gw, stream)
    assert names == ["forecast"]
    _clean(text + reasoning)
    assert len(gw.upstream.chat_requests) == 2


async def test_a_quoted_call_mid_sentence_is_the_answer(gw: AppGateway) -> None:
    quoted = (
        'Hermes models write <tool_call>{"name": "forecast", "arguments": {}}</tool_call> '
        "and the server parses it."
    )
    gw.upstream.add(Reply(text=quoted))
    text, names, _ = await chat(gw, True)
    assert text == quoted and names == []
    assert len(gw.upstream.chat_requests) == 1


async def test_salvage_runs_every_leaked_block(fake_upstream: Any) -> None:
    """With `leak_mode="salvage"` the calls are read from the text: both siblings, no re-ask."""
    from tests.inprocess_gateway import app_gateway
    from toolwire.loop.state import LoopSettings

    fake_upstream.add(Reply(text=SIBLINGS))
    async with app_gateway(fake_upstream, settings=LoopSettings(leak_mode="salvage")) as gw:
        text, names, _ = await responses(gw, False)
    assert names == ["forecast", "forecast"]
    assert text.strip() == "Both cities:"
    assert len(fake_upstream.chat_requests) == 1
