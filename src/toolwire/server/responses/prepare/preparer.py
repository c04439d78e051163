"""Preparing a `/v1/responses` request: a body becomes a `Prepared` (one `LoopRequest`, plus
what the response object echoes and what its record keeps) in one pass: the body is validated
(`server/responses/prepare/request.py`), history is loaded (`previous_response_id`, `conversation`,
or a response the caller holds), items are checked (`server/responses/prepare/validation/`) and
lowered to a transcript (`loop/items.py`), tools and `tool_choice` are resolved
(`server/responses/prepare/tools.py`), approvals matched
(`server/responses/prepare/validation/approvals.py`). Every 400 a request can earn is raised here,
before anything runs or is stored.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

from toolwire.config import McpServerConfig, WebSearchConfig
from toolwire.errors import MISSING_MODEL, InvalidRequestError, NotFoundError
from toolwire.loop.approvals import ApprovalDecisions, ApprovalSigner
from toolwire.loop.compaction import CompactionCodec, ContextPolicy
from toolwire.loop.items import items_to_transcript
from toolwire.loop.state import LoopRequest, LoopSettings, RunServices
from toolwire.pdf_readers import may_hold_pdf, read_ahead
from toolwire.server.responses.prepare.approval_tools import restore as restore_tools
from toolwire.server.responses.prepare.item_ids import check_storable, check_unique
from toolwire.server.responses.prepare.item_references import (
    referenced_upstream,
    resolve_stored_references,
)
from toolwire.server.responses.prepare.mcp_tools import McpServerUse
from toolwire.server.responses.prepare.request import CreateResponse, parse_create
from toolwire.server.responses.prepare.tools import RecentTools, RequestTools
from toolwire.server.responses.prepare.tools import tool_choice as choose_tool
from toolwire.server.responses.prepare.validation.approvals import approval_decisions
from toolwire.server.responses.prepare.validation.compactions import expand_compactions
from toolwire.server.responses.prepare.validation.items import (
    check_outputs_answer_calls,
    normalize_input,
)
from toolwire.server.responses.response_object import ResponseHeader
from toolwire.store.database import Store
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.mcp.toolset import McpToolset
from toolwire.upstream.base import NO_HINTS, RoutingHints, Sampling
from toolwire.wire import responses as wire
from toolwire.wire.items import Item, McpListedTool, ResponseObject

_NOTHING: frozenset[str] = frozenset()
_DEFAULT_SAMPLING = Sampling()
_SERVICES_KEPT = 256
"""A bound on the run services kept by key (`Preparer._services`)."""


@dataclass(slots=True)
class Prepared:
    request: CreateResponse
    header: ResponseHeader
    input_items: list[Item]
    history_items: list[Item]
    loop_request: LoopRequest
    client_tools: set[str] = field(default_factory=set)
    owner: str | None = None
    """The API key that owns the response (None when the server runs without keys)."""
    not_offered: list[str] = field(default_factory=list)
    """Requested tool types the model was not offered (`x-toolwire-tools-not-offered`)."""
    history_inline: bool = False
    """The history came from the caller's memory (`LocalResponse`), not the store: a stored
    response keeps a full copy, as its previous response may be stored nowhere."""
    services: RunServices = field(default_factory=RunServices)
    """What the run uses beside its request: the approval ledger and signer, the seal."""
    resumed: list[Item] = field(default_factory=list)
    """Output an earlier attempt of this response stored; the run goes on after it."""
    served_by: str | None = None
    """The model server that served the run, once it finished (when a router chose one):
    set by the recorder, kept by a WebSocket's `LocalResponse` for its continuation."""

    @property
    def response_id(self) -> str:
        return self.header.response_id


@dataclass(slots=True, frozen=True)
class Resumption:
    """A queued job, prepared under the id and time it was queued with; `output`: what an
    earlier process running it stored, its open items closed (`response_record.resumable`)."""

    response_id: str
    created_at: int
    output: list[Item] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class LocalResponse:
    """A finished response its caller holds in memory (WebSocket mode keeps the socket's last
    one): `previous_response_id` naming it continues from `history` without the store, so a
    `store: false` response can be continued on the socket that made it."""

    response_id: str
    history: list[Item]
    """Every item the model had seen when it ended: what a continuation starts from."""
    upstream: str | None = None
    """The model server that served it (a fleet's): where its continuation goes."""

    @classmethod
    def of(cls, prepared: Prepared, final: ResponseObject) -> LocalResponse:
        items = prepared.history_items + prepared.input_items + list(final["output"] or [])
        return cls(final["id"], items, prepared.served_by)


