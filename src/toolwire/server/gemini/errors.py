"""Errors on the Gemini door, in Google's shape: `{"error": {"code", "message", "status"}}`.

`code` is the HTTP status and `status` google.rpc's name for it (`wire/gemini.py`). toolwire's
own statuses map onto the ones Google answers with: a body over the size limit or a refused
content type is `INVALID_ARGUMENT` (400, as Google refuses an oversized payload), a run that
ended with no answer the door can express (an approval pending) `FAILED_PRECONDITION` (400),
a failing or unreachable upstream `UNAVAILABLE` (503, which Gemini's clients retry), one that
timed out `DEADLINE_EXCEEDED` (504). A method a route does not serve keeps HTTP's 405 (with
its `Allow` header), named `UNIMPLEMENTED`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.responses import Response

from toolwire.errors import ToolwireError
from toolwire.server.http.helpers import ORJSONResponse
from toolwire.wire import gemini

log = logging.getLogger("toolwire.server")

_STATUS: dict[int, tuple[int, str]] = {
    413: (400, "INVALID_ARGUMENT"),
    415: (400, "INVALID_ARGUMENT"),
    422: (400, "FAILED_PRECONDITION"),
    424: (400, "FAILED_PRECONDITION"),
    502: (503, "UNAVAILABLE"),
    529: (503, "UNAVAILABLE"),
}


def gemini_shape(error: ToolwireError) -> tuple[int, Mapping[str, object]]:
    """The HTTP status and body a Gemini client reads for `error`."""
    code, status = _STATUS.get(error.status, (error.status, gemini.status_name(error.status)))
    return code, gemini.error_body(code, error.message, status)


def unexpected_response(exc: Exception) -> Response:
    log.error("unhandled error on the Gemini door", exc_info=exc)
    return ORJSONResponse(gemini.error_body(500, f"internal error: {type(exc).__name__}"), 500)


def error_frame(error: ToolwireError) -> bytes:
    """The error after a stream opened."""
    code, status = _STATUS.get(error.status, (error.status, None))
    return gemini.stream_error(code, error.message, status)
