"""The store: responses, their items, conversations and their items, behind one async API.

SQLAlchemy Core with async drivers (aiosqlite by default, asyncpg for PostgreSQL), so one code
path serves both. SQLite runs in WAL mode with a busy timeout, and every write of this process
goes through one writer at a time (`Store.write`): concurrent requests queue for the write lock
in process instead of racing for SQLite's file lock ("database is locked"). A server killed
mid-request loses nothing committed. The schema is migrated by Alembic (`store/migrate.py`).

History is stored by reference: a response keeps only its own input and output items and the
id of the response it continues; `get_response_record` walks that chain back (one recursive
query), so storage grows linearly with a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson
import sqlalchemy as sa
from platformdirs import user_data_dir
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from toolwire.errors import ConfigError
from toolwire.store import timelines as _timelines  # noqa: F401  (its table joins metadata)
from toolwire.store.files import prepare_sqlite_file, private_directory, sqlite_path
from toolwire.store.items import index_items, unindex_response
from toolwire.store.keys import KeyStore
from toolwire.store.migrate import ensure_schema
from toolwire.store.owner import INHERIT, Owner, OwnerArg, owned_by, owner_key, resolve
from toolwire.store.prepared import Prepared
from toolwire.store.quotas import QuotaStore
from toolwire.store.records import ConversationRecord, ResponseRecord
from toolwire.store.runs import RunChange, RunStore, apply_change
from toolwire.store.tables import (
    approvals,
    conversation_items,
    conversations,
    responses,
    sealed_tools,
    server_secrets,
)
from toolwire.store.writer import Job, SqliteWriter, apply_pragmas
from toolwire.wire.items import Item, ResponseObject

T = TypeVar("T")


def default_database_url() -> str:
    directory = Path(user_data_dir("toolwire", appauthor=False))
    private_directory(directory)
    return f"sqlite+aiosqlite:///{directory / 'toolwire.db'}"


def normalize_url(url: str) -> str:
    """Accept plain `sqlite:///x.db` / `postgresql://…` and pick the async driver."""
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    return url


def _check_sqlite_directory(url: str) -> None:
    """A SQLite file in a directory that does not exist: say so, and what to do, rather than
    SQLAlchemy's "unable to open database file" under a long traceback."""
    prefix = "sqlite+aiosqlite:///"
    if not url.startswith(prefix):
        return
    path = Path(url[len(prefix) :].split("?", 1)[0])
    if not path.name or path.name == ":memory:" or path.parent.is_dir():
        return
    raise ConfigError(
        f"the database's directory {path.parent} does not exist: create it "
        f"(mkdir -p {path.parent}) or pick another --db, e.g. sqlite:///toolwire.db"
    )


#: Status of a deleted response that others continue: hidden, kept for their history.
DELETED = "deleted"
#: The longest chain of responses a history is read through.
MAX_CHAIN = 100_000


