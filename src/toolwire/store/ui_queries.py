"""The queries behind the `/ui` page's lists and overview, for one tenant or (an operator) all.

Filtering, counting and paging happen in SQL (SQLAlchemy Core, the same for SQLite and
PostgreSQL: the model is read from the stored body's JSON, text is searched in the stored
input and body), so a page's total is the true number of matching rows, not the size of a
page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa

from toolwire.store.records import (
    SavedCounts,
    UiConversation,
    UiConversationItem,
    UiConversationRow,
    UiResponse,
    UiResponseRow,
    UiRun,
)
from toolwire.store.tables import api_keys, conversation_items, conversations, responses
from toolwire.store.timelines import run_timelines
from toolwire.wire.items import ResponseObject, UsageObject
from toolwire.wire.timeline import TimelineEntry

#: The most responses the overview reads for one time range (the newest of it).
OVERVIEW_ROWS = 20_000
#: The `key` filter value for rows made while the server ran without keys.
NO_KEY = "none"


@dataclass(slots=True, frozen=True)
class Visible:
    """Whose rows a request may see: one key's (a tenant), or everyone's (an operator, who
    may narrow to one key, or to `NO_KEY`: history from before the first key)."""

    owner: str | None
    everyone: bool
    key: str | None = None

    def where(self, column: Any) -> sa.ColumnElement[bool] | None:
        if not self.everyone:
            mine: sa.ColumnElement[bool] = (
                column.is_(None) if self.owner is None else column == self.owner
            )
            return mine
        if self.key == NO_KEY:
            return column.is_(None)  # type: ignore[no-any-return]
        if self.key:
            return column == self.key  # type: ignore[no-any-return]
        return None


@dataclass(slots=True, frozen=True)
class ResponseFilter:
    status: str | None = None
    model: str | None = None
    since: int | None = None
    until: int | None = None
    text: str | None = None


def _model() -> Any:
    return responses.c.body["model"].as_string()


def _filtered(query: Any, visible: Visible, where: ResponseFilter) -> Any:
    owned = visible.where(responses.c.owner)
    if owned is not None:
        query = query.where(owned)
    if where.status:
        query = query.where(responses.c.status == where.status)
    if where.model:
        query = query.where(_model() == where.model)
    if where.since is not None:
        query = query.where(responses.c.created_at >= where.since)
    if where.until is not None:
        query = query.where(responses.c.created_at <= where.until)
    if where.text:
        needle = where.text.lower()
        query = query.where(
            sa.or_(
                responses.c.id == where.text,
                sa.func.lower(sa.cast(responses.c.input_items, sa.Text)).contains(
                    needle, autoescape=True
                ),
                sa.func.lower(sa.cast(responses.c.body, sa.Text)).contains(needle, autoescape=True),
            )
        )
    return query


class UiQueries:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    async def responses(
        self, visible: Visible, where: ResponseFilter, *, offset: int, limit: int
    ) -> tuple[list[UiResponseRow], int]:
        """A page of responses, newest first, and how many match in all."""
        page = _filtered(
            sa.select(
                responses.c.id,
                responses.c.created_at,
                responses.c.status,
                responses.c.owner,
                responses.c.conversation_id,
                responses.c.previous_response_id,
                responses.c.body,
                responses.c.input_items,
            ),
            visible,
            where,
        )
        page = page.order_by(responses.c.created_at.desc(), responses.c.id.desc())
        count = _filtered(sa.select(sa.func.count()).select_from(responses), visible, where)
        async with self.engine.connect() as connection:
            total = int((await connection.execute(count)).scalar_one())
            rows = (await connection.execute(page.offset(offset).limit(limit))).all()
            ids = [row.id for row in rows]
            timelines = {
                r.response_id: r.entries
                for r in (
                    await connection.execute(
                        sa.select(run_timelines.c.response_id, run_timelines.c.entries).where(
                            run_timelines.c.response_id.in_(ids)
                        )
                    )
                ).all()
            }
        return [_row(row, timelines.get(row.id) or []) for row in rows], total

    async def models(self, visible: Visible) -> list[str]:
        """The models these responses used (for the filter's choices)."""
        query = sa.select(_model()).distinct()
        owned = visible.where(responses.c.owner)
        if owned is not None:
            query = query.where(owned)
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query.limit(200))).all()
        return sorted(str(r[0]) for r in rows if r[0])

    async def runs(self, visible: Visible, since: int, until: int) -> list[UiRun]:
        """Each response of the range with its timeline (the overview's input), newest
        first, at most `OVERVIEW_ROWS`."""
        query = _filtered(
            sa.select(
                responses.c.id,
                responses.c.created_at,
                responses.c.status,
                responses.c.owner,
                _model().label("model"),
                responses.c.body["usage"].label("usage"),
                run_timelines.c.entries,
            ).select_from(
                responses.outerjoin(run_timelines, run_timelines.c.response_id == responses.c.id)
            ),
            visible,
            ResponseFilter(since=since, until=until),
        )
        query = query.order_by(responses.c.created_at.desc()).limit(OVERVIEW_ROWS)
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [
            {
                "id": r.id,
                "created_at": r.created_at,
                "status": r.status,
                "owner": r.owner,
                "model": r.model,
                "usage": cast(UsageObject, r.usage) if isinstance(r.usage, dict) else None,
                "entries": r.entries or [],
            }
            for r in rows
        ]

    async def conversations(
        self, visible: Visible, *, offset: int, limit: int
    ) -> tuple[list[UiConversationRow], int]:
        owned = visible.where(conversations.c.owner)
        page = sa.select(
            conversations.c.id,
            conversations.c.created_at,
            conversations.c.metadata,
            conversations.c.owner,
            sa.select(sa.func.count())
            .where(conversation_items.c.conversation_id == conversations.c.id)
            .scalar_subquery()
            .label("items"),
        ).order_by(conversations.c.created_at.desc(), conversations.c.id.desc())
        count = sa.select(sa.func.count()).select_from(conversations)
        if owned is not None:
            page, count = page.where(owned), count.where(owned)
        async with self.engine.connect() as connection:
            total = int((await connection.execute(count)).scalar_one())
            rows = (await connection.execute(page.offset(offset).limit(limit))).all()
        return [
            {
                "id": r.id,
                "created_at": r.created_at,
                "metadata": r.metadata or {},
                "owner": r.owner,
                "items": int(r.items or 0),
            }
            for r in rows
        ], total

    async def conversation(self, visible: Visible, conversation_id: str) -> UiConversation | None:
        """The conversation, its items (messages, tool calls, outputs) in order, and the
        responses that ran in it."""
        owned = visible.where(conversations.c.owner)
        head = sa.select(conversations).where(conversations.c.id == conversation_id)
        if owned is not None:
            head = head.where(owned)
        async with self.engine.connect() as connection:
            found = (await connection.execute(head)).first()
            if found is None:
                return None
            items = (
                await connection.execute(
                    sa.select(conversation_items.c.item, conversation_items.c.created_at)
                    .where(conversation_items.c.conversation_id == conversation_id)
                    .order_by(conversation_items.c.seq)
                    .limit(2000)
                )
            ).all()
            runs = (
                await connection.execute(
                    sa.select(responses.c.id, responses.c.created_at, responses.c.status)
                    .where(responses.c.conversation_id == conversation_id)
                    .order_by(responses.c.created_at)
                )
            ).all()
        conversation: UiConversation = {
            "id": found.id,
            "created_at": found.created_at,
            "metadata": found.metadata or {},
            "items": [
                cast(UiConversationItem, {**r.item, "created_at": r.created_at}) for r in items
            ],
            "responses": [
                {"id": r.id, "created_at": r.created_at, "status": r.status} for r in runs
            ],
        }
        return conversation

    async def key_names(self) -> dict[str, str]:
        async with self.engine.connect() as connection:
            rows = (await connection.execute(sa.select(api_keys.c.id, api_keys.c.name))).all()
        return {r.id: r.name for r in rows}


