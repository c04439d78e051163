"""`/openapi.json` covers exactly the routes the app serves, from the validating models."""

from __future__ import annotations

from typing import Any

from starlette.routing import Route

from toolwire.server.app import create_app
from toolwire.server.openapi import API
from toolwire.server.requests import CreateResponse
from toolwire.server.responses_service import ResponsesService
from toolwire.store.database import Store
from toolwire.testing import ScriptedUpstream


async def test_every_route_is_documented_and_nothing_else() -> None:
    upstream = ScriptedUpstream.in_process()
    adapter = upstream.adapter()
    store = await Store.open("sqlite+aiosqlite:///:memory:")
    try:
        app = create_app(
            upstream=adapter, store=store, responses=ResponsesService(upstream=adapter, store=store)
        )
        served = {
            (method.lower(), route.path)
            for route in app.routes
            if isinstance(route, Route)
            for method in route.methods or ()
            if method != "HEAD"
        }
    finally:
        await adapter.aclose()
        await store.close()
    document = API.document()
    documented = {(m, p) for p, ops in document["paths"].items() for m in ops}
    assert served == documented


def test_request_bodies_come_from_the_validating_models() -> None:
    document = API.document()
    schemas: dict[str, Any] = document["components"]["schemas"]
    body = document["paths"]["/v1/responses"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/CreateResponse"}
    assert set(schemas["CreateResponse"]["properties"]) == {
        field.alias or name for name, field in CreateResponse.model_fields.items()
    }
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            for status, answer in op["responses"].items():
                if status != "200":
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (path, method)
