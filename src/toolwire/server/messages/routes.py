"""The door's routes: `POST /v1/messages` (also `?beta=true`) and `/v1/messages/count_tokens`.

Every error leaves in Anthropic's shape (`errors.py`), also what the app would otherwise answer
in OpenAI's. The prompt is counted before the run (with the counter compaction uses: the
upstream's tokenizer where it has one), so `message_start` carries a real input count and a
prompt that cannot fit the upstream's window is refused as Anthropic refuses one, which is what
makes Claude Code compact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.errors import InvalidRequestError, ToolwireError
from toolwire.loop.compaction import count_tokens
from toolwire.loop.events import LoopEvent, LoopFinished
from toolwire.loop.pump import pump_batches
from toolwire.loop.state import LoopRequest
from toolwire.pdf_readers import read_ahead
from toolwire.runtime import Runtime
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.quotas import admit
from toolwire.server.http.errors import in_shape_of, register_error_shape
from toolwire.server.http.helpers import ORJSONResponse, started, until_disconnected
from toolwire.server.http.root import ModelListShape
from toolwire.server.http.streaming import EventStreamResponse
from toolwire.server.messages.errors import (
    anthropic_shape,
    error_frame,
    unexpected_response,
)
from toolwire.server.messages.history import ThinkingSeal
from toolwire.server.messages.schemas import register as register_operations
from toolwire.server.messages.sink import (
    RELAYED,
    BlockWriter,
    CallRetracted,
    stop_reason,
    usage_of,
)
from toolwire.server.messages.translate import MessagesCall, MessagesSettings, translate
from toolwire.upstream.base import ensure_served, routes_models
from toolwire.upstream.events import Routed
from toolwire.upstream.fleet.affinity import session_of
from toolwire.upstream.window import UpstreamWindows, capped
from toolwire.wire import anthropic

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ORDER = {"thinking": 0, "text": 1, "tool_use": 2}


anthropic_errors = in_shape_of("/v1/messages")
"""The door's handlers: every error in Anthropic's shape (registered in `routes`)."""


class MessagesDoor:
    """The Anthropic door, on the composed `Runtime`."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        settings: MessagesSettings,
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
        self._seal: ThinkingSeal | None = None
        self._windows = UpstreamWindows(runtime.upstream, settings.context_window)

    def routes(self) -> list[Route]:
        register_operations()  # the door in /openapi.json (schemas.py)
        register_error_shape("/v1/messages", anthropic_shape)  # errors in Anthropic's shape
        return [
            Route("/v1/messages", anthropic_errors(self.create), methods=["POST"]),
            Route("/v1/messages/count_tokens", anthropic_errors(self.count), methods=["POST"]),
        ]

    def model_list(self) -> ModelListShape:
        """`GET /v1/models` in Anthropic's shape for its clients (they send
        `anthropic-version`)."""
        return ModelListShape(lambda request: "anthropic-version" in request.headers, self.models)

    def models(self, data: list[dict[str, object]]) -> anthropic.ModelList:
        """`data`: the upstream's `/models` entries, as it sent them."""
        aliases = [
            name for name in self.settings.models if name.startswith(("claude", "anthropic"))
        ]
        return anthropic_models(data, aliases)

    async def seal(self) -> ThinkingSeal:
        if self._seal is None:  # shared by replicas on this database, kept across restarts
            self._seal = ThinkingSeal(await self.store.secret("anthropic_thinking"))
        return self._seal

    async def _translate(
        self, request: Request, *, counting: bool = False
    ) -> tuple[Any, MessagesCall]:
        """The body as sent, and the call it asks for."""
        body = await self.read_json(request)
        await read_ahead(body, raw=await request.body())  # its PDFs, read off the event loop
        call = translate(
            body,
            settings=self.settings,
            default_model=self.default_model,
            seal=await self.seal(),
            owner=owner_of(request),
            server_tools=self.server_tools,
            loop_settings=self.loop_settings,
            counting=counting,
            session=session_of(request.headers),
            routes=routes_models(self.upstream),
        )
        ensure_served(self.upstream, call.request.model)
        return body, call

    async def _prompt_tokens(self, request: LoopRequest) -> int:
        return await count_tokens(self.upstream, request.prompt_turn())

    async def count(self, request: Request) -> Response:
        _, call = await self._translate(request, counting=True)
        return ORJSONResponse({"input_tokens": await self._prompt_tokens(call.request)})

    async def _window(self, model: str) -> int | None:
        """The upstream's window for `model` (`upstream/window.py`)."""
        return await self._windows.window(model)

    async def _fit(self, call: MessagesCall, prompt: int) -> None:
        """`max_tokens` within what the upstream's window leaves; a prompt that does not fit
        is refused in the words Claude Code reacts to by compacting."""
        window = await self._window(call.request.model)
        if window is None:
            return
        if prompt >= window:
            raise InvalidRequestError(
                f"prompt is too long: {prompt} tokens > {window} maximum", param="messages"
            )
        call.request.sampling = capped(call.request.sampling, window - prompt)

    async def create(self, request: Request) -> Response:
        body, call = await self._translate(request)
        # the key's limits (server/gate/quotas.py): 429 before any upstream work (the prompt
        # is counted by the upstream's tokenizer, the window asked of its /models next); the
        # model calls themselves reserve and settle through QuotaUpstream like every door's
        await admit(self.store, owner_of(request), body, call.request.sampling.max_output_tokens)
        prompt = await self._prompt_tokens(call.request)
        await self._fit(call, prompt)
        writer = BlockWriter(
            await self.seal(),
            owner_of(request),
            call.show_thinking,
            call.omit_thinking,
            live=call.stream,
            stop_sequences=call.stop_sequences,
            web_tools=call.web_tools,
        )
        if call.stream:
            return EventStreamResponse(
                await started(self._stream(call, writer, prompt)),
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        body = await until_disconnected(request, self._complete(call, writer, prompt))
        return ORJSONResponse(body)

    async def _complete(
        self, call: MessagesCall, writer: BlockWriter, prompt: int
    ) -> anthropic.Message:
        frames: list[bytes] = []
        finished: list[LoopFinished] = []

        def keep(event: LoopEvent) -> None:
            if isinstance(event, Routed):
                writer.upstream = event.upstream
            elif isinstance(event, RELAYED):
                done = writer.write(event, frames)
                frames.clear()
                if done is not None:
                    finished.append(done)

        await self.driver.run(call.request, keep)
        reason = stop_reason(finished[-1], writer.stop_sequence)
        # A whole upstream answer may give its reasoning after its text: thinking goes first,
        # as Anthropic orders a turn's blocks (a stable sort keeps each kind's own order).
        content = sorted(writer.content, key=lambda block: _ORDER.get(block["type"], 1))
        return anthropic.message(
            anthropic.message_id(),
            call.model,
            content,
            reason,
            usage_of(finished[-1].usage, prompt),
            writer.stop_sequence if reason == "stop_sequence" else None,
        )

    async def _stream(
        self, call: MessagesCall, writer: BlockWriter, prompt: int
    ) -> AsyncIterator[bytes]:
        msg_id = anthropic.message_id()

        async def run(emit: Callable[[LoopEvent], None]) -> None:
            def relay(event: LoopEvent) -> None:
                if isinstance(event, RELAYED):
                    emit(event)
                elif isinstance(event, Routed):  # a fleet's choice, for thinking signatures
                    writer.upstream = event.upstream

            await self.driver.run(call.request, relay)

        # Nothing goes out before the run's first event, or ping_interval seconds without one
        # (a slow model keeps its connection alive): a failure before that is a real HTTP
        # error (raised from the first step); after it, Anthropic's `error` event.
        opened = False
        try:
            async for batch in pump_batches(run, self.settings.ping_interval):
                frames: list[bytes] = []
                if not opened:
                    for event in batch:
                        if isinstance(event, LoopFinished):
                            stop_reason(event)  # a run that failed at once: an HTTP error
                    opened = True
                    start = anthropic.message(
                        msg_id, call.model, [], None, anthropic.usage(prompt, 0)
                    )
                    frames += [anthropic.message_start(start), anthropic.PING]
                elif not batch:  # quiet for ping_interval seconds: keep the connection alive
                    frames.append(anthropic.PING)
                for event in batch:
                    try:
                        done = writer.write(event, frames)
                    except CallRetracted as exc:
                        frames.append(error_frame(exc))
                        yield b"".join(frames)
                        return
                    if done is not None:
                        try:
                            reason = stop_reason(done, writer.stop_sequence)
                        except ToolwireError as exc:
                            frames.append(error_frame(exc))
                            yield b"".join(frames)
                            return
                        use = usage_of(done.usage, prompt)
                        matched = writer.stop_sequence if reason == "stop_sequence" else None
                        frames.append(anthropic.message_delta(reason, use, matched))
                        frames.append(anthropic.MESSAGE_STOP)
                if frames:
                    yield b"".join(frames)
        except ToolwireError as exc:
            if not opened:
                raise
            yield error_frame(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not opened:
                raise
            unexpected_response(exc)  # logs it
            yield anthropic.error_event(500, f"internal error: {type(exc).__name__}")


def anthropic_models(
    data: list[dict[str, object]], aliases: Iterable[str] = ()
) -> anthropic.ModelList:
    """Models in the shape of Anthropic's `GET /v1/models` (a `ModelInfo` list): the mapped
    `claude-*` names first (Claude Code's gateway discovery lists only names starting with
    `claude` or `anthropic`), then the upstream's own."""
    models = [_model_info(alias, None) for alias in aliases]
    models += [_model_info(str(m["id"]), m.get("created")) for m in data if m.get("id")]
    return {
        "data": models,
        "has_more": False,
        "first_id": models[0]["id"] if models else None,
        "last_id": models[-1]["id"] if models else None,
    }


def _model_info(model_id: str, created: object) -> anthropic.ModelInfo:
    when = datetime.fromtimestamp(created, UTC) if isinstance(created, int) else EPOCH
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
