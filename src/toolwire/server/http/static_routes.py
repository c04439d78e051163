"""The routes with a fixed path, served by the gate straight from a dict: `POST
/v1/chat/completions` and its peers skip Starlette's exception middleware, router and
`request_response` wrappers.

Why by hand: in the chat door's profile those layers were ~10% of a proxied request's CPU:
every resumption of the request's task walks their coroutine frames, the router tries the
routes one by one with a regex each, and each of two exception layers wraps `send` again. What
they do for a fixed path is small and is done here the same way: the route is the one Starlette
would pick (a fixed path that no earlier route also matches: checked when the table is built),
`scope` gets the same keys (`route`, `endpoint`, `path_params`, `router`), and the app's
exception handlers answer an exception the endpoint raises, unless the response has started
(then, as in Starlette, it goes on to the server-error layer). Anything else (a path with
parameters, a mount, a WebSocket, a wrong method, a `root_path`) goes through Starlette as
before.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route, Router

from toolwire.server.gate.auth import Message, Receive, Scope, Send

Handler = Callable[[Request, Exception], Awaitable[Response]]
_PLAIN_CALL = Response.__call__  # a response that sends a body it holds (not a stream)


class StaticRoutes:
    """Filled once the app exists (`fill`); until then, and for any path not in it, `find`
    answers None and the request takes Starlette's way."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], Route] = {}
        self._handlers: dict[type, Handler] = {}
        self._router: Router | None = None

    def fill(self, router: Router, handlers: Mapping[Any, Handler]) -> None:
        """The plain HTTP routes of `router` with a fixed path that no earlier route matches,
        and the exception handlers of the app's exception layer (not `Exception`'s and 500's:
        those belong to the server-error layer outside the gate, which still runs)."""
        self._router = router
        self._handlers = {
            kind: handler
            for kind, handler in handlers.items()
            if isinstance(kind, type) and kind is not Exception
        }
        earlier: list[Any] = []
        for route in router.routes:
            if isinstance(route, Route) and _plain(route):
                for method in route.methods or ():
                    key = (method, route.path)
                    if key not in self._routes and not any(
                        _takes(other, method, route.path) for other in earlier
                    ):
                        self._routes[key] = route
            earlier.append(route)

    def find(self, scope: Scope) -> Route | None:
        if scope["root_path"]:
            return None
        return self._routes.get((scope["method"], scope["path"]))

    async def serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        """What Starlette's router, `request_response` and exception layers do for `route`."""
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {}
        scope.setdefault("router", self._router)
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except Exception as exc:
            response = await self._answer(request, exc)  # nothing was sent yet
        if type(response).__call__ is _PLAIN_CALL:
            # a body in hand (JSON): sending it raises only what no handler answers
            await response(scope, receive, send)
            return
        started = False

        async def sender(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await response(scope, receive, sender)
        except Exception as exc:
            if started and self._handler(exc) is not None:
                raise RuntimeError(
                    "Caught handled exception, but response already started."
                ) from exc
            if started:
                raise
            answer = await self._answer(request, exc)
            await answer(scope, receive, send)

    def _handler(self, exc: Exception) -> Handler | None:
        for kind in type(exc).__mro__:
            found = self._handlers.get(kind)
            if found is not None:
                return found
        return None

    async def _answer(self, request: Request, exc: Exception) -> Response:
        handler = self._handler(exc)
        if handler is None:
            raise exc
        response = await handler(request, exc)
        exc.__traceback__ = None  # a reused exception would gather tracebacks
        return response


def _plain(route: Any) -> bool:
    """A route this table serves as Starlette would: a `Route` with a fixed path and methods,
    its endpoint a coroutine function wrapped by nothing but `request_response` (a route's own
    `middleware=` or body limit wraps `route.app`, which the table does not call)."""
    return (
        type(route) is Route
        and not route.param_convertors
        and bool(route.methods)
        and getattr(route.app, "__qualname__", "") == "request_response.<locals>.app"
        and inspect.iscoroutinefunction(route.endpoint)
    )


def _takes(route: Any, method: str, path: str) -> bool:
    """Whether Starlette's router would hand a `method` request for `path` to `route` (any
    kind of route): a full match. A partial one (the path, another method) it passes over."""
    scope = {"type": "http", "path": path, "root_path": "", "method": method, "headers": []}
    try:
        match, _ = route.matches(scope)
    except Exception:  # a kind that needs more of a scope: assume it takes it
        return True
    return bool(match is Match.FULL)
