"""`/v1/responses` in process: the official `openai` client and raw httpx into the app, the app
into an in-process ScriptedUpstream. JSON and SSE; the stream's lifecycle checked as invariants
(they hold whether deltas are live or not, and whatever their number)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import openai
import orjson
import pytest

from tests.inprocess_gateway import AppGateway, Gate, app_gateway, sse_events
from toolwire import tool
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream

STOCK_TOOL = {
    "type": "function",
    "name": "lookup_stock",
    "description": "Stock level of a product.",
    "parameters": {
        "type": "object",
        "properties": {"sku": {"type": "string"}},
        "required": ["sku"],
    },
}
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def check_lifecycle(events: list[dict[str, Any]]) -> dict[str, Any]:
    """OpenAI's stream contract, as invariants; returns the final response object."""
    numbers = [e["sequence_number"] for e in events]
    assert all(a < b for a, b in itertools.pairwise(numbers)), numbers
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in TERMINAL and sum(k in TERMINAL for k in kinds) == 1
    final: dict[str, Any] = events[-1]["response"]
    assert events[0]["response"]["id"] == final["id"]

    opened: dict[str, int] = {}  # item id -> output_index, while the item is open
    closed: dict[str, dict[str, Any]] = {}
    text: dict[str, list[str]] = {}
    reasoning: dict[str, list[str]] = {}
    arguments: dict[str, list[str]] = {}
    parts_open: set[str] = set()
    for event in events[2:-1]:
        kind = event["type"]
        if kind == "error":
            continue
        if kind == "response.output_item.added":
            item = event["item"]
            assert item["id"] not in opened and item["id"] not in closed, "an item added twice"
            assert event["output_index"] == len(opened) + len(closed), "indexes in order"
            opened[item["id"]] = event["output_index"]
            continue
        item_id = event["item"]["id"] if kind == "response.output_item.done" else event["item_id"]
        assert item_id in opened, f"{kind} for an item that is not open: {item_id}"
        assert event["output_index"] == opened[item_id]
        if kind == "response.output_item.done":
            del opened[item_id]
            closed[item_id] = event["item"]
            assert item_id not in parts_open
        elif kind == "response.content_part.added":
            parts_open.add(item_id)
        elif kind == "response.content_part.done":
            parts_open.remove(item_id)
        elif kind == "response.output_text.delta":
            assert item_id in parts_open, "text delta outside a content part"
            text.setdefault(item_id, []).append(event["delta"])
        elif kind == "response.output_text.done":
            assert "".join(text.pop(item_id, [])) == event["text"]
        elif kind == "response.reasoning_text.delta":
            assert item_id in parts_open, "reasoning delta outside a content part"
            reasoning.setdefault(item_id, []).append(event["delta"])
        elif kind == "response.reasoning_text.done":
            assert "".join(reasoning.pop(item_id, [])) == event["text"]
        elif kind == "response.function_call_arguments.delta":
            arguments.setdefault(item_id, []).append(event["delta"])
        elif kind == "response.function_call_arguments.done":
            arguments.pop(item_id, None)  # repaired arguments may differ from the raw pieces
            assert isinstance(orjson.loads(event["arguments"]), dict)
    assert not opened, f"items never done: {opened}"
    assert not text and not reasoning and not arguments, "deltas without a done"
    # the stream's items are the final response's output, in order
    assert [item["id"] for item in final["output"]] == list(closed)
    for item in final["output"]:
        assert closed[item["id"]] == item
    return final