def first_line(items: Any, limit: int = 160) -> str:
    """The first line of a response's input: what a person recognizes it by."""
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        text = ""
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = next(
                (
                    str(part.get("text"))
                    for part in content
                    if isinstance(part, dict) and isinstance(part.get("text"), str)
                ),
                "",
            )
        elif item.get("type") == "function_call_output":
            text = f"(tool output) {item.get('output', '')}"
        elif item.get("type") == "mcp_approval_response":
            text = "(approval) " + ("approve" if item.get("approve") else "deny")
        text = text.strip()
        if text:
            line = text.splitlines()[0]
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _row(row: Any, entries: list[TimelineEntry]) -> UiResponseRow:
    body = row.body or {}
    finished = next((e for e in reversed(entries) if e.get("type") == "finished"), None)
    count: SavedCounts = {"repairs": 0, "leaks": 0, "retries": 0, "refused": 0}
    for entry in entries:
        kind = entry.get("type")
        if kind in ("repair", "arguments_repaired") or (
            kind == "arguments_misfit" and entry.get("action") == "retry"
        ):
            count["repairs"] += 1
        elif kind == "leak":
            count["leaks"] += 1
        elif kind == "upstream_retry":
            count["retries"] += 1
        elif kind == "tool_rejected":
            count["refused"] += 1
    approvals = [
        item["id"]
        for item in body.get("output") or []
        if isinstance(item, dict) and item.get("type") == "mcp_approval_request"
    ]
    return {
        "id": row.id,
        "created_at": row.created_at,
        "status": row.status,
        "model": body.get("model"),
        "owner": row.owner,
        "conversation_id": row.conversation_id,
        "previous_response_id": row.previous_response_id,
        "usage": body.get("usage"),
        "latency": finished.get("t") if finished else None,
        "input": first_line(row.input_items),
        "approval_requests": approvals,
        "error": body.get("error"),
        "incomplete_details": body.get("incomplete_details"),
        "saved": count,
    }


async def one_response(engine: Any, visible: Visible, response_id: str) -> UiResponse | None:
    """A response as the run page shows it: the body, its input items and its owner."""
    query = sa.select(
        responses.c.body, responses.c.input_items, responses.c.owner, responses.c.created_at
    ).where(responses.c.id == response_id)
    owned = visible.where(responses.c.owner)
    if owned is not None:
        query = query.where(owned)
    async with engine.connect() as connection:
        row = (await connection.execute(query)).first()
    if row is None:
        return None
    return {
        "body": cast(ResponseObject, dict(row.body)),
        "input_items": list(row.input_items or []),
        "owner": row.owner,
    }
