"""The one place that picks a door's error shape.

Every error a client sees is in the shape of the API it called: OpenAI's
(`{"error": {message, type, param, code}}`) by default, another where a wing registered its own
for its path prefix (`register_error_shape`; the Anthropic door does for `/v1/messages`). The
route handlers' exception handlers, the unknown-route fallback and the gate's middlewares (which
answer before any route runs) all ask `shape_for(path)`, so a door's clients never see another
API's errors. `http/` imports no wing: wings register here as they are built.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from toolwire.errors import ToolwireError
from toolwire.server.http.helpers import ORJSONResponse

log = logging.getLogger("toolwire.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


class ErrorShape(Protocol):
    def __call__(self, error: ToolwireError) -> tuple[int, Mapping[str, object]]:
        """The HTTP status and the body a client of this API reads for `error`."""
        ...


def openai_shape(error: ToolwireError) -> tuple[int, Mapping[str, object]]:
    return error.status, error.to_body()


Asks = Callable[[Scope], bool]
_SHAPES: list[tuple[str, ErrorShape, Asks | None]] = []


def register_error_shape(prefix: str, shape: ErrorShape, *, asks: Asks | None = None) -> None:
    """Errors on paths under `prefix` are answered in `shape` (idempotent: apps built again in
    one process register again). `asks`: only for the requests it accepts, on a path the door
    shares with others (the Gemini door's clients on `/v1/models`, told by their key)."""
    global _SHAPES
    kept = [entry for entry in _SHAPES if entry[0] != prefix]
    # the longest prefix first, so a nested door's shape wins over its parent's
    _SHAPES = sorted([*kept, (prefix, shape, asks)], key=lambda entry: -len(entry[0]))


def shape_for(path: str, scope: Scope | None = None) -> ErrorShape:
    for prefix, shape, asks in _SHAPES:
        if path.startswith(prefix) and (asks is None or (scope is not None and asks(scope))):
            return shape
    return openai_shape


def error_response(error: ToolwireError, path: str = "", scope: Scope | None = None) -> Response:
    """`error` as the API at `path` answers it; a 429's `retry-after` and `x-ratelimit-*`
    headers travel with it, and `x-should-retry: false` tells SDKs not to retry."""
    status, body = shape_for(path, scope)(error)
    headers = dict(error.headers or {})
    if not error.should_retry:
        headers["x-should-retry"] = "false"
    return ORJSONResponse(body, status_code=status, headers=headers or None)


Handler = Callable[[Request], Awaitable[Response]]


def in_shape_of(prefix: str) -> Callable[[Handler], Handler]:
    """A door's route handler whose every error leaves in the shape registered for `prefix`,
    also one no check expected (logged, a 500 in that shape), answered by the handler itself
    rather than by the app's last-resort handler."""

    def wrap(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except ToolwireError as exc:
                return error_response(exc, prefix)
            except Exception as exc:
                log.error("unhandled error on %s %s", request.method, prefix, exc_info=exc)
                return error_response(internal_error(exc), prefix)

        return guarded

    return wrap


def internal_error(exc: Exception) -> ToolwireError:
    """What a client reads of a failure nobody expected: its kind, nothing of its content."""
    return ToolwireError(f"internal error: {type(exc).__name__}", code="internal_error")


async def toolwire_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ToolwireError)
    return error_response(exc, request.url.path, request.scope)


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(internal_error(exc), request.url.path, request.scope)


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    *,
    param: str | None = None,
    error_type: str = "invalid_request_error",
    headers: list[tuple[bytes, bytes]] | None = None,
    scope: Scope | None = None,
) -> None:
    """An error answered straight from middleware, in the shape of the API at the scope's path.
    For a WebSocket handshake (`scope` of type `websocket`), the same status and body when the
    server can send an HTTP answer to an upgrade (the ASGI "websocket.http.response" extension:
    uvicorn, Starlette's TestClient); otherwise the upgrade is closed with 1008 (policy
    violation), which servers answer as 403."""
    error = ToolwireError(message, code=code, param=param, status=status, error_type=error_type)
    status, shaped = shape_for(scope.get("path", "") if scope is not None else "", scope)(error)
    body = orjson.dumps(shaped)
    start = {
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    }
    if scope is not None and scope["type"] == "websocket":
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", **start})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": code})
        return
    await send({"type": "http.response.start", **start})
    await send({"type": "http.response.body", "body": body})