def events_of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def stream_raw(gw: AppGateway, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await gw.http.post("/v1/responses", json={**body, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return sse_events(response.content)


# -- JSON ------------------------------------------------------------------------------------


async def test_plain_text_is_answered_stored_and_retrievable(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Hello! How can I help?"))
    response = await gw.client.responses.create(
        model="scripted-model", input="hi", instructions="Be kind.", metadata={"team": "blue"}
    )
    assert response.status == "completed"
    assert response.output_text == "Hello! How can I help?"
    assert response.model == "scripted-model"
    assert response.metadata == {"team": "blue"} and response.instructions == "Be kind."
    assert response.usage is not None and response.usage.total_tokens == 15
    sent = gw.upstream.chat_requests[0].body["messages"]
    assert sent == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    again = await gw.client.responses.retrieve(response.id)
    assert again.output_text == response.output_text and again.status == "completed"
    assert again.model_dump() == response.model_dump()
    items = await gw.client.responses.input_items.list(response.id)
    assert [i.type for i in items.data] == ["message"]


async def test_previous_response_id_continues_the_conversation(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Nice to meet you, Ada."), Reply(text="Your name is Ada."))
    first = await gw.client.responses.create(model="m", input="My name is Ada.")
    second = await gw.client.responses.create(
        model="m", input="What is my name?", previous_response_id=first.id
    )
    assert second.output_text == "Your name is Ada."
    assert second.previous_response_id == first.id
    messages = gw.upstream.chat_requests[1].body["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]


async def test_previous_response_id_branches_do_not_mix(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="A."), Reply(text="B1."), Reply(text="B2."))
    root = await gw.client.responses.create(model="m", input="start")
    await gw.client.responses.create(model="m", input="left", previous_response_id=root.id)
    await gw.client.responses.create(model="m", input="right", previous_response_id=root.id)
    contents = [m["content"] for m in gw.upstream.chat_requests[2].body["messages"]]
    assert contents == ["start", "A.", "right"]


async def test_function_tool_round_trip(gw: AppGateway) -> None:
    gw.upstream.add(
        Reply(tool_calls=[("lookup_stock", {"sku": "A-1"})]), Reply(text="12 in stock.")
    )
    first = await gw.client.responses.create(model="m", input="Stock of A-1?", tools=[STOCK_TOOL])
    assert first.status == "completed"
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "lookup_stock"
    assert calls[0].arguments == '{"sku":"A-1"}'
    second = await gw.client.responses.create(
        model="m",
        previous_response_id=first.id,
        tools=[STOCK_TOOL],
        input=[
            {
                "type": "function_call_output",
                "call_id": calls[0].call_id,
                "output": "12 units\nwarehouse \\.ts$",
            }
        ],
    )
    assert second.output_text == "12 in stock."
    tool_message = gw.upstream.chat_requests[1].body["messages"][-1]
    assert tool_message == {
        "role": "tool",
        "tool_call_id": calls[0].call_id,
        "content": "status:\nsuccess\n\ntoolName:\nlookup_stock\n\nerror:\n\n\noutput:\n12 units\nwarehouse \\.ts$",
    }


async def test_server_side_tools_run_inside_the_loop_and_usage_is_summed(
    gw: AppGateway,
) -> None:
    gw.upstream.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="18 °C in Paris.")
    )
    response = await gw.client.responses.create(model="m", input="Weather in Paris?")
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["mcp_call", "message"]
    call = response.output[0]
    assert call.name == "get_weather" and call.server_label == "toolwire"  # type: ignore[union-attr]
    assert call.output == (  # type: ignore[union-attr]
        "city: Paris\ntemperature_c: 18\ntemperature_f: 64\nsky: light rain\n"
        "summary: It is 18 °C (64 °F) in Paris, with light rain."
    )
    assert response.usage is not None and response.usage.input_tokens == 20  # two model calls
    offered = [t["function"]["name"] for t in gw.upstream.chat_requests[0].body["tools"]]
    assert offered == ["get_weather", "convert_temperature"]


async def test_settings_are_passed_upstream_and_echoed(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text='{"answer": 42}'))
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    response = await gw.client.responses.create(
        model="m",
        input="answer",
        temperature=0.2,
        top_p=0.9,
        max_output_tokens=64,
        tool_choice="none",
        parallel_tool_calls=False,
        text={
            "format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
        },
    )
    body = gw.upstream.chat_requests[0].body
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9 and body["max_tokens"] == 64
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert body["tool_choice"] == "none" and body["parallel_tool_calls"] is False
    assert response.temperature == 0.2 and response.top_p == 0.9
    assert response.max_output_tokens == 64 and response.tool_choice == "none"
    assert response.text is not None and response.text.format is not None
    assert response.text.format.type == "json_schema"


async def test_reasoning_becomes_a_reasoning_item(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="4", reasoning="2 + 2 is 4."))
    response = await gw.client.responses.create(model="m", input="2+2?")
    assert [item.type for item in response.output] == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.content is not None and reasoning.content[0].text == "2 + 2 is 4."  # type: ignore[union-attr]


async def test_store_false_is_not_retrievable(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="ephemeral"))
    response = await gw.client.responses.create(model="m", input="hi", store=False)
    assert response.output_text == "ephemeral" and response.store is False
    with pytest.raises(openai.NotFoundError):
        await gw.client.responses.retrieve(response.id)


