"""`item_reference` resolution against everything the request's key stored.

A reference is looked up first in the history the request continues (a previous response's
or a conversation's items), then among every item the same key stored in responses and
conversations (`store/items.py`), as OpenAI resolves any stored item. Only an id that does
not exist for this key answers 404; another key's id looks exactly like one that never
existed.
"""

from __future__ import annotations

from toolwire.errors import NotFoundError
from toolwire.server.responses.prepare.validation.items import resolve_references
from toolwire.store.database import Store
from toolwire.wire import responses as wire
from toolwire.wire.items import Item


def _referenced(items: list[Item]) -> set[str]:
    return {
        item["id"]
        for item in items
        if item.get("type") == "item_reference" and isinstance(item.get("id"), str)
    }


async def resolve_stored_references(
    store: Store,
    items: list[Item],
    history: list[Item],
    owner: str | None,
    param: str = "input",
) -> list[Item]:
    """`items` with each `item_reference` replaced by the item it names."""
    wanted = _referenced(items)
    if not wanted:  # most inputs reference nothing: no walk of the history, no lookup
        return resolve_references(items, history, param)
    wanted -= {item.get("id") for item in history}
    found = await store.find_items(wanted, owner=owner)
    return resolve_references(items, [*found.values(), *history], param)


async def referenced_upstream(store: Store, items: list[Item], owner: str | None) -> str | None:
    """The model server that served the newest stored response holding an item the input
    references (a client replaying earlier turns as references continues that session)."""
    wanted = _referenced(items)
    return await store.upstream_of_items(wanted, owner=owner) if wanted else None


async def conversation_additions(
    store: Store, items: list[Item], held: set[str], owner: str | None
) -> list[Item]:
    """Items to add to a conversation: a reference to an item the conversation already holds
    adds nothing; one to another item this key stored adds a copy of it (under a new id when
    the original id is taken, since conversation item ids are unique); any other is a 404
    naming it. A conversation item is never of type `item_reference` (OpenAI's
    `ConversationItem`)."""
    found = await store.find_items(_referenced(items) - held, owner=owner)
    kept = []
    for position, item in enumerate(items):
        if item["type"] != "item_reference":
            kept.append(item)
        elif item["id"] in held:
            continue
        elif item["id"] in found:
            copy = found[item["id"]].copy()
            if await store.taken_item_ids([copy["id"]], owner=owner):
                prefix = str(copy["id"]).split("_", 1)[0] or "item"
                copy["id"] = wire.new_id(prefix)
            kept.append(copy)
            held.add(item["id"])
        else:
            raise NotFoundError(
                f"Item with id '{item['id']}' not found.", param=f"items[{position}]"
            )
    return kept
