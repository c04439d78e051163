"""`GET /openapi.json`: an OpenAPI 3.1 document of every route, built from the models that
validate the requests (`CreateResponse`, `server/responses/schemas/`), so it cannot drift from them.

Each wing registers its routes' `Operation`s with an `ApiSpec` (`API`, the default one) as it is
built (`responses/operations.py`, `chat/operations.py`, `messages/schemas.py`,
`operator/operations.py`, and `http/root_operations.py` for the routes every app serves), and
`tests/unit/test_openapi.py` fails if a served route has no operation or the other way round. Each
operation names its request body model, its success answer (JSON, and the SSE event it streams if it
streams) and the error statuses it can answer; the statuses every route shares (401 without a valid
key, 403 for a refused Origin or Host, 413 and 415 for bodies, 500) are added here. Every error is
the OpenAI shape (`ErrorResponse`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import toolwire
from toolwire.server.http.helpers import INCLUDABLE

Method = Literal["get", "post", "delete", "put", "patch"]
REF = "#/components/schemas/{model}"

#: What each error status means, whichever route answers it.
ERROR_STATUSES: dict[int, str] = {
    400: "The request is invalid: `error.param` names the field.",
    401: "No API key, or a wrong one (only when the server has keys).",
    403: "The Origin or Host header is not allowed.",
    404: "No such object (or it belongs to another API key).",
    413: "The body is larger than the server's limit.",
    415: "The body is not `application/json`.",
    422: "The run ended without an answer this door can express.",
    424: "A tool server's tools could not be listed.",
    429: "The upstream model server is rate limiting.",
    500: "An internal error (a bug: please report it).",
    502: "The upstream model server failed.",
    503: "The upstream model server failed or is unavailable (the Gemini door's status for it).",
    504: "The upstream model server did not answer in time.",
    529: "The upstream model server is overloaded (Anthropic's status for it).",
}
_BODY_METHODS = ("post", "put", "patch", "delete")


@dataclass(frozen=True, slots=True)
class Query:
    """A query parameter: its JSON schema and description."""

    name: str
    schema: dict[str, object]
    description: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    method: Method
    path: str
    operation_id: str
    summary: str
    tag: str
    ok: type[BaseModel] | None
    """The 200 answer's JSON body (None: `ok_media` says what it is)."""
    body: type[BaseModel] | None = None
    body_required: bool = True
    stream_event: type[BaseModel] | None = None
    """If the route can stream (`"stream": true`): the `data` of each SSE frame."""
    errors: tuple[int, ...] = ()
    query: tuple[Query, ...] = ()
    public: bool = False
    """Served without an API key (like `/health`)."""
    description: str = ""
    ok_media: str | None = None
    """The 200 answer's media type when it is not JSON (`/metrics`' text, `/ui`'s HTML)."""
    error: type[BaseModel] | None = None
    """The error body when it is not OpenAI's `ErrorResponse` (the Anthropic door's)."""


