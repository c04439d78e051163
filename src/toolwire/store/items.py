"""Finding stored items by id, wherever the same owner stored them: a response's input or
output items, or a conversation's items.

`item_reference` names any item its key stored (OpenAI resolves any stored item, and clients
such as the AI SDK replay earlier turns as references with no `previous_response_id`). A
conversation item is found by its indexed id. A response keeps its items inside its JSON row,
so the owner's responses are narrowed in SQL to rows whose text holds the id in quotes (the
owner column is indexed; the JSON is searched as text, which SQLite and PostgreSQL both store
as written), then the items are read in Python: a match in text is only a candidate.
Another owner's items are never found (for them the id does not exist).
"""

from __future__ import annotations

from typing import cast

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwire.store.owner import Owner, owned_by
from toolwire.store.tables import conversation_items, conversations, responses
from toolwire.wire.items import Item

#: Status of a deleted response kept as a tombstone (store/database.py): its items are gone.
_DELETED = "deleted"


async def find_items(engine: AsyncEngine, ids: set[str], owner: Owner) -> dict[str, Item]:
    """id -> the stored item, for those of `ids` that `owner` stored; ids not found are
    absent. The newest response holding an id wins (a client may resend an item with its
    id; the latest copy is the one it last saw)."""
    found: dict[str, Item] = {}
    if not ids:
        return found
    async with engine.connect() as connection:
        rows = await connection.execute(
            sa.select(conversation_items.c.id, conversation_items.c.item)
            .join(conversations, conversations.c.id == conversation_items.c.conversation_id)
            .where(conversation_items.c.id.in_(sorted(ids)), owned_by(conversations.c.owner, owner))
        )
        for row in rows:
            found[row.id] = cast(Item, dict(row.item))
        missing = ids - set(found)
        if not missing:
            return found
        text = sa.cast(responses.c.body, sa.Text) + sa.cast(responses.c.input_items, sa.Text)
        holds = sa.or_(
            *(text.contains(orjson.dumps(item_id).decode(), autoescape=True) for item_id in missing)
        )
        candidates = await connection.execute(
            sa.select(responses.c.body, responses.c.input_items)
            .where(owned_by(responses.c.owner, owner), responses.c.status != _DELETED, holds)
            .order_by(responses.c.created_at.desc())
        )
        for row in candidates:
            for item in [*(row.body.get("output") or []), *(row.input_items or [])]:
                item_id = item.get("id") if isinstance(item, dict) else None
                if item_id in missing and item.get("type") != "item_reference":
                    found[item_id] = cast(Item, dict(item))
                    missing.discard(item_id)
            if not missing:
                break
    return found