class Preparer:
    """Turns request bodies into `Prepared` runs, with this server's tools and settings."""

    def __init__(
        self,
        *,
        store: Store,
        signer: ApprovalSigner,
        compaction: CompactionCodec,
        default_model: str | None,
        server_tools: list[Tool],
        loop_settings: LoopSettings,
        mcp_servers: list[McpServerConfig] | None,
        mcp_pool: McpPool,
        mcp_call_timeout: float,
        web_search: WebSearchConfig | None,
        routes: bool = False,
    ) -> None:
        """`routes`: the upstream routes over several model servers: requests carry where
        their continued turn was served (`LoopRequest.routing`)."""
        self.routes = routes
        self.store = store
        self.signer = signer
        self.compaction = compaction
        self.default_model = default_model
        self.server_tools = server_tools
        self.loop_settings = loop_settings
        self.mcp_configs = {config.label: config for config in mcp_servers or []}
        self.mcp_pool = mcp_pool
        self.mcp_call_timeout = mcp_call_timeout
        self.web_search = web_search
        self._services_by_owner: dict[str | None, RunServices] = {}
        self._recent_tools = RecentTools()

    async def prepare(
        self,
        body: Any,
        *,
        owner: str | None = None,
        local: LocalResponse | None = None,
        resume: Resumption | None = None,
        session: str | None = None,
        raw: bytes | None = None,
    ) -> Prepared:
        """`local`: a response the caller holds (WebSocket mode), found by
        `previous_response_id` before the store is asked. `resume`: a queued job, prepared
        under its own id, going on after what an earlier attempt stored. `session`: the
        client's session id (a header), a routing hint. `raw`: the body as it came, when there
        is one (its input's PDFs are looked for only if it may hold one)."""
        request = parse_create(body)
        model = request.model or self.default_model
        if not model:
            raise InvalidRequestError(MISSING_MODEL, param="model")
        history: list[Item] = []
        served_by: str | None = None  # the model server of the turn continued (fleet)
        conversation_id = request.conversation_id
        inline = local is not None and request.previous_response_id == local.response_id
        if local is not None and inline:
            history = list(local.history)
            served_by = local.upstream
        elif request.previous_response_id:
            record = await self.store.get_response_record(request.previous_response_id, owner=owner)
            if record is None:
                raise InvalidRequestError(  # 400, as OpenAI answers (not 404)
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            history = list(record["history"] or [])
            served_by = record.get("upstream")
        elif conversation_id is not None:
            conversation = await self.store.get_conversation(conversation_id, owner=owner)
            if conversation is None:
                raise NotFoundError(
                    f"Conversation with id '{conversation_id}' not found.", param="conversation"
                )
            history = await self.store.list_items(conversation_id, owner=owner)
            served_by = conversation.get("upstream")
        input_items = normalize_input(request.input)
        check_unique(input_items, "input")
        if conversation_id is not None:
            await check_storable(self.store, input_items, "input", owner)
        if self.routes and served_by is None:  # an `item_reference` chain's session
            served_by = await referenced_upstream(self.store, input_items, owner)
        input_items = await resolve_stored_references(self.store, input_items, history, owner)
        check_outputs_answer_calls(history, input_items)
        if request.previous_response_id and request.tools:
            # the /ui page sends the echoed (redacted) tools back: the owner's originals
            request.tools = await restore_tools(
                self.store, request.previous_response_id, request.tools, owner
            )
        tools = self._request_tools(request.tools)
        specs = tools.specs
        tool_choice = self._tool_choice(request, tools)
        kept = resume.output if resume is not None else []
        approvals = approval_decisions(history, input_items, self.signer, owner)
        if kept:  # the earlier attempt claimed and ran them
            approvals = ApprovalDecisions()
        header = ResponseHeader(
            resume.response_id if resume is not None else wire.new_id("resp"),
            resume.created_at if resume is not None else wire.now(),
            model,
            _echo(request, tools.echo),
            client_tools=tools.client,
            web_search=tools.web_search,
            include=frozenset(request.include) if request.include else _NOTHING,
            reasoning_summary=bool((request.reasoning or {}).get("summary")),
        )
        # their PDFs, read off the event loop: the stored ones, and the input's (a body
        # without a PDF's opening costs no walk and no coroutine: `may_hold_pdf`)
        if history or kept:
            await read_ahead(history, kept)
        if raw is None or may_hold_pdf(raw):
            await read_ahead(input_items, raw=raw)
        transcript = items_to_transcript(
            expand_compactions(history, input_items + kept, self.compaction, owner),
            frozenset(approvals.decisions),
            tools.client,
        )
        loop_request = LoopRequest(
            model=model,
            input=transcript,
            resume_calls=approvals.calls,
            approvals=dict(approvals.decisions),
            context=self._context_policy(request, input_items, owner),
            run_id=header.response_id,
            instructions=request.instructions,
            tools=self.server_tools,
            toolsets=self._toolsets(tools.mcp_uses, history + kept),
            client_tools=specs,
            caller_tools=tools.client,
            tool_choice=tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            sampling=_sampling(request),
            settings=self._settings(request.max_tool_calls),
            routing=RoutingHints(served_by, session) if self.routes else NO_HINTS,
        )
        return Prepared(
            request=request,
            header=header,
            input_items=input_items,
            history_items=history,
            loop_request=loop_request,
            client_tools={spec.name for spec in specs},
            owner=owner,
            not_offered=tools.not_offered,
            history_inline=inline,
            services=self._services(owner),
            resumed=kept,
        )

    def _context_policy(
        self, request: CreateResponse, input_items: list[Item], owner: str | None
    ) -> ContextPolicy | None:
        """`context_management` for the loop, or a `compaction_trigger` ending the input (only
        there, as OpenAI requires); compaction items are sealed for this key."""
        triggers = [i for i, item in enumerate(input_items) if item["type"] == "compaction_trigger"]
        if triggers and triggers[0] != len(input_items) - 1:
            raise InvalidRequestError(
                "A compaction_trigger item must be the final input item.",
                param=f"input[{triggers[0]}]",
                code="invalid_value",
            )
        entries = request.context_management or []
        if not entries and not triggers:
            return None
        thresholds = [e.compact_threshold for e in entries if e.compact_threshold is not None]
        return ContextPolicy(
            compact_threshold=min(thresholds) if thresholds else None,
            compact_now=bool(triggers),
        )

    def _toolsets(self, uses: list[McpServerUse], history: list[Item]) -> list[McpToolset]:
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
                    # an `mcp_list_tools` item: its tools are listings (checked at the door)
                    listing=list(cast(list[McpListedTool], listed.get("tools", [])))
                    if listed is not None
                    else None,
                    call_timeout=self.mcp_call_timeout,
                )
            )
        return toolsets

    def _services(self, owner: str | None) -> RunServices:
        """The run's services for `owner`: one (frozen) object per key, kept for the last
        keys seen (at most `_SERVICES_KEPT`), as making one cost as much as the rest of the
        loop request."""
        services = self._services_by_owner.get(owner)
        if services is None:
            if len(self._services_by_owner) >= _SERVICES_KEPT:
                self._services_by_owner.clear()
            services = self._services_by_owner[owner] = RunServices(
                ledger=self.store,
                approval_ids=partial(self.signer.issue, owner),
                seal=partial(self.compaction.seal, owner=owner),
            )
        return services

    def _settings(self, max_tool_calls: int | None) -> LoopSettings:
        """The server's loop settings with the request's `max_tool_calls`: the shared ones
        when it changes nothing (nothing writes a run's settings; a copy per request cost
        more than the rest of its loop request)."""
        if max_tool_calls == self.loop_settings.max_tool_calls:
            return self.loop_settings
        return replace(self.loop_settings, max_tool_calls=max_tool_calls)

    def _request_tools(self, tools: list[dict[str, Any]]) -> RequestTools:
        taken = {tool.name for tool in self.server_tools}
        return self._recent_tools.resolve(tools, self.mcp_configs, self.web_search, taken)

    def _tool_choice(self, request: CreateResponse, tools: RequestTools) -> str | dict[str, Any]:
        return choose_tool(request.tool_choice, tools, {t.name for t in self.server_tools})


