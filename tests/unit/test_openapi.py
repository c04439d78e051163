"""`/openapi.json` covers exactly the routes the app serves, from the validating models."""

from __future__ import annotations

from typing import Any

import httpx

from toolwire.observe.setup import Observability
from toolwire.server.app import create_app
from toolwire.server.http.openapi import API, served_operations
from toolwire.server.main import compose
from toolwire.server.responses.prepare.request import CreateResponse
from toolwire.store.database import Store
from toolwire.testing import ScriptedUpstream


async def test_every_route_is_documented_and_nothing_else() -> None:
    """As `toolwire serve` builds it (with `/metrics` and `/ui`), and as a bare `create_app`:
    each app's `/openapi.json` lists exactly the routes it serves."""
    upstream = ScriptedUpstream.in_process()
    adapter = upstream.adapter()
    store = await Store.open("sqlite:///:memory:")
    try:
        bare = create_app(await compose(upstream=adapter, store=store))
        observability = Observability.from_env(upstream_name="u", tools=[], log_format="off")
        runtime = await compose(upstream=adapter, store=store, observe=observability.observe)
        served = create_app(runtime, observability=observability)
        documents = {}
        for name, app in (("bare", bare), ("served", served)):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://localhost"
            ) as http:
                documents[name] = (await http.get("/openapi.json")).json()
        routes = {
            name: served_operations(app.routes)
            for name, app in (("bare", bare), ("served", served))
        }
    finally:
        await adapter.aclose()
        await store.close()
    for name, document in documents.items():
        documented = {(m, p) for p, ops in document["paths"].items() for m in ops}
        assert routes[name] == documented, name
    assert {"/metrics", "/ui", "/ui/api/responses/{response_id}"} <= set(
        documents["served"]["paths"]
    )
    assert "/metrics" not in documents["bare"]["paths"]
    everything = API.document()
    assert {(m, p) for p, ops in everything["paths"].items() for m in ops} == routes["served"]
    metrics = documents["served"]["paths"]["/metrics"]["get"]["responses"]
    assert "text/plain; version=0.0.4" in metrics["200"]["content"] and "401" in metrics


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
                    shape = "ErrorResponse"
                    if path.startswith("/v1/messages"):
                        shape = "AnthropicError"
                    elif path.startswith(("/v1beta/", "/v1/models/")):
                        shape = "GeminiError"
                    assert schema == {"$ref": f"#/components/schemas/{shape}"}, (path, method)
