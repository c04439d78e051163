"""What popular SDKs send by default (issue 27), in process: `item_reference`s to any item the
key stored, with no `previous_response_id` (the AI SDK's default), and OpenAI's error for an
unknown `previous_response_id`."""

from __future__ import annotations

from typing import Any

from tests.inprocess_gateway import AppGateway
from toolwire.testing import Reply


async def create(gw: AppGateway, headers: dict[str, str] | None = None, **body: Any) -> Any:
    return await gw.http.post("/v1/responses", json={"model": "m", **body}, headers=headers)


async def test_item_reference_names_any_item_the_key_stored(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Paris.", reasoning="The capital of France."), Reply(text="ok"))
    first = (await create(gw, input="capital of France?")).json()
    message = next(item for item in first["output"] if item["type"] == "message")
    # the AI SDK's next turn: the user's words again, the answer by reference, no
    # previous_response_id
    answer = await create(
        gw,
        input=[
            {"role": "user", "content": "capital of France?"},
            {"type": "item_reference", "id": message["id"]},
            {"role": "user", "content": "and of Italy?"},
        ],
    )
    assert answer.status_code == 200, answer.text
    sent = gw.upstream.chat_requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "Paris."


async def test_item_reference_to_a_missing_or_foreign_item_is_404(gw: AppGateway) -> None:
    _, key_a = await gw.store.keys.create("a")
    _, key_b = await gw.store.keys.create("b")
    as_a = {"authorization": f"Bearer {key_a}"}
    as_b = {"authorization": f"Bearer {key_b}"}
    gw.upstream.add(Reply(text="mine"), Reply(text="again"))
    first = (await create(gw, as_a, input="hi")).json()
    item_id = first["output"][0]["id"]
    reference = [{"type": "item_reference", "id": item_id}]

    foreign = await create(gw, as_b, input=reference)
    missing = await create(gw, as_b, input=[{"type": "item_reference", "id": "msg_nowhere"}])
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["error"]["param"] == "input[0]"
    assert foreign.json()["error"]["message"] == f"Item with id '{item_id}' not found."
    assert missing.json()["error"]["message"] == "Item with id 'msg_nowhere' not found."

    own = await create(gw, as_a, input=reference)
    assert own.status_code == 200, own.text


async def test_item_reference_in_conversation_items_copies_a_stored_response_item(
    gw: AppGateway,
) -> None:
    gw.upstream.add(Reply(text="stored answer"))
    first = (await create(gw, input="hi")).json()
    item_id = first["output"][0]["id"]
    conversation = (await gw.http.post("/v1/conversations", json={})).json()["id"]
    path = f"/v1/conversations/{conversation}/items"
    added = await gw.http.post(path, json={"items": [{"type": "item_reference", "id": item_id}]})
    assert added.status_code == 200, added.text
    listed = (await gw.http.get(path)).json()["data"]
    assert [item["content"][0]["text"] for item in listed] == ["stored answer"]
    # a second conversation referencing the same item gets its own copy, under a new id
    other = (await gw.http.post("/v1/conversations", json={})).json()["id"]
    other_path = f"/v1/conversations/{other}/items"
    again = await gw.http.post(
        other_path, json={"items": [{"type": "item_reference", "id": listed[0]["id"]}]}
    )
    assert again.status_code == 200, again.text
    copied = (await gw.http.get(other_path)).json()["data"]
    assert copied[0]["content"][0]["text"] == "stored answer"
    assert copied[0]["id"] != listed[0]["id"]


async def test_unknown_previous_response_is_400_as_openai_answers(gw: AppGateway) -> None:
    answer = await create(gw, input="x", previous_response_id="resp_nope")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "previous_response_not_found"
    assert error["param"] == "previous_response_id"
