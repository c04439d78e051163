"""The objects toolwire answers with, as `/openapi.json` describes them.

These describe, they do not build: the handlers answer with dicts made by the services. Each
model requires only the fields every answer has, and allows more (`extra="allow"`), so the
document never promises less than is sent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Item(BaseModel):
    """An input or output item (message, function_call, function_call_output, reasoning,
    mcp_call, mcp_list_tools, mcp_approval_request, …), in OpenAI's shape."""

    model_config = ConfigDict(extra="allow", title="Item")
    type: str
    id: str


class ResponseError(BaseModel):
    model_config = ConfigDict(extra="allow", title="ResponseError")
    code: str | None = None
    message: str


class ResponseObject(BaseModel):
    model_config = ConfigDict(extra="allow", title="Response")
    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]
    model: str
    output: list[Item]
    error: ResponseError | None = None


class ItemList(BaseModel):
    """A page of items, OpenAI's list shape."""

    model_config = ConfigDict(extra="allow", title="ItemList")
    object: Literal["list"]
    data: list[Item]
    first_id: str | None
    last_id: str | None
    has_more: bool


class ResponseDeleted(BaseModel):
    model_config = ConfigDict(extra="allow", title="ResponseDeleted")
    id: str
    object: Literal["response.deleted"]
    deleted: bool


class Conversation(BaseModel):
    model_config = ConfigDict(extra="allow", title="Conversation")
    id: str
    object: Literal["conversation"]
    created_at: int
    metadata: dict[str, str]


class ConversationDeleted(BaseModel):
    model_config = ConfigDict(extra="allow", title="ConversationDeleted")
    id: str
    object: Literal["conversation.deleted"]
    deleted: bool


#: Every event a streamed response can send, in order of first appearance; each SSE frame is
#: `event: TYPE` then `data: {"type": TYPE, "sequence_number": n, ...}`.
RESPONSE_EVENT_TYPES: tuple[str, ...] = (
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_call.in_progress",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
)


class ResponseStreamEvent(BaseModel):
    """One event of a streamed response (`text/event-stream`)."""

    model_config = ConfigDict(extra="allow", title="ResponseStreamEvent")
    type: str = Field(json_schema_extra={"enum": list(RESPONSE_EVENT_TYPES)})
    sequence_number: int | None = None
