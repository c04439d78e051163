"""Client-chosen item ids: unique within a request, and unused among the owner's conversation
items when they are to be stored in a conversation.

Conversation item ids are unique per owner (`conversation_items` (owner, id), schema 5): one
key's ids neither collide with another's nor can be probed by it (a global constraint let a key
learn another's ids from `duplicate_item_id` and take its next one first). OpenAI answers a
reused id with a 400 ("Duplicate item found with id …"); so does toolwire, before anything is
stored or run, instead of failing on the unique constraint after the run (a 500 with the
response stored `completed`). Ids are not checked against the database when the items are not
stored in a conversation (a plain response keeps its input items in its own row), so a client
may resend earlier output items with their ids there. `item_reference` items name an existing
item on purpose and are skipped.
"""

from __future__ import annotations

from toolwire.errors import InvalidRequestError
from toolwire.store.database import Store
from toolwire.store.failures import duplicate_key
from toolwire.store.owner import Owner
from toolwire.wire.items import Item

#: The longest id a stored item may have (the column's width).
MAX_ID_LENGTH = 80
_REFERENCES = frozenset({"item_reference"})


def duplicate_item(item_id: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"Duplicate item found with id '{item_id}'. Remove duplicate items from your input "
        "and try again.",
        param=param,
        code="duplicate_item_id",
    )


def taken_item(param: str) -> InvalidRequestError:
    """A concurrent request stored one of these ids first."""
    return InvalidRequestError(
        "An item id in this request is already used by another item.",
        param=param,
        code="duplicate_item_id",
    )


def _owned_ids(items: list[Item], param: str) -> dict[str, str]:
    """id -> the param naming it, for the items that carry their own id."""
    seen: dict[str, str] = {}
    for position, item in enumerate(items):
        item_id = item.get("id")
        if item.get("type") in _REFERENCES or not isinstance(item_id, str):
            continue
        where = f"{param}[{position}].id"
        if item_id in seen:
            raise duplicate_item(item_id, where)
        seen[item_id] = where
    return seen


def check_unique(items: list[Item], param: str) -> None:
    """400 when two items of one request carry the same id."""
    _owned_ids(items, param)


async def check_storable(store: Store, items: list[Item], param: str, owner: Owner) -> None:
    """400 when items about to be added to one of `owner`'s conversations carry an id that is
    too long for the store, or that another of the owner's conversation items already has."""
    ids = _owned_ids(items, param)
    for item_id, where in ids.items():
        if len(item_id) > MAX_ID_LENGTH:
            raise InvalidRequestError(
                f"Item ids are at most {MAX_ID_LENGTH} characters.",
                param=where,
                code="invalid_value",
            )
    if not ids:
        return
    taken = await store.taken_item_ids(list(ids), owner=owner)
    if taken:
        raise duplicate_item(taken[0], ids[taken[0]])


def is_duplicate_key(exc: BaseException) -> bool:
    """Whether `exc` is the database refusing an item id that is already taken (a race the
    check above lost)."""
    return duplicate_key(exc)