def request_body(prepared: Prepared) -> dict[str, Any]:
    """The request as JSON, for callers that did not keep the body they prepared."""
    return prepared.request.model_dump(by_alias=True, exclude_unset=True, mode="json")


_ECHOED = (
    "model",
    "instructions",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "store",
    "background",
    "previous_response_id",
    "reasoning",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "prompt",
    "service_tier",
    "moderation",
)
"""The request fields echoed as given, in the model's field order (what `model_dump` gave),
first in the echo (`_echo` names them in this order)."""
_NESTED = ("tool_choice", "metadata", "reasoning", "prompt_cache_options", "prompt", "moderation")
"""The echoed fields that may hold an object: copied, as `model_dump` copied them."""


def _echo(request: CreateResponse, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request's settings as the response object echoes them, secrets redacted. Fields
    that only steer this request (input, stream, include, client_metadata, pass-through
    sampling extras but the penalties) are not echoed, as OpenAI does not echo them. A
    nested value is a copy: the echo never shares an object with the request. One dict
    display from the model's `__dict__` (`_ECHOED`, then the defaulted fields): built key by
    key it was ~0.3% of a stored /v1/responses request's instructions."""
    fields = request.__dict__
    conversation_id = request.conversation_id
    temperature = fields["temperature"]
    top_p = fields["top_p"]
    text = fields["text"]
    if text:
        text_echo = text.model_dump(by_alias=True, exclude_none=True)
        text_echo.setdefault("verbosity", "medium")
    else:
        text_echo = {"format": {"type": "text"}, "verbosity": "medium"}
    echo = {
        "model": fields["model"],
        "instructions": fields["instructions"],
        "tool_choice": fields["tool_choice"],
        "parallel_tool_calls": fields["parallel_tool_calls"],
        "max_output_tokens": fields["max_output_tokens"],
        "max_tool_calls": fields["max_tool_calls"],
        "metadata": fields["metadata"],
        "store": fields["store"],
        "background": fields["background"],
        "previous_response_id": fields["previous_response_id"],
        "reasoning": fields["reasoning"],
        "user": fields["user"],
        "safety_identifier": fields["safety_identifier"],
        "prompt_cache_key": fields["prompt_cache_key"],
        "prompt_cache_retention": fields["prompt_cache_retention"],
        "prompt_cache_options": fields["prompt_cache_options"],
        "prompt": fields["prompt"],
        "service_tier": fields["service_tier"],
        "moderation": fields["moderation"],
        "temperature": 1.0 if temperature is None else temperature,
        "top_p": 1.0 if top_p is None else top_p,
        "presence_penalty": fields["presence_penalty"] or 0.0,
        "frequency_penalty": fields["frequency_penalty"] or 0.0,
        "conversation": {"id": conversation_id} if conversation_id else None,
        "text": text_echo,
        "top_logprobs": fields["top_logprobs"] or 0,
        "tools": tools,
        "truncation": fields["truncation"] or "disabled",
    }
    for name in _NESTED:
        if type(echo[name]) is dict:
            echo[name] = deepcopy(echo[name])
    return echo


def _sampling(request: CreateResponse) -> Sampling:
    """The request's sampling; the shared default one when it sets none (most do)."""
    response_format = _response_format(request)
    extras = request.sampling_extras() or None
    if (
        request.temperature is None
        and request.top_p is None
        and request.max_output_tokens is None
        and response_format is None
        and extras is None
    ):
        return _DEFAULT_SAMPLING
    return Sampling(
        temperature=request.temperature,
        top_p=request.top_p,
        max_output_tokens=request.max_output_tokens,
        response_format=response_format,
        extra_body=extras,
    )


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
