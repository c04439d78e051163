"""The routes every app serves whatever its doors (`/v1/models`, `/health`, `/openapi.json`),
as `/openapi.json` describes them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from toolwire.server.http.openapi import API, ApiSpec, Operation

UPSTREAM = (502, 504)


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", title="Model")
    id: str


class ModelList(BaseModel):
    model_config = ConfigDict(extra="allow", title="ModelList")
    object: Literal["list"]
    data: list[Model]


class Health(BaseModel):
    model_config = ConfigDict(extra="allow", title="Health")
    status: Literal["ok"]


class OpenAPIDocument(BaseModel):
    """This server's OpenAPI 3.1 document."""

    model_config = ConfigDict(extra="allow", title="OpenAPIDocument")
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


OPERATIONS = (
    Operation(
        "get",
        "/v1/models",
        "listModels",
        "List the upstream's models",
        "Models",
        ModelList,
        errors=UPSTREAM,
    ),
    Operation("get", "/health", "health", "Liveness", "Server", Health, public=True),
    Operation(
        "get", "/openapi.json", "openapi", "This document", "Server", OpenAPIDocument, public=True
    ),
)


def register(spec: ApiSpec = API) -> None:
    spec.ensure(*OPERATIONS)
