"""The Responses API through the official `openai` client against `toolwire serve`: what only
a real server on a socket shows (the SDK's streaming over HTTP, live delivery, disconnects,
upstream failures on the wire). Scenarios that sockets add nothing to run in process
(tests/inprocess/test_responses.py), once."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import httpx
import openai
import pytest

from tests.integration.conftest import Gateway
from toolwire.testing import Body, Chunks, Reply

WEATHER_TOOL = {
    "type": "function",
    "name": "lookup_stock",
    "description": "Stock level of a product.",
    "parameters": {
        "type": "object",
        "properties": {"sku": {"type": "string"}},
        "required": ["sku"],
    },
}


def test_conversations_carry_history_and_items(gw: Gateway) -> None:
    conversation = gw.client.conversations.create(
        metadata={"topic": "pets"},
        items=[{"type": "message", "role": "user", "content": "I have a cat."}],
    )
    assert conversation.metadata == {"topic": "pets"}
    gw.upstream.add(Reply(text="Cats are great."), Reply(text="You have a cat."))
    gw.client.responses.create(model="m", input="Remember that.", conversation=conversation.id)
    answer = gw.client.responses.create(
        model="m", input="What pet do I have?", conversation=conversation.id
    )
    assert answer.output_text == "You have a cat."
    contents = [m["content"] for m in gw.upstream.chat_requests[1].body["messages"]]
    assert contents == ["I have a cat.", "Remember that.", "Cats are great.", "What pet do I have?"]
    items = gw.client.conversations.items.list(conversation.id, order="asc")
    assert [i.type for i in items.data] == ["message"] * 5
    added = gw.client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "And a dog."}]
    )
    item_id = added.data[0].id
    assert (
        gw.client.conversations.items.retrieve(item_id, conversation_id=conversation.id).id
        == item_id
    )
    gw.client.conversations.items.delete(item_id, conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        gw.client.conversations.items.retrieve(item_id, conversation_id=conversation.id)
    updated = gw.client.conversations.update(conversation.id, metadata={"topic": "animals"})
    assert updated.metadata == {"topic": "animals"}
    assert gw.client.conversations.retrieve(conversation.id).metadata == {"topic": "animals"}
    assert gw.client.conversations.delete(conversation.id).deleted
    with pytest.raises(openai.NotFoundError):
        gw.client.conversations.retrieve(conversation.id)


def test_delete_response(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="bye"))
    response = gw.client.responses.create(model="m", input="hi")
    gw.client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        gw.client.responses.retrieve(response.id)


# -- streaming -------------------------------------------------------------------------------


def check_lifecycle(events: list[Any]) -> None:
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type in ("response.completed", "response.incomplete", "response.failed")
    opened: dict[int, str] = {}
    texts: dict[str, list[str]] = {}
    for event in events:
        if event.type == "response.output_item.added":
            opened[event.output_index] = event.item.id
        elif event.type == "response.output_item.done":
            assert opened.pop(event.output_index) == event.item.id
        elif event.type == "response.output_text.delta":
            assert opened[event.output_index] == event.item_id
            texts.setdefault(event.item_id, []).append(event.delta)
        elif event.type == "response.output_text.done":
            assert "".join(texts[event.item_id]) == event.text
    assert not opened


def test_streaming_event_lifecycle_parses_with_the_sdk(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="Streaming works, token by token.", reasoning="think"))
    events = list(gw.client.responses.create(model="m", input="stream", stream=True))
    check_lifecycle(events)
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.reasoning_text.delta"] * kinds.count("response.reasoning_text.delta"),
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * kinds.count("response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1].response
    assert final.output_text == "Streaming works, token by token."
    assert gw.client.responses.retrieve(final.id).output_text == final.output_text


def test_stream_helper_and_function_call_events(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="Checking.", tool_calls=[("lookup_stock", {"sku": "B-2"})]))
    with gw.client.responses.stream(model="m", input="stock?", tools=[WEATHER_TOOL]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_lifecycle(events)
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output[1].arguments == '{"sku":"B-2"}'


def test_streamed_server_tool_calls_emit_mcp_call_events(gw: Gateway) -> None:
    gw.upstream.add(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]), Reply(text="4 °C."))
    events = list(gw.client.responses.create(model="m", input="Oslo?", stream=True))
    check_lifecycle(events)
    kinds = [e.type for e in events]
    for kind in (
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ):
        assert kind in kinds
    assert events[-1].response.output[0].output == (
        "city: Oslo\ntemperature_c: 4\ntemperature_f: 39\nsky: clear\n"
        "summary: It is 4 °C (39 °F) in Oslo, with clear skies."
    )


def test_response_created_is_sent_before_the_upstream_answers(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="late", delay=4))
    body = {"model": "m", "input": "hi", "stream": True}
    with httpx.stream("POST", gw.base_url + "/responses", json=body, timeout=10) as response:
        lines = response.iter_lines()
        started = time.monotonic()
        first = next(lines)
        waited = time.monotonic() - started
        rest = list(lines)
    assert first == "event: response.created"
    assert waited < 3  # the upstream holds its answer for 4 s (beyond the 2 s read timeout)
    assert any(line.startswith("event: response.") for line in rest)


# -- errors ----------------------------------------------------------------------------------


def test_upstream_failure_before_streaming_is_a_client_error_and_stored_failed(
    gw: Gateway,
) -> None:
    gw.upstream.add(Body({"error": {"message": "model not loaded"}}, status=400))
    with pytest.raises(openai.APIStatusError) as info:
        gw.client.responses.create(model="m", input="x")
    assert info.value.status_code == 400  # the upstream's 4xx, as the client error it is
    assert "model not loaded" in info.value.message


def test_upstream_timeout_before_streaming_is_504(gw: Gateway) -> None:
    gw.upstream.add(Body({"choices": []}, delay=4))
    with pytest.raises(openai.APIStatusError) as info:
        gw.client.responses.create(model="m", input="x")
    assert info.value.status_code == 504


def test_upstream_failure_mid_stream_is_response_failed_and_stored(gw: Gateway) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([chunk, chunk], disconnect_after=1))
    events = list(gw.client.responses.create(model="m", input="x", stream=True))
    assert events[-1].type == "response.failed"
    assert "error" in [e.type for e in events]
    failed = events[-1].response
    assert failed.error is not None and "broke" in failed.error.message
    assert gw.client.responses.retrieve(failed.id).status == "failed"


def wait_for_status(gw: Gateway, response_id: str, wanted: set[str], timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        status = gw.client.responses.retrieve(response_id).status or ""
        if status in wanted:
            return status
        time.sleep(0.05)
    return status


def test_client_disconnect_cancels_the_run_and_stores_it_cancelled(gw: Gateway) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "slow "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([chunk] * 50, delay=0.2))
    response_id = None
    with httpx.stream(
        "POST",
        gw.base_url + "/responses",
        json={"model": "m", "input": "x", "stream": True},
        timeout=10,
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and response_id is None:
                import json

                response_id = json.loads(line[5:])["response"]["id"]
            if "output_text.delta" in line:
                break
    assert response_id is not None
    assert wait_for_status(gw, response_id, {"cancelled"}) == "cancelled"
    stored = gw.client.responses.retrieve(response_id)
    assert stored.output and stored.output[0].type == "message"  # what streamed is kept


def test_a_client_leaving_a_slow_non_streamed_response_cancels_it(gw: Gateway) -> None:
    """Without a stream, a hang-up is seen only by watching for it: the run is cancelled and
    stored so before the slow upstream answers (1.8 s, under the 2 s read timeout)."""
    gw.upstream.add(Reply(text="too late", delay=1.8))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(gw.base_url + "/responses", json={"model": "m", "input": "x"}, timeout=0.1)
    hung_up = time.monotonic()
    status = ""
    while time.monotonic() - hung_up < 1.5 and status != "cancelled":
        time.sleep(0.05)
        with sqlite3.connect(f"file:{gw.db}?mode=ro", uri=True) as db:
            row = db.execute("SELECT status FROM responses ORDER BY rowid DESC").fetchone()
        status = row[0] if row else ""
    assert status == "cancelled"


def test_background_response_completes(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="done in the background", delay=0.3))
    queued = gw.client.responses.create(model="m", input="x", background=True)
    assert queued.status == "queued" and queued.background is True
    assert wait_for_status(gw, queued.id, {"completed"}) == "completed"
    assert gw.client.responses.retrieve(queued.id).output_text == "done in the background"


def test_background_response_can_be_cancelled_idempotently(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="never", delay=5))
    queued = gw.client.responses.create(model="m", input="x", background=True)
    assert wait_for_status(gw, queued.id, {"in_progress"}) == "in_progress"
    assert gw.client.responses.cancel(queued.id).status == "cancelled"
    assert gw.client.responses.cancel(queued.id).status == "cancelled"
    assert gw.client.responses.retrieve(queued.id).status == "cancelled"