async def test_delete_response(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="bye"))
    response = await gw.client.responses.create(model="m", input="hi")
    deleted = await gw.http.delete(f"/v1/responses/{response.id}")
    assert deleted.json() == {"id": response.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        await gw.client.responses.retrieve(response.id)


async def test_models_and_health(gw: AppGateway) -> None:
    assert [m.id async for m in gw.client.models.list()] == ["scripted-model"]
    assert (await gw.http.get("/health")).json() == {"status": "ok"}


# -- SSE -------------------------------------------------------------------------------------


async def test_text_stream_lifecycle(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Streaming works, token by token.", reasoning="think first"))
    events = await stream_raw(gw, {"model": "m", "input": "stream"})
    final = check_lifecycle(events)
    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["output"][1]["content"][0]["text"] == "Streaming works, token by token."
    assert events_of(events, "response.output_text.delta"), "text arrives as deltas"
    kinds = [e["type"] for e in events]
    # the reasoning item closes before the message opens
    message_opens = next(
        n
        for n, e in enumerate(events)
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "message"
    )
    assert kinds.index("response.reasoning_text.done") < message_opens
    stored = (await gw.http.get(f"/v1/responses/{final['id']}")).json()
    assert stored == final


async def test_the_sdk_parses_the_stream(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Streaming works, token by token.", reasoning="think"))
    stream = await gw.client.responses.create(model="m", input="stream", stream=True)
    events = [event async for event in stream]
    check_lifecycle([e.model_dump(mode="json") for e in events])
    final = events[-1].response  # type: ignore[union-attr]
    assert final.output_text == "Streaming works, token by token."
    assert (await gw.client.responses.retrieve(final.id)).output_text == final.output_text


async def test_function_call_stream_lifecycle(gw: AppGateway) -> None:
    gw.upstream.add(
        Reply(
            text="Checking both.",
            tool_calls=[("lookup_stock", {"sku": "B-2"}), ("lookup_stock", {"sku": "C-3"})],
        )
    )
    events = await stream_raw(gw, {"model": "m", "input": "stock?", "tools": [STOCK_TOOL]})
    final = check_lifecycle(events)
    assert [item["type"] for item in final["output"]] == [
        "message",
        "function_call",
        "function_call",
    ]
    calls = final["output"][1:]
    assert [c["arguments"] for c in calls] == ['{"sku":"B-2"}', '{"sku":"C-3"}']
    assert all(c["status"] == "completed" and c["name"] == "lookup_stock" for c in calls)
    assert len({c["call_id"] for c in calls}) == 2
    for call in calls:
        mine = [e for e in events if e.get("item_id") == call["id"]]
        kinds = [e["type"] for e in mine]
        assert kinds[-1] == "response.function_call_arguments.done"
        assert set(kinds[:-1]) <= {"response.function_call_arguments.delta"}
        deltas = [e["delta"] for e in mine if e["type"].endswith(".delta")]
        assert "".join(deltas) == mine[-1]["arguments"] == call["arguments"]  # clean call


async def test_the_sdk_stream_helper_gives_the_final_response(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Checking.", tool_calls=[("lookup_stock", {"sku": "B-2"})]))
    async with gw.client.responses.stream(model="m", input="stock?", tools=[STOCK_TOOL]) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.done" in kinds
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output[1].arguments == '{"sku":"B-2"}'  # type: ignore[union-attr]


async def test_a_repaired_call_streams_its_repaired_arguments_in_done(gw: AppGateway) -> None:
    head = {"index": 0, "id": "call_r", "type": "function"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    gw.upstream.add(
        Chunks(
            [
                chunk(
                    {
                        "tool_calls": [
                            {**head, "function": {"name": "lookup_stock", "arguments": ""}}
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{'sku': "}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "'B-2',}"}}]}),
                chunk({}, "tool_calls"),
            ]
        )
    )
    events = await stream_raw(gw, {"model": "m", "input": "stock?", "tools": [STOCK_TOOL]})
    final = check_lifecycle(events)
    done = events_of(events, "response.function_call_arguments.done")
    assert [orjson.loads(d["arguments"]) for d in done] == [{"sku": "B-2"}]
    assert final["output"][-1]["arguments"] == done[0]["arguments"]


async def test_streamed_server_tool_calls_emit_mcp_call_events(gw: AppGateway) -> None:
    gw.upstream.add(
        Reply(text="Looking.", tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(text="4 °C."),
    )
    events = await stream_raw(gw, {"model": "m", "input": "Oslo?"})
    final = check_lifecycle(events)
    kinds = [e["type"] for e in events]
    order = [
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ]
    assert [kinds.index(k) for k in order] == sorted(kinds.index(k) for k in order)
    assert [item["type"] for item in final["output"]] == ["message", "mcp_call", "message"]
    assert final["output"][1]["output"] == (
        "city: Oslo\ntemperature_c: 4\ntemperature_f: 39\nsky: clear\n"
        "summary: It is 4 °C (39 °F) in Oslo, with clear skies."
    )
    assert final["output"][2]["content"][0]["text"] == "4 °C."


async def test_response_created_is_sent_before_the_upstream_answers(
    fake_upstream: ScriptedUpstream,
) -> None:
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="late"))
    async with (
        app_gateway(fake_upstream, upstream_transport=gate.transport) as gw,
        gw.http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        ) as response,
    ):
        chunks = response.aiter_text()
        first = await anext(chunks)
        assert first.startswith("event: response.created")
        await gate.reached.wait()
        assert not gate.release.is_set()  # the upstream has not answered yet
        gate.release.set()
        rest = first + "".join([chunk async for chunk in chunks])
    final = check_lifecycle(sse_events(rest.encode()))
    assert final["output"][0]["content"][0]["text"] == "late"


async def test_a_non_streaming_response_is_stored_once_with_its_timeline_before_the_answer(
    fake_upstream: ScriptedUpstream,
) -> None:
    """One write on the hot path: no `in_progress` row nor lease while it runs (nobody can know
    its id yet), then the response and its /ui timeline in one transaction, committed before
    the answer leaves: a GET right after sees it."""
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="done"))
    async with app_gateway(fake_upstream, upstream_transport=gate.transport) as gw:
        writes: list[str] = []
        original = gw.store.save_response

        async def counted(body: dict[str, Any], **kwargs: Any) -> bool:
            writes.append(body["status"])
            return await original(body, **kwargs)

        gw.store.save_response = counted  # type: ignore[method-assign]
        pending = asyncio.create_task(gw.client.responses.create(model="m", input="hi"))
        await gate.reached.wait()
        assert writes == []
        gate.release.set()
        answer = await pending
        assert writes == ["completed"]
        assert (await gw.client.responses.retrieve(answer.id)).status == "completed"
        entries = await gw.store.ui.timeline(answer.id)
        assert entries and entries[-1]["type"] == "finished"


async def test_a_streamed_response_is_retrievable_in_progress_while_it_runs(
    fake_upstream: ScriptedUpstream,
) -> None:
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="done"))
    async with (
        app_gateway(fake_upstream, upstream_transport=gate.transport) as gw,
        gw.http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        ) as response,
    ):
        chunks = response.aiter_text()
        first = await anext(chunks)
        response_id = sse_events(first.encode())[0]["response"]["id"]
        await gate.reached.wait()
        assert (await gw.client.responses.retrieve(response_id)).status == "in_progress"
        gate.release.set()
        async for _ in chunks:
            pass
        assert (await gw.client.responses.retrieve(response_id)).status == "completed"


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": 5}, "input"),
        ({"model": "m", "input": "x", "temperature": 3}, "temperature"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "m", "input": "x", "tools": [{"type": "teleport"}]}, "tools[0].type"),
        ({"model": "m", "input": "x", "max_output_tokens": 15}, "max_output_tokens"),
        ({"model": "m", "input": [{"type": "séance"}]}, "input[0].type"),
        (
            {"model": "m", "input": [{"type": "message", "role": "wizard", "content": "x"}]},
            "input[0].role",
        ),
        (
            {
                "model": "m",
                "input": "x",
                "previous_response_id": "resp_1",
                "conversation": "conv_1",
            },
            "previous_response_id",
        ),
        (
            {"model": "m", "input": "x", "tool_choice": {"type": "function", "name": "nope"}},
            "tool_choice",
        ),
    ],
)
async def test_invalid_bodies_are_400_naming_the_field(
    gw: AppGateway, body: dict[str, Any], param: str
) -> None:
    response = await gw.http.post("/v1/responses", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"]
    assert not gw.upstream.chat_requests  # nothing was sent upstream


async def test_malformed_json_is_400(gw: AppGateway) -> None:
    response = await gw.http.post(
        "/v1/responses", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/responses/resp_missing"),
        ("DELETE", "/v1/responses/resp_missing"),
        ("GET", "/v1/responses/resp_missing/input_items"),
        ("POST", "/v1/responses/resp_missing/cancel"),
        ("GET", "/v1/conversations/conv_missing"),
        ("GET", "/v1/conversations/conv_missing/items"),
    ],
)
async def test_unknown_ids_are_404(gw: AppGateway, method: str, path: str) -> None:
    response = await gw.http.request(method, path)
    assert response.status_code == 404
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


