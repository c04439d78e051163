"""Schema 8: a response's write touches fewer index pages (no index on `item_index`'s
`response_id`, none on `responses.owner` alone, a partial one on `previous_response_id`),
and deleting a response still unindexes exactly its items."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from toolwire.store.database import Store


def _message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }


def _body(response_id: str, output: list[dict[str, Any]]) -> Any:
    return {"id": response_id, "created_at": 1, "status": "completed", "output": output}


def _indexes(connection: sa.Connection) -> dict[str, set[str]]:
    inspector = sa.inspect(connection)
    return {
        table: {str(index["name"]) for index in inspector.get_indexes(table)}
        for table in ("responses", "item_index")
    }


def _continuations_index(connection: sa.Connection) -> str:
    """The index's definition as the database keeps it."""
    query = (
        "SELECT sql FROM sqlite_master WHERE name = :name"
        if connection.dialect.name == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
    )
    name = "ix_responses_previous_response_id"
    return str(connection.execute(sa.text(query), {"name": name}).scalar_one())


async def test_a_response_write_updates_only_the_indexes_that_serve_a_read(
    database_url: str,
) -> None:
    store = await Store.open(database_url)
    try:
        indexes = await store.read(_indexes)
        assert "ix_responses_owner" not in indexes["responses"]  # its prefix index serves
        assert "ix_responses_previous_response_id" in indexes["responses"]
        assert indexes["item_index"] == set()
        assert "IS NOT NULL" in await store.read(_continuations_index)
    finally:
        await store.close()


async def test_deleting_a_response_unindexes_its_items_and_no_newer_copy(
    database_url: str,
) -> None:
    store = await Store.open(database_url)
    try:
        for owner in (None, "key_a"):
            first = [_message("msg_shared", "one"), _message("msg_only", "two")]
            await store.save_response(
                _body("resp_1", [_message("msg_out", "out")]),
                input_items=first,  # type: ignore[arg-type]
                conversation_id=None,
                owner=owner,
            )
            # the client sends one item again: the newest response holding it is where it is
            await store.save_response(
                _body("resp_2", []),
                input_items=[_message("msg_shared", "one again")],  # type: ignore[list-item]
                conversation_id=None,
                owner=owner,
            )
            assert await store.delete_response("resp_1", owner=owner)
            found = await store.find_items({"msg_shared", "msg_only", "msg_out"}, owner=owner)
            assert {k: v["content"][0]["text"] for k, v in found.items()} == {
                "msg_shared": "one again"
            }
            assert await store.delete_response("resp_2", owner=owner)
            assert await store.find_items({"msg_shared"}, owner=owner) == {}
    finally:
        await store.close()
