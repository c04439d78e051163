"""Every read the `/ui` page makes (`Store.ui`): its lists, the overview, a run with its
timeline, the approvals waiting; for one tenant or (an operator) all.

Filtering, counting and paging happen in SQL (SQLAlchemy Core, the same for SQLite and
PostgreSQL: the model is read from the stored body's JSON, text is searched in the stored
input and body), so a page's total is the true number of matching rows, not the size of a
page. Each method is one read job (`Store.read`): one snapshot, off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa

from toolwire.store.engine import Database
from toolwire.store.records import (
    ResponseSummary,
    SavedCounts,
    UiConversation,
    UiConversationItem,
    UiConversationRow,
    UiResponse,
    UiResponseRow,
    UiRun,
)
from toolwire.store.tables import api_keys, approvals, conversation_items, conversations, responses
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


def _owned(table: sa.Table, query: Any, owner: str | None) -> Any:
    """`owner`'s rows (None: every row)."""
    if owner is not None and "owner" in table.c:
        return query.where(table.c.owner == owner)
    return query


class UiQueries:
    def __init__(self, database: Database) -> None:
        self.database = database

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
                responses.c.timeline,
            ),
            visible,
            where,
        )
        page = page.order_by(responses.c.created_at.desc(), responses.c.id.desc())
        count = _filtered(sa.select(sa.func.count()).select_from(responses), visible, where)

        def read(connection: sa.Connection) -> tuple[list[UiResponseRow], int]:
            total = int(connection.execute(count).scalar_one())
            rows = connection.execute(page.offset(offset).limit(limit)).all()
            return [_row(row, row.timeline or []) for row in rows], total

        return await self.database.read(read)

    async def models(self, visible: Visible) -> list[str]:
        """The models these responses used (for the filter's choices)."""
        query = sa.select(_model()).distinct()
        owned = visible.where(responses.c.owner)
        if owned is not None:
            query = query.where(owned)
        rows = await self.database.read(
            lambda connection: connection.execute(query.limit(200)).all()
        )
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
                responses.c.timeline,
            ),
            visible,
            ResponseFilter(since=since, until=until),
        )
        query = query.order_by(responses.c.created_at.desc()).limit(OVERVIEW_ROWS)
        rows = await self.database.read(lambda connection: connection.execute(query).all())
        return [
            {
                "id": r.id,
                "created_at": r.created_at,
                "status": r.status,
                "owner": r.owner,
                "model": r.model,
                "usage": cast(UsageObject, r.usage) if isinstance(r.usage, dict) else None,
                "entries": r.timeline or [],
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

        def read(connection: sa.Connection) -> tuple[int, list[Any]]:
            total = int(connection.execute(count).scalar_one())
            return total, list(connection.execute(page.offset(offset).limit(limit)).all())

        total, rows = await self.database.read(read)
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

        def read(connection: sa.Connection) -> tuple[Any, list[Any], list[Any]] | None:
            found = connection.execute(head).first()
            if found is None:
                return None
            items = connection.execute(
                sa.select(conversation_items.c.item, conversation_items.c.created_at)
                .where(conversation_items.c.conversation_id == conversation_id)
                .order_by(conversation_items.c.seq)
                .limit(2000)
            ).all()
            runs = connection.execute(
                sa.select(responses.c.id, responses.c.created_at, responses.c.status)
                .where(responses.c.conversation_id == conversation_id)
                .order_by(responses.c.created_at)
            ).all()
            return found, list(items), list(runs)

        read_back = await self.database.read(read)
        if read_back is None:
            return None
        found, items, runs = read_back
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
        query = sa.select(api_keys.c.id, api_keys.c.name)
        rows = await self.database.read(lambda connection: connection.execute(query).all())
        return {r.id: r.name for r in rows}

    async def response(self, visible: Visible, response_id: str) -> UiResponse | None:
        """A response as the run page shows it: the body, its input items and its owner."""
        query = sa.select(
            responses.c.body, responses.c.input_items, responses.c.owner, responses.c.created_at
        ).where(responses.c.id == response_id)
        owned = visible.where(responses.c.owner)
        if owned is not None:
            query = query.where(owned)
        row = await self.database.read(lambda connection: connection.execute(query).first())
        if row is None:
            return None
        return {
            "body": cast(ResponseObject, dict(row.body)),
            "input_items": list(row.input_items or []),
            "owner": row.owner,
        }

    async def timeline(self, response_id: str) -> list[TimelineEntry] | None:
        """The run's timeline (`store/timelines.py`), if one was stored."""
        query = sa.select(responses.c.timeline).where(responses.c.id == response_id)
        row = await self.database.read(lambda connection: connection.execute(query).first())
        return None if row is None or row.timeline is None else list(row.timeline)

    async def response_body(self, response_id: str, owner: str | None) -> ResponseObject | None:
        """The stored response of `owner` (None: anyone's)."""
        query = _owned(
            responses, sa.select(responses.c.body).where(responses.c.id == response_id), owner
        )
        row = await self.database.read(lambda connection: connection.execute(query).first())
        return None if row is None else cast(ResponseObject, dict(row.body))

    async def recent_responses(
        self,
        *,
        owner: str | None,
        status: str | None = None,
        model: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
    ) -> list[ResponseSummary]:
        """Newest first: id, time, status, model, conversation and usage of each response
        (`owner` None: everyone's)."""
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
        rows = await self.database.read(lambda connection: connection.execute(query).all())
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
        query = sa.select(approvals.c.approval_request_id).where(
            approvals.c.approval_request_id.in_(approval_ids)
        )
        return await self.database.read(lambda connection: set(connection.scalars(query)))


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
