"""`/v1/conversations` in process, and responses that read and extend a conversation."""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.inprocess.test_bad_input import stored_statuses
from tests.inprocess.test_responses import STOCK_TOOL, check_lifecycle, stream_raw
from tests.inprocess_gateway import AppGateway, Gate, app_gateway, sse_events
from toolwire.testing import Reply, ScriptedUpstream


async def test_conversations_carry_history_and_items(gw: AppGateway) -> None:
    conversation = await gw.client.conversations.create(
        metadata={"topic": "pets"},
        items=[{"type": "message", "role": "user", "content": "I have a cat."}],
    )
    assert conversation.metadata == {"topic": "pets"}
    gw.upstream.add(Reply(text="Cats are great."), Reply(text="You have a cat."))
    await gw.client.responses.create(
        model="m", input="Remember that.", conversation=conversation.id
    )
    answer = await gw.client.responses.create(
        model="m", input="What pet do I have?", conversation=conversation.id
    )
    assert answer.output_text == "You have a cat."
    assert answer.conversation is not None and answer.conversation.id == conversation.id
    contents = [m["content"] for m in gw.upstream.chat_requests[1].body["messages"]]
    assert contents == ["I have a cat.", "Remember that.", "Cats are great.", "What pet do I have?"]
    items = await gw.client.conversations.items.list(conversation.id, order="asc")
    assert [i.type for i in items.data] == ["message"] * 5
    assert [i.role for i in items.data] == ["user", "user", "assistant", "user", "assistant"]  # type: ignore[union-attr]


async def test_conversation_items_crud_and_metadata(gw: AppGateway) -> None:
    conversation = await gw.client.conversations.create(metadata={"topic": "pets"})
    added = await gw.client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": "A dog."},
            {"type": "message", "role": "user", "content": "A fish."},
        ],
    )
    first, second = (item.id for item in added.data)
    got = await gw.client.conversations.items.retrieve(second, conversation_id=conversation.id)
    assert got.id == second
    await gw.client.conversations.items.delete(first, conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        await gw.client.conversations.items.retrieve(first, conversation_id=conversation.id)
    remaining = await gw.client.conversations.items.list(conversation.id)
    assert [i.id for i in remaining.data] == [second]
    updated = await gw.client.conversations.update(conversation.id, metadata={"topic": "animals"})
    assert updated.metadata == {"topic": "animals"}
    assert (await gw.client.conversations.retrieve(conversation.id)).metadata == {
        "topic": "animals"
    }
    assert (await gw.client.conversations.delete(conversation.id)).deleted
    with pytest.raises(openai.NotFoundError):
        await gw.client.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        await gw.client.responses.create(model="m", input="hi", conversation=conversation.id)
    assert not gw.upstream.chat_requests


async def test_items_pagination(gw: AppGateway) -> None:
    conversation = await gw.client.conversations.create(
        items=[{"type": "message", "role": "user", "content": f"m{i}"} for i in range(5)]
    )
    page = await gw.http.get(
        f"/v1/conversations/{conversation.id}/items", params={"order": "asc", "limit": 2}
    )
    body = page.json()
    assert [i["content"][0]["text"] for i in body["data"]] == ["m0", "m1"]
    assert body["has_more"] is True and body["last_id"] == body["data"][-1]["id"]
    rest = await gw.http.get(
        f"/v1/conversations/{conversation.id}/items",
        params={"order": "asc", "after": body["last_id"]},
    )
    assert [i["content"][0]["text"] for i in rest.json()["data"]] == ["m2", "m3", "m4"]
    assert rest.json()["has_more"] is False
    # the SDK's auto-pagination walks every page
    texts = [
        item.content[0].text  # type: ignore[union-attr]
        async for item in gw.client.conversations.items.list(conversation.id, limit=2, order="asc")
    ]
    assert texts == ["m0", "m1", "m2", "m3", "m4"]


async def test_a_streamed_response_extends_the_conversation(gw: AppGateway) -> None:
    conversation = await gw.client.conversations.create()
    gw.upstream.add(Reply(text="Streamed into the conversation."))
    events = await stream_raw(gw, {"model": "m", "input": "hi", "conversation": conversation.id})
    final = check_lifecycle(events)
    items = await gw.client.conversations.items.list(conversation.id, order="asc")
    assert [i.id for i in items.data][-1] == final["output"][0]["id"]
    assert len(items.data) == 2


async def test_a_function_call_is_continued_in_the_conversation(gw: AppGateway) -> None:
    conversation = await gw.client.conversations.create()
    gw.upstream.add(
        Reply(tool_calls=[("lookup_stock", {"sku": "A-1"})]), Reply(text="12 in stock.")
    )
    first = await gw.client.responses.create(
        model="m", input="Stock of A-1?", tools=[STOCK_TOOL], conversation=conversation.id
    )
    call = first.output[0]
    assert call.type == "function_call"
    answer = await gw.client.responses.create(
        model="m",
        tools=[STOCK_TOOL],
        conversation=conversation.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "12"}],
    )
    assert answer.output_text == "12 in stock."
    roles = [m["role"] for m in gw.upstream.chat_requests[1].body["messages"]]
    assert roles == ["user", "assistant", "tool"]
    kinds = [i.type async for i in gw.client.conversations.items.list(conversation.id, order="asc")]
    assert kinds == ["message", "function_call", "function_call_output", "message"]


