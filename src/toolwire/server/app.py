"""The ASGI app: the wings on one `Runtime`, behind the gate.

Each wing registers its own routes, error shape and `/openapi.json` rows; this module only puts
them side by side: `responses/` (Responses, Conversations, compaction, WebSocket mode), `chat/`,
`messages/` (Anthropic), `gemini/` (Google's Gemini API), `operator/` (`/metrics`, `/ui`) and
the routes every app serves (`http/root.py`). The routes parse no model output: the driver does.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from toolwire.errors import ToolwireError
from toolwire.observe.setup import Observability
from toolwire.runtime import Runtime
from toolwire.server.chat.routes import ChatWing
from toolwire.server.gate.limits import read_limited_json
from toolwire.server.gate.middleware import Gate
from toolwire.server.gate.security import Security, middleware
from toolwire.server.gemini.routes import GeminiDoor
from toolwire.server.gemini.translate import GeminiSettings
from toolwire.server.http.errors import toolwire_error_handler, unexpected_error_handler
from toolwire.server.http.fallback import http_error_handler
from toolwire.server.http.root import root_routes
from toolwire.server.http.static_routes import StaticRoutes
from toolwire.server.messages.routes import MessagesDoor
from toolwire.server.messages.translate import MessagesSettings
from toolwire.server.operator.routes import OperatorWing
from toolwire.server.responses.durable import DurabilitySettings
from toolwire.server.responses.routes import ResponsesWing


class GatedStarlette(Starlette):
    """Starlette whose HTTP requests go straight to the gate when it observes them: the gate
    then answers an unexpected exception as Starlette's server-error layer does (its 500
    handler, the exception raised on to the server), so `Starlette.__call__` and that layer
    are two frames fewer on every resumption of a request and one `send` wrapper fewer
    (~1% of a proxied chat request). Anything else (no observer, a debug app, a WebSocket,
    lifespan) takes Starlette's way."""

    _outermost: Callable[[Scope, Receive, Send], Awaitable[None]] | bool = False
    _stack: Any = None  # the middleware stack `_outermost` was found in (`debug=` rebuilds it)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            outermost = self._outermost
            if self._stack is None or self._stack is not self.middleware_stack:
                outermost = self._outermost = self._gate_outermost()
                self._stack = self.middleware_stack
            if outermost:
                scope["app"] = self
                await outermost(scope, receive, send)  # type: ignore[operator]
                return
        await super().__call__(scope, receive, send)

    def _gate_outermost(self) -> Callable[[Scope, Receive, Send], Awaitable[None]] | bool:
        """The gate's `outermost` with the server-error layer's answer, or False when the
        stack is not the plain one (server errors, then the observing gate)."""
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        errors = self.middleware_stack
        gate = getattr(errors, "app", None)
        if (
            type(errors) is not ServerErrorMiddleware
            or not isinstance(gate, Gate)
            or gate.observer is None
            or errors.debug
            or errors.handler is None
            or not inspect.iscoroutinefunction(errors.handler)
        ):
            return False
        handler = cast(Callable[[Request, Exception], Awaitable[Response]], errors.handler)

        async def answer(scope: Scope, receive: Receive, send: Send, exc: Exception) -> None:
            response = await handler(Request(scope), exc)
            await response(scope, receive, send)

        return functools.partial(gate.outermost, errors=answer)


def create_app(
    runtime: Runtime,
    *,
    security: Security | None = None,
    messages: MessagesSettings | None = None,
    durability: DurabilitySettings | None = None,
    observability: Observability | None = None,
    gemini: GeminiSettings | None = None,
) -> Starlette:
    """The app, behind the gate (`server/gate/security.py`): with the default `Security()`,
    keys are checked whenever the store holds one, Origin and Host are checked as for a
    loopback server, and the default limits apply. `observability`: `/metrics`, `/ui` and the
    request log (the run observers are composed into the runtime's driver). The app owns the
    runtime from here: its shutdown closes it. `app.state.responses` is the Responses wing's
    service (its background runs, its replica)."""
    security = security or Security()
    limits = security.limits

    async def read_json(request: Request) -> Any:
        return await read_limited_json(request, limits)

    responses = ResponsesWing(runtime, limits=limits, read_json=read_json, durability=durability)
    chat = ChatWing(runtime, read_json=read_json)
    anthropic = MessagesDoor(runtime, settings=messages or MessagesSettings(), read_json=read_json)
    google = GeminiDoor(runtime, settings=gemini or GeminiSettings(), read_json=read_json)
    routes: list[BaseRoute] = [
        *responses.routes(),
        *chat.routes(),
        *anthropic.routes(),
        *google.routes(),
        *root_routes(runtime.upstream, [anthropic.model_list(), google.model_list()]),
    ]
    observer = None
    if observability is not None:
        operator = OperatorWing(runtime, observability)
        routes.extend(operator.routes())
        observer = operator.request_observer()  # outermost, in the one middleware

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await responses.start()  # the lease, the sweep, the background queue
        try:
            yield
        finally:
            await responses.stop()
            await runtime.aclose()

    handlers: dict[Any, Any] = {
        ToolwireError: toolwire_error_handler,
        HTTPException: http_error_handler,
        Exception: unexpected_error_handler,
    }
    static = StaticRoutes()  # the gate serves fixed paths itself (server/http/static_routes.py)
    app = GatedStarlette(
        routes=routes,
        exception_handlers=handlers,
        lifespan=lifespan,
        middleware=middleware(security, runtime.store, observer, static),
    )
    static.fill(app.router, handlers)
    app.state.responses = responses.service
    return app
