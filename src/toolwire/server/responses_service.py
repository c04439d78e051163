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

from toolwire.config import McpServerConfig
from toolwire.errors import InvalidRequestError, NotFoundError, RunStatus
from toolwire.loop.approvals import ApprovalSigner, approval_decisions
from toolwire.loop.driver import Checkpoint, LoopDriver
from toolwire.loop.events import LoopEvent, LoopFinished, RunStarted
from toolwire.loop.items import items_to_transcript, normalize_input
from toolwire.loop.pump import pump
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.server.item_ids import check_storable, check_unique, is_duplicate_key, taken_item
from toolwire.server.mcp_tools import McpServerUse, configured_use, redacted, request_use
from toolwire.server.requests import CreateResponse, parse_create
from toolwire.server.responses_sink import ResponseBuilder, ResponseHeader
from toolwire.store.database import Store
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.mcp.toolset import McpToolset
from toolwire.transcript import ToolSpec
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
    ) -> None:
        self.driver = LoopDriver(upstream)
        # Without a secret from the store (shared by replicas, kept across restarts), requests
        # issued by this process can only be approved while it runs.
        self.signer = ApprovalSigner(approval_secret or secrets.token_bytes(32))
        self.mcp_configs = {config.label: config for config in mcp_servers or []}
        self.mcp_pool = mcp_pool or McpPool()
        self.mcp_call_timeout = mcp_call_timeout
        self.store = store
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
        input_items = normalize_input(request.input)
        check_unique(input_items, "input")
        if conversation_id is not None:
            await check_storable(self.store, input_items, "input")
        client_specs, mcp_uses = self._request_tools(request.tools)
        tool_choice = self._tool_choice(request, client_specs)
        approvals = approval_decisions(history, input_items, self.signer, owner)
        header = ResponseHeader(wire.new_id("resp"), wire.now(), model, _echo(request))
        loop_request = LoopRequest(
            model=model,
            input=items_to_transcript(history + input_items, frozenset(approvals.decisions)),
            resume_calls=approvals.calls,
            approvals=dict(approvals.decisions),
            ledger=self.store,
            approval_ids=partial(self.signer.issue, owner),
            run_id=header.response_id,
            instructions=request.instructions,
            tools=self.server_tools,
            toolsets=self._toolsets(mcp_uses, history),
            client_tools=client_specs,
            tool_choice=tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            sampling=Sampling(
                temperature=request.temperature,
                top_p=request.top_p,
                max_output_tokens=request.max_output_tokens,
                response_format=_response_format(request),
            ),
            settings=replace(self.loop_settings, max_tool_calls=request.max_tool_calls),
        )
        return Prepared(
            request=request,
            header=header,
            input_items=input_items,
            history_items=history,
            loop_request=loop_request,
            client_tools={spec.name for spec in client_specs},
            owner=owner,
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

    def _request_tools(
        self, tools: list[dict[str, Any]]
    ) -> tuple[list[ToolSpec], list[McpServerUse]]:
        specs: list[ToolSpec] = []
        uses: list[McpServerUse] = []
        for index, entry in enumerate(tools):
            kind = entry.get("type")
            if kind == "mcp":
                use = request_use(entry, index, self.mcp_configs)
                if any(u.spec.label == use.spec.label for u in uses):
                    raise InvalidRequestError(
                        f"tools[{index}]: server_label {use.spec.label!r} is used twice",
                        param=f"tools[{index}].server_label",
                    )
                uses.append(use)
                continue
            if kind != "function":
                raise InvalidRequestError(
                    f"tools[{index}].type {kind!r} is not supported; supported: function, mcp",
                    param=f"tools[{index}].type",
                    code="unsupported_tool_type",
                )
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidRequestError(
                    f"tools[{index}].name must be a non-empty string", param=f"tools[{index}].name"
                )
            parameters = entry.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(parameters, dict):
                raise InvalidRequestError(
                    f"tools[{index}].parameters must be a JSON schema object",
                    param=f"tools[{index}].parameters",
                )
            specs.append(
                ToolSpec(name, entry.get("description") or "", parameters, entry.get("strict"))
            )
        labels = {use.spec.label for use in uses}
        for config in self.mcp_configs.values():
            if config.default and config.label not in labels:
                uses.append(configured_use(config))
        return specs, uses

    def _tool_choice(self, request: CreateResponse, specs: list[ToolSpec]) -> str | dict[str, Any]:
        choice = request.tool_choice
        if isinstance(choice, dict):
            if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
                raise InvalidRequestError(
                    "tool_choice must be auto, none, required or {type: function, name}",
                    param="tool_choice",
                )
            known = {s.name for s in specs} | {t.name for t in self.server_tools}
            if choice["name"] not in known:
                raise InvalidRequestError(
                    f"tool_choice names an unknown tool {choice['name']!r}", param="tool_choice"
                )
        return choice

    # -- persistence: driven by the run's events -----------------------------------------

    def checkpoint(self, prepared: Prepared, builder: ResponseBuilder) -> Checkpoint:
        """Stores the response when the run starts (retrievable while it runs) and when it
        finishes, whatever ended it; a conversation gets the finished turn's items."""

        async def record(event: LoopEvent) -> None:
            if isinstance(event, RunStarted):
                if prepared.request.store:
                    await self.persist(prepared, builder.body("in_progress"))
            elif isinstance(event, LoopFinished) and builder.final is not None:
                await self.persist(prepared, builder.final)

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
            try:
                await self.store.add_items(
                    conversation_id, prepared.input_items + output, wire.now(), owner=prepared.owner
                )
            except Exception as exc:
                if not is_duplicate_key(exc):
                    raise
                # A concurrent request stored one of these ids first (the check in `prepare`
                # lost the race): the response is not left saying it completed.
                error = taken_item("input")
                if prepared.request.store:
                    failed = {
                        **body,
                        "status": "failed",
                        "error": {"code": error.code, "message": error.message},
                    }
                    await self.store.save_response(
                        failed,
                        input_items=prepared.input_items,
                        history=prepared.history_items + prepared.input_items + output,
                        conversation_id=conversation_id,
                        owner=prepared.owner,
                    )
                raise error from None

    # -- the three ways to run ------------------------------------------------------------

    async def _run(self, prepared: Prepared, builder: ResponseBuilder) -> LoopFinished:
        finished: list[LoopFinished] = []

        def sink(event: LoopEvent) -> None:
            builder(event)
            if isinstance(event, LoopFinished):
                finished.append(event)

        await self.driver.run(
            prepared.loop_request, sink, checkpoint=self.checkpoint(prepared, builder)
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
            try:
                await self._run(prepared, ResponseBuilder(prepared.header, None))
            finally:
                self.background.pop(prepared.response_id, None)

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


def _echo(request: CreateResponse) -> dict[str, Any]:
    """The request's settings as the response object echoes them, secrets redacted."""
    echo = request.model_dump(
        exclude={"input", "stream", "stream_options", "include"}, by_alias=True
    )
    conversation_id = request.conversation_id
    echo["temperature"] = 1.0 if request.temperature is None else request.temperature
    echo["top_p"] = 1.0 if request.top_p is None else request.top_p
    echo["conversation"] = {"id": conversation_id} if conversation_id else None
    echo["text"] = (
        request.text.model_dump(by_alias=True, exclude_none=True)
        if request.text
        else {"format": {"type": "text"}, "verbosity": "medium"}
    )
    echo["text"].setdefault("verbosity", "medium")
    echo["top_logprobs"] = request.top_logprobs or 0
    echo["tools"] = [redacted(t) if t.get("type") == "mcp" else t for t in request.tools]
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
