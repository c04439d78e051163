"""The ASGI app: routes only translate HTTP to services and back; they parse no model output."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute

from toolwire.errors import NotFoundError, ToolwireError
from toolwire.observe.setup import Observability
from toolwire.server.chat.proxy import ChatProxy
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.limits import read_limited_json
from toolwire.server.gate.quotas import QuotaUpstream, admit
from toolwire.server.gate.security import Security, middleware
from toolwire.server.http.errors import toolwire_error_handler, unexpected_error_handler
from toolwire.server.http.fallback import http_error_handler
from toolwire.server.http.helpers import ORJSONResponse, paginate, started, until_disconnected
from toolwire.server.http.openapi import API, served_operations
from toolwire.server.messages.routes import MessagesDoor
from toolwire.server.messages.translate import MessagesSettings
from toolwire.server.operator.observability import observability_routes, request_observer
from toolwire.server.responses.compaction import CompactionService
from toolwire.server.responses.conversations import ConversationsService
from toolwire.server.responses.operations import register_builtin
from toolwire.server.responses.prepare.tools import NOT_OFFERED_HEADER
from toolwire.server.responses.service import ResponsesService
from toolwire.server.responses.socket import ResponsesSocket
from toolwire.store.database import Store
from toolwire.upstream.base import Upstream
from toolwire.upstream.fleet.affinity import session_of
from toolwire.upstream.fleet.router import fleet_of


def create_app(
    *,
    upstream: Upstream,
    store: Store,
    responses: ResponsesService,
    on_shutdown: list[Any] | None = None,
    security: Security | None = None,
    messages: MessagesSettings | None = None,
    observability: Observability | None = None,
) -> Starlette:
    """The app, behind the security middleware (`server/gate/security.py`): with the default
    `Security()`, keys are checked whenever the store holds one, Origin and Host are checked
    as for a loopback server, and the default limits apply. `observability`: `/metrics`,
    `/ui` and the request middleware (the run observers go to `ResponsesService(observe=)`)."""
    security = security or Security()
    limits = security.limits

    async def read_json(request: Request) -> Any:
        return await read_limited_json(request, limits)

    # every model call of every door reserves from its key's limits (server/gate/quotas.py)
    responses.driver.upstream = QuotaUpstream(responses.driver.upstream, store.quotas)
    conversations = ConversationsService(store, responses.compaction)
    proxy = ChatProxy(responses.driver, responses.loop_settings, responses.default_model)
    messages_door = MessagesDoor(  # the Anthropic door: server/messages/
        driver=responses.driver,
        upstream=upstream,
        store=store,
        settings=messages or MessagesSettings(),
        loop_settings=responses.loop_settings,
        default_model=responses.default_model,
        server_tools=responses.server_tools,
        read_json=read_json,
    )

    async def chat_completions(request: Request) -> Response:
        body = await read_json(request)
        call = proxy.prepare(body, session=session_of(request.headers))
        await admit(store, owner_of(request), body, call.request.sampling.max_output_tokens)
        if call.stream:
            # The status line waits for the upstream's first content: a failure before it is
            # a real HTTP error (raised here), one after it an in-band error frame.
            return StreamingResponse(
                await started(proxy.stream(call)),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        return ORJSONResponse(await until_disconnected(request, proxy.complete(call)))

    async def create_response(request: Request) -> Response:
        body = await read_json(request)
        prepared = await responses.prepare(
            body, owner=owner_of(request), session=session_of(request.headers)
        )
        await admit(store, prepared.owner, body, prepared.loop_request.sampling.max_output_tokens)
        headers = (
            {NOT_OFFERED_HEADER: ", ".join(prepared.not_offered)} if prepared.not_offered else {}
        )
        if prepared.request.background:
            return ORJSONResponse(await responses.start_background(prepared, body), headers=headers)
        if prepared.request.stream:
            return StreamingResponse(
                responses.stream(prepared),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no", **headers},
            )
        return ORJSONResponse(
            await until_disconnected(request, responses.create(prepared)), headers=headers
        )

    async def get_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        body = await store.get_response(response_id, owner=owner_of(request))
        if body is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        return ORJSONResponse(body)

    async def delete_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not await store.delete_response(response_id, owner=owner_of(request)):
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        return ORJSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})

    async def input_items(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        record = await store.get_response_record(response_id, owner=owner_of(request))
        if record is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        return ORJSONResponse(paginate(list(record["input_items"]), request))

    async def cancel_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        return ORJSONResponse(await responses.cancel(response_id, owner=owner_of(request)))

    async def models(request: Request) -> Response:
        data = await upstream.list_models()
        if "anthropic-version" in request.headers:  # an Anthropic client's model discovery
            return ORJSONResponse(messages_door.models(data))
        return ORJSONResponse({"object": "list", "data": data})

    async def root(request: Request) -> Response:
        return ORJSONResponse({"status": "ok"})  # reachability checks (Claude Code's HEADs)

    async def health(request: Request) -> Response:
        return ORJSONResponse({"status": "ok"})

    register_builtin(API)

    async def openapi(request: Request) -> Response:
        return ORJSONResponse(API.document(served_operations(request.app.routes)))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await responses.start()  # the lease, the sweep, the background queue
        yield
        await responses.stop()
        for hook in on_shutdown or []:
            await hook()

    routes = [
        Route("/v1/responses", create_response, methods=["POST"]),
        WebSocketRoute("/v1/responses", ResponsesSocket(responses, limits).endpoint),
        *CompactionService(responses).routes(read_json),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
        *conversations.routes(read_json, ORJSONResponse),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        *messages_door.routes(),
        Route("/v1/models", models, methods=["GET"]),
        Route("/", root, methods=["GET"]),
        Route("/api/hello", root, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    observer = None
    if observability is not None:
        router = fleet_of(upstream)  # several model servers: their state on /ui
        routes.extend(
            observability_routes(
                responses.timelines,
                store,
                responses.driver.upstream.name,
                router.status if router is not None else None,
            )
        )
        observer = request_observer(observability)  # outermost, in the one middleware
    layers = middleware(security, store, observer)
    return Starlette(
        routes=routes,
        exception_handlers={
            ToolwireError: toolwire_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        lifespan=lifespan,
        middleware=layers,
    )
