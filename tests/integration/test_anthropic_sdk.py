"""The official `anthropic` SDK against a real `toolwire serve` on loopback and a scripted
upstream: create, stream with tools (and the tool result going back), count_tokens, the beta
path, model discovery, and its typed errors."""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import pytest

from tests.integration.conftest import Gateway
from tests.integration.test_claude_code import call_chunks
from toolwire.testing import Body, Chunks, Reply

READ: Any = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}
HI: Any = [{"role": "user", "content": "hi"}]
#: `Read` marked strict: this module's upstream says it is vLLM 0.27, which enforces `strict`,
#: so its calls stream live; `Read` itself is judged first and reaches the client whole.
LIVE_READ: Any = {**READ, "strict": True}


@pytest.fixture(autouse=True)
def enforcing_upstream(gw: Gateway) -> None:
    gw.upstream.version = "0.27.0"


@pytest.fixture
def client(gw: Gateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=gw.base_url.removesuffix("/v1"), api_key="sk-unused", max_retries=0
    )


def test_create(gw: Gateway, client: anthropic.Anthropic) -> None:
    gw.upstream.add(Reply(text="Hello from toolwire.", reasoning="A greeting."))
    message = client.messages.create(model="claude-opus-5-5", max_tokens=100, messages=HI)
    assert isinstance(message, anthropic.types.Message)
    thinking, text = message.content
    assert isinstance(thinking, anthropic.types.ThinkingBlock) and thinking.signature
    assert isinstance(text, anthropic.types.TextBlock) and text.text == "Hello from toolwire."
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 10 and message.usage.output_tokens == 5


