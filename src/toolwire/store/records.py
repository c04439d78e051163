"""Typed shapes of the rows the store hands back: `TypedDict`s, since a row is read as a
mapping (`dict(row._mapping)`) and goes on as one, at no cost. The JSON columns hold wire
shapes (`wire/items.py`): a response's `body` is the response object, its items are `Item`s.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from toolwire.wire.items import ErrorObject, IncompleteDetails, Item, ResponseObject, UsageObject
from toolwire.wire.timeline import TimelineEntry


class ResponseRecord(TypedDict):
    """A `responses` row; `history` is filled by `Store.get_response_record` (every item the
    model had seen when the response ended)."""

    id: str
    created_at: int
    status: str
    previous_response_id: str | None
    conversation_id: str | None
    body: ResponseObject
    input_items: list[Item]
    history: list[Item] | None
    owner: str | None
    conversation_items: int | None
    upstream: str | None
    """The model server that served it (schema 7; None with a single upstream)."""


class ConversationRecord(TypedDict):
    """A `conversations` row; `metadata` is the client's JSON (string values, by OpenAI's
    rule, checked at the door)."""

    id: str
    created_at: int
    metadata: dict[str, str]
    owner: str | None
    upstream: str | None
    """The model server that served its last response (schema 7; None with one upstream)."""


class QueuedRequest(TypedDict, total=False):
    """What a `runs` row keeps of a queued background request, for any replica to run it."""

    sealed_body: str
    """The request body, sealed (it may carry MCP credentials: `toolwire/sealed.py`)."""
    body: object
    """The request body in the clear (rows queued before requests were sealed)."""
    owner: str | None


class RunRecord(TypedDict):
    """A `runs` row."""

    response_id: str
    kind: str
    state: str
    replica_id: str | None
    request: QueuedRequest | None
    attempts: int
    cancel_requested: bool
    created_at: float
    updated_at: float


class ResponseSummary(TypedDict):
    """A response as the `/ui` list shows it (`UiQueries.recent_responses`)."""

    id: str
    created_at: int
    status: str
    model: str | None
    conversation_id: str | None
    previous_response_id: str | None
    usage: UsageObject | None
    approval_requests: list[str]
    """Ids of the `mcp_approval_request` items in its output."""
    error: ErrorObject | None
    incomplete_details: IncompleteDetails | None
    pending_approvals: NotRequired[list[str]]
    """Filled by `/ui`: those of `approval_requests` not yet decided."""


class ResponseStatus(TypedDict):
    id: str
    created_at: int
    status: str


class SavedCounts(TypedDict):
    repairs: int
    leaks: int
    retries: int
    refused: int


class UiResponseRow(TypedDict):
    """A response as the `/ui` list shows it (`UiQueries.responses`)."""

    id: str
    created_at: int
    status: str
    model: str | None
    owner: str | None
    conversation_id: str | None
    previous_response_id: str | None
    usage: UsageObject | None
    latency: float | None
    input: str
    approval_requests: list[str]
    error: ErrorObject | None
    incomplete_details: IncompleteDetails | None
    saved: SavedCounts
    pending_approvals: NotRequired[list[str]]
    """Filled by `/ui`: those of `approval_requests` not yet decided."""
    key_name: NotRequired[str | None]
    """Filled by `/ui`: the name of the key that owns it."""


class UiRun(TypedDict):
    """A response with its timeline: the `/ui` overview's input (`UiQueries.runs`)."""

    id: str
    created_at: int
    status: str
    owner: str | None
    model: str | None
    usage: UsageObject | None
    entries: list[TimelineEntry]


class UiConversationRow(TypedDict):
    id: str
    created_at: int
    metadata: dict[str, str]
    owner: str | None
    items: int


class UiConversationItem(Item, total=False):
    created_at: int
    """When the item was added to the conversation."""


class UiConversation(TypedDict):
    id: str
    created_at: int
    metadata: dict[str, str]
    items: list[UiConversationItem]
    responses: list[ResponseStatus]


class UiResponse(TypedDict):
    """A response as the `/ui` run page shows it."""

    body: ResponseObject
    input_items: list[Item]
    owner: str | None
