"""The routes every app serves whatever its doors: `/v1/models` (shared by the doors), `/health`,
the root and `/api/hello` (reachability checks), `/openapi.json`.

`GET /v1/models` answers in the shape of the API whose client asks: a door registers how to tell
its clients (`register_model_list`: the Anthropic door by the `anthropic-version` header) and
how it lists models; anyone else gets OpenAI's list of the upstream's models.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.server.http.helpers import ORJSONResponse
from toolwire.server.http.openapi import API, served_operations
from toolwire.server.http.root_operations import register
from toolwire.upstream.base import Upstream

Models = list[dict[str, object]]


@dataclass(frozen=True, slots=True)
class ModelListShape:
    """A door's `/v1/models`: `asks` tells its clients' requests; `render` lists the
    upstream's models (`data`, as the upstream sent them) the way its API does."""

    asks: Callable[[Request], bool]
    render: Callable[[Models], object]


def root_routes(upstream: Upstream, shapes: list[ModelListShape]) -> list[Route]:
    register(API)

    async def models(request: Request) -> Response:
        data = await upstream.list_models()
        for shape in shapes:
            if shape.asks(request):
                return ORJSONResponse(shape.render(data))
        return ORJSONResponse({"object": "list", "data": data})

    async def ok(request: Request) -> Response:
        return ORJSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        return ORJSONResponse(API.document(served_operations(request.app.routes)))

    handlers: list[tuple[str, Callable[[Request], Awaitable[Response]]]] = [
        ("/v1/models", models),
        ("/", ok),  # reachability checks (Claude Code's HEADs)
        ("/api/hello", ok),
        ("/health", ok),
        ("/openapi.json", openapi),
    ]
    return [Route(path, handler, methods=["GET"]) for path, handler in handlers]
