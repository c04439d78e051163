"""Every error a client sees, in OpenAI's shape: `{"error": {message, type, param, code}}`."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolwire.errors import ToolwireError

log = logging.getLogger("toolwire.server")


def error_response(error: ToolwireError) -> JSONResponse:
    headers = dict(error.headers or {})
    if not error.should_retry:
        headers["x-should-retry"] = "false"
    return JSONResponse(error.to_body(), status_code=error.status, headers=headers)


async def toolwire_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ToolwireError)
    return error_response(exc)


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse(
        ToolwireError(f"internal error: {type(exc).__name__}", code="internal_error").to_body(),
        status_code=500,
    )
