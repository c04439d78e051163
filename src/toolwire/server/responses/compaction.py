"""`POST /v1/responses/compact`: a conversation (input items and/or `previous_response_id`)
compacted into OpenAI's `response.compaction` object: the user's recent messages as they were,
then one `compaction` item standing for everything. The summary is written by the upstream
model; how, and how the item is sealed and expanded again, is the loop's (`loop/compaction.py`).
Nothing is stored: the client passes `output` as the input of its next request.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import MISSING_MODEL, InvalidRequestError
from toolwire.loop.compaction import Compactor
from toolwire.loop.items import items_to_transcript
from toolwire.pdf_readers import read_ahead
from toolwire.runtime import Runtime
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.quotas import admit
from toolwire.server.http.compat import Ignored
from toolwire.server.http.helpers import ORJSONResponse, until_disconnected
from toolwire.server.http.openapi import API, ApiSpec, Operation
from toolwire.server.http.validation import validation_error
from toolwire.server.responses.prepare.item_ids import check_unique
from toolwire.server.responses.prepare.item_references import resolve_stored_references
from toolwire.server.responses.prepare.validation.compactions import expand_compactions
from toolwire.server.responses.prepare.validation.items import normalize_input
from toolwire.server.responses.schemas.objects import Item as ItemSchema
from toolwire.wire import responses as wire
from toolwire.wire.items import Item


class CompactRequest(BaseModel):
    """The body of `POST /v1/responses/compact` (OpenAI's `CompactResponseMethodPublicBody`).
    The prompt-cache, service-tier and `image` (the SDK sends it) fields, and any field OpenAI
    adds later, take any value and are ignored (docs/server.md, "Forward compatibility")."""

    model_config = ConfigDict(extra="ignore", title="CompactRequest")
    model: str | None = None
    input: str | list[Any] | None = None
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: Ignored[str] = None
    prompt_cache_retention: Ignored[str] = None
    prompt_cache_options: Ignored[dict[str, Any]] = None
    service_tier: Ignored[str] = None
    image: Ignored[dict[str, Any]] = None


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow", title="ResponseUsage")
    input_tokens: int
    output_tokens: int
    total_tokens: int


class CompactedResponse(BaseModel):
    """The compacted conversation: pass `output` as the next request's input."""

    model_config = ConfigDict(extra="allow", title="CompactedResponse")
    id: str
    object: Literal["response.compaction"]
    created_at: int
    output: list[ItemSchema]
    usage: Usage


OPERATION = Operation(
    "post",
    "/v1/responses/compact",
    "compactResponse",
    "Compact a conversation: earlier turns become one compaction item",
    "Responses",
    CompactedResponse,
    body=CompactRequest,
    errors=(404, 502, 504),
    description=(
        "The upstream model summarizes the conversation; the answer's `output` (the recent user "
        "messages, then a `compaction` item whose `encrypted_content` only this gateway can "
        "read) is the input to continue with."
    ),
)


def register(spec: ApiSpec = API) -> None:
    """Document the route (once per spec)."""
    if not any(op.operation_id == OPERATION.operation_id for op in spec.operations):
        spec.register(OPERATION)


class CompactionService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def compact(self, body: Any, owner: str | None) -> dict[str, Any]:
        request = _parse(body)
        runtime = self.runtime
        model = request.model or runtime.default_model
        if not model:
            raise InvalidRequestError(MISSING_MODEL, param="model")
        history: list[Item] = []
        if request.previous_response_id:
            record = await runtime.store.get_response_record(
                request.previous_response_id, owner=owner
            )
            if record is None:
                raise InvalidRequestError(  # 400, as OpenAI answers (not 404)
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            history = list(record["history"] or [])
        input_items = normalize_input(request.input if request.input is not None else [])
        check_unique(input_items, "input")
        input_items = await resolve_stored_references(runtime.store, input_items, history, owner)
        if not history and not input_items:
            raise InvalidRequestError(
                "Nothing to compact: give input items or a previous_response_id.", param="input"
            )
        items = expand_compactions(history, input_items, runtime.compaction, owner)
        await read_ahead(items)  # their PDFs, read off the event loop
        compactor = Compactor(runtime.upstream, model)
        context = await compactor.compact(items_to_transcript(items), request.instructions)
        output = [
            {"id": wire.new_id("msg"), **item, "status": "completed"}
            for item in context.items()[:-1]  # the last one is the summary: sealed below
        ]
        output.append(
            {
                "id": wire.new_id("cmp"),
                "type": "compaction",
                "encrypted_content": runtime.compaction.seal(context, owner),
            }
        )
        usage = compactor.usage
        return {
            "id": wire.new_id("resp"),
            "object": "response.compaction",
            "created_at": wire.now(),
            "output": output,
            "usage": wire.usage_object(
                usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_tokens
            ),
        }

    def routes(self, read_json: Any) -> list[Route]:
        register(API)

        async def compact(request: Request) -> Response:
            body = await read_json(request)
            await admit(self.runtime.store, owner_of(request), body, None)  # 429: limits
            work = self.compact(body, owner_of(request))
            return ORJSONResponse(await until_disconnected(request, work))

        return [Route("/v1/responses/compact", compact, methods=["POST"])]


def _parse(body: Any) -> CompactRequest:
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return CompactRequest.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
