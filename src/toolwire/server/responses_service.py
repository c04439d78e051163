"""`/v1/responses`: a validated request becomes one `LoopRequest` and runs through the driver;
the Responses sink translates its events, and a checkpoint stores the response at the run's
persistence events. Streaming, non-streaming and background share all of it. Nothing here
decides how a run goes: the driver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import orjson

from toolwire.config import McpServerConfig, WebSearchConfig
from toolwire.errors import InvalidRequestError, NotFoundError, RunStatus
from toolwire.loop.approvals import ApprovalSigner, approval_decisions
from toolwire.loop.driver import Checkpoint, LoopDriver
from toolwire.loop.events import LoopEvent, LoopFinished, RunStarted
from toolwire.loop.items import items_to_transcript, normalize_input, resolve_references
from toolwire.loop.pump import pump
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.observe.metrics import BACKGROUND_JOBS
from toolwire.observe.timeline import Timeline
from toolwire.server.mcp_tools import McpServerUse
from toolwire.server.request_tools import RequestTools, request_tools
from toolwire.server.request_tools import tool_choice as choose_tool
from toolwire.server.requests import CreateResponse, parse_create
from toolwire.server.responses_sink import ResponseBuilder, ResponseHeader
from toolwire.store.database import Store
from toolwire.store.timelines import TimelineStore
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.mcp.toolset import McpToolset
from toolwire.upstream.base import Sampling, Upstream
from toolwire.wire import responses as wire
from toolwire.wire.sse import encode_event


@dataclass(slots=True)
class Prepared:
    request: CreateResponse
    header: ResponseHeader
    input_items: list[dict[str, Any]]
    history_items: list[dict[str, Any]]
    loop_request: LoopRequest
    client_tools: set[str] = field(default_factory=set)
    owner: str | None = None
    """The API key that owns the response (None when the server runs without keys)."""
    not_offered: list[str] = field(default_factory=list)
    """Requested tool types the model was not offered (`x-toolwire-tools-not-offered`)."""

    @property
    def response_id(self) -> str:
        return self.header.response_id


class ResponsesService:
    def __init__(
        self,
        *,
        upstream: Upstream,
        store: Store,
        default_model: str | None = None,
        server_tools: list[Tool] | None = None,
        loop_settings: LoopSettings | None = None,
        mcp_servers: list[McpServerConfig] | None = None,
        mcp_pool: McpPool | None = None,
        mcp_call_timeout: float = 60.0,
        approval_secret: bytes | None = None,
        web_search: WebSearchConfig | None = None,
    ) -> None:
        self.driver = LoopDriver(upstream)
        # Without a secret from the store (shared by replicas, kept across restarts), requests
        # issued by this process can only be approved while it runs.
        self.signer = ApprovalSigner(approval_secret or secrets.token_bytes(32))
        self.mcp_configs = {config.label: config for config in mcp_servers or []}
        self.web_search = web_search
        self.mcp_pool = mcp_pool or McpPool()
        self.mcp_call_timeout = mcp_call_timeout
        self.store = store
        self.timelines = TimelineStore(store.engine)  # observe/: run timelines for /ui
        self.default_model = default_model
        self.server_tools = server_tools or []
        self.loop_settings = loop_settings or LoopSettings()
        self.background: dict[str, asyncio.Task[None]] = {}

    # -- preparing: HTTP body -> LoopRequest ----------------------------------------------

    async def prepare(self, body: Any, *, owner: str | None = None) -> Prepared:
        request = parse_create(body)
        model = request.model or self.default_model
        if not model:
            raise InvalidRequestError("Missing required parameter: 'model'.", param="model")
        history: list[dict[str, Any]] = []
        conversation_id = request.conversation_id
        if request.previous_response_id:
            record = await self.store.get_response_record(request.previous_response_id, owner=owner)
            if record is None:
                raise NotFoundError(
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            history = list(record["history"])
        elif conversation_id is not None:
            if await self.store.get_conversation(conversation_id, owner=owner) is None:
                raise NotFoundError(
                    f"Conversation with id '{conversation_id}' not found.", param="conversation"
                )
            history = await self.store.list_items(conversation_id, owner=owner)
        input_items = resolve_references(normalize_input(request.input), history)
        tools = self._request_tools(request.tools)
        tool_choice = self._tool_choice(request, tools)
        approvals = approval_decisions(history, input_items, self.signer, owner)
        header = ResponseHeader(
            wire.new_id("resp"),
            wire.now(),
            model,
            _echo(request, tools.echo),
            client_tools=tools.client,
            web_search=tools.web_search,
        )
        transcript = items_to_transcript(
            history + input_items, frozenset(approvals.decisions), tools.client
        )
        loop_request = LoopRequest(
            model=model,
            input=transcript,
            resume_calls=approvals.calls,
            approvals=dict(approvals.decisions),
            ledger=self.store,
            approval_ids=partial(self.signer.issue, owner),
            run_id=header.response_id,
            instructions=request.instructions,
            tools=self.server_tools,
            toolsets=self._toolsets(tools.mcp_uses, history),
            client_tools=tools.specs,
            caller_tools=tools.client,
            tool_choice=tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            sampling=Sampling(
                temperature=request.temperature,
                top_p=request.top_p,
                max_output_tokens=request.max_output_tokens,
                response_format=_response_format(request),
                extra_body=request.sampling_extras() or None,
            ),
            settings=replace(self.loop_settings, max_tool_calls=request.max_tool_calls),
        )
        return Prepared(
            request=request,
            header=header,
            input_items=input_items,
            history_items=history,
            loop_request=loop_request,
            client_tools={spec.name for spec in tools.specs},
            owner=owner,
            not_offered=tools.not_offered,
        )

    def _toolsets(
        self, uses: list[McpServerUse], history: list[dict[str, Any]]
    ) -> list[McpToolset]:
        """One toolset per MCP server; a server this history already listed is not listed
        again (its `mcp_list_tools` item is reused, as OpenAI does)."""
        known = {
            item.get("server_label"): item
            for item in history
            if item.get("type") == "mcp_list_tools" and not item.get("error")
        }
        toolsets = []
        for use in uses:
            listed = known.get(use.spec.label)
            toolsets.append(
                McpToolset(
                    use.spec,
                    self.mcp_pool,
                    use.rule,
                    use.allowed,
                    listing=list(listed.get("tools", [])) if listed is not None else None,
                    call_timeout=self.mcp_call_timeout,
                )
            )
        return toolsets

    def _request_tools(self, tools: list[dict[str, Any]]) -> RequestTools:
        taken = {tool.name for tool in self.server_tools}
        return request_tools(tools, self.mcp_configs, self.web_search, taken)

    def _tool_choice(self, request: CreateResponse, tools: RequestTools) -> str | dict[str, Any]:
        return choose_tool(request.tool_choice, tools, {t.name for t in self.server_tools})

    # -- persistence: driven by the run's events -----------------------------------------

    def checkpoint(
        self, prepared: Prepared, builder: ResponseBuilder, timeline: Timeline | None = None
    ) -> Checkpoint:
        """Stores the response when the run starts (retrievable while it runs) and when it
        finishes, whatever ended it; a conversation gets the finished turn's items."""

        async def record(event: LoopEvent) -> None:
            if isinstance(event, RunStarted):
                if prepared.request.store:
                    await self.persist(prepared, builder.body("in_progress"))
            elif isinstance(event, LoopFinished) and builder.final is not None:
                await self.persist(prepared, builder.final)
                if timeline is not None and prepared.request.store:  # observe/: for /ui
                    await self.timelines.save(
                        prepared.response_id, prepared.header.created_at, timeline.entries
                    )

        return record

    async def persist(self, prepared: Prepared, body: dict[str, Any]) -> None:
        output = body["output"]
        conversation_id = prepared.request.conversation_id
        if prepared.request.store:
            await self.store.save_response(
                body,
                input_items=prepared.input_items,
                history=prepared.history_items + prepared.input_items + output,
                conversation_id=conversation_id,
                owner=prepared.owner,
            )
        if conversation_id is not None and body["status"] not in ("queued", "in_progress"):
            await self.store.add_items(
                conversation_id, prepared.input_items + output, wire.now(), owner=prepared.owner
            )

    # -- the three ways to run ------------------------------------------------------------

    async def _run(self, prepared: Prepared, builder: ResponseBuilder) -> LoopFinished:
        finished: list[LoopFinished] = []
        timeline = Timeline(prepared.loop_request)  # observe/: an observer of the run's events

        def sink(event: LoopEvent) -> None:
            builder(event)
            timeline(event)
            if isinstance(event, LoopFinished):
                finished.append(event)

        await self.driver.run(
            prepared.loop_request, sink, checkpoint=self.checkpoint(prepared, builder, timeline)
        )
        return finished[-1]

    async def create(self, prepared: Prepared) -> dict[str, Any]:
        """Non-streaming: the finished response, or the error if the run failed (stored as
        failed either way)."""
        builder = ResponseBuilder(prepared.header, None)
        finished = await self._run(prepared, builder)
        if finished.status is RunStatus.FAILED and finished.error is not None:
            raise finished.error
        assert builder.final is not None
        return builder.final

    async def stream(self, prepared: Prepared) -> AsyncIterator[bytes]:
        """Streaming: `response.created` goes out before the upstream is even called."""

        async def run(emit: Any) -> None:
            await self._run(prepared, ResponseBuilder(prepared.header, emit))

        async for event in pump(run):
            yield encode_event(orjson.dumps(event), event["type"])

    # -- background -----------------------------------------------------------------------

    async def start_background(self, prepared: Prepared) -> dict[str, Any]:
        queued = ResponseBuilder(prepared.header, None).body("queued")
        await self.persist(prepared, queued)

        async def work() -> None:
            BACKGROUND_JOBS.labels("queued").dec()  # observe/
            BACKGROUND_JOBS.labels("running").inc()
            try:
                await self._run(prepared, ResponseBuilder(prepared.header, None))
            finally:
                BACKGROUND_JOBS.labels("running").dec()
                self.background.pop(prepared.response_id, None)

        BACKGROUND_JOBS.labels("queued").inc()
        self.background[prepared.response_id] = asyncio.create_task(work())
        return queued

    async def cancel(self, response_id: str, *, owner: str | None = None) -> dict[str, Any]:
        record = await self.store.get_response(response_id, owner=owner)
        if record is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        if not record.get("background"):
            raise InvalidRequestError(
                "Only background responses can be cancelled.", param="response_id"
            )
        task = self.background.get(response_id)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return await self.store.get_response(response_id, owner=owner) or record