async def test_unknown_previous_response_is_400(gw: AppGateway) -> None:
    with pytest.raises(openai.BadRequestError):
        await gw.client.responses.create(model="m", input="x", previous_response_id="resp_nope")


async def test_upstream_client_errors_become_the_matching_client_error(gw: AppGateway) -> None:
    gw.upstream.add(Body({"error": {"message": "bad request: no such thing"}}, status=400))
    with pytest.raises(openai.BadRequestError) as info:
        await gw.client.responses.create(model="m", input="x")
    assert "no such thing" in info.value.message
    gw.upstream.add(
        Body({"error": {"message": "The model `nope` does not exist.", "code": 404}}, status=404)
    )
    with pytest.raises(openai.NotFoundError) as missing:
        await gw.client.responses.create(model="nope", input="x")
    assert missing.value.code == "model_not_found"
    body = "Traceback (most recent call last):\n  File 'x.py'\nKeyError: 'secret'"
    gw.upstream.add(*[Body(body, status=500)] * 4)
    with pytest.raises(openai.APIStatusError) as failed:
        await gw.client.responses.create(model="m", input="x")
    assert failed.value.status_code == 502 and failed.value.code == "server_error"
    assert "Traceback" not in failed.value.message and "secret" not in failed.value.message


async def test_upstream_timeout_before_an_answer_is_504(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Body({"choices": []}, delay=60))
    async with app_gateway(fake_upstream, read_timeout=0.01) as gw:
        with pytest.raises(openai.APIStatusError) as info:
            await gw.client.responses.create(model="m", input="x")
    assert info.value.status_code == 504


