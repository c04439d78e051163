"""Unknown routes and methods answer in the OpenAI error shape (404 `unknown_url`, 405
`method_not_allowed` with its `Allow` header), never Starlette's plain text; under a door that
registered its own shape (`http/errors.py`), in that door's."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolwire.errors import ToolwireError
from toolwire.server.http.errors import shape_for


class RouteError(ToolwireError):
    """No such route, or not with this method."""

    error_type = "invalid_request_error"


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette names only the first route's).
    A route whose path is this very path (`/v1/responses/compact`) speaks for it alone, as the
    OpenAPI document does, not the templated ones it also matches (`/v1/responses/{id}`)."""
    path = request.url.path
    routes = [r for r in getattr(request.app, "routes", []) if isinstance(r, Route)]
    matching = [r for r in routes if r.path == path] or [
        r for r in routes if r.path_regex.match(path)
    ]
    methods: set[str] = set()
    for route in matching:
        methods |= route.methods or set()
    return sorted(methods)


_CODES = {404: "unknown_url", 405: "method_not_allowed"}


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        message = (
            f"Unknown request URL: {request.method} {request.url.path}. "
            "The routes this server serves are listed at /openapi.json."
        )
    elif status == 405:
        allowed = allowed_methods(request)
        headers = {**(exc.headers or {}), "Allow": ", ".join(allowed)}
        message = (
            f"Method {request.method} is not allowed on {request.url.path}; "
            f"allowed: {', '.join(allowed)}."
        )
        error = RouteError(message, code="method_not_allowed", status=405)
        status, body = shape_for(request.url.path, request.scope)(error)
        return JSONResponse(body, status_code=status, headers=headers)
    else:
        message = str(exc.detail)
    if status in (204, 304):
        return Response(status_code=status, headers=exc.headers)
    error = RouteError(message, code=_CODES.get(status, "http_error"), status=status)
    status, body = shape_for(request.url.path, request.scope)(error)
    return JSONResponse(body, status_code=status, headers=exc.headers)
