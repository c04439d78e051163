"""Finding stored items by id, wherever the same owner stored them: a response's input or
output items, or a conversation's items.

`item_reference` names any item its key stored (OpenAI resolves any stored item, and clients
such as the AI SDK replay earlier turns as references with no `previous_response_id`). A
conversation item is found by its (owner, id) unique index. A response keeps its items inside
its JSON row; `item_index` (schema 5) maps each (owner, item id) to the newest response
holding it, written in the transaction that writes the response row, so the lookup is one
indexed query whatever the number of stored responses. Another owner's items are never found
(for them the id does not exist).
"""

from __future__ import annotations

import functools
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from toolwire.store.owner import Owner, owned_by, owner_key
from toolwire.store.prepared import Prepared
from toolwire.store.tables import (
    ITEM_INDEX_ID_LENGTH,
    conversation_items,
    conversations,
    item_index,
    responses,
)
from toolwire.wire.items import Item, ResponseObject

#: Status of a deleted response kept as a tombstone (store/database.py): its items are gone.
_DELETED = "deleted"


def _item_ids(items: list[Item]) -> set[str]:
    """The ids a response's items can be referenced by (references themselves are not)."""
    return {
        item["id"]
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and len(item["id"]) <= ITEM_INDEX_ID_LENGTH
        and item.get("type") != "item_reference"
    }


def _upsert(insert: Any) -> Any:
    """The index's upsert: PostgreSQL and SQLite spell it the same (ON CONFLICT DO UPDATE) but
    SQLAlchemy keeps it per dialect. Built once: a fresh one per write (its `excluded` alias
    and columns) cost more than the write's SQL itself."""
    statement = insert(item_index)
    return statement.on_conflict_do_update(
        index_elements=[item_index.c.owner, item_index.c.item_id],
        set_={"response_id": statement.excluded.response_id},
    )


_SQLITE_UPSERT = Prepared(_upsert(sqlite.insert))


@functools.cache
def _postgresql_upsert() -> Any:
    """PostgreSQL's, built on its first write: its dialect is not imported by a SQLite server
    (~2 MB)."""
    from sqlalchemy.dialects import postgresql

    return _upsert(postgresql.insert)


def index_items(
    connection: sa.Connection,
    body: ResponseObject,
    input_items: list[Item],
    owner: Owner,
) -> None:
    """Point the owner's index entries for the response's items at it (the newest response
    holding an id wins: a client may resend an item with its id, the latest copy is the one it
    last saw). Runs in the caller's transaction, with the response row's write."""
    ids = _item_ids([*(body.get("output") or []), *input_items])
    if not ids:
        return
    key = owner_key(owner)
    rows = [
        {"owner": key, "item_id": item_id, "response_id": body["id"]} for item_id in sorted(ids)
    ]
    if connection.dialect.name == "postgresql":
        connection.execute(_postgresql_upsert(), rows)
    else:
        _SQLITE_UPSERT.run_many(connection, rows)


def unindex_response(
    connection: sa.Connection,
    response_id: str,
    body: ResponseObject,
    input_items: list[Item],
    owner: Owner,
) -> None:
    """A deleted response's items are no longer found: the entries of its items' ids that
    still point at it (by the index's key; `response_id` itself is not indexed, which spares
    every response's write an index page)."""
    ids = _item_ids([*(body.get("output") or []), *(input_items or [])])
    if not ids:
        return
    connection.execute(
        item_index.delete().where(
            item_index.c.owner == owner_key(owner),
            item_index.c.item_id.in_(sorted(ids)),
            item_index.c.response_id == response_id,
        )
    )


def find_items_in(ids: set[str], owner: Owner, connection: sa.Connection) -> dict[str, Item]:
    """A read job: id -> the stored item, for those of `ids` that `owner` stored; ids not
    found are absent. A conversation item wins over a response's copy of the same id."""
    found: dict[str, Item] = {}
    if not ids:
        return found
    key = owner_key(owner)
    rows = connection.execute(
        sa.select(conversation_items.c.id, conversation_items.c.item)
        .join(conversations, conversations.c.id == conversation_items.c.conversation_id)
        .where(
            conversation_items.c.owner == key,
            conversation_items.c.id.in_(sorted(ids)),
            owned_by(conversations.c.owner, owner),
        )
    )
    for row in rows:
        found[row.id] = cast(Item, dict(row.item))
    missing = ids - set(found)
    if not missing:
        return found
    candidates = connection.execute(
        sa.select(item_index.c.item_id, responses.c.body, responses.c.input_items)
        .join(responses, responses.c.id == item_index.c.response_id)
        .where(
            item_index.c.owner == key,
            item_index.c.item_id.in_(sorted(missing)),
            owned_by(responses.c.owner, owner),
            responses.c.status != _DELETED,
        )
    )
    for hit in candidates:
        for item in [*(hit.body.get("output") or []), *(hit.input_items or [])]:
            if (
                isinstance(item, dict)
                and item.get("id") == hit.item_id
                and item.get("type") != "item_reference"
            ):
                found[hit.item_id] = cast(Item, dict(item))
                break
    return found


def taken_ids_in(ids: list[str], owner: Owner, connection: sa.Connection) -> list[str]:
    """A read job: those of `ids` that one of the owner's conversation items already has
    (conversation item ids are unique per owner)."""
    return list(
        connection.execute(
            sa.select(conversation_items.c.id).where(
                conversation_items.c.owner == owner_key(owner),
                conversation_items.c.id.in_(ids),
            )
        ).scalars()
    )


def upstream_of_items_in(ids: set[str], owner: Owner, connection: sa.Connection) -> str | None:
    """A read job: the model server that served the newest of the owner's responses holding
    one of `ids` (an `item_reference` chain continues that response's session); None if none
    says."""
    row = connection.execute(
        sa.select(responses.c.upstream)
        .join(item_index, item_index.c.response_id == responses.c.id)
        .where(
            item_index.c.owner == owner_key(owner),
            item_index.c.item_id.in_(sorted(ids)),
            owned_by(responses.c.owner, owner),
            responses.c.upstream.is_not(None),
        )
        .order_by(responses.c.created_at.desc())
        .limit(1)
    ).first()
    return None if row is None else str(row.upstream)