async def test_store_false_in_a_conversation_extends_it_but_is_not_retrievable(
    gw: AppGateway,
) -> None:
    """OpenAI's document: a response's input and output items are added to its conversation
    (`conversation`); `store` is about retrieving the response itself later."""
    conversation = await gw.client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ada."}]
    )
    gw.upstream.add(Reply(text="Hello Ada."), Reply(text="You are Ada."))
    first = await gw.client.responses.create(
        model="m", input="Hi.", conversation=conversation.id, store=False
    )
    assert first.store is False and first.conversation is not None
    assert first.conversation.id == conversation.id
    with pytest.raises(openai.NotFoundError):
        await gw.client.responses.retrieve(first.id)
    items = await gw.client.conversations.items.list(conversation.id, order="asc")
    assert [i.role for i in items.data] == ["user", "user", "assistant"]  # type: ignore[union-attr]
    # the next turn (stored or not) reads the whole conversation, this turn included
    await gw.client.responses.create(
        model="m", input="Who am I?", conversation=conversation.id, store=False
    )
    contents = [m["content"] for m in gw.upstream.chat_requests[-1].body["messages"]]
    assert contents == ["My name is Ada.", "Hi.", "Hello Ada.", "Who am I?"]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_item_id_taken_while_the_response_ran_is_the_documented_400(
    fake_upstream: ScriptedUpstream, stream: bool
) -> None:
    """The check in `prepare` passes, then another request stores the same item id in the
    conversation while the model answers: the final write (response, conversation items, in
    one transaction) is refused whole. The client hears the request's own 400
    `duplicate_item_id` (not "finalized elsewhere", not a store error), the stored response
    says `failed` the same way, and the conversation holds none of the refused turn."""
    gate = Gate(fake_upstream)
    fake_upstream.add(Reply(text="late"))
    async with app_gateway(fake_upstream, upstream_transport=gate.transport) as gw:
        conversation = (await gw.http.post("/v1/conversations", json={})).json()["id"]
        body = {
            "model": "m",
            "conversation": conversation,
            "input": [{"id": "msg_race", "role": "user", "content": "mine"}],
            "stream": stream,
        }
        answer = asyncio.create_task(gw.http.post("/v1/responses", json=body))
        await gate.reached.wait()  # prepared and checked: the model is answering
        taken = await gw.http.post(
            f"/v1/conversations/{conversation}/items",
            json={"items": [{"id": "msg_race", "role": "user", "content": "theirs"}]},
        )
        assert taken.status_code == 200, taken.text
        gate.release.set()
        reply = await answer
        if stream:
            events = sse_events(reply.content)
            assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
            assert events[-2]["code"] == "duplicate_item_id"
            told = events[-1]["response"]
        else:
            assert reply.status_code == 400, reply.text
            assert reply.json()["error"]["code"] == "duplicate_item_id"
            assert reply.json()["error"]["type"] == "invalid_request_error"
            told = None
        await gw.idle()
        assert await stored_statuses(gw) == ["failed"]
        items = (await gw.http.get(f"/v1/conversations/{conversation}/items")).json()["data"]
        assert [item["content"][0]["text"] for item in items] == ["theirs"]
        if told is not None:
            kept = (await gw.http.get(f"/v1/responses/{told['id']}")).json()
            assert kept["status"] == "failed" == told["status"]
            assert kept["error"] == told["error"]
            assert "already used" in kept["error"]["message"]