async def test_upstream_failure_mid_stream_is_response_failed_and_stored(gw: AppGateway) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([chunk, chunk], disconnect_after=1))
    events = await stream_raw(gw, {"model": "m", "input": "x"})
    final = check_lifecycle(events)
    assert final["status"] == "failed" and "broke" in final["error"]["message"]
    assert [e["type"] for e in events][-2] == "error"
    assert final["output"][0]["content"][0]["text"] == "partial "
    stored = await gw.client.responses.retrieve(final["id"])
    assert stored.status == "failed"


async def test_client_disconnect_cancels_the_run_and_stores_it_cancelled(gw: AppGateway) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "slow "}, "finish_reason": None}]}
    gw.upstream.add(Chunks([chunk] * 50, delay=0.01))
    response_id = None
    async with gw.http.stream(
        "POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}
    ) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:") and response_id is None:
                response_id = orjson.loads(line[5:])["response"]["id"]
            if "output_text.delta" in line:
                break
    assert response_id is not None
    await gw.idle()  # the app's cleanup after the hang-up
    stored = await gw.client.responses.retrieve(response_id)
    assert stored.status == "cancelled"
    assert len(gw.upstream.chat_requests) == 1


async def test_background_response_completes(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="done in the background"))
    queued = await gw.client.responses.create(model="m", input="x", background=True)
    assert queued.status == "queued" and queued.background is True
    await gw.idle()
    done = await gw.client.responses.retrieve(queued.id)
    assert done.status == "completed" and done.output_text == "done in the background"


