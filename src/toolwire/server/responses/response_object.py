"""The Responses door's response object: what it echoes of its request (`ResponseHeader`,
fixed before the run starts) and the object itself, for a draft's output and a status."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwire.errors import RunStatus, error_code
from toolwire.loop.events import LoopFinished
from toolwire.loop.tool_types import ClientTools
from toolwire.server.responses.prepare.tools import SearchBackend
from toolwire.upstream.events import Usage
from toolwire.wire import responses as wire
from toolwire.wire.items import Item, ResponseObject


@dataclass(slots=True, frozen=True)
class ResponseHeader:
    """What the response object echoes of its request, and how its tools were declared:
    fixed before the run starts."""

    response_id: str
    created_at: int
    model: str
    settings: dict[str, object]
    """The request's settings as the response object echoes them (the client's JSON)."""
    client_tools: ClientTools = field(default_factory=ClientTools)
    """Caller-side tools by the name the model knows them: a call goes back as the client
    declared the tool (`function_call` with its `namespace`, or `custom_tool_call`)."""
    web_search: SearchBackend | None = None
    """The MCP tool serving `web_search`: its calls are `web_search_call` items."""
    include: frozenset[str] = frozenset()
    """The request's `include`: the optional output data it asked for."""
    reasoning_summary: bool = False
    """`reasoning.summary` was asked for: reasoning items carry a `summary_text` part, which
    is the upstream's reasoning text itself (toolwire makes no call to summarize it)."""


def response_object(
    header: ResponseHeader,
    output: list[Item],
    status: str,
    finished: LoopFinished | None = None,
    usage: Usage | None = None,
) -> ResponseObject:
    """OpenAI's response object for `header` and `output`: `finished` gives a failed one its
    `error` and an unfinished one its `incomplete_details` (toolwire's own reason beside
    OpenAI's, errors.py)."""
    error = None
    incomplete = None
    if finished is not None:
        reason = finished.reason
        if reason.status is RunStatus.FAILED:
            error = wire.error_object(
                error_code(reason, finished.error), finished.message or reason.value
            )
        if reason.incomplete_reason is not None:
            incomplete = reason.incomplete_reason
    body = wire.response_object(
        response_id=header.response_id,
        created_at=header.created_at,
        status=status,
        model=header.model,
        output=output,
        settings=header.settings,
        usage=wire.usage_object(
            usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_tokens
        )
        if usage is not None
        else None,
        error=error,
        incomplete_reason=incomplete,
        completed_at=wire.now() if status not in ("queued", "in_progress") else None,
    )
    details = body["incomplete_details"]
    if details is not None and finished is not None:
        if incomplete != finished.reason.value:  # toolwire's own reason (errors.py)
            details["toolwire_reason"] = finished.reason.value
        if finished.message:
            details["message"] = finished.message
    return body
