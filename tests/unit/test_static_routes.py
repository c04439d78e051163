"""The gate serves fixed paths from a dict (`server/http/static_routes.py`), skipping
Starlette's router and exception layers: every request must get the answer Starlette's own way
gives, route priority, wrong methods, handled and unhandled exceptions included."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route

from toolwire.server.gate.auth import ASGIApp, Receive, Scope, Send
from toolwire.server.http.static_routes import StaticRoutes


class Refused(Exception):
    pass


async def refused(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=418)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)


async def unexpected(request: Request, exc: Exception) -> Response:
    return PlainTextResponse("server error", status_code=500)


async def by_parameter(request: Request) -> Response:
    return PlainTextResponse(f"parameter {request.path_params['name']}")


async def fixed(request: Request) -> Response:
    body = await request.body()
    return PlainTextResponse(f"fixed {request.scope['route'].path} {body.decode()}")


async def raises_handled(request: Request) -> Response:
    raise Refused("no")


async def raises_http(request: Request) -> Response:
    raise HTTPException(409, "conflict")


async def raises_unexpected(request: Request) -> Response:
    raise KeyError("bug")


async def stream_then_fail(request: Request) -> Response:
    async def pieces() -> AsyncIterator[bytes]:
        yield b"first "
        raise Refused("late")

    return StreamingResponse(pieces())


async def fail_before_streaming(request: Request) -> Response:
    async def pieces() -> AsyncIterator[bytes]:
        raise Refused("early")
        yield b""  # pragma: no cover

    return StreamingResponse(pieces())


class Deny:
    """A route's own middleware: the table must not step around it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse("denied by the route's middleware", status_code=403)(
            scope, receive, send
        )


def sync_endpoint(request: Request) -> Response:
    return PlainTextResponse("sync ran")


class OwnStream(Response):
    """A response class of its own (not a `StreamingResponse`) that fails before sending."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise Refused("before the first byte")


async def own_stream(request: Request) -> Response:
    return OwnStream()


def starlette_app(middleware: list[Middleware] | None = None) -> Starlette:
    routes = [
        Route("/items/{name}", by_parameter, methods=["POST"]),
        Route("/items/special", fixed, methods=["POST"]),  # never reached: the one above wins
        Route("/fixed", fixed, methods=["POST", "PUT"]),
        Route("/fixed", by_parameter, methods=["GET"]),  # a second route, another method
        Route("/handled", raises_handled, methods=["POST"]),
        Route("/http", raises_http, methods=["POST"]),
        Route("/unexpected", raises_unexpected, methods=["POST"]),
        Route("/late", stream_then_fail, methods=["POST"]),
        Route("/early", fail_before_streaming, methods=["POST"]),
        Route("/own", own_stream, methods=["POST"]),
        Route("/guarded", fixed, methods=["POST"], middleware=[Middleware(Deny)]),
        Route("/sync", sync_endpoint, methods=["POST"]),
        Mount("/mounted", routes=[Route("/inner", fixed, methods=["POST"])]),
        Route("/mounted/inner", fixed, methods=["POST"]),  # the mount comes first
    ]
    handlers = {Refused: refused, HTTPException: http_error, Exception: unexpected}
    return Starlette(routes=routes, exception_handlers=handlers, middleware=middleware)


class Choose:
    """Where the gate stands (inside the server-error layer, outside the exception layer and
    the router): a fixed path to `routes`, anything else on to Starlette."""

    def __init__(self, app: ASGIApp, routes: StaticRoutes) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.find(scope) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
        else:
            await self.routes.serve(route, scope, receive, send)


def gated() -> tuple[StaticRoutes, Starlette]:
    """The test app with the gate's choice, as `create_app` composes it."""
    static = StaticRoutes()
    app = starlette_app(middleware=[Middleware(Choose, routes=static)])
    static.fill(app.router, app.exception_handlers)
    return static, app


REQUESTS = [
    ("POST", "/items/special"),
    ("POST", "/items/other"),
    ("POST", "/fixed"),
    ("PUT", "/fixed"),
    ("GET", "/fixed"),
    ("DELETE", "/fixed"),
    ("POST", "/fixed/"),
    ("POST", "/handled"),
    ("POST", "/http"),
    ("POST", "/unexpected"),
    ("POST", "/early"),
    ("POST", "/own"),
    ("POST", "/guarded"),
    ("POST", "/sync"),
    ("POST", "/mounted/inner"),
    ("POST", "/nowhere"),
]


async def answers(app: Starlette) -> list[tuple[int, str]]:
    transport = httpx.ASGITransport(app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        out = []
        for method, path in REQUESTS:
            answer = await client.request(method, path, content=b"body")
            out.append((answer.status_code, answer.text))
        return out


async def test_every_request_gets_the_answer_starlettes_router_gives() -> None:
    plain = starlette_app()
    static, fast = gated()
    assert static.find(_scope("POST", "/fixed")) is not None  # the fast way is taken
    assert static.find(_scope("POST", "/items/special")) is None  # an earlier route wins
    assert static.find(_scope("POST", "/mounted/inner")) is None  # so does the mount
    assert await answers(fast) == await answers(plain)


async def test_a_handled_exception_after_the_stream_started_is_not_answered_twice() -> None:
    _, fast = gated()
    transport = httpx.ASGITransport(fast, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        with pytest.raises(RuntimeError, match="response already started"):
            await client.post("/late")


def test_a_root_path_takes_starlettes_way() -> None:
    static, _ = gated()
    assert static.find({**_scope("POST", "/fixed"), "root_path": "/api"}) is None


def _scope(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "root_path": ""}