async def test_background_response_can_be_cancelled_idempotently(
    fake_upstream: ScriptedUpstream,
) -> None:
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="never"))
    async with app_gateway(fake_upstream, upstream_transport=gate.transport) as gw:
        queued = await gw.client.responses.create(model="m", input="x", background=True)
        await gate.reached.wait()
        assert (await gw.client.responses.retrieve(queued.id)).status == "in_progress"
        assert (await gw.client.responses.cancel(queued.id)).status == "cancelled"
        assert (await gw.client.responses.cancel(queued.id)).status == "cancelled"
        assert (await gw.client.responses.retrieve(queued.id)).status == "cancelled"


async def test_cancel_of_a_foreground_response_is_400(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="hi"))
    response = await gw.client.responses.create(model="m", input="x")
    with pytest.raises(openai.BadRequestError):
        await gw.client.responses.cancel(response.id)


# -- cancellation races -----------------------------------------------------------------------


async def test_cancel_during_the_in_progress_write_still_cancels(
    gw: AppGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = gw.store.save_response
    entered, hold = asyncio.Event(), asyncio.Event()

    async def slow_in_progress_write(body: dict[str, Any], **kwargs: Any) -> None:
        if body["status"] == "in_progress":
            entered.set()
            await hold.wait()  # the write is in flight when the cancel arrives
        await original(body, **kwargs)

    monkeypatch.setattr(gw.store, "save_response", slow_in_progress_write)
    gw.upstream.add(Reply(text="never"))
    queued = await gw.client.responses.create(model="m", input="x", background=True)
    await entered.wait()
    cancelled = await gw.client.responses.cancel(queued.id)
    hold.set()
    await gw.idle()
    stored = await gw.client.responses.retrieve(queued.id)
    assert (cancelled.status, stored.status) == ("cancelled", "cancelled")
    assert not gw.service.background


async def test_a_tool_interrupted_by_a_disconnect_is_not_reported_as_a_success(
    fake_upstream: ScriptedUpstream,
) -> None:
    running = asyncio.Event()

    @tool
    async def wait_forever(x: str) -> str:
        """Never returns."""
        running.set()
        await asyncio.Event().wait()
        return "never"

    fake_upstream.add(Reply(text="Running it.", tool_calls=[("wait_forever", {"x": "1"})]))
    async with app_gateway(fake_upstream, tools=[wait_forever]) as gw:
        response_id = None
        async with gw.http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}
        ) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:") and response_id is None:
                    response_id = orjson.loads(line[5:])["response"]["id"]
                if "response.mcp_call.in_progress" in line:
                    await running.wait()  # a live call is in progress before it runs
                    break  # hang up while the tool runs
        await gw.idle()
        stored = await gw.client.responses.retrieve(str(response_id))
        assert stored.status == "cancelled"
        fake_upstream.add(Reply(text="ok"))
        await gw.client.responses.create(
            model="m", input="and now?", previous_response_id=stored.id
        )
    told = [m for m in fake_upstream.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "status:\nsuccess" not in told[0]["content"]
    assert [item.status for item in stored.output if item.type == "mcp_call"] != ["in_progress"]  # type: ignore[union-attr]
