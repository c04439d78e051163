"""The one ASGI middleware every request crosses: observe, guard, authenticate, limit the body,
then the key's fair shares (requests per minute, concurrent requests and WebSockets:
`server/gate/shares.py`).

Four separate middlewares (`observe/requests.py`, `server/gate/guards.py`, `server/gate/auth.py`,
`server/gate/limits.py`) each added a coroutine frame that every resumption of a request's task
walks through, and two `receive` wrappers per request; in the profile of the chat door they were
~15% of a proxied request's own time. Here their checks run in the same order (the request is
observed first, so a refusal is logged and counted too; then Origin / Host / content type, the key,
the declared body size) from one callable, with one `send` and one `receive` wrapper. The checks
themselves stay where they were written (`screen`, `admit`, `counted`), so each is still tested on
its own.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from toolwire.server.gate.auth import ASGIApp, AuthMiddleware, Message, Receive, Scope, Send
from toolwire.server.gate.guards import GuardMiddleware
from toolwire.server.gate.limits import BodyLimitMiddleware
from toolwire.server.gate.shares import Shares
from toolwire.store.owner import current_owner

#: Answers an exception no layer inside handled, for a response not yet started.
Answer = Callable[[Scope, Receive, Send, Exception], Awaitable[None]]

if TYPE_CHECKING:
    from toolwire.observe.requests import RequestObserver
    from toolwire.server.http.static_routes import StaticRoutes


class Gate:
    """Observe (when there is an `observer`: `server/operator/observability.py`), then guard, then
    authenticate, then limit the body; then the app, or for a route with a fixed path, that
    route itself (`routes`: `server/http/static_routes.py`)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        guard: GuardMiddleware,
        auth: AuthMiddleware,
        limit: BodyLimitMiddleware,
        shares: Shares | None = None,
        observer: RequestObserver | None = None,
        routes: StaticRoutes | None = None,
    ) -> None:
        self.app = app
        self.routes = routes
        self.guard = guard
        self.auth = auth
        self.limit = limit
        self.shares = shares
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self.observer is None:
                await self._http(scope, self.limit.counted(receive), send)
            else:
                await self._observed(scope, receive, send, self.observer)
        elif kind == "websocket":
            if self.observer is None:
                await self._websocket(scope, receive, send)
            else:
                await self.observer.websocket(scope, receive, send, self._websocket)
        else:
            await self.app(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        passed = await self.guard.screen(scope, send)
        if passed is None or not await self.auth.admit(scope, passed):
            return
        slot = "" if self.shares is None else await self.shares.take(scope, passed)
        if slot is None:
            return
        token = current_owner.set(scope["state"]["owner"])
        try:
            await self.app(scope, self.limit.limited_messages(receive, passed), passed)
        finally:
            current_owner.reset(token)
            if slot and self.shares is not None:
                self.shares.give(scope, slot)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        passed = await self.guard.screen(scope, send)
        if (
            passed is None
            or not await self.auth.admit(scope, passed)
            or not await self.limit.admit(scope, passed)
        ):
            return
        owner = scope["state"]["owner"]
        # no key, no shares to count (`Shares.take` says so too): no coroutine for it
        slot = "" if self.shares is None or owner is None else await self.shares.take(scope, passed)
        if slot is None:
            return
        token = current_owner.set(owner)
        route = None if self.routes is None else self.routes.find(scope)
        try:
            if route is None:
                await self.app(scope, receive, passed)
            else:
                await self.routes.serve(route, scope, receive, passed)  # type: ignore[union-attr]
        finally:
            current_owner.reset(token)
            if slot and self.shares is not None:
                self.shares.give(scope, slot)

    async def outermost(self, scope: Scope, receive: Receive, send: Send, errors: Answer) -> None:
        """An HTTP request, observed, with the gate as the app's outermost layer
        (`server/app.py`): what Starlette's server-error layer did around it is `errors`, which
        answers an unexpected exception with a 500 when no response has started (the
        exception then goes on to the server, as there)."""
        assert self.observer is not None
        await self._observed(scope, receive, send, self.observer, errors)

    async def _observed(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        observer: RequestObserver,
        errors: Answer | None = None,
    ) -> None:
        start = time.perf_counter()
        request_id = observer.request_id(scope)
        limit = self.limit.max_bytes
        status: int | None = None  # until the response starts
        first_byte: float | None = None
        finished = False
        disconnected = False
        received = 0

        async def observed_send(message: Message) -> None:
            nonlocal status, first_byte, finished, disconnected
            kind = message["type"]
            if kind == "http.response.body":
                if first_byte is None:
                    first_byte = time.perf_counter()
                if not message.get("more_body", False):
                    finished = True
            elif kind == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id)]
            try:
                await send(message)
            except OSError:
                disconnected = True
                raise

        async def observed_receive() -> Message:
            nonlocal disconnected, received
            message = await receive()
            kind = message["type"]
            if kind == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    from toolwire.server.gate.limits import too_large

                    raise too_large(limit)
            elif kind == "http.disconnect" and not finished:
                disconnected = True
            return message

        trace = observer.attach(scope) if observer.tracing else None
        try:
            await self._http(scope, observed_receive, observed_send)
        except Exception as exc:
            if errors is not None and status is None:
                await errors(scope, receive, send, exc)  # unobserved, as it was (outside)
            raise
        finally:
            if trace is not None:
                observer.detach(trace)
            recorded = 500 if status is None else status
            observer.record(scope, recorded, start, first_byte, finished, disconnected)
