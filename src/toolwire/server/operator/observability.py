"""`observe/` in the served app, declared when the app is built (`create_app(observability=)`):
`/metrics`, `/ui` and the request middleware here; the driver's observers (metrics, traces)
are handed to `ResponsesService(observe=)` as it is built. Nothing is patched onto an app or
a driver afterwards."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from toolwire.observe.metrics import render_metrics
from toolwire.observe.requests import ObserveMiddleware, RequestObserver
from toolwire.observe.setup import Observability
from toolwire.server.gate.auth import is_operator
from toolwire.server.operator.ui.access import operator_only
from toolwire.server.operator.ui.routes import ui_routes
from toolwire.store.database import Store
from toolwire.store.timelines import TimelineStore
from toolwire.upstream.fleet.router import ReplicaStatus


def observability_routes(
    timelines: TimelineStore,
    store: Store,
    upstream_name: str,
    fleet: Callable[[], Sequence[ReplicaStatus]] | None = None,
) -> list[BaseRoute]:
    """`/metrics` (operator keys only when keys are in use) and `/ui`; `fleet`: each model
    server's state, when the gateway routes among several."""

    async def metrics(request: Request) -> Response:
        if not is_operator(request):  # it names every tenant's models and tools
            return operator_only()
        body, content_type = render_metrics()
        return Response(body, media_type=content_type)

    ui = ui_routes(timelines, store, upstream_name, fleet)
    return [Route("/metrics", metrics, methods=["GET"]), *ui]


def observability_middleware(observability: Observability) -> Middleware:
    """The request observer as a middleware of its own, for an app without the gate (the
    served app folds it into the gate: `request_observer`)."""
    return Middleware(ObserveMiddleware, **observability.middleware_options())


def request_observer(observability: Observability) -> RequestObserver:
    """What the one middleware (`server/gate/middleware.py`) observes of each request, outermost: it
    times and logs every request, refused ones included."""
    return RequestObserver(**observability.middleware_options())
