"""Errors on the Messages door, in Anthropic's shape: `{"type": "error", "error": {type, message}}`.

The error types and statuses are Anthropic's (`wire/anthropic.py`). toolwire's own errors keep
their status where Anthropic has one for it; an overloaded or unavailable upstream (503) is
Anthropic's `overloaded_error` (529), which its clients back off and retry.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.responses import Response

from toolwire.errors import ToolwireError, UpstreamError
from toolwire.server.http.helpers import ORJSONResponse
from toolwire.wire import anthropic

log = logging.getLogger("toolwire.server")


def status_of(error: ToolwireError) -> int:
    upstream = error.upstream_status if isinstance(error, UpstreamError) else None
    if error.status in (503, 529) or upstream in (503, 529):
        return 529
    return error.status


def anthropic_shape(error: ToolwireError) -> tuple[int, Mapping[str, object]]:
    """The door's error shape (registered for its paths with `http/errors.py`)."""
    status = status_of(error)
    return status, anthropic.error_body(status, error.message)


def unexpected_response(exc: Exception) -> Response:
    log.error("unhandled error on the Messages door", exc_info=exc)
    return ORJSONResponse(
        anthropic.error_body(500, f"internal error: {type(exc).__name__}"), status_code=500
    )


def error_frame(error: ToolwireError) -> bytes:
    """The stream's `error` event, for a failure after the stream opened."""
    return anthropic.error_event(status_of(error), error.message)
