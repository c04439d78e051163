"""Wiring `observe/` into the served app: `/metrics`, `/ui`, the request middleware, the
driver's observers and shutdown. One call from `server/main.py` (`install_observability`), so
`create_app` stays as it is."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.observe.metrics import render_metrics
from toolwire.observe.requests import ObserveMiddleware, RequestObserver
from toolwire.observe.setup import Observability
from toolwire.server.gate import observe_requests
from toolwire.server.responses_service import ResponsesService
from toolwire.server.ui.routes import ui_routes


def install_observability(
    app: Starlette, service: ResponsesService, observability: Observability
) -> None:
    async def metrics(request: Request) -> Response:
        body, content_type = render_metrics()
        return Response(body, media_type=content_type)

    service.driver.observe = observability.observe
    app.router.routes.extend(
        [Route("/metrics", metrics, methods=["GET"]), *ui_routes(service.timelines)]
    )
    options = observability.middleware_options()
    if not observe_requests(app.user_middleware, RequestObserver(**options)):
        app.add_middleware(ObserveMiddleware, **options)
