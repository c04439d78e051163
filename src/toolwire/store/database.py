"""The store: responses, their items, conversations and their items, behind one async API.

SQLAlchemy Core with async drivers (aiosqlite by default, asyncpg for PostgreSQL), so one code
path serves both. SQLite runs in WAL mode: a server killed mid-request loses nothing committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from platformdirs import user_data_dir
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolwire.store import timelines as _timelines  # noqa: F401  (its table joins metadata)
from toolwire.store.tables import (
    approvals,
    conversation_items,
    conversations,
    metadata,
    responses,
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
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

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
    ) -> None:
        """Insert or replace a response (status changes rewrite the row)."""
        values = {
            "id": body["id"],
            "created_at": body["created_at"],
            "status": body["status"],
            "previous_response_id": body.get("previous_response_id"),
            "conversation_id": conversation_id,
            "body": body,
            "input_items": input_items,
            "history": history,
        }
        async with self.engine.begin() as connection:
            updated = await connection.execute(
                responses.update().where(responses.c.id == body["id"]).values(**values)
            )
            if updated.rowcount == 0:
                await connection.execute(responses.insert().values(**values))

    async def get_response(self, response_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(responses.c.body).where(responses.c.id == response_id)
                )
            ).first()
        return None if row is None else dict(row.body)

    async def get_response_record(self, response_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(sa.select(responses).where(responses.c.id == response_id))
            ).first()
        return None if row is None else dict(row._mapping)

    async def delete_response(self, response_id: str) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(
                responses.delete().where(responses.c.id == response_id)
            )
        return bool(result.rowcount)

    # -- conversations --------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str, created_at: int, meta: dict[str, Any]
    ) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                conversations.insert().values(
                    id=conversation_id, created_at=created_at, metadata=meta
                )
            )

    async def get_conversation(self, conversation_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(conversations).where(conversations.c.id == conversation_id)
                )
            ).first()
        return None if row is None else dict(row._mapping)

    async def update_conversation(self, conversation_id: str, meta: dict[str, Any]) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(
                conversations.update()
                .where(conversations.c.id == conversation_id)
                .values(metadata=meta)
            )
        return bool(result.rowcount)

    async def delete_conversation(self, conversation_id: str) -> bool:
        async with self.engine.begin() as connection:
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
        self, conversation_id: str, items: list[dict[str, Any]], created_at: int
    ) -> None:
        if not items:
            return
        async with self.engine.begin() as connection:
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

    async def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[dict[str, Any]]:
        query = sa.select(conversation_items.c.item, conversation_items.c.seq).where(
            conversation_items.c.conversation_id == conversation_id
        )
        async with self.engine.connect() as connection:
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

    async def get_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(conversation_items.c.item).where(
                        conversation_items.c.conversation_id == conversation_id,
                        conversation_items.c.id == item_id,
                    )
                )
            ).first()
        return None if row is None else dict(row.item)

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(
                conversation_items.delete().where(
                    conversation_items.c.conversation_id == conversation_id,
                    conversation_items.c.id == item_id,
                )
            )
        return bool(result.rowcount)

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
