"""`/v1/responses` behaviour: a validated request becomes one `LoopRequest`, runs through the
driver with the Responses sink, and is stored. Streaming, non-streaming and background share it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire.config import McpServerConfig
from toolwire.errors import InvalidRequestError, NotFoundError, ToolwireError
from toolwire.loop.driver import LoopDriver
from toolwire.loop.items import call_from_item, items_to_transcript, normalize_input
from toolwire.loop.state import LoopRequest, LoopSettings, LoopState
from toolwire.server.mcp_tools import McpServerUse, configured_use, redacted, request_use
from toolwire.server.requests import CreateResponse, parse_create
from toolwire.server.responses_sink import ResponseBuilder
from toolwire.store.database import Store
from toolwire.tools.base import Tool
from toolwire.tools.envelope import render_envelope
from toolwire.tools.mcp.connection import McpConnectionError
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.mcp.toolset import (
    McpTool,
    definition_from_listing,
    list_server_tools,
    tool_listing,
)
from toolwire.transcript import ToolCall, ToolMessage, ToolSpec
from toolwire.upstream.base import Upstream
from toolwire.upstream.events import Usage
from toolwire.wire import responses as wire
from toolwire.wire.sse import encode_event

_END = object()


@dataclass(slots=True)
class Prepared:
    request: CreateResponse
    response_id: str
    created_at: int
    model: str
    input_items: list[dict[str, Any]]
    history_items: list[dict[str, Any]]
    loop_request: LoopRequest
    settings: dict[str, Any]
    client_tools: set[str] = field(default_factory=set)
    mcp: list[McpServerUse] = field(default_factory=list)
    decisions: dict[str, bool] = field(default_factory=dict)


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
    ) -> None:
        self.driver = LoopDriver(upstream)
        self.mcp_configs = {config.label: config for config in mcp_servers or []}
        self.mcp_pool = mcp_pool or McpPool()
        self.mcp_call_timeout = mcp_call_timeout
        self.store = store
        self.default_model = default_model
        self.server_tools = server_tools or []
        self.loop_settings = loop_settings or LoopSettings()
        self.background: dict[str, asyncio.Task[None]] = {}

    # -- preparing ------------------------------------------------------------------------

    async def prepare(self, body: Any) -> Prepared:
        request = parse_create(body)
        model = request.model or self.default_model
        if not model:
            raise InvalidRequestError("Missing required parameter: 'model'.", param="model")
        history: list[dict[str, Any]] = []
        conversation_id = request.conversation_id
        if request.previous_response_id:
            record = await self.store.get_response_record(request.previous_response_id)
            if record is None:
                raise NotFoundError(
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                )
            history = list(record["history"])
        elif conversation_id is not None:
            if await self.store.get_conversation(conversation_id) is None:
                raise NotFoundError(
                    f"Conversation with id '{conversation_id}' not found.", param="conversation"
                )
            history = await self.store.list_items(conversation_id)
        input_items = normalize_input(request.input)
        client_specs, mcp_uses = self._request_tools(request.tools)
        tool_choice = self._tool_choice(request, client_specs)
        decisions, resume = _approval_decisions(history, input_items)
        settings = replace(self.loop_settings, max_tool_calls=request.max_tool_calls)
        loop_request = LoopRequest(
            model=model,
            input=items_to_transcript(history + input_items, frozenset(decisions)),
            resume_calls=resume,
            approvals=dict(decisions),
            instructions=request.instructions,
            tools=self.server_tools,
            client_tools=client_specs,
            tool_choice=tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            temperature=request.temperature,
            top_p=request.top_p,
            max_output_tokens=request.max_output_tokens,
            response_format=_response_format(request),
            settings=settings,
        )
        echo = request.model_dump(
            exclude={"input", "stream", "stream_options", "include"}, by_alias=True
        )
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
        return Prepared(
            request=request,
            response_id=wire.new_id("resp"),
            created_at=wire.now(),
            model=model,
            input_items=input_items,
            history_items=history,
            loop_request=loop_request,
            settings=echo,
            client_tools={spec.name for spec in client_specs},
            mcp=mcp_uses,
            decisions=decisions,
        )

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

    # -- MCP and approvals ----------------------------------------------------------------

    async def _claim_approvals(self, prepared: Prepared) -> None:
        """Each approval runs at most once, across every branch of history: the decision is
        recorded atomically first, and a decision that was already recorded runs nothing."""
        request = prepared.loop_request
        for call in list(request.resume_calls):
            approve = prepared.decisions[call.id]
            if await self.store.claim_approval(call.id, prepared.response_id, approve, wire.now()):
                continue
            request.resume_calls.remove(call)
            request.approvals.pop(call.id, None)
            text = render_envelope(
                call.name,
                ok=False,
                error="this approval was already used; the call did not run again",
            )
            request.input.append(ToolMessage(call.id, call.name, text))

    async def _attach_mcp(
        self, prepared: Prepared, builder: ResponseBuilder
    ) -> ToolwireError | None:
        """List each MCP server's tools (unless this history already did) and offer them."""
        builder.approval_ids = set(prepared.decisions)
        known = {
            item.get("server_label"): item
            for item in prepared.history_items
            if item.get("type") == "mcp_list_tools" and not item.get("error")
        }
        tools: list[Tool] = []
        for use in prepared.mcp:
            label = use.spec.label
            listed = known.get(label)
            if listed is not None:
                definitions = [definition_from_listing(t) for t in listed.get("tools", [])]
            else:
                item: dict[str, Any] = {
                    "id": wire.new_id("mcpl"),
                    "type": "mcp_list_tools",
                    "server_label": label,
                    "tools": [],
                    "error": None,
                }
                index = builder.add_item(item)
                builder.event(
                    "response.mcp_list_tools.in_progress", item_id=item["id"], output_index=index
                )
                try:
                    definitions = await list_server_tools(self.mcp_pool, use.spec)
                except (McpConnectionError, Exception) as exc:
                    message = f"could not list the tools of MCP server {label!r}: {exc}"
                    item["error"] = message
                    builder.event(
                        "response.mcp_list_tools.failed", item_id=item["id"], output_index=index
                    )
                    builder.finish_item(index)
                    return McpListError(message, code="mcp_list_tools_failed")
                if use.allowed is not None:
                    definitions = [d for d in definitions if d.name in use.allowed]
                item["tools"] = [tool_listing(d) for d in definitions]
                builder.event(
                    "response.mcp_list_tools.completed", item_id=item["id"], output_index=index
                )
                builder.finish_item(index)
            if use.allowed is not None:
                definitions = [d for d in definitions if d.name in use.allowed]
            for definition in definitions:
                tools.append(
                    McpTool(use.spec, self.mcp_pool, definition, use.rule, self.mcp_call_timeout)
                )
                builder.server_labels[definition.name] = label
        if tools:
            prepared.loop_request.tools = [*self.server_tools, *tools]
        return None

    # -- running --------------------------------------------------------------------------

    def response_body(
        self,
        prepared: Prepared,
        status: str,
        builder: ResponseBuilder | None,
        state: LoopState | None,
    ) -> dict[str, Any]:
        output = builder.output if builder is not None else []
        usage = state.usage if state is not None else Usage()
        error = None
        incomplete = None
        if state is not None and status == "failed":
            err = state.error
            error = wire.error_object(
                err.code or "server_error" if err else "server_error", state.reason or "failed"
            )
        if state is not None and status == "incomplete" and state.reason:
            incomplete = state.reason.split(":", 1)[0]
        body = wire.response_object(
            response_id=prepared.response_id,
            created_at=prepared.created_at,
            status=status,
            model=prepared.model,
            output=output,
            settings=prepared.settings,
            usage=wire.usage_object(
                usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_tokens
            )
            if state is not None
            else None,
            error=error,
            incomplete_reason=incomplete,
            completed_at=wire.now()
            if status in ("completed", "incomplete", "failed", "cancelled")
            else None,
        )
        if incomplete and state is not None and state.reason:
            body["incomplete_details"]["message"] = state.reason
        return body

    async def persist(self, prepared: Prepared, body: dict[str, Any]) -> None:
        output = body["output"]
        conversation_id = prepared.request.conversation_id
        if prepared.request.store:
            await self.store.save_response(
                body,
                input_items=prepared.input_items,
                history=prepared.history_items + prepared.input_items + output,
                conversation_id=conversation_id,
            )
        if conversation_id is not None and body["status"] not in ("queued", "in_progress"):
            await self.store.add_items(conversation_id, prepared.input_items + output, wire.now())

    async def run(
        self, prepared: Prepared, builder: ResponseBuilder
    ) -> tuple[dict[str, Any], LoopState | None]:
        """Run the loop and persist the outcome, also when cancelled (then stored incomplete)."""
        try:
            await self._claim_approvals(prepared)
            failure = await self._attach_mcp(prepared, builder)
            if failure is not None:
                state = LoopState(transcript=[], output_start=0)
                state.status, state.reason, state.error = "failed", failure.message, failure
            else:
                state = await self.driver.run(prepared.loop_request, builder)
        except asyncio.CancelledError:
            builder.close_open_items()
            body = self.response_body(prepared, "incomplete", builder, None)
            body["incomplete_details"] = {
                "reason": "cancelled",
                "message": "the client disconnected or the response was cancelled",
            }
            await asyncio.shield(self.persist(prepared, body))
            raise
        builder.close_open_items()
        body = self.response_body(prepared, state.status, builder, state)
        await self.persist(prepared, body)
        return body, state

    async def create(self, prepared: Prepared) -> dict[str, Any]:
        """Non-streaming: the finished response, or the upstream's error if it failed."""
        builder = ResponseBuilder(None, prepared.client_tools)
        body, state = await self.run(prepared, builder)
        if state is not None and state.status == "failed" and state.error is not None:
            raise state.error  # stored as failed; the caller gets 502 / 504 in the error shape
        return body

    async def stream(self, prepared: Prepared) -> AsyncIterator[bytes]:
        """Streaming: `response.created` goes out before the upstream is even called."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        builder = ResponseBuilder(queue.put_nowait, prepared.client_tools)
        initial = self.response_body(prepared, "in_progress", None, None)
        builder.event("response.created", response=initial)
        builder.event("response.in_progress", response=initial)

        async def produce() -> None:
            try:
                if prepared.request.store:  # retrievable (as in_progress) while it streams
                    await self.persist(prepared, initial)
                body, _ = await self.run(prepared, builder)
            except ToolwireError as exc:  # pragma: no cover - run() turns these into state
                builder.event("error", code=exc.code, message=exc.message, param=exc.param)
            else:
                if body["status"] == "failed":
                    error = body["error"] or {}
                    builder.event(
                        "error", code=error.get("code"), message=error.get("message"), param=None
                    )
                kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
                    body["status"], "response.failed"
                )
                builder.event(kind, response=body)
            finally:
                queue.put_nowait(_END)

        task = asyncio.create_task(produce())
        try:
            while True:
                event = await queue.get()
                if event is _END:
                    break
                yield encode_event(orjson.dumps(event), event["type"])
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- background -----------------------------------------------------------------------

    async def start_background(self, prepared: Prepared) -> dict[str, Any]:
        queued = self.response_body(prepared, "queued", None, None)
        await self.persist(prepared, queued)

        async def work() -> None:
            in_progress = self.response_body(prepared, "in_progress", None, None)
            await self.persist(prepared, in_progress)
            builder = ResponseBuilder(None, prepared.client_tools)
            try:
                await self.run(prepared, builder)
            except asyncio.CancelledError:
                body = self.response_body(prepared, "cancelled", builder, None)
                await asyncio.shield(self.persist(prepared, body))
            finally:
                self.background.pop(prepared.response_id, None)

        self.background[prepared.response_id] = asyncio.create_task(work())
        return queued

    async def cancel(self, response_id: str) -> dict[str, Any]:
        record = await self.store.get_response(response_id)
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
        return await self.store.get_response(response_id) or record


class McpListError(ToolwireError):
    """An MCP server's tools could not be listed (HTTP 424, as OpenAI answers)."""

    status = 424
    error_type = "external_connector_error"


def _approval_decisions(
    history: list[dict[str, Any]], input_items: list[dict[str, Any]]
) -> tuple[dict[str, bool], list[ToolCall]]:
    """Approval responses in the input -> decisions on pending requests, and the calls to run.

    A response to a request already answered in this history, or a second response to the same
    request, runs nothing. One that matches no request here is a stale id: a 400.
    """
    requests = {i["id"]: i for i in history if i.get("type") == "mcp_approval_request"}
    answered = {
        i.get("approval_request_id")
        for i in history
        if i.get("type") in ("mcp_call", "mcp_approval_response")
    }
    decisions: dict[str, bool] = {}
    calls: list[ToolCall] = []
    for position, item in enumerate(input_items):
        if item.get("type") != "mcp_approval_response":
            continue
        request_id = item["approval_request_id"]
        request = requests.get(request_id)
        if request is None:
            raise InvalidRequestError(
                f"approval_request_id {request_id!r} matches no approval request in this "
                "conversation (a stale or foreign id)",
                param=f"input[{position}].approval_request_id",
            )
        if request_id in answered or request_id in decisions:
            continue
        decisions[request_id] = item["approve"]
        calls.append(call_from_item(request_id, request["name"], request.get("arguments", "")))
    return decisions, calls


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
