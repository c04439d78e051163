"""The Responses wing's routes: `/v1/responses` (JSON, SSE, background, WebSocket mode),
retrieve / delete / input items / cancel, `/v1/responses/compact` and the Conversations API, all
on one `ResponsesService` built on the composed `Runtime`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from toolwire.errors import NotFoundError
from toolwire.runtime import Runtime
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.limits import Limits
from toolwire.server.gate.quotas import admit, admit_storage
from toolwire.server.http.helpers import (
    ORJSONResponse,
    paginate,
    read_body,
    until_disconnected,
)
from toolwire.server.http.openapi import API
from toolwire.server.http.streaming import EventStreamResponse
from toolwire.server.responses.compaction import CompactionService
from toolwire.server.responses.conversations import ConversationsService
from toolwire.server.responses.durable import DurabilitySettings
from toolwire.server.responses.operations import register
from toolwire.server.responses.prepare.tools import NOT_OFFERED_HEADER
from toolwire.server.responses.service import ResponsesService
from toolwire.server.responses.socket import ResponsesSocket
from toolwire.upstream.fleet.affinity import session_of

JSONReader = Callable[[Request], Awaitable[Any]]


class ResponsesWing:
    def __init__(
        self,
        runtime: Runtime,
        *,
        limits: Limits,
        read_json: JSONReader,
        durability: DurabilitySettings | None = None,
    ) -> None:
        self.service = ResponsesService(runtime, durability)
        self.store = runtime.store
        self.limits = limits
        self.read_json = read_json
        self.conversations = ConversationsService(runtime.store, runtime.compaction)
        self.compaction = CompactionService(runtime)

    async def start(self) -> None:
        """The lease, the sweep, the background queue (`durable.py`)."""
        await self.service.start()

    async def stop(self) -> None:
        await self.service.stop()

    def routes(self) -> list[BaseRoute]:
        register(API)
        service, store, read_json = self.service, self.store, self.read_json
        routes_models = service.preparer.routes

        async def create(request: Request) -> Response:
            body = await read_json(request)
            prepared = await service.prepare(
                body,
                owner=owner_of(request),
                # a routing hint (upstream/fleet/), read only where there is a choice
                session=session_of(request.headers) if routes_models else None,
                raw=await read_body(request),
            )
            if prepared.owner is not None:  # without a key there is nothing to admit
                await admit(
                    store, prepared.owner, body, prepared.loop_request.sampling.max_output_tokens
                )
                if prepared.request.store:
                    await admit_storage(store, prepared.owner, body)
            # None without one: `ORJSONResponse` then skips Starlette's header building
            headers = (
                {NOT_OFFERED_HEADER: ", ".join(prepared.not_offered)}
                if prepared.not_offered
                else None
            )
            if prepared.request.background:
                return ORJSONResponse(
                    await service.start_background(prepared, body), headers=headers
                )
            if prepared.request.stream:
                return EventStreamResponse(
                    service.stream(prepared),
                    headers={
                        "cache-control": "no-cache",
                        "x-accel-buffering": "no",
                        **(headers or {}),
                    },
                )
            return ORJSONResponse(
                await until_disconnected(request, service.create(prepared)), headers=headers
            )

        async def retrieve(request: Request) -> Response:
            response_id = request.path_params["response_id"]
            body = await store.get_response(response_id, owner=owner_of(request))
            if body is None:
                raise _not_found(response_id)
            return ORJSONResponse(body)

        async def delete(request: Request) -> Response:
            response_id = request.path_params["response_id"]
            if not await store.delete_response(response_id, owner=owner_of(request)):
                raise _not_found(response_id)
            return ORJSONResponse(
                {"id": response_id, "object": "response.deleted", "deleted": True}
            )

        async def input_items(request: Request) -> Response:
            response_id = request.path_params["response_id"]
            record = await store.get_response_record(response_id, owner=owner_of(request))
            if record is None:
                raise _not_found(response_id)
            return ORJSONResponse(paginate(list(record["input_items"]), request))

        async def cancel(request: Request) -> Response:
            response_id = request.path_params["response_id"]
            return ORJSONResponse(await service.cancel(response_id, owner=owner_of(request)))

        one = "/v1/responses/{response_id}"
        return [
            Route("/v1/responses", create, methods=["POST"]),
            WebSocketRoute("/v1/responses", ResponsesSocket(service, self.limits).endpoint),
            *self.compaction.routes(read_json),
            Route(one, retrieve, methods=["GET"]),
            Route(one, delete, methods=["DELETE"]),
            Route(one + "/input_items", input_items, methods=["GET"]),
            Route(one + "/cancel", cancel, methods=["POST"]),
            *self.conversations.routes(read_json, ORJSONResponse),
        ]


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