class Store:
    """Responses, conversations and their items, each owned by the API key that created it
    (see `store/owner.py`: every method takes `owner`, defaulting to the current request's);
    `keys` holds the API keys themselves."""

    def __init__(self, engine: AsyncEngine, sqlite_file: Path | None = None) -> None:
        """`sqlite_file`: the database's file, when it is one: the hot-path writes
        (`transact`) then go through the store's writer (`store/writer.py`)."""
        self.engine = engine
        self.keys = KeyStore(engine)
        # SQLite has one writer: this process's writes take turns here rather than at the file
        # lock, where a waiting write can fail with "database is locked".
        self._write_lock = asyncio.Lock() if engine.dialect.name == "sqlite" else None
        self._writer = (
            SqliteWriter(f"sqlite:///{sqlite_file}", self._write_lock)
            if sqlite_file is not None and self._write_lock is not None
            else None
        )
        self.runs = RunStore(engine, self.write, self.transact)
        self.quotas = QuotaStore(engine, self.write)  # per-key limits and budgets

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (one at a time in this process on SQLite)."""
        if self._write_lock is None:
            async with self.engine.begin() as connection:
                yield connection
            return
        async with self._write_lock, self.engine.begin() as connection:
            yield connection

    async def transact(self, job: Job[T]) -> T:
        """`job` (a function of a synchronous connection) in a write transaction: on a SQLite
        file, at once on the event loop when the file is free, else on the writer thread with
        the writes queued beside it (`store/writer.py`); on PostgreSQL or an in-memory SQLite,
        on the async engine (`run_sync`)."""
        if self._writer is not None:
            return await self._writer.run(job)
        async with self.write() as connection:
            return await connection.run_sync(job)

    @classmethod
    async def open(cls, url: str | None = None, *, migrate: bool = True) -> Store:
        """Open (and create) the database; an older schema is upgraded, or with
        `migrate=False` refused with a `ConfigError` naming `toolwire db upgrade`."""
        url = normalize_url(url or default_database_url())
        _check_sqlite_directory(url)
        sqlite_file = sqlite_path(url)
        if sqlite_file is not None:
            prepare_sqlite_file(sqlite_file)
        options: dict[str, object] = {}  # the engine's keyword options
        if url.startswith("postgresql"):
            options.update(pool_size=20, max_overflow=20, pool_pre_ping=True)
        engine = create_async_engine(
            url,
            json_serializer=lambda value: orjson.dumps(value).decode(),
            json_deserializer=orjson.loads,
            **options,
        )
        if engine.dialect.name == "sqlite":

            @event.listens_for(engine.sync_engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                apply_pragmas(dbapi_connection)

        try:
            async with engine.begin() as connection:
                await connection.run_sync(ensure_schema, migrate=migrate)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, sqlite_file)

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.close()
        await self.engine.dispose()

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
    ) -> bool:
        """Insert or replace a response (status changes rewrite the row). A row of another
        owner with the same id is never rewritten (the insert then fails on the id).
        `fresh`: the id was never stored (a new response): one insert, no update first.
        `also`: more writes in the same transaction (one commit on the hot path).

        History is by reference: the row links to `previous_response_id` (in the body) or, in
        a conversation, counts the `conversation_items` before it; `history` (a full copy)
        is for callers that have no such link. `run` changes the response's run row (its
        lease, its job) in the same transaction. With `only_if_active`, a response that is
        already finished (e.g. finalized by another replica) is left alone: False."""
        who = resolve(owner)
        values = {
            "id": body["id"],
            "created_at": body["created_at"],
            "status": body["status"],
            "previous_response_id": body.get("previous_response_id"),
            "conversation_id": conversation_id,
            "body": body,
            "input_items": input_items,
            "history": history,
            "conversation_items": conversation_items,
            "owner": who,
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

        return await self.transact(save)

    async def get_response(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> ResponseObject | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(responses.c.body).where(_response(response_id, resolve(owner)))
                )
            ).first()
        return None if row is None else cast(ResponseObject, dict(row.body))

    async def get_response_record(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> ResponseRecord | None:
        """The row, with `history`: every item the model had seen when the response ended
        (what a continuation starts from), gathered along the chain of responses."""
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(responses).where(_response(response_id, resolve(owner)))
                )
            ).first()
            if row is None:
                return None
            record = cast(ResponseRecord, dict(row._mapping))
            if record["history"] is None:
                record["history"] = await _history(connection, response_id)
        return record

    async def delete_response(self, response_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        """Delete a response. One that others continue stays as a hidden tombstone (status
        `deleted`): their history is read through it."""
        async with self.write() as connection:
            found = (
                await connection.execute(
                    sa.select(responses.c.id).where(_response(response_id, resolve(owner)))
                )
            ).first()
            if found is None:
                return False
            continued = (
                await connection.execute(
                    sa.select(responses.c.id)
                    .where(responses.c.previous_response_id == response_id)
                    .limit(1)
                )
            ).first()
            await unindex_response(connection, response_id)
            await connection.execute(
                sealed_tools.delete().where(sealed_tools.c.response_id == response_id)
            )
            if continued is None:
                await connection.execute(responses.delete().where(responses.c.id == response_id))
            else:
                await connection.execute(
                    responses.update().where(responses.c.id == response_id).values(status=DELETED)
                )
        return True

    # -- conversations --------------------------------------------------------------------

    async def create_conversation(
        self,
        conversation_id: str,
        created_at: int,
        meta: dict[str, str],
        *,
        owner: OwnerArg = INHERIT,
    ) -> None:
        async with self.write() as connection:
            await connection.execute(
                conversations.insert().values(
                    id=conversation_id, created_at=created_at, metadata=meta, owner=resolve(owner)
                )
            )

    async def get_conversation(
        self, conversation_id: str, *, owner: OwnerArg = INHERIT
    ) -> ConversationRecord | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(conversations).where(_conversation(conversation_id, resolve(owner)))
                )
            ).first()
        return None if row is None else cast(ConversationRecord, dict(row._mapping))

    async def update_conversation(
        self, conversation_id: str, meta: dict[str, str], *, owner: OwnerArg = INHERIT
    ) -> bool:
        async with self.write() as connection:
            result = await connection.execute(
                conversations.update()
                .where(_conversation(conversation_id, resolve(owner)))
                .values(metadata=meta)
            )
        return bool(result.rowcount)

    async def delete_conversation(self, conversation_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        async with self.write() as connection:
            if not await _owns(connection, conversation_id, resolve(owner)):
                return False
            await connection.execute(
                conversation_items.delete().where(
                    conversation_items.c.conversation_id == conversation_id
                )
            )
            result = await connection.execute(
                conversations.delete().where(conversations.c.id == conversation_id)
            )
        return bool(result.rowcount)

    async def add_items(
        self,
        conversation_id: str,
        items: list[Item],
        created_at: int,
        *,
        owner: OwnerArg = INHERIT,
    ) -> bool:
        """Append items; False (nothing added) if the owner has no such conversation."""
        who = resolve(owner)
        return await self.transact(partial(add_items_in, conversation_id, items, created_at, who))

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
        query = sa.select(conversation_items.c.item, conversation_items.c.seq).where(
            conversation_items.c.conversation_id == conversation_id
        )
        async with self.engine.connect() as connection:
            if not await _owns(connection, conversation_id, resolve(owner)):
                return []
            if after is not None:
                anchor = (
                    await connection.execute(
                        sa.select(conversation_items.c.seq).where(
                            conversation_items.c.conversation_id == conversation_id,
                            conversation_items.c.id == after,
                        )
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
            rows = (await connection.execute(query)).all()
        return [cast(Item, dict(row.item)) for row in rows]

    async def get_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> Item | None:
        async with self.engine.connect() as connection:
            if not await _owns(connection, conversation_id, resolve(owner)):
                return None
            row = (
                await connection.execute(
                    sa.select(conversation_items.c.item).where(
                        conversation_items.c.conversation_id == conversation_id,
                        conversation_items.c.id == item_id,
                    )
                )
            ).first()
        return None if row is None else cast(Item, dict(row.item))

    async def delete_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> bool:
        async with self.write() as connection:
            if not await _owns(connection, conversation_id, resolve(owner)):
                return False
            result = await connection.execute(
                conversation_items.delete().where(
                    conversation_items.c.conversation_id == conversation_id,
                    conversation_items.c.id == item_id,
                )
            )
        return bool(result.rowcount)

    # -- secrets ------------------------------------------------------------------------

    async def secret(self, name: str) -> bytes:
        """A random 32-byte secret shared by every process on this database, made on first use.
        Two processes racing to make it agree on the one that was stored first."""
        async with self.engine.begin() as connection:
            row = await connection.scalar(
                sa.select(server_secrets.c.value).where(server_secrets.c.name == name)
            )
        if row is not None:
            return bytes(row)
        with contextlib.suppress(sa.exc.IntegrityError):
            async with self.write() as connection:
                await connection.execute(
                    server_secrets.insert().values(name=name, value=secrets.token_bytes(32))
                )
        async with self.engine.begin() as connection:
            value = await connection.scalar(
                sa.select(server_secrets.c.value).where(server_secrets.c.name == name)
            )
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
        try:
            async with self.write() as connection:
                await connection.execute(
                    approvals.insert().values(
                        approval_request_id=approval_request_id,
                        response_id=response_id,
                        approve=approve,
                        created_at=created_at,
                    )
                )
        except sa.exc.IntegrityError:
            async with self.engine.connect() as connection:
                claimed_by = await connection.scalar(
                    sa.select(approvals.c.response_id).where(
                        approvals.c.approval_request_id == approval_request_id
                    )
                )
            return bool(claimed_by == response_id)
        return True


def _conversation(conversation_id: str, owner: Owner) -> sa.ColumnElement[bool]:
    return sa.and_(conversations.c.id == conversation_id, owned_by(conversations.c.owner, owner))


# The response row's writes, compiled once (`store/prepared.py`): an insert, and an update
# for each shape of its WHERE (with or without an owner, only while still running or not).
_INSERT_RESPONSE = Prepared(responses.insert())
_ACTIVE = sa.text("responses.status IN ('queued', 'in_progress')")


def _update_response(anonymous: bool, only_if_active: bool) -> Prepared:
    owner = (
        responses.c.owner.is_(None) if anonymous else responses.c.owner == sa.bindparam("owner_")
    )
    query = responses.update().where(responses.c.id == sa.bindparam("where_id"), owner)
    return Prepared(query.where(_ACTIVE) if only_if_active else query)


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
) -> bool:
    """In the caller's transaction: append `items` to the owner's conversation; False (nothing
    added) if the owner has no such conversation. An id the owner's conversation items already
    have raises `IntegrityError` (the whole transaction is then rolled back)."""
    owned = connection.execute(
        sa.select(conversations.c.id).where(_conversation(conversation_id, owner))
    ).first()
    if owned is None:
        return False
    if items:
        connection.execute(
            conversation_items.insert(),
            [
                {
                    "id": item["id"],
                    "conversation_id": conversation_id,
                    "created_at": created_at,
                    "item": item,
                    "owner": owner_key(owner),
                }
                for item in items
            ],
        )
    return True


async def _owns(connection: AsyncConnection, conversation_id: str, owner: Owner) -> bool:
    query = sa.select(conversations.c.id).where(_conversation(conversation_id, owner))
    return (await connection.execute(query)).first() is not None


def _response(response_id: str, owner: Owner) -> sa.ColumnElement[bool]:
    return sa.and_(
        responses.c.id == response_id,
        owned_by(responses.c.owner, owner),
        responses.c.status != DELETED,
    )


async def _history(connection: AsyncConnection, response_id: str) -> list[Item]:
    """The items a response's model had seen: walk `previous_response_id` back (one
    recursive query) to a row with a full copy (schema 1), a conversation prefix, or the
    start; then each response's input and output items, oldest first."""
    start = (
        sa.select(responses.c.id, responses.c.previous_response_id, sa.literal(0).label("depth"))
        .where(responses.c.id == response_id)
        .cte("chain", recursive=True)
    )
    parent = responses.alias("parent")
    chain = start.union_all(
        sa.select(parent.c.id, parent.c.previous_response_id, start.c.depth + 1).where(
            parent.c.id == start.c.previous_response_id, start.c.depth < MAX_CHAIN
        )
    )
    rows = (
        await connection.execute(
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
    ).all()
    parts: list[list[Item]] = []
    for row in rows:
        if row.history is not None:
            parts.append(list(row.history))
            break
        parts.append(list(row.input_items) + list(row.body.get("output") or []))
        if row.conversation_id is not None and row.conversation_items is not None:
            prefix = (
                await connection.execute(
                    sa.select(conversation_items.c.item)
                    .where(conversation_items.c.conversation_id == row.conversation_id)
                    .order_by(conversation_items.c.seq)
                    .limit(row.conversation_items)
                )
            ).all()
            parts.append([cast(Item, dict(p.item)) for p in prefix])
            break
    return [item for part in reversed(parts) for item in part]
