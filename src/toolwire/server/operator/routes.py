"""The operator's wing: `/metrics` and `/ui` (declared when the app is built, with
`create_app(observability=)`). It reads the store and the run timelines; it knows nothing of the
doors. The request observer it hands the gate times and logs every request, refused ones
included; the driver's observers (metrics, traces) are composed into the `Runtime`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from toolwire.observe.metrics import render_metrics
from toolwire.observe.requests import RequestObserver
from toolwire.observe.setup import Observability
from toolwire.runtime import Runtime
from toolwire.server.gate.auth import is_operator
from toolwire.server.http.openapi import API
from toolwire.server.operator.operations import register
from toolwire.server.operator.ui.access import operator_only
from toolwire.server.operator.ui.routes import ui_routes
from toolwire.upstream.fleet.router import fleet_of


class OperatorWing:
    def __init__(self, runtime: Runtime, observability: Observability) -> None:
        self.runtime = runtime
        self.observability = observability

    def routes(self) -> list[BaseRoute]:
        """`/metrics` (operator keys only when keys are in use) and `/ui`."""
        register(API)

        async def metrics(request: Request) -> Response:
            if not is_operator(request):  # it names every tenant's models and tools
                return operator_only()
            body, content_type = render_metrics()
            return Response(body, media_type=content_type)

        runtime = self.runtime
        router = fleet_of(runtime.upstream)  # several model servers: their state on /ui
        ui = ui_routes(
            runtime.store, runtime.upstream.name, router.status if router is not None else None
        )
        return [Route("/metrics", metrics, methods=["GET"]), *ui]

    def request_observer(self) -> RequestObserver:
        """What the gate's one middleware (`server/gate/middleware.py`) observes of each
        request, outermost."""
        return RequestObserver(**self.observability.middleware_options())