LIST_QUERY = (
    Query("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
    Query("order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}),
    Query("after", {"type": "string"}, "Return items after this item id."),
    Query(
        "include",
        {"type": "array", "items": {"type": "string", "enum": sorted(INCLUDABLE)}},
        "OpenAI's include values; accepted, and items are returned whole anyway.",
    ),
)


@dataclass(slots=True)
class ApiSpec:
    title: str = "toolwire"
    operations: list[Operation] = field(default_factory=list)
    _cached: dict[frozenset[tuple[str, str]], dict[str, object]] | None = None

    def register(self, *operations: Operation) -> None:
        for operation in operations:
            key = (operation.method, operation.path)
            if any((o.method, o.path) == key for o in self.operations):
                raise ValueError(f"{operation.method.upper()} {operation.path} is registered twice")
            self.operations.append(operation)
        self._cached = None

    def ensure(self, *operations: Operation) -> None:
        """Register those of `operations` not registered yet (a wing registers its rows each
        time an app is built; one process may build several)."""
        present = {(o.method, o.path) for o in self.operations}
        self.register(*(o for o in operations if (o.method, o.path) not in present))

    def document(self, served: frozenset[tuple[str, str]] | None = None) -> dict[str, object]:
        """The document; with `served` ((method, path) pairs), only the operations an app
        actually serves (a library app has no `/metrics`), each set built once."""
        if self._cached is None:
            self._cached = {}
        key = served if served is not None else frozenset()
        if key not in self._cached:
            operations = [
                op for op in self.operations if served is None or (op.method, op.path) in served
            ]
            self._cached[key] = self._build(operations)
        return self._cached[key]

    def _build(self, operations: list[Operation]) -> dict[str, object]:
        from toolwire.server.http.error_schema import ErrorResponse

        models: set[type[BaseModel]] = {ErrorResponse}
        for op in operations:
            models.update(m for m in (op.ok, op.body, op.stream_event, op.error) if m is not None)
        ordered = sorted(models, key=lambda m: m.__name__)
        refs, definitions = models_json_schema(
            [(m, "validation") for m in ordered], ref_template=REF
        )

        def ref(model: type[BaseModel]) -> dict[str, object]:
            return refs[(model, "validation")]

        error_ref = ref(ErrorResponse)
        paths: dict[str, dict[str, object]] = {}
        for op in operations:
            errors = ref(op.error) if op.error is not None else error_ref
            paths.setdefault(op.path, {})[op.method] = _operation(op, ref, errors)
        return {
            "openapi": "3.1.0",
            "info": {
                "title": self.title,
                "version": toolwire.__version__,
                "description": (
                    "An OpenAI-compatible agent gateway. Errors are "
                    '`{"error": {"message", "type", "param", "code"}}`, except on the '
                    "Anthropic door (`/v1/messages`) and the Gemini door (`/v1beta/...`, "
                    "`/v1/models/...`), where they are Anthropic's and Google's shapes."
                ),
                "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
            },
            "servers": [{"url": "/"}],
            "paths": paths,
            "components": {
                "schemas": definitions.get("$defs", {}),
                "securitySchemes": {
                    "bearer": {"type": "http", "scheme": "bearer"},
                    "apiKey": {"type": "apiKey", "in": "header", "name": "api-key"},
                },
            },
            # Keys are needed only when the server has some: none is also a valid choice.
            "security": [{}, {"bearer": []}, {"apiKey": []}],
        }


def _operation(op: Operation, ref: Any, error_ref: dict[str, object]) -> dict[str, object]:
    ok_content: dict[str, object] = (
        {"application/json": {"schema": ref(op.ok)}}
        if op.ok is not None
        else {op.ok_media or "text/plain": {"schema": {"type": "string"}}}
    )
    if op.stream_event is not None:
        # Each SSE frame: its `event` name (if any) and its `data`, a JSON text of the event.
        ok_content["text/event-stream"] = {
            "schema": {
                "type": "object",
                "properties": {
                    "event": {"type": "string"},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": ref(op.stream_event),
                    },
                },
                "required": ["data"],
            }
        }
    statuses = set(op.errors) | {500}
    if not op.public:
        statuses |= {401, 403}
    else:
        statuses |= {403}
    if op.method in _BODY_METHODS:
        statuses |= {400, 413, 415}
    if op.query:
        statuses |= {400}
    responses: dict[str, object] = {
        "200": {
            "description": (op.ok.__doc__ if op.ok is not None else None) or op.summary,
            "content": ok_content,
        }
    }
    for status in sorted(statuses):
        responses[str(status)] = {
            "description": ERROR_STATUSES[status],
            "content": {"application/json": {"schema": error_ref}},
        }
    out: dict[str, object] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
        "responses": responses,
    }
    if op.description:
        out["description"] = op.description
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _path_names(op.path)
    ]
    parameters += [
        {"name": q.name, "in": "query", "required": False, "schema": q.schema}
        | ({"description": q.description} if q.description else {})
        for q in op.query
    ]
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        out["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": ref(op.body)}},
        }
    if op.public:
        out["security"] = []
    return out


def served_operations(routes: list[Any]) -> frozenset[tuple[str, str]]:
    """(method, path) of each plain route an app serves (`HEAD` is implied by `GET`); a typed
    path parameter (`{model:gemini_model}`) is documented by its name alone."""
    from starlette.routing import Route

    return frozenset(
        (method.lower(), re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path))
        for route in routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    )


def _path_names(path: str) -> list[str]:
    """The path's parameters, also one followed by more text in its segment (Gemini's
    `/models/{model}:generateContent`)."""
    return re.findall(r"\{([^{}/]+)\}", path)


API = ApiSpec()
"""The default spec: toolwire's own operations (`server/responses/operations.py`) and any a later
route
registers."""