def test_stream_with_tools_and_the_result_going_back(
    gw: Gateway, client: anthropic.Anthropic
) -> None:
    gw.upstream.add(call_chunks("Read", ['{"file_pa', 'th": "a.txt"}'], "call_1"))
    with client.messages.stream(
        model="claude-opus-5-5", max_tokens=100, messages=HI, tools=[READ]
    ) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_message()
    assert kinds[0] == "message_start" and "input_json" in kinds
    assert first.stop_reason == "tool_use"
    call = first.content[0]
    assert isinstance(call, anthropic.types.ToolUseBlock)
    assert call.name == "Read" and call.input == {"file_path": "a.txt"}

    gw.upstream.add(Reply(text="The file says hello."))
    result: Any = {"type": "tool_result", "tool_use_id": call.id, "content": "hello"}
    history: Any = [
        *HI,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [result]},
    ]
    with client.messages.stream(
        model="claude-opus-5-5", max_tokens=100, messages=history, tools=[READ]
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "The file says hello."
    sent = gw.upstream.chat_requests[-1].body["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "hello"}


def test_call_pieces_reach_the_client_before_the_turn_ends(
    gw: Gateway, client: anthropic.Anthropic
) -> None:
    # a strict tool on an upstream that enforces it: judging the call cannot change it
    seen = threading.Event()
    turn = call_chunks("Read", ['{"file_pa', 'th": "a.txt"}'], "call_1")
    turn.gate, turn.gate_at = seen, len(turn.chunks) - 1  # the finish waits for the client
    gw.upstream.add(turn)
    with client.messages.stream(
        model="claude-opus-5-5", max_tokens=100, messages=HI, tools=[LIVE_READ]
    ) as stream:
        for event in stream:
            if event.type == "input_json":
                seen.set()  # a piece arrived: let the upstream end its turn
        message = stream.get_final_message()
    assert turn.gate_opened == [True]  # the piece came while the upstream's turn was open
    assert message.content[0].input == {"file_path": "a.txt"}  # type: ignore[union-attr]


LEAK = '<tool_call>\n{"name": "Read", "arguments": {"file_path": "a.txt"}}\n</tool_call>'


def quirks() -> dict[str, list[Any]]:
    """Fresh turns per test (a gate is set on them)."""
    return {
        "split": [call_chunks("Read", ['{"fi', 'le_path"', ': "a.t', 'xt"', "}"], "call_1")],
        "name_repeated": [call_chunks("Read", ['{"file_path": "a.txt"}'], "call_1")],
        "repeated_at_end": [
            call_chunks("Read", ['{"file_path": ', '"a.txt"}', '{"file_path": "a.txt"}'], "call_1")
        ],
        "seeded_empty": [call_chunks("Read", ["{}", '{"file_path": "a.txt"}'], "call_1")],
        "raw_newline_trailing_comma": [
            call_chunks("Read", ['{"file_path": "a', '\n.txt",', "}"], "call_1")
        ],
        "single_quotes": [call_chunks("Read", ["{'file_path': ", "'a.txt'}"], "call_1")],
        "leaked": [Reply(text=LEAK), Reply(tool_calls=[("Read", {"file_path": "a.txt"})])],
    }


@pytest.mark.parametrize("strict", [True, False], ids=["enforced_live", "judged_first"])
@pytest.mark.parametrize("quirk", list(quirks()))
def test_streamed_input_is_the_repaired_arguments(
    gw: Gateway, client: anthropic.Anthropic, quirk: str, strict: bool
) -> None:
    turns = quirks()[quirk]
    seen = threading.Event()
    # a leaked call is text until the turn ends; a call judged first is held until then too
    live = isinstance(turns[0], Chunks) and strict
    if live:
        turns[0].gate, turns[0].gate_at = seen, len(turns[0].chunks) - 1
    gw.upstream.add(*turns)
    with client.messages.stream(
        model="claude-opus-5-5", max_tokens=100, messages=HI, tools=[LIVE_READ if strict else READ]
    ) as stream:
        for event in stream:
            if event.type == "input_json":
                seen.set()
        message = stream.get_final_message()  # the SDK's own accumulator
    if live:
        assert turns[0].gate_opened == [True]  # pieces went out while the turn was open
    calls = [block for block in message.content if block.type == "tool_use"]
    expected = "a\n.txt" if quirk == "raw_newline_trailing_comma" else "a.txt"
    assert len(calls) == 1 and calls[0].input == {"file_path": expected}
    assert message.stop_reason == "tool_use"
    assert "<tool_call>" not in message.model_dump_json()


def test_count_tokens_and_beta_and_models(gw: Gateway, client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(model="claude-opus-5-5", messages=HI, tools=[READ])
    assert counted.input_tokens > 0
    gw.upstream.add(Reply(text="beta ok"))
    beta = client.beta.messages.create(
        model="claude-opus-5-5",
        max_tokens=50,
        messages=HI,
        betas=["interleaved-thinking-2025-05-14"],
    )
    assert beta.content[0].type == "text" and gw.upstream.chat_requests
    models = list(client.models.list())
    assert models[0].id == "scripted-model" and models[0].type == "model"


def test_typed_errors(gw: Gateway, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="claude-opus-5-5", max_tokens=10, messages=[])
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]

    gw.upstream.add(*[Body({"error": {"message": "slow down"}}, status=429)] * 2)
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model="claude-opus-5-5", max_tokens=10, messages=HI)

    gw.upstream.add(*[Body({"error": {"message": "overloaded"}}, status=503)] * 2)
    with pytest.raises(anthropic.OverloadedError):
        client.messages.create(model="claude-opus-5-5", max_tokens=10, messages=HI)

    text = {"choices": [{"index": 0, "delta": {"content": "Partial"}}]}
    broken = Chunks([text, text], done=False, disconnect_after=2, delay=0.05)
    gw.upstream.add(broken, broken)
    stream = client.messages.stream(model="claude-opus-5-5", max_tokens=10, messages=HI)
    with pytest.raises(anthropic.APIStatusError) as mid, stream as events:  # its error event
        for _ in events:
            pass
    assert "upstream" in str(mid.value)
