"""The chat door's route: `POST /v1/chat/completions` through the hardening proxy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from toolwire.pdf_readers import may_hold_pdf, read_ahead
from toolwire.runtime import Runtime
from toolwire.server.chat.operations import register
from toolwire.server.chat.proxy import ChatProxy
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.quotas import admit
from toolwire.server.http.helpers import (
    ORJSONResponse,
    read_body,
    started,
    until_disconnected,
)
from toolwire.server.http.openapi import API
from toolwire.server.http.streaming import EventStreamResponse
from toolwire.upstream.fleet.affinity import session_of

JSONReader = Callable[[Request], Awaitable[Any]]


class ChatWing:
    def __init__(self, runtime: Runtime, *, read_json: JSONReader) -> None:
        self.proxy = ChatProxy(runtime.driver, runtime.loop_settings, runtime.default_model)
        self.store = runtime.store
        self.read_json = read_json

    def routes(self) -> list[BaseRoute]:
        register(API)
        proxy, store, read_json = self.proxy, self.store, self.read_json

        async def chat_completions(request: Request) -> Response:
            body = await read_json(request)
            raw = await read_body(request)  # (read by `read_json`: kept)
            if may_hold_pdf(raw):
                await read_ahead(body, raw=raw)  # its PDFs, off the event loop
            call = proxy.prepare(body, session=session_of(request.headers))
            await admit(store, owner_of(request), body, call.request.sampling.max_output_tokens)
            if call.stream:
                # The status line waits for the upstream's first content: a failure before it
                # is a real HTTP error (raised here), one after it an in-band error frame.
                return EventStreamResponse(
                    await started(proxy.stream(call)), headers={"cache-control": "no-cache"}
                )
            return ORJSONResponse(await until_disconnected(request, proxy.complete(call)))

        return [Route("/v1/chat/completions", chat_completions, methods=["POST"])]
