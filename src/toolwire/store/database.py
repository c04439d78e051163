"""The store: responses, their items, conversations and their items, behind one async API.

Every database call is a job (a plain function of a synchronous `sqlalchemy.Connection`, SQLAlchemy
Core, one code path for SQLite and PostgreSQL) handed to `Store.read` or `Store.transact`, which run
it on the database's one engine (`store/engine.py`): a SQLite file's writes inline when the file is
free, else on the writer thread (`store/writer.py`), its reads on reader threads; PostgreSQL's on
its async engine. SQLite runs in WAL mode: readers never wait for the writer, and a server killed
mid-request loses nothing committed. The schema is migrated by Alembic (`store/migrate.py`).

History is stored by reference: a response keeps only its own input and output items and the
id of the response it continues; `get_response_record` walks that chain back (one recursive
query), so storage grows linearly with a conversation.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, cast

import orjson
import sqlalchemy as sa

from toolwire.store.engine import Database, Job, execute, open_database, scalar
from toolwire.store.files import prepare_sqlite_file, sqlite_path
from toolwire.store.items import (
    find_items_in,
    index_items,
    taken_ids_in,
    unindex_response,
    upstream_of_items_in,
)
from toolwire.store.keys import KeyStore
from toolwire.store.migrate import ensure_schema
from toolwire.store.notify import Listener
from toolwire.store.owner import INHERIT, Owner, OwnerArg, owned_by, owner_key, resolve
from toolwire.store.prepared import Prepared
from toolwire.store.quotas import QuotaStore
from toolwire.store.records import ConversationRecord, ResponseRecord
from toolwire.store.runs import RunChange, RunStore, apply_change
from toolwire.store.storage import StorageQuota
from toolwire.store.tables import (
    UPSTREAM_NAME_LENGTH,
    approvals,
    conversation_items,
    conversations,
    responses,
    sealed_tools,
    server_secrets,
)
from toolwire.store.ui_queries import UiQueries
from toolwire.store.urls import check_sqlite_directory, default_database_url, normalize_url
from toolwire.wire.items import Item, ResponseObject

log = logging.getLogger("toolwire.store")
T = TypeVar("T")

#: Status of a deleted response that others continue: hidden, kept for their history.
DELETED = "deleted"
#: The longest chain of responses a history is read through.
MAX_CHAIN = 100_000


class Store:
    """Responses, conversations and their items, each owned by the API key that created it
    (see `store/owner.py`: every method takes `owner`, defaulting to the current request's);
    `keys` holds the API keys themselves, `runs` leases and the queue, `quotas` per-key limits,
    `ui` the `/ui` page's reads."""

    def __init__(self, database: Database, *, schema_before: str | None = None) -> None:
        """`schema_before`: the schema's revision when the database was opened (None: new)."""
        self.database = database
        self.schema_before = schema_before
        self.keys = KeyStore(database)
        self.runs = RunStore(database)
        self.quotas = QuotaStore(database)  # per-key limits and budgets
        self.storage = StorageQuota(database)  # per-key storage quota
        self.ui = UiQueries(database)

    async def read(self, job: Job[T]) -> T:
        """`job` (a function of a synchronous connection) in a read-only transaction: on a
        SQLite file on a reader thread (never on the event loop: a history can be long), on
        PostgreSQL on its engine. A write in it is refused: writes go through `transact`."""
        return await self.database.read(job)

    async def transact(self, job: Job[T]) -> T:
        """`job` (a function of a synchronous connection) in a write transaction, committed
        when this returns, even if the caller is cancelled meanwhile: on a SQLite file, at once
        on the event loop when the file is free, else on the writer thread with the writes
        queued beside it (`store/writer.py`); on PostgreSQL on its engine. The one way to
        write."""
        return await self.database.transact(job)

    def listener(self, on_notify: Callable[[str], None]) -> Listener:
        """Wake-ups from other replicas: PostgreSQL's `LISTEN` (a no-op elsewhere)."""
        return self.database.listener(on_notify)

    @classmethod
    async def open(cls, url: str | None = None, *, migrate: bool = True) -> Store:
        """Open (and create) the database; an older schema is upgraded, or with
        `migrate=False` refused with a `ConfigError` naming `toolwire db upgrade`."""
        url = normalize_url(url or default_database_url())
        check_sqlite_directory(url)
        sqlite_file = sqlite_path(url)
        if sqlite_file is not None:
            prepare_sqlite_file(sqlite_file)
        database = await open_database(url)
        try:
            before = await database.transact(partial(ensure_schema, migrate=migrate), inline=False)
        except BaseException:
            await database.close()
            raise
        return cls(database, schema_before=before)

    async def close(self) -> None:
        """Give the quota leases back (`store/quotas.py`), wait for the writes under way, then
        close the database."""
        try:
            await self.quotas.close()
        except Exception:
            log.warning("closing: could not give the quota leases back", exc_info=True)
        await self.database.close()

    # -- responses ------------------------------------------------------------------------

    async def save_response(
        self,
        body: ResponseObject,
        *,
        input_items: list[Item],
        conversation_id: str | None,
        history: list[Item] | None = None,
        conversation_items: int | None = None,
        owner: OwnerArg = INHERIT,
        run: RunChange | None = None,
        only_if_active: bool = False,
        fresh: bool = False,
        also: Callable[[sa.Connection], None] | None = None,
        upstream: str | None = None,
        timeline: orjson.Fragment | None = None,
        body_json: bytes | None = None,
    ) -> bool:
        """Insert or replace a response (status changes rewrite the row). A row of another
        owner with the same id is never rewritten (the insert then fails on the id).
        `fresh`: the id was never stored (a new response): one insert, no update first.
        `also`: more writes in the same transaction (one commit on the hot path).

        History is by reference: the row links to `previous_response_id` (in the body) or, in
        a conversation, counts the `conversation_items` before it; `history` (a full copy)
        is for callers that have no such link. `run` changes the response's run row (its
        lease, its job) in the same transaction. With `only_if_active`, a response that is
        already finished (e.g. finalized by another replica) is left alone: False.
        `upstream`: the model server that served it, when a router chose one; `timeline`:
        the run's `/ui` timeline, serialized (`store/timelines.py`), kept in the row;
        `body_json`: `body` serialized, when the caller has it (to answer with the same bytes)."""
        who = resolve(owner)
        # Serialized once, here, to be measured (the owner's storage quota counts the bytes):
        # the engines write the same bytes (`orjson.Fragment` is taken as it is).
        if body_json is None:
            body_json = orjson.dumps(body)
        items_json = orjson.dumps(input_items)
        history_json = orjson.dumps(history)
        values = {
            "id": body["id"],
            "created_at": body["created_at"],
            "status": body["status"],
            "previous_response_id": body.get("previous_response_id"),
            "conversation_id": conversation_id,
            "body": orjson.Fragment(body_json),
            "input_items": orjson.Fragment(items_json),
            "history": None if history is None else orjson.Fragment(history_json),
            "conversation_items": conversation_items,
            "owner": who,
            "upstream": upstream[:UPSTREAM_NAME_LENGTH] if upstream else None,
            "stored_bytes": len(body_json) + len(items_json) + len(history_json),
            "timeline": timeline,
        }
        now = time.time()

        def save(connection: sa.Connection) -> bool:
            if fresh:
                _INSERT_RESPONSE.run(connection, values)
            else:
                update = _UPDATE_RESPONSE[who is None, only_if_active]
                if update.run(connection, {**values, "where_id": body["id"], "owner_": who}) == 0:
                    if only_if_active:
                        return False
                    _INSERT_RESPONSE.run(connection, values)
            index_items(connection, body, input_items, who)
            if run is not None:
                apply_change(connection, body["id"], run, now, fresh=fresh)
            if also is not None:
                also(connection)
            return True

        return await self.database.transact(save)  # `transact`, one call less on the hot path

    async def get_response(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> ResponseObject | None:
        query = sa.select(responses.c.body).where(_response(response_id, resolve(owner)))

        def get(connection: sa.Connection) -> ResponseObject | None:
            row = connection.execute(query).first()
            return None if row is None else cast(ResponseObject, dict(row.body))

        return await self.read(get)

    async def get_response_record(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> ResponseRecord | None:
        """The row, with `history`: every item the model had seen when the response ended
        (what a continuation starts from), gathered along the chain of responses."""
        query = sa.select(*_RECORD).where(_response(response_id, resolve(owner)))

        def get(connection: sa.Connection) -> ResponseRecord | None:
            row = connection.execute(query).first()
            if row is None:
                return None
            record = cast(ResponseRecord, dict(row._mapping))
            if record["history"] is None:
                record["history"] = _history(connection, response_id)
            return record

        return await self.read(get)

    async def delete_response(self, response_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        """Delete a response. One that others continue stays as a hidden tombstone (status
        `deleted`): their history is read through it."""
        who = resolve(owner)

        def delete(connection: sa.Connection) -> bool:
            found = connection.execute(
                sa.select(responses.c.body, responses.c.input_items, responses.c.owner).where(
                    _response(response_id, who)
                )
            ).first()
            if found is None:
                return False
            continued = connection.execute(
                sa.select(responses.c.id)
                .where(responses.c.previous_response_id == response_id)
                .limit(1)
            ).first()
            unindex_response(
                connection, response_id, found.body, found.input_items or [], found.owner
            )
            connection.execute(
                sealed_tools.delete().where(sealed_tools.c.response_id == response_id)
            )
            if continued is None:
                connection.execute(responses.delete().where(responses.c.id == response_id))
            else:
                connection.execute(
                    responses.update().where(responses.c.id == response_id).values(status=DELETED)
                )
            return True

        return await self.transact(delete)

    # -- conversations --------------------------------------------------------------------

    async def create_conversation(
        self,
        conversation_id: str,
        created_at: int,
        meta: dict[str, str],
        *,
        owner: OwnerArg = INHERIT,
    ) -> None:
        insert = conversations.insert().values(
            id=conversation_id, created_at=created_at, metadata=meta, owner=resolve(owner)
        )
        await self.transact(partial(execute, insert))

    async def get_conversation(
        self, conversation_id: str, *, owner: OwnerArg = INHERIT
    ) -> ConversationRecord | None:
        query = sa.select(conversations).where(_conversation(conversation_id, resolve(owner)))

        def get(connection: sa.Connection) -> ConversationRecord | None:
            row = connection.execute(query).first()
            return None if row is None else cast(ConversationRecord, dict(row._mapping))

        return await self.read(get)

    async def update_conversation(
        self, conversation_id: str, meta: dict[str, str], *, owner: OwnerArg = INHERIT
    ) -> bool:
        update = (
            conversations.update()
            .where(_conversation(conversation_id, resolve(owner)))
            .values(metadata=meta)
        )
        return await self.transact(lambda connection: bool(connection.execute(update).rowcount))

    async def delete_conversation(self, conversation_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        who = resolve(owner)

        def delete(connection: sa.Connection) -> bool:
            if not _owns(connection, conversation_id, who):
                return False
            connection.execute(
                conversation_items.delete().where(
                    conversation_items.c.conversation_id == conversation_id
                )
            )
            result = connection.execute(
                conversations.delete().where(conversations.c.id == conversation_id)
            )
            return bool(result.rowcount)

        return await self.transact(delete)

    async def add_items(
        self,
        conversation_id: str,
        items: list[Item],
        created_at: int,
        *,
        owner: OwnerArg = INHERIT,
        upstream: str | None = None,
    ) -> bool:
        """Append items; False (nothing added) if the owner has no such conversation.
        `upstream`: the model server that served them (fleet), kept as the conversation's."""
        who = resolve(owner)
        return await self.transact(
            partial(add_items_in, conversation_id, items, created_at, who, upstream=upstream)
        )

    async def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str = "asc",
        owner: OwnerArg = INHERIT,
    ) -> list[Item]:
        """The conversation's items; none if the owner has no such conversation."""
        who = resolve(owner)

        def listing(connection: sa.Connection) -> list[Item]:
            if not _owns(connection, conversation_id, who):
                return []
            query = sa.select(conversation_items.c.item, conversation_items.c.seq).where(
                conversation_items.c.conversation_id == conversation_id
            )
            if after is not None:
                anchor = connection.execute(
                    sa.select(conversation_items.c.seq).where(
                        conversation_items.c.conversation_id == conversation_id,
                        conversation_items.c.id == after,
                    )
                ).scalar()
                if anchor is not None:
                    query = query.where(
                        conversation_items.c.seq > anchor
                        if order == "asc"
                        else conversation_items.c.seq < anchor
                    )
            column = conversation_items.c.seq
            query = query.order_by(column.asc() if order == "asc" else column.desc())
            if limit is not None:
                query = query.limit(limit)
            return [cast(Item, dict(row.item)) for row in connection.execute(query)]

        return await self.read(listing)

    async def get_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> Item | None:
        who = resolve(owner)

        def get(connection: sa.Connection) -> Item | None:
            if not _owns(connection, conversation_id, who):
                return None
            row = connection.execute(
                sa.select(conversation_items.c.item).where(
                    conversation_items.c.conversation_id == conversation_id,
                    conversation_items.c.id == item_id,
                )
            ).first()
            return None if row is None else cast(Item, dict(row.item))

        return await self.read(get)

    async def delete_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> bool:
        who = resolve(owner)

        def delete(connection: sa.Connection) -> bool:
            if not _owns(connection, conversation_id, who):
                return False
            result = connection.execute(
                conversation_items.delete().where(
                    conversation_items.c.conversation_id == conversation_id,
                    conversation_items.c.id == item_id,
                )
            )
            return bool(result.rowcount)

        return await self.transact(delete)

    # -- items, wherever they are stored ---------------------------------------------------

    async def find_items(self, ids: set[str], *, owner: OwnerArg = INHERIT) -> dict[str, Item]:
        """id -> the stored item, for those of `ids` that the owner stored, in a response or a
        conversation (`store/items.py`); ids not found are absent."""
        if not ids:
            return {}
        return await self.read(partial(find_items_in, ids, resolve(owner)))

    async def taken_item_ids(self, ids: list[str], *, owner: OwnerArg = INHERIT) -> list[str]:
        """Those of `ids` that one of the owner's conversation items already has."""
        if not ids:
            return []
        return await self.read(partial(taken_ids_in, ids, resolve(owner)))

    async def upstream_of_items(self, ids: set[str], *, owner: OwnerArg = INHERIT) -> str | None:
        """The model server that served the newest of the owner's responses holding one of
        `ids` (a fleet's routing hint for an `item_reference` chain); None if none says."""
        if not ids:
            return None
        return await self.read(partial(upstream_of_items_in, ids, resolve(owner)))

    # -- secrets ------------------------------------------------------------------------

    async def secret(self, name: str) -> bytes:
        """A random 32-byte secret shared by every process on this database, made on first use.
        Two processes racing to make it agree on the one that was stored first."""
        query = sa.select(server_secrets.c.value).where(server_secrets.c.name == name)
        row = await self.read(partial(scalar, query))
        if row is not None:
            return bytes(row)
        insert = server_secrets.insert().values(name=name, value=secrets.token_bytes(32))
        with contextlib.suppress(sa.exc.IntegrityError):
            await self.transact(partial(execute, insert))
        value = await self.read(partial(scalar, query))
        assert value is not None  # inserted above, by this process or another
        return bytes(value)

    # -- approvals ------------------------------------------------------------------------

    async def claim_approval(
        self, approval_request_id: str, response_id: str, approve: bool, created_at: int
    ) -> bool:
        """Record a decision once. False if this approval request was already decided: the
        caller then runs nothing (a replayed or duplicated approval). The same response
        claiming again (a background run started over from the beginning after its process
        died, before any of its tools started) gets True."""
        insert = approvals.insert().values(
            approval_request_id=approval_request_id,
            response_id=response_id,
            approve=approve,
            created_at=created_at,
        )
        try:
            await self.transact(partial(execute, insert))
        except sa.exc.IntegrityError:
            query = sa.select(approvals.c.response_id).where(
                approvals.c.approval_request_id == approval_request_id
            )
            claimed_by = await self.read(partial(scalar, query))
            return bool(claimed_by == response_id)
        return True


def _conversation(conversation_id: str, owner: Owner) -> sa.ColumnElement[bool]:
    return sa.and_(conversations.c.id == conversation_id, owned_by(conversations.c.owner, owner))


# The response row's writes, compiled once (`store/prepared.py`): an insert, and an update
# for each shape of its WHERE (with or without an owner, only while still running or not).
_INSERT_RESPONSE = Prepared(responses.insert())
_ACTIVE = sa.text("responses.status IN ('queued', 'in_progress')")


#: What a response's later write sets: not its id and owner (its WHERE already holds them) nor
#: its `previous_response_id` (fixed by its request): SQLite leaves an index alone when none of
#: its columns is set, so the rewrite of a running response touches two indexes, not five.
_REWRITTEN = tuple(
    column.name
    for column in responses.columns
    if column.name not in ("id", "owner", "previous_response_id")
)


def _update_response(anonymous: bool, only_if_active: bool) -> Prepared:
    owner = (
        responses.c.owner.is_(None) if anonymous else responses.c.owner == sa.bindparam("owner_")
    )
    query = responses.update().where(responses.c.id == sa.bindparam("where_id"), owner)
    return Prepared(query.where(_ACTIVE) if only_if_active else query, columns=_REWRITTEN)


_UPDATE_RESPONSE = {
    (anonymous, active): _update_response(anonymous, active)
    for anonymous in (True, False)
    for active in (True, False)
}


def add_items_in(
    conversation_id: str,
    items: list[Item],
    created_at: int,
    owner: Owner,
    connection: sa.Connection,
    *,
    upstream: str | None = None,
) -> bool:
    """In the caller's transaction: append `items` to the owner's conversation; False (nothing
    added) if the owner has no such conversation. An id the owner's conversation items already
    have raises `IntegrityError` (the whole transaction is then rolled back). `upstream`: the
    model server that served them (a fleet's), kept as the conversation's."""
    owned = connection.execute(
        sa.select(conversations.c.id).where(_conversation(conversation_id, owner))
    ).first()
    if owned is None:
        return False
    if upstream:
        connection.execute(
            conversations.update()
            .where(conversations.c.id == conversation_id)
            .values(upstream=upstream[:UPSTREAM_NAME_LENGTH])
        )
    if items:
        rows = []
        for item in items:
            encoded = orjson.dumps(item)  # once: measured (the storage quota), then written
            rows.append(
                {
                    "id": item["id"],
                    "conversation_id": conversation_id,
                    "created_at": created_at,
                    "item": orjson.Fragment(encoded),
                    "owner": owner_key(owner),
                    "stored_bytes": len(encoded),
                }
            )
        connection.execute(conversation_items.insert(), rows)
    return True


def _owns(connection: sa.Connection, conversation_id: str, owner: Owner) -> bool:
    query = sa.select(conversations.c.id).where(_conversation(conversation_id, owner))
    return connection.execute(query).first() is not None


def _response(response_id: str, owner: Owner) -> sa.ColumnElement[bool]:
    return sa.and_(
        responses.c.id == response_id,
        owned_by(responses.c.owner, owner),
        responses.c.status != DELETED,
    )


def _history_query() -> sa.Select[Any]:
    """The chain of responses behind `:start` (itself first), one recursive query: built once
    (its construction cost several times its execution)."""
    start = (
        sa.select(responses.c.id, responses.c.previous_response_id, sa.literal(0).label("depth"))
        .where(responses.c.id == sa.bindparam("start"))
        .cte("chain", recursive=True)
    )
    parent = responses.alias("parent")
    chain = start.union_all(
        sa.select(parent.c.id, parent.c.previous_response_id, start.c.depth + 1).where(
            parent.c.id == start.c.previous_response_id, start.c.depth < MAX_CHAIN
        )
    )
    return (
        sa.select(
            responses.c.history,
            responses.c.input_items,
            responses.c.body,
            responses.c.conversation_id,
            responses.c.conversation_items,
        )
        .join(chain, chain.c.id == responses.c.id)
        .order_by(chain.c.depth)
    )


_HISTORY = _history_query()

#: A response's record: its row but the `/ui` timeline (read by `/ui` alone).
_RECORD = tuple(column for column in responses.columns if column.name != "timeline")


def _history(connection: sa.Connection, response_id: str) -> list[Item]:
    """The items a response's model had seen: walk `previous_response_id` back (one
    recursive query) to a row with a full copy (schema 1), a conversation prefix, or the
    start; then each response's input and output items, oldest first."""
    rows = connection.execute(_HISTORY, {"start": response_id}).all()
    parts: list[list[Item]] = []
    for row in rows:
        if row.history is not None:
            parts.append(list(row.history))
            break
        parts.append(list(row.input_items) + list(row.body.get("output") or []))
        if row.conversation_id is not None and row.conversation_items is not None:
            prefix = connection.execute(
                sa.select(conversation_items.c.item)
                .where(conversation_items.c.conversation_id == row.conversation_id)
                .order_by(conversation_items.c.seq)
                .limit(row.conversation_items)
            ).all()
            parts.append([cast(Item, dict(p.item)) for p in prefix])
            break
    return [item for part in reversed(parts) for item in part]
