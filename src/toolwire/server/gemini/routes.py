"""The door's routes: `models/{model}:generateContent`, `:streamGenerateContent` (`alt=sse`, or
the JSON array without it) and `:countTokens` under `/v1beta` and `/v1`, and the model listing
(`GET /v1beta/models`, `/v1beta/models/{model}`; `GET /v1/models` is shared with the other
doors, which hand a Gemini client's request to `models`).

Every error leaves in Google's shape (`errors.py`). The prompt is counted before the run (with
the counter compaction uses: the upstream's tokenizer where it has one), so `usageMetadata`
carries a real prompt count (what Gemini CLI compares with its compression threshold) and a
prompt that cannot fit the upstream's window is refused with Google's own words.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import InvalidRequestError, NotFoundError, ToolwireError
from toolwire.loop.compaction import count_tokens
from toolwire.loop.events import LoopEvent, LoopFinished
from toolwire.loop.pump import pump_batches
from toolwire.loop.state import LoopRequest
from toolwire.pdf_readers import read_ahead
from toolwire.runtime import Runtime
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.quotas import admit
from toolwire.server.gemini.contents import ThoughtSeal
from toolwire.server.gemini.errors import (
    error_frame,
    gemini_shape,
    unexpected_response,
)
from toolwire.server.gemini.schemas import register as register_operations
from toolwire.server.gemini.sink import RELAYED, PartWriter, finish_reason, usage_of
from toolwire.server.gemini.translate import (
    FAMILIES,
    Context,
    GeminiCall,
    GeminiSettings,
    count_request,
    translate,
)
from toolwire.server.http.compat import known_value
from toolwire.server.http.errors import Scope, in_shape_of, register_error_shape
from toolwire.server.http.helpers import ORJSONResponse, started, until_disconnected
from toolwire.server.http.root import ModelListShape
from toolwire.server.http.streaming import EventStreamResponse
from toolwire.upstream.base import ensure_served, routes_models
from toolwire.upstream.fleet.affinity import session_of
from toolwire.upstream.window import UpstreamWindows, capped, listed_window
from toolwire.wire import gemini

PREFIXES = ("/v1beta", "/v1")
METHODS = ["generateContent", "countTokens"]
ALT = ("json", "sse")
ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")


class ModelName(Convertor[str]):
    """A model's name in `GET .../models/{model}`: anything but a `/`, yet not ending in a
    method (`:generateContent`, `:embedContent`): `GET` on a method's path is then that route's
    405, and a method the door does not serve a 404, never a lookup of a model named so.
    (Names with a colon stay names: Ollama's `llama3:8b`.)"""

    regex = r"(?![^/]*:[a-z]+[A-Z][A-Za-z]*$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("gemini_model", ModelName())


def _google_client(scope: Scope) -> bool:
    """A request sent as Google's clients send one: its key as `x-goog-api-key` or `key=`."""
    return gemini.carries_google_key(scope["headers"], scope.get("query_string", b""))


google_errors = in_shape_of(gemini.PATH_PREFIXES[0])
"""The door's handlers: every error in Google's shape (registered in `routes`)."""


class GeminiDoor:
    """The Gemini door, on the composed `Runtime`."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        settings: GeminiSettings,
        read_json: Callable[[Request], Awaitable[Any]],
    ) -> None:
        self.driver = runtime.driver
        self.upstream = runtime.upstream
        self.store = runtime.store
        self.settings = settings
        self.loop_settings = runtime.loop_settings
        self.default_model = runtime.default_model
        self.server_tools = runtime.server_tools
        self.read_json = read_json
        self.windows = UpstreamWindows(runtime.upstream, settings.context_window)
        self._seal: ThoughtSeal | None = None

    def routes(self) -> list[Route]:
        register_operations()  # the door in /openapi.json (schemas.py)
        for prefix in gemini.PATH_PREFIXES:  # errors in Google's shape, also the gate's
            register_error_shape(prefix, gemini_shape)
        register_error_shape("/v1/models", gemini_shape, asks=_google_client)
        routes = []
        for prefix in PREFIXES:
            for action, handler in zip(
                ACTIONS, (self.generate, self.stream, self.count), strict=True
            ):
                path = f"{prefix}/models/{{model}}:{action}"
                routes.append(Route(path, google_errors(handler), methods=["POST"]))
        routes += [
            Route("/v1beta/models", google_errors(self.list_models), methods=["GET"]),
            Route(
                "/v1beta/models/{model:gemini_model}",
                google_errors(self.get_model),
                methods=["GET"],
            ),
            # the SDK's models.get under /v1 (its default version); OpenAI's retrieve is not
            # served, so only a Gemini client's request is answered there (`get_model`)
            Route(
                "/v1/models/{model:gemini_model}", google_errors(self.get_model), methods=["GET"]
            ),
        ]
        return routes

    async def seal(self) -> ThoughtSeal:
        if self._seal is None:  # shared by replicas on this database, kept across restarts
            self._seal = ThoughtSeal(await self.store.secret("gemini_thoughts"))
        return self._seal

    # -- generation ------------------------------------------------------------------------

    async def _prepare(self, request: Request, *, stream: bool) -> GeminiCall:
        body = await self.read_json(request)
        await read_ahead(body, raw=await request.body())  # its PDFs, read off the event loop
        call = translate(body, await self._context(request), stream=stream)
        ensure_served(self.upstream, call.request.model)  # a fleet's 404, in Google's shape
        # the key's limits (server/gate/quotas.py): 429 before any upstream work (the prompt
        # is counted by the upstream's tokenizer, the window asked of its /models next); the
        # model calls themselves reserve and settle through QuotaUpstream like every door's
        await admit(self.store, owner_of(request), body, call.request.sampling.max_output_tokens)
        call.prompt_tokens = await self._prompt_tokens(call.request)
        await self._fit(call)
        return call

    async def _context(self, request: Request) -> Context:
        return Context(
            model=request.path_params["model"],
            settings=self.settings,
            default_model=self.default_model,
            seal=await self.seal(),
            owner=owner_of(request),
            server_tools=self.server_tools,
            loop_settings=self.loop_settings,
            session=session_of(request.headers),
            routes=routes_models(self.upstream),
        )

    async def _prompt_tokens(self, request: LoopRequest) -> int:
        return await count_tokens(self.upstream, request.prompt_turn())

    async def _fit(self, call: GeminiCall) -> None:
        """`maxOutputTokens` within what the upstream's window leaves; a prompt that does not
        fit is refused as Gemini refuses one."""
        window = await self.windows.window(call.request.model)
        if window is None:
            return
        prompt = call.prompt_tokens
        if prompt >= window:
            raise InvalidRequestError(
                f"The input token count ({prompt}) exceeds the maximum number of tokens "
                f"allowed ({window}).",
                param="contents",
            )
        call.request.sampling = capped(call.request.sampling, window - prompt)

    async def generate(self, request: Request) -> Response:
        call = await self._prepare(request, stream=False)
        writer = PartWriter(await self.seal(), owner_of(request), call.show_thoughts)
        return ORJSONResponse(await until_disconnected(request, self._complete(call, writer)))

    async def stream(self, request: Request) -> Response:
        alt = known_value("alt", request.query_params.get("alt", "json"), ALT)
        call = await self._prepare(request, stream=True)
        writer = PartWriter(await self.seal(), owner_of(request), call.show_thoughts)
        sse = alt == "sse"
        return EventStreamResponse(
            await started(self._stream(call, writer, sse)),
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            media_type="text/event-stream" if sse else "application/json",
        )

    async def _complete(
        self, call: GeminiCall, writer: PartWriter
    ) -> gemini.GenerateContentResponse:
        finished: list[LoopFinished] = []

        def keep(event: LoopEvent) -> None:
            if isinstance(event, RELAYED):
                done = writer.parts([event], [])  # gathered by the writer: no live chunk
                if done is not None:
                    finished.append(done)

        await self.driver.run(call.request, keep)
        done = finished[-1]
        reason, message = finish_reason(done)
        return gemini.response(
            gemini.response_id(),
            call.model,
            writer.final_parts(done, whole=True),
            reason,
            usage_of(done.usage, call.prompt_tokens),
            message,
        )

    async def _stream(
        self, call: GeminiCall, writer: PartWriter, sse: bool
    ) -> AsyncIterator[bytes]:
        resp_id = gemini.response_id()
        first = True

        def frame(chunk: gemini.GenerateContentResponse) -> bytes:
            nonlocal first
            if sse:
                return gemini.sse_frame(chunk)
            out = gemini.array_element(chunk, first)
            first = False
            return out

        def failure(exc: ToolwireError) -> bytes:
            """The error object that ends an open stream (in the array, its last element)."""
            if sse:
                return error_frame(exc)
            return gemini.array_element(gemini_shape(exc)[1], first) + gemini.ARRAY_END

        async def run(emit: Callable[[LoopEvent], None]) -> None:
            def relay(event: LoopEvent) -> None:
                if isinstance(event, RELAYED):
                    emit(event)

            await self.driver.run(call.request, relay)

        # Nothing goes out before the run's first event, or keepalive_interval seconds without
        # one: a failure before that is a real HTTP error (raised from the first step); after
        # it, an error object ends the stream, never a silent end.
        opened = False
        try:
            async for batch in pump_batches(run, self.settings.keepalive_interval):
                if not opened:
                    for event in batch:
                        if isinstance(event, LoopFinished):
                            finish_reason(event)  # a run that failed at once: an HTTP error
                    opened = True
                if not batch:
                    yield gemini.KEEPALIVE
                    continue
                live: list[gemini.Part] = []
                done = writer.parts(batch, live)
                if done is None:
                    if live:
                        yield frame(gemini.response(resp_id, call.model, live))
                    continue
                try:
                    reason, message = finish_reason(done)
                except ToolwireError as exc:
                    if live:
                        yield frame(gemini.response(resp_id, call.model, live))
                    yield failure(exc)
                    return
                parts = live + writer.final_parts(done, whole=False)
                use = usage_of(done.usage, call.prompt_tokens)
                last = frame(gemini.response(resp_id, call.model, parts, reason, use, message))
                yield last if sse else last + gemini.ARRAY_END
        except ToolwireError as exc:
            if not opened:
                raise
            yield failure(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not opened:
                raise
            unexpected_response(exc)  # logs it
            yield failure(ToolwireError(f"internal error: {type(exc).__name__}"))

    # -- counting and models ---------------------------------------------------------------

    async def count(self, request: Request) -> Response:
        body = await self.read_json(request)
        await read_ahead(body, raw=await request.body())
        call = count_request(body, await self._context(request))
        tokens = await self._prompt_tokens(call.request)
        answer: gemini.CountTokensResponse = {
            "totalTokens": tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}],
        }
        return ORJSONResponse(answer)

    def model_list(self) -> ModelListShape:
        """`GET /v1/models` in Google's shape for its clients (a key as `x-goog-api-key` or
        `key=`: what the SDK sends, listing under `/v1`)."""
        return ModelListShape(lambda request: _google_client(request.scope), self.models)

    def _aliases(self) -> list[str]:
        return [name for name in self.settings.models if name not in (*FAMILIES, "default")]

    def models(self, data: list[dict[str, object]]) -> gemini.ModelList:
        """Every model a Gemini client may name: the mapped names first, then the upstream's
        own (`data`, its `/models` entries, which also say each one's window)."""
        names = self._aliases()
        names += [str(m["id"]) for m in data if m.get("id") and str(m["id"]) not in names]
        return {"models": [self._model(name, data) for name in names]}

    def _model(self, name: str, listed: list[dict[str, object]]) -> gemini.Model:
        upstream = self.settings.upstream_model(name, self.default_model)
        model: gemini.Model = {
            "name": f"models/{name}",
            "baseModelId": name,
            "version": "toolwire",
            "displayName": name,
            "description": f"{upstream}, through toolwire",
            "supportedGenerationMethods": list(METHODS),
        }
        window = self.settings.context_window or listed_window(listed, upstream)
        if window is not None:
            model["inputTokenLimit"] = window
            model["outputTokenLimit"] = window
        return model

    async def list_models(self, request: Request) -> Response:
        return ORJSONResponse(self.models(await self.windows.listing()))

    async def get_model(self, request: Request) -> Response:
        """A name is served when a request naming it would run: a mapped name, an upstream
        model, or any name when there is a default model to send it to."""
        name = request.path_params["model"]
        if request.url.path.startswith("/v1/") and not _google_client(request.scope):
            raise NotFoundError(
                f"{request.url.path} answers Gemini clients (a key as x-goog-api-key or key=)."
            )
        listing = await self.windows.listing()
        upstream = self.settings.upstream_model(name, self.default_model)
        if upstream == name and name not in {str(m.get("id")) for m in listing}:
            version = request.url.path.split("/")[1]
            raise NotFoundError(f"models/{name} is not found for API version {version}.")
        return ORJSONResponse(self._model(name, listing))
