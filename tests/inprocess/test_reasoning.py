"""Reasoning both ways (issue 27): streamed as OpenAI streams it (content parts, summaries
when asked for), and sent back to interleaved-thinking upstreams that refuse a tool-call turn
without it; a stuck leak's prose once; OpenAI's enums for incomplete reasons and error codes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway, Gate, app_gateway, chat_chunks, sse_events
from tests.openai_schemas import violations
from tests.thinking_upstream import ThinkingUpstream
from toolwire.loop.state import LoopSettings
from toolwire.server.responses.draft import ResponseDraft
from toolwire.store.runs import host_key
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream

WEATHER = {
    "type": "function",
    "name": "lookup",
    "description": "Look a city up.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
LEAK = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


async def stream(gw: AppGateway, body: dict[str, Any]) -> list[dict[str, Any]]:
    answer = await gw.http.post("/v1/responses", json={"model": "m", **body, "stream": True})
    assert answer.status_code == 200, answer.text
    return sse_events(answer.content)


def reasoning_events(events: list[dict[str, Any]]) -> list[str]:
    rs = next(e["item"]["id"] for e in events if e["type"] == "response.output_item.added")
    return [
        e["type"] for e in events if e.get("item_id") == rs or (e.get("item") or {}).get("id") == rs
    ]


# -- streaming reasoning ---------------------------------------------------------------------


async def test_reasoning_streams_inside_its_content_part(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Paris.", reasoning="France's capital is Paris."))
    events = await stream(gw, {"input": "capital?"})
    assert reasoning_events(events) == [
        "response.output_item.added",
        "response.content_part.added",
        *["response.reasoning_text.delta"] * (len(reasoning_events(events)) - 5),
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    added = next(e for e in events if e["type"] == "response.content_part.added")
    assert added["part"] == {"type": "reasoning_text", "text": ""}
    for event in events[2:-1]:  # the items' events (response.created's usage: null is
        # what OpenAI sends, though its document types it an object)
        assert violations(event, "post", "/responses", media="text/event-stream") == [], event
    final = events[-1]["response"]
    assert final["output"][0]["content"] == [
        {"type": "reasoning_text", "text": "France's capital is Paris."}
    ]
    assert final["output"][0]["summary"] == []


async def test_a_summary_is_the_reasoning_in_summary_text_parts_when_asked_for(
    gw: AppGateway,
) -> None:
    gw.upstream.add(Reply(text="Paris.", reasoning="France's capital is Paris."))
    events = await stream(gw, {"input": "capital?", "reasoning": {"summary": "auto"}})
    kinds = reasoning_events(events)
    for kind in (
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    ):
        assert kind in kinds
    assert kinds.index("response.reasoning_summary_part.added") < kinds.index(
        "response.reasoning_summary_text.delta"
    )
    assert kinds.index("response.reasoning_summary_text.done") < kinds.index(
        "response.reasoning_summary_part.done"
    )
    for event in events[2:-1]:  # the items' events (response.created's usage: null is
        # what OpenAI sends, though its document types it an object)
        assert violations(event, "post", "/responses", media="text/event-stream") == [], event
    deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"]
    assert "".join(deltas) == "France's capital is Paris."
    summary = [{"type": "summary_text", "text": "France's capital is Paris."}]
    assert events[-1]["response"]["output"][0]["summary"] == summary

    gw.upstream.add(Reply(text="Paris.", reasoning="France's capital is Paris."))
    body = {"model": "m", "input": "capital?", "reasoning": {"summary": "auto"}}
    whole = (await gw.http.post("/v1/responses", json=body)).json()
    assert whole["output"][0]["summary"] == summary
    assert violations(whole, "post", "/responses") == []


async def test_an_answer_asked_whole_gives_the_items_a_streamed_one_does(
    fake_upstream: ScriptedUpstream,
) -> None:
    """An upstream asked without streaming (a server that refuses to stream, or
    `LoopSettings(stream=False)`) answers reasoning and text in one message: the reasoning
    item still comes first, with its summary, as from a stream."""
    fake_upstream.add(Reply(text="Paris.", reasoning="France's capital is Paris."))
    body = {"model": "m", "input": "capital?", "reasoning": {"summary": "auto"}}
    async with app_gateway(fake_upstream, settings=LoopSettings(stream=False)) as gw:
        whole = (await gw.http.post("/v1/responses", json=body)).json()
    assert fake_upstream.chat_requests[-1].body["stream"] is False
    reasoning, message = whole["output"]
    assert reasoning["type"] == "reasoning" and message["type"] == "message"
    assert reasoning["summary"] == [{"type": "summary_text", "text": "France's capital is Paris."}]
    assert reasoning["content"] == [
        {"type": "reasoning_text", "text": "France's capital is Paris."}
    ]
    assert message["content"][0]["text"] == "Paris."


# -- reasoning replay ------------------------------------------------------------------------


def thinking(gw: AppGateway, *turns: Reply, field: str = "reasoning_content") -> ThinkingUpstream:
    upstream = ThinkingUpstream(turns, field)
    gw.upstream.default = upstream
    return upstream


async def test_reasoning_items_go_back_to_a_thinking_upstream(gw: AppGateway) -> None:
    upstream = thinking(
        gw,
        Reply(reasoning="I should look Paris up.", tool_calls=[("lookup", {"city": "Paris"})]),
        Reply(text="Sunny.", reasoning="It said sunny."),
    )
    body = {"model": "m", "input": "Paris?", "tools": [WEATHER]}
    first = (await gw.http.post("/v1/responses", json=body)).json()
    call = next(item for item in first["output"] if item["type"] == "function_call")
    reasoning = next(item for item in first["output"] if item["type"] == "reasoning")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    # stateless, as a client keeping its own history sends it
    again = await gw.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "tools": [WEATHER],
            "input": [{"role": "user", "content": "Paris?"}, reasoning, call, output],
        },
    )
    assert again.status_code == 200, again.text
    assert upstream.refused == 0
    sent = gw.upstream.chat_requests[-1].body["messages"]
    assert sent[1]["reasoning_content"] == "I should look Paris up."


async def test_reasoning_goes_back_by_reference_and_within_a_run(gw: AppGateway) -> None:
    upstream = thinking(
        gw,
        Reply(reasoning="Weather tool.", tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="Cold.", reasoning="It is cold."),
        Reply(reasoning="Look it up.", tool_calls=[("lookup", {"city": "Rome"})]),
        Reply(text="Warm."),
    )
    # a server tool: the run itself sends the tool-call turn back with its reasoning
    ran = (await gw.http.post("/v1/responses", json={"model": "m", "input": "Oslo?"})).json()
    assert ran["status"] == "completed", ran
    assert upstream.refused == 0
    # a caller tool, then the AI SDK's next step: reasoning and call by reference
    body = {"model": "m", "input": "Rome?", "tools": [WEATHER]}
    first = (await gw.http.post("/v1/responses", json=body)).json()
    call = next(item for item in first["output"] if item["type"] == "function_call")
    reasoning = next(item for item in first["output"] if item["type"] == "reasoning")
    again = await gw.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "tools": [WEATHER],
            "input": [
                {"role": "user", "content": "Rome?"},
                {"type": "item_reference", "id": reasoning["id"]},
                {"type": "item_reference", "id": call["id"]},
                {"type": "function_call_output", "call_id": call["call_id"], "output": "warm"},
            ],
        },
    )
    assert again.status_code == 200, again.text
    assert upstream.refused == 0


async def test_chat_door_keeps_reasoning_content_on_assistant_turns(gw: AppGateway) -> None:
    upstream = thinking(gw, Reply(text="Sunny."))
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    answer = await gw.http.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "tools": tools}
    )
    assert answer.status_code == 200, answer.text
    assert upstream.refused == 0
    assert gw.upstream.chat_requests[-1].body["messages"][1]["reasoning_content"] == "Look."


async def test_reasoning_goes_back_in_the_field_the_upstream_writes_it_in(
    gw: AppGateway,
) -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    gw.upstream.add(
        Chunks(
            [
                {"choices": [{"index": 0, "delta": {"reasoning": "Weather tool."}}]},
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        **call,
                                        "function": {
                                            "name": "get_weather",
                                            "arguments": '{"city": "Oslo"}',
                                        },
                                    }
                                ]
                            },
                            "finish_reason": "tool_calls",
                        }
                    ]
                },
            ]
        )
    )
    upstream = thinking(gw, Reply(text="Cold."), field="reasoning")
    ran = (await gw.http.post("/v1/responses", json={"model": "m", "input": "Oslo?"})).json()
    assert ran["status"] == "completed", ran
    assert upstream.refused == 0
    sent = gw.upstream.chat_requests[-1].body["messages"][1]
    assert sent["reasoning"] == "Weather tool." and "reasoning_content" not in sent


async def test_reasoning_replay_can_be_turned_off() -> None:
    for replay, refused in (("auto", 0), ("off", 1)):
        async with (
            ScriptedUpstream.in_process() as scripted,
            app_gateway(scripted, reasoning_replay=replay) as gw,
        ):
            upstream = thinking(
                gw,
                Reply(reasoning="Weather.", tool_calls=[("get_weather", {"city": "Oslo"})]),
                Reply(text="Cold."),
            )
            body = {"model": "m", "input": "Oslo?"}
            ran = await gw.http.post("/v1/responses", json=body)
            assert upstream.refused == refused
            sent = gw.upstream.chat_requests[-1].body["messages"][1]
            if replay == "off":
                assert ran.status_code == 400
                assert "reasoning_content" in ran.json()["error"]["message"]
                assert "reasoning_content" not in sent
            else:
                assert ran.status_code == 200, ran.text
                assert sent["reasoning_content"] == "Weather."


# -- a stuck leak: its prose once ------------------------------------------------------------


def stuck(gw: AppGateway) -> None:
    gw.upstream.add(*[Reply(text="Let me check the weather.\n" + LEAK) for _ in range(3)])


async def test_a_stuck_leak_keeps_its_prose_once_in_json_and_in_the_store(gw: AppGateway) -> None:
    stuck(gw)
    answer = (await gw.http.post("/v1/responses", json={"model": "m", "input": "Paris?"})).json()
    messages = [item for item in answer["output"] if item["type"] == "message"]
    assert [m["content"][0]["text"] for m in messages] == ["Let me check the weather.\n"]
    assert answer["incomplete_details"]["reason"] == "max_output_tokens"
    assert answer["incomplete_details"]["toolwire_reason"] == "leaked_tool_call"
    assert violations(answer, "post", "/responses") == []
    stored = (await gw.http.get(f"/v1/responses/{answer['id']}")).json()
    assert stored["output"] == answer["output"]


async def test_a_stuck_leak_streams_its_prose_once(gw: AppGateway) -> None:
    stuck(gw)
    events = await stream(gw, {"input": "Paris?"})
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Let me check the weather.\n"
    final = events[-1]["response"]
    assert sum(item["type"] == "message" for item in final["output"]) == 1


async def test_a_stuck_leak_streams_its_prose_once_on_the_chat_door(gw: AppGateway) -> None:
    stuck(gw)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    answer = await gw.http.post(
        "/v1/chat/completions",
        json={
            "model": "m",
            "messages": [{"role": "user", "content": "Paris?"}],
            "tools": tools,
            "stream": True,
        },
    )
    chunks, _ = chat_chunks(answer.content)
    text = "".join(
        (choice.get("delta") or {}).get("content") or ""
        for chunk in chunks
        for choice in chunk.get("choices") or []
    )
    assert text == "Let me check the weather.\n"


# -- error codes -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream_it", [False, True])
async def test_an_upstream_specific_400_code_is_relayed(gw: AppGateway, stream_it: bool) -> None:
    error = {"message": "Invalid base64 image.", "type": "invalid_request_error"}
    gw.upstream.add(Body({"error": {**error, "code": "invalid_base64_image"}}, status=400))
    answer = await gw.http.post(
        "/v1/responses", json={"model": "m", "input": "look", "stream": stream_it}
    )
    if stream_it:
        events = sse_events(answer.content)
        assert events[-1]["response"]["error"]["code"] == "invalid_base64_image"
    else:
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_base64_image"


# -- the upstream size limit on the chat door's whole answers -------------------------------


async def test_a_50_mb_whole_answer_is_refused_on_the_chat_door(gw: AppGateway) -> None:
    huge = "x" * (50 * 1024 * 1024)
    message = {"role": "assistant", "content": huge}
    gw.upstream.add(
        Body(
            {
                "id": "c",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )
    )
    answer = await gw.http.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == "upstream_response_too_large"
    assert "max_upstream_event_bytes" in error["message"]


# -- a service never started still holds a lease ----------------------------------------------


async def test_a_service_used_without_start_is_a_live_replica(
    fake_upstream: ScriptedUpstream,
) -> None:
    """The library and embedding apps use `ResponsesService` without `start()`: while one of
    its responses runs, another replica on the database sees it alive and leaves the run."""
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="done"))
    async with (
        app_gateway(fake_upstream, upstream_transport=gate.transport) as gw,
        gw.http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        ) as response,
    ):
        chunks = response.aiter_text()
        await anext(chunks)
        await gate.reached.wait()
        runs = gw.store.runs
        now = time.time()
        dead, live = await runs.dead_replicas("rep_other", now, 10.0, host_key())
        assert gw.service.replica.id in live
        # long after its lease would have run out without one, the run is nobody's orphan
        orphans = await runs.orphans("rep_other", set(dead), live, set(), now + 60, 10.0, 2.0)
        assert orphans == []
        gate.release.set()
        async for _ in chunks:
            pass


# -- a cancelled background response's partial message ---------------------------------------


async def test_a_cancelled_background_response_keeps_its_partial_message_incomplete(
    gw: AppGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text was streaming when the cancel came: the message it was writing is cut off."""
    text_in = asyncio.Event()
    original = ResponseDraft._text_delta

    def seen(draft: ResponseDraft, text: str) -> None:
        original(draft, text)
        text_in.set()

    monkeypatch.setattr(ResponseDraft, "_text_delta", seen)
    first = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([first, *[first] * 400], delay=0.05))
    queued = await gw.client.responses.create(model="m", input="x", background=True)
    await text_in.wait()
    cancelled = await gw.client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    stored = (await gw.http.get(f"/v1/responses/{queued.id}")).json()
    message = stored["output"][0]
    assert message["type"] == "message" and message["content"][0]["text"].startswith("partial")
    assert message["status"] == "incomplete"


# -- a response cancelled right after response.created ---------------------------------------


async def test_a_stream_cancelled_during_its_first_write_is_still_stored(
    gw: AppGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client leaves right after `response.created`, while the response's first write is
    in flight: the write is cut short, and the outcome is stored all the same."""
    original = gw.store.save_response
    entered = asyncio.Event()

    async def stuck_first_write(body: dict[str, Any], **kwargs: Any) -> bool:
        if body["status"] == "in_progress":
            entered.set()
            await asyncio.Event().wait()  # in flight until the cancel cuts it short
        return await original(body, **kwargs)

    monkeypatch.setattr(gw.store, "save_response", stuck_first_write)
    gw.upstream.add(Reply(text="never"))
    async with gw.http.stream(
        "POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}
    ) as response:
        first = await anext(response.aiter_text())
        response_id = sse_events(first.encode())[0]["response"]["id"]
        await entered.wait()
    await gw.idle()
    stored = await gw.http.get(f"/v1/responses/{response_id}")
    assert stored.status_code == 200, stored.text
    assert stored.json()["status"] == "cancelled"