def _echo(request: CreateResponse, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request's settings as the response object echoes them, secrets redacted. Fields
    that only steer this request (input, stream, include, client_metadata, pass-through
    sampling extras but the penalties) are not echoed, as OpenAI does not echo them."""
    echo = request.model_dump(
        exclude={
            "input",
            "stream",
            "stream_options",
            "include",
            "client_metadata",
            "context_management",
            "top_k",
            "min_p",
            "typical_p",
            "repetition_penalty",
            "seed",
            "stop",
            "logit_bias",
            "min_tokens",
        },
        by_alias=True,
    )
    conversation_id = request.conversation_id
    echo["temperature"] = 1.0 if request.temperature is None else request.temperature
    echo["top_p"] = 1.0 if request.top_p is None else request.top_p
    echo["presence_penalty"] = request.presence_penalty or 0.0
    echo["frequency_penalty"] = request.frequency_penalty or 0.0
    echo["conversation"] = {"id": conversation_id} if conversation_id else None
    echo["text"] = (
        request.text.model_dump(by_alias=True, exclude_none=True)
        if request.text
        else {"format": {"type": "text"}, "verbosity": "medium"}
    )
    echo["text"].setdefault("verbosity", "medium")
    echo["top_logprobs"] = request.top_logprobs or 0
    echo["tools"] = tools
    echo["truncation"] = request.truncation or "disabled"
    return echo


def _response_format(request: CreateResponse) -> dict[str, Any] | None:
    if request.text is None:
        return None
    fmt = request.text.format
    if fmt.type == "json_schema":
        schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.schema_ or {}}
        if fmt.strict is not None:
            schema["strict"] = fmt.strict
        return {"type": "json_schema", "json_schema": schema}
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return None
