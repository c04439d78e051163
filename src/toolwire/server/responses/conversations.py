"""The Conversations API: create, retrieve, update metadata, delete; list, add, get, delete items.

Items are stored in the shape clients see; `/v1/responses` with `conversation` reads them as
history and appends its input and output.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import InvalidRequestError, NotFoundError
from toolwire.loop.compaction import CompactionCodec
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.quotas import admit_storage
from toolwire.server.http.helpers import paginate
from toolwire.server.responses.prepare.item_ids import check_storable, is_duplicate_key, taken_item
from toolwire.server.responses.prepare.item_references import conversation_additions
from toolwire.server.responses.prepare.validation.compactions import open_compaction
from toolwire.server.responses.prepare.validation.items import normalize_input
from toolwire.server.responses.schemas.conversations import (
    AddItems,
    CreateConversation,
    UpdateConversation,
    parse_body,
)
from toolwire.store.database import Store
from toolwire.store.records import ConversationRecord
from toolwire.wire import responses as wire
from toolwire.wire.items import ConversationObject, Item

JSONReader = Callable[[Request], Awaitable[Any]]


class ConversationsService:
    def __init__(self, store: Store, compaction: CompactionCodec | None = None) -> None:
        self.store = store
        self.compaction = compaction
        """Checks `compaction` items before they are stored: one this gateway did not make for
        this key would make every later response on the conversation a 400."""

    def _object(self, row: ConversationRecord) -> ConversationObject:
        return {
            "id": row["id"],
            "object": "conversation",
            "created_at": row["created_at"],
            "metadata": row["metadata"] or {},
        }

    async def _require(self, conversation_id: str, owner: str | None) -> ConversationRecord:
        row = await self.store.get_conversation(conversation_id, owner=owner)
        if row is None:
            raise NotFoundError(
                f"Conversation with id '{conversation_id}' not found.", param="conversation_id"
            )
        return row

    def routes(self, read_json: JSONReader, respond: type[Response]) -> list[Route]:
        store = self.store

        async def body_of(request: Request) -> dict[str, Any]:
            raw = await request.body()
            if not raw:
                return {}
            body = await read_json(request)
            if not isinstance(body, dict):
                raise InvalidRequestError("the request body must be a JSON object")
            return body

        def check_compactions(items: list[Item], owner: str | None) -> None:
            for position, item in enumerate(items):
                if item["type"] == "compaction_trigger":
                    # A request to compact a response's input, not history: OpenAI's
                    # conversation items (`ConversationItem`) have no such type.
                    raise InvalidRequestError(
                        "A compaction_trigger item can only end a response's input; "
                        "it cannot be stored in a conversation.",
                        param=f"items[{position}].type",
                        code="invalid_value",
                    )
                if item["type"] == "compaction" and self.compaction is not None:
                    param = f"items[{position}].encrypted_content"
                    open_compaction(self.compaction, item.get("encrypted_content"), owner, param)

        async def add(conversation_id: str, items: list[Item], owner: str | None) -> None:
            try:
                await store.add_items(conversation_id, items, wire.now(), owner=owner)
            except Exception as exc:
                if is_duplicate_key(exc):  # a concurrent request took an id first
                    raise taken_item("items") from None
                raise

        async def create(request: Request) -> Response:
            parsed = parse_body(CreateConversation, await body_of(request))
            meta = parsed.metadata or {}
            items = normalize_input(parsed.items or [], "items")
            owner = owner_of(request)
            await admit_storage(store, owner, [meta, items])
            items = await conversation_additions(store, items, set(), owner)
            await check_storable(store, items, "items", owner)
            conversation_id = wire.new_id("conv")
            created = wire.now()
            check_compactions(items, owner)
            await store.create_conversation(conversation_id, created, meta, owner=owner)
            await add(conversation_id, items, owner)
            return respond(
                {
                    "id": conversation_id,
                    "object": "conversation",
                    "created_at": created,
                    "metadata": meta,
                }
            )

        async def retrieve(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            return respond(self._object(await self._require(conversation_id, owner_of(request))))

        async def update(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            owner = owner_of(request)
            await self._require(conversation_id, owner)
            parsed = parse_body(UpdateConversation, await body_of(request))
            await admit_storage(store, owner, parsed.metadata)
            await store.update_conversation(conversation_id, parsed.metadata, owner=owner)
            return respond(self._object(await self._require(conversation_id, owner)))

        async def delete(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            if not await store.delete_conversation(conversation_id, owner=owner_of(request)):
                raise NotFoundError(
                    f"Conversation with id '{conversation_id}' not found.", param="conversation_id"
                )
            return respond(
                {"id": conversation_id, "object": "conversation.deleted", "deleted": True}
            )

        async def list_items(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            owner = owner_of(request)
            await self._require(conversation_id, owner)
            items = await store.list_items(conversation_id, owner=owner)
            return respond(paginate(items, request))

        async def add_items(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            owner = owner_of(request)
            await self._require(conversation_id, owner)
            parsed = parse_body(AddItems, await body_of(request))
            items = normalize_input(parsed.items, "items")
            await admit_storage(store, owner, items)
            if any(item["type"] == "item_reference" for item in items):
                held = await store.list_items(conversation_id, owner=owner)
                items = await conversation_additions(
                    store, items, {item["id"] for item in held}, owner
                )
            check_compactions(items, owner)
            await check_storable(store, items, "items", owner)
            await add(conversation_id, items, owner)
            return respond(
                {
                    "object": "list",
                    "data": items,
                    "first_id": items[0]["id"] if items else None,
                    "last_id": items[-1]["id"] if items else None,
                    "has_more": False,
                }
            )

        async def get_item(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            owner = owner_of(request)
            await self._require(conversation_id, owner)
            item = await store.get_item(
                conversation_id, request.path_params["item_id"], owner=owner
            )
            if item is None:
                raise NotFoundError(
                    f"Item with id '{request.path_params['item_id']}' not found.", param="item_id"
                )
            return respond(item)

        async def delete_item(request: Request) -> Response:
            conversation_id = request.path_params["conversation_id"]
            owner = owner_of(request)
            row = await self._require(conversation_id, owner)
            item_id = request.path_params["item_id"]
            if not await store.delete_item(conversation_id, item_id, owner=owner):
                raise NotFoundError(
                    f"Item with id '{request.path_params['item_id']}' not found.", param="item_id"
                )
            return respond(self._object(row))

        base = "/v1/conversations"
        return [
            Route(base, create, methods=["POST"]),
            Route(base + "/{conversation_id}", retrieve, methods=["GET"]),
            Route(base + "/{conversation_id}", update, methods=["POST"]),
            Route(base + "/{conversation_id}", delete, methods=["DELETE"]),
            Route(base + "/{conversation_id}/items", list_items, methods=["GET"]),
            Route(base + "/{conversation_id}/items", add_items, methods=["POST"]),
            Route(base + "/{conversation_id}/items/{item_id}", get_item, methods=["GET"]),
            Route(base + "/{conversation_id}/items/{item_id}", delete_item, methods=["DELETE"]),
        ]
