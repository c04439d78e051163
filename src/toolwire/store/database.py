"""The store: responses, their items, conversations and their items, behind one async API.

SQLAlchemy Core with async drivers (aiosqlite by default, asyncpg for PostgreSQL), so one code
path serves both. SQLite runs in WAL mode: a server killed mid-request loses nothing committed.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from platformdirs import user_data_dir
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from toolwire.store import timelines as _timelines  # noqa: F401  (its table joins metadata)
from toolwire.store.keys import KeyStore
from toolwire.store.owner import INHERIT, Owner, OwnerArg, owned_by, resolve
from toolwire.store.tables import (
    ADDED_COLUMNS,
    approvals,
    conversation_items,
    conversations,
    metadata,
    responses,
    server_secrets,
)


def default_database_url() -> str:
    directory = Path(user_data_dir("toolwire", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite+aiosqlite:///{directory / 'toolwire.db'}"


def normalize_url(url: str) -> str:
    """Accept plain `sqlite:///x.db` / `postgresql://…` and pick the async driver."""
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    return url


class Store:
    """Responses, conversations and their items, each owned by the API key that created it
    (see `store/owner.py`: every method takes `owner`, defaulting to the current request's);
    `keys` holds the API keys themselves."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.keys = KeyStore(engine)

    @classmethod
    async def open(cls, url: str | None = None) -> Store:
        url = normalize_url(url or default_database_url())
        engine = create_async_engine(
            url,
            json_serializer=lambda value: orjson.dumps(value).decode(),
            json_deserializer=orjson.loads,
        )
        if engine.dialect.name == "sqlite":

            @event.listens_for(engine.sync_engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute("PRAGMA busy_timeout=5000")
                cursor.close()

        async with engine.begin() as connection:
            await connection.run_sync(metadata.create_all)
            await connection.run_sync(_add_missing_columns)
        return cls(engine)

    async def close(self) -> None:
        await self.engine.dispose()

    # -- responses ------------------------------------------------------------------------

    async def save_response(
        self,
        body: dict[str, Any],
        *,
        input_items: list[dict[str, Any]],
        history: list[dict[str, Any]],
        conversation_id: str | None,
        owner: OwnerArg = INHERIT,
    ) -> None:
        """Insert or replace a response (status changes rewrite the row). A row of another
        owner with the same id is never rewritten (the insert then fails on the id)."""
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
            "owner": who,
        }
        async with self.engine.begin() as connection:
            updated = await connection.execute(
                responses.update()
                .where(responses.c.id == body["id"], owned_by(responses.c.owner, who))
                .values(**values)
            )
            if updated.rowcount == 0:
                await connection.execute(responses.insert().values(**values))

    async def get_response(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(responses.c.body).where(
                        responses.c.id == response_id, owned_by(responses.c.owner, resolve(owner))
                    )
                )
            ).first()
        return None if row is None else dict(row.body)

    async def get_response_record(
        self, response_id: str, *, owner: OwnerArg = INHERIT
    ) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(responses).where(
                        responses.c.id == response_id, owned_by(responses.c.owner, resolve(owner))
                    )
                )
            ).first()
        return None if row is None else dict(row._mapping)

    async def delete_response(self, response_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(
                responses.delete().where(
                    responses.c.id == response_id, owned_by(responses.c.owner, resolve(owner))
                )
            )
        return bool(result.rowcount)

    # -- conversations --------------------------------------------------------------------

    async def create_conversation(
        self,
        conversation_id: str,
        created_at: int,
        meta: dict[str, Any],
        *,
        owner: OwnerArg = INHERIT,
    ) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                conversations.insert().values(
                    id=conversation_id, created_at=created_at, metadata=meta, owner=resolve(owner)
                )
            )

    async def get_conversation(
        self, conversation_id: str, *, owner: OwnerArg = INHERIT
    ) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(conversations).where(_conversation(conversation_id, resolve(owner)))
                )
            ).first()
        return None if row is None else dict(row._mapping)

    async def update_conversation(
        self, conversation_id: str, meta: dict[str, Any], *, owner: OwnerArg = INHERIT
    ) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(
                conversations.update()
                .where(_conversation(conversation_id, resolve(owner)))
                .values(metadata=meta)
            )
        return bool(result.rowcount)

    async def delete_conversation(self, conversation_id: str, *, owner: OwnerArg = INHERIT) -> bool:
        async with self.engine.begin() as connection:
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
        items: list[dict[str, Any]],
        created_at: int,
        *,
        owner: OwnerArg = INHERIT,
    ) -> bool:
        """Append items; False (nothing added) if the owner has no such conversation."""
        async with self.engine.begin() as connection:
            if not await _owns(connection, conversation_id, resolve(owner)):
                return False
            if not items:
                return True
            await connection.execute(
                conversation_items.insert(),
                [
                    {
                        "id": item["id"],
                        "conversation_id": conversation_id,
                        "created_at": created_at,
                        "item": item,
                    }
                    for item in items
                ],
            )
        return True

    async def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str = "asc",
        owner: OwnerArg = INHERIT,
    ) -> list[dict[str, Any]]:
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
                        sa.select(conversation_items.c.seq).where(conversation_items.c.id == after)
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
        return [dict(row.item) for row in rows]

    async def get_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> dict[str, Any] | None:
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
        return None if row is None else dict(row.item)

    async def delete_item(
        self, conversation_id: str, item_id: str, *, owner: OwnerArg = INHERIT
    ) -> bool:
        async with self.engine.begin() as connection:
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
            async with self.engine.begin() as connection:
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
        caller then runs nothing (a replayed or duplicated approval)."""
        try:
            async with self.engine.begin() as connection:
                await connection.execute(
                    approvals.insert().values(
                        approval_request_id=approval_request_id,
                        response_id=response_id,
                        approve=approve,
                        created_at=created_at,
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True


def _conversation(conversation_id: str, owner: Owner) -> sa.ColumnElement[bool]:
    return sa.and_(conversations.c.id == conversation_id, owned_by(conversations.c.owner, owner))


async def _owns(connection: AsyncConnection, conversation_id: str, owner: Owner) -> bool:
    query = sa.select(conversations.c.id).where(_conversation(conversation_id, owner))
    return (await connection.execute(query)).first() is not None


def _add_missing_columns(connection: sa.Connection) -> None:
    """Databases created before a column existed get it (nullable, so no data to fill in)."""
    inspector = sa.inspect(connection)
    for table, name in ADDED_COLUMNS:
        if name not in {column["name"] for column in inspector.get_columns(table.name)}:
            column = table.c[name]
            kind = column.type.compile(dialect=connection.dialect)
            connection.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{name}" {kind}'))
            if column.index:
                connection.execute(
                    sa.text(
                        f"CREATE INDEX IF NOT EXISTS ix_{table.name}_{name} "
                        f'ON {table.name} ("{name}")'
                    )
                )
