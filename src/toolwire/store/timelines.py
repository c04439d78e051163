"""Run timelines (`observe/timeline.py`) and the queries behind the `/ui` page.

Its own table on the shared metadata (created with the others by `Store.open`), so the
responses table and its writes stay as they are. Ownership: where the responses table has an
`owner` column (API keys), listings keep to the caller's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import sqlalchemy as sa

from toolwire.store.prepared import Prepared
from toolwire.store.records import ResponseStatus, ResponseSummary
from toolwire.store.tables import approvals, conversations, metadata, responses
from toolwire.wire.items import ResponseObject
from toolwire.wire.timeline import TimelineEntry

run_timelines = sa.Table(
    "run_timelines",
    metadata,
    sa.Column("response_id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("entries", sa.JSON, nullable=False),
)


_INSERT = Prepared(run_timelines.insert())  # compiled once: `store/prepared.py`


def _owned(table: sa.Table, query: Any, owner: str | None) -> Any:
    if owner is not None and "owner" in table.c:
        return query.where(table.c.owner == owner)
    return query


class TimelineStore:
    def __init__(self, engine: Any, write: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self.engine = engine
        self._write = write
        """The store's one write funnel: on SQLite a write of our own beside it would wait on
        "database is locked" under load instead of queueing."""

    async def save(self, response_id: str, created_at: int, entries: list[TimelineEntry]) -> None:
        async with self._write() as connection:
            await connection.run_sync(self.save_in, response_id, created_at, entries)

    @staticmethod
    def save_in(
        connection: sa.Connection,
        response_id: str,
        created_at: int,
        entries: list[TimelineEntry],
        *,
        fresh: bool = False,
    ) -> None:
        """The same, inside a transaction of the caller's (the response's final write);
        `fresh`: no timeline was stored for this response yet (one insert)."""
        values = {"response_id": response_id, "created_at": created_at, "entries": entries}
        if fresh:
            _INSERT.run(connection, values)
            return
        updated = connection.execute(
            run_timelines.update()
            .where(run_timelines.c.response_id == response_id)
            .values(**values)
        )
        if updated.rowcount == 0:
            connection.execute(run_timelines.insert().values(**values))

    async def get(self, response_id: str) -> list[TimelineEntry] | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(run_timelines.c.entries).where(
                        run_timelines.c.response_id == response_id
                    )
                )
            ).first()
        return None if row is None else list(row.entries)

    async def get_response(self, response_id: str, owner: str | None) -> ResponseObject | None:
        query = _owned(
            responses, sa.select(responses.c.body).where(responses.c.id == response_id), owner
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return None if row is None else cast(ResponseObject, dict(row.body))

    async def list_responses(
        self,
        *,
        owner: str | None,
        status: str | None = None,
        model: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
    ) -> list[ResponseSummary]:
        """Newest first: id, time, status, model, conversation and usage of each response."""
        query = sa.select(
            responses.c.id,
            responses.c.created_at,
            responses.c.status,
            responses.c.conversation_id,
            responses.c.previous_response_id,
            responses.c.body,
        ).order_by(responses.c.created_at.desc(), responses.c.id.desc())
        if status:
            query = query.where(responses.c.status == status)
        if since is not None:
            query = query.where(responses.c.created_at >= since)
        if until is not None:
            query = query.where(responses.c.created_at <= until)
        query = _owned(responses, query, owner)
        # the model lives in the body: filter it here, reading a bounded number of rows
        query = query.limit(limit if not model else limit * 10)
        out: list[ResponseSummary] = []
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        for row in rows:
            body = row.body or {}
            if model and body.get("model") != model:
                continue
            pending = [
                item["id"]
                for item in body.get("output") or []
                if item.get("type") == "mcp_approval_request"
            ]
            out.append(
                {
                    "id": row.id,
                    "created_at": row.created_at,
                    "status": row.status,
                    "model": body.get("model"),
                    "conversation_id": row.conversation_id,
                    "previous_response_id": row.previous_response_id,
                    "usage": body.get("usage"),
                    "approval_requests": pending,
                    "error": body.get("error"),
                    "incomplete_details": body.get("incomplete_details"),
                }
            )
            if len(out) >= limit:
                break
        return out

    async def decided(self, approval_ids: list[str]) -> set[str]:
        """Which of these approval requests were already answered."""
        if not approval_ids:
            return set()
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(
                    sa.select(approvals.c.approval_request_id).where(
                        approvals.c.approval_request_id.in_(approval_ids)
                    )
                )
            ).all()
        return {row.approval_request_id for row in rows}

    async def list_conversations(self, *, owner: str | None, limit: int = 50) -> list[Any]:
        query = _owned(
            conversations,
            sa.select(conversations)
            .order_by(conversations.c.created_at.desc(), conversations.c.id.desc())
            .limit(limit),
            owner,
        )
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        out = []
        for row in rows:
            mapping = dict(row._mapping)
            out.append(
                {
                    "id": mapping["id"],
                    "created_at": mapping["created_at"],
                    "metadata": mapping.get("metadata") or {},
                }
            )
        return out

    async def conversation_responses(
        self, conversation_id: str, owner: str | None
    ) -> list[ResponseStatus]:
        query = _owned(
            responses,
            sa.select(responses.c.id, responses.c.created_at, responses.c.status)
            .where(responses.c.conversation_id == conversation_id)
            .order_by(responses.c.created_at.asc()),
            owner,
        )
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [{"id": r.id, "created_at": r.created_at, "status": r.status} for r in rows]
