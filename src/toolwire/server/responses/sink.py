"""The Responses sink: `LoopEvent`s -> output items, the response object, and OpenAI's exact
stream event lifecycle. A pure translator: every fact it needs arrives on the events.

One builder serves streaming and non-streaming alike (non-streaming just drops the events), so
the items a client streams and the items it later retrieves are the same by construction.
`sequence_number` increases strictly; every item goes added -> deltas -> done at one
`output_index`; text deltas concatenate to the done text; a call's argument deltas go out as the
model writes them and its `.done` carries the final, repaired arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from toolwire.errors import RunStatus, error_code
from toolwire.loop.events import (
    ApprovalRequest,
    ApprovalRequested,
    CallArgumentsDelta,
    CallStreamStarted,
    CallTarget,
    ContextCompacted,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
    RunStarted,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolListingFinished,
    ToolListingStarted,
)
from toolwire.loop.tool_types import ClientTool, ClientTools, custom_input
from toolwire.server.responses.citations import sources, url_citations, urls
from toolwire.server.responses.prepare.tools import SearchBackend
from toolwire.transcript import ToolCall
from toolwire.upstream.events import Usage
from toolwire.wire import responses as wire
from toolwire.wire.items import Item, ResponseObject, StreamEvent
from toolwire.wire.sse import FramedEvent, delta_template

Emit = Callable[[StreamEvent], None]

_TERMINAL_EVENT = {
    RunStatus.COMPLETED: "response.completed",
    RunStatus.INCOMPLETE: "response.incomplete",
    RunStatus.FAILED: "response.failed",
    RunStatus.CANCELLED: "response.failed",
}


@dataclass(slots=True, frozen=True)
class ResponseHeader:
    """What the response object echoes of its request, and how its tools were declared:
    fixed before the run starts."""

    response_id: str
    created_at: int
    model: str
    settings: dict[str, object]
    """The request's settings as the response object echoes them (the client's JSON)."""
    client_tools: ClientTools = field(default_factory=ClientTools)
    """Caller-side tools by the name the model knows them: a call goes back as the client
    declared the tool (`function_call` with its `namespace`, or `custom_tool_call`)."""
    web_search: SearchBackend | None = None
    """The MCP tool serving `web_search`: its calls are `web_search_call` items."""
    include: frozenset[str] = frozenset()
    """The request's `include`: the optional output data it asked for."""
    reasoning_summary: bool = False
    """`reasoning.summary` was asked for: reasoning items carry a `summary_text` part, which
    is the upstream's reasoning text itself (toolwire makes no call to summarize it)."""


class ResponseBuilder:
    def __init__(
        self,
        header: ResponseHeader,
        emit: Emit | None,
        *,
        output: list[Item] | None = None,
    ) -> None:
        """`output`: items an earlier attempt of this response stored (a resumed run goes
        on after them)."""
        self.header = header
        self._emit = emit
        self.sequence = 0
        self.output: list[Item] = list(output or [])
        self.final: ResponseObject | None = None
        self._settled: tuple[LoopFinished, ResponseObject] | None = None
        self._message: Item | None = None
        self._message_index = 0
        self._message_text: list[str] = []
        self._reasoning: Item | None = None
        self._reasoning_index = 0
        self._reasoning_text: list[str] = []
        self._live: dict[int, int] = {}  # stream key -> output index, this model turn
        self._streamed: dict[int, list[str]] = {}  # output index -> argument pieces so far
        self._calls: dict[str, int] = {}  # call id -> output index of its open call item
        self._templates: dict[str, tuple[str, bytes, bytes, bytes]] = {}  # item id -> frame parts
        self._listings: dict[str, int] = {}  # server label -> output index of mcp_list_tools
        self._sources: dict[str, str] = {}  # url -> title, of this response's web searches

    # -- the response object --------------------------------------------------------------

    def body(
        self,
        status: str,
        *,
        finished: LoopFinished | None = None,
        usage: Usage | None = None,
    ) -> ResponseObject:
        header = self.header
        error = None
        incomplete = None
        if finished is not None:
            reason = finished.reason
            if reason.status is RunStatus.FAILED:
                error = wire.error_object(
                    error_code(reason, finished.error), finished.message or reason.value
                )
            if reason.incomplete_reason is not None:
                incomplete = reason.incomplete_reason
        body = wire.response_object(
            response_id=header.response_id,
            created_at=header.created_at,
            status=status,
            model=header.model,
            output=self.output,
            settings=header.settings,
            usage=wire.usage_object(
                usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_tokens
            )
            if usage is not None
            else None,
            error=error,
            incomplete_reason=incomplete,
            completed_at=wire.now() if status not in ("queued", "in_progress") else None,
        )
        details = body["incomplete_details"]
        if details is not None and finished is not None:
            if incomplete != finished.reason.value:  # toolwire's own reason (errors.py)
                details["toolwire_reason"] = finished.reason.value
            if finished.message:
                details["message"] = finished.message
        return body

    # -- plumbing -------------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> None:
        if self._emit is None:
            return
        # the keyword names are `StreamEvent`'s fields (mypy cannot check **fields)
        payload = cast(StreamEvent, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        self._emit(payload)

    def _delta(self, kind: str, item_id: str, index: int, delta: str, text: bool) -> None:
        """A per-chunk delta event, its SSE frame made from a template kept per item: this
        runs once per upstream chunk, so no kwargs dict, no merge, no dump of the whole event.
        `text`: an `output_text` delta (with `content_index` and `logprobs`)."""
        if self._emit is None:
            return
        sequence = self.sequence
        self.sequence += 1
        if text:
            event = FramedEvent(
                type=kind,
                sequence_number=sequence,
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        else:
            event = FramedEvent(
                type=kind,
                sequence_number=sequence,
                item_id=item_id,
                output_index=index,
                delta=delta,
            )
        template = self._templates.get(item_id)
        if template is None or template[0] != kind:
            fields = b'"item_id":' + orjson.dumps(item_id) + b',"output_index":%d,' % index
            if text:
                fields += b'"content_index":0,'
            parts = delta_template(kind, fields, b',"logprobs":[]' if text else b"")
            template = (kind, *parts)
            self._templates[item_id] = template
        _, head, middle, tail = template
        event.frame = head + b"%d" % sequence + middle + orjson.dumps(delta) + tail
        self._emit(cast(StreamEvent, event))  # a dict with the delta event's keys, and its frame

    def _add(self, item: Item) -> int:
        index = len(self.output)
        self.output.append(item)
        self.event("response.output_item.added", output_index=index, item=dict(item))
        return index

    def _done(self, index: int) -> None:
        self.event("response.output_item.done", output_index=index, item=self.output[index])

    # -- the mapping ----------------------------------------------------------------------

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, OutputTextDelta):
            self._text_delta(event.text)
        elif isinstance(event, CallArgumentsDelta):
            self._arguments_delta(event)
        elif isinstance(event, ReasoningTextDelta):
            self._reasoning_delta(event.text)
        elif isinstance(event, CallStreamStarted):
            self._call_started(event)
        elif isinstance(event, ModelTurnCompleted):
            self._turn_completed(event)
        elif isinstance(event, ToolExecutionStarted):
            self._server_call_started(event.call, event.server_label, event.approval_request_id)
        elif isinstance(event, ToolExecutionFinished):
            result = event.result
            self._server_call_finished(
                event.call,
                event.server_label,
                event.approval_request_id,
                result.ok,
                result.output_text,
                result.error,
            )
        elif isinstance(event, ApprovalRequested):
            self.close_open_items()
            for request in event.requests:
                self._approval_request(request)
        elif isinstance(event, ModelCallStarted):
            self.close_open_items()
            self._live = {}
        elif isinstance(event, ToolListingStarted):
            self._listing_started(event.label)
        elif isinstance(event, ToolListingFinished):
            self._listing_finished(event)
        elif isinstance(event, ContextCompacted):
            self._compacted(event)
        elif isinstance(event, RunStarted):
            initial = self.body("in_progress")
            # A snapshot: the events are encoded when the door sends them, and by then the run
            # may have added items (an MCP listing starts right away) to the live output list.
            initial["output"] = list(initial["output"])
            self.event("response.created", response=initial)
            self.event("response.in_progress", response=initial)
        elif isinstance(event, LoopFinished):
            self._finished(event)

    def settle(self, event: LoopFinished) -> ResponseObject:
        """The final response object for an outcome the driver is about to announce: the
        recorder stores it first, then the terminal event carries this same object. Items
        still open close here (their `.done` events go out; the terminal one does not): the
        run's end cut them off (a cancel, a failure) unless it completed."""
        if self._settled is not None and self._settled[0] is event:
            return self._settled[1]
        completed = event.status is RunStatus.COMPLETED
        self.close_open_items("completed" if completed else "incomplete")
        self._abandon_open_calls()
        body = self.body(event.status.value, finished=event, usage=event.usage)
        self._settled = (event, body)
        return body

    def _finished(self, event: LoopFinished) -> None:
        status = event.status
        self.final = self.settle(event)
        if status is RunStatus.FAILED:
            error = self.final["error"]
            code = error["code"] if error else None
            if event.error is not None and event.error.status == 400 and event.error.code:
                # The `error` event's code is free (the response's is OpenAI's enum): a
                # refused request keeps its exact code there (`context_length_exceeded`).
                code = event.error.code
            self.event("error", code=code, message=error["message"] if error else None, param=None)
        self.event(_TERMINAL_EVENT[status], response=self.final)

    # -- MCP tool listings ----------------------------------------------------------------

    def _hidden_listing(self, label: str) -> bool:
        """The search backend's listing, when the client declared only `web_search`: OpenAI
        shows no listing for its search, so neither does toolwire (unless it fails)."""
        search = self.header.web_search
        return search is not None and search.search_only and search.label == label

    def _compacted(self, event: ContextCompacted) -> None:
        """The compaction item, whole at once (it has no deltas), as OpenAI streams it."""
        self.close_open_items()
        item: Item = {
            "id": event.item_id,
            "type": "compaction",
            "encrypted_content": event.encrypted_content,
        }
        self._done(self._add(item))

    def _listing_started(self, label: str) -> None:
        if self._hidden_listing(label):
            return
        self._show_listing(label)

    def _show_listing(self, label: str) -> None:
        item: Item = {
            "id": wire.new_id("mcpl"),
            "type": "mcp_list_tools",
            "server_label": label,
            "tools": [],
            "error": None,
        }
        index = self._add(item)
        self._listings[label] = index
        self.event("response.mcp_list_tools.in_progress", item_id=item["id"], output_index=index)

    def _listing_finished(self, event: ToolListingFinished) -> None:
        if self._hidden_listing(event.label):
            if not event.error:
                return
            self._show_listing(event.label)  # a failure is shown, as any failed listing
        index = self._listings.pop(event.label)
        item = self.output[index]
        item["tools"] = event.tools
        item["error"] = event.error
        kind = "failed" if event.error else "completed"
        self.event(f"response.mcp_list_tools.{kind}", item_id=item["id"], output_index=index)
        self._done(index)

    # -- text -----------------------------------------------------------------------------

    def _reasoning_delta(self, text: str) -> None:
        """Reasoning streams as OpenAI streams it: the item, its `reasoning_text` content
        part, the deltas; with `reasoning.summary` asked for, a `summary_text` part too
        (the upstream's reasoning text itself: toolwire does not summarize)."""
        if self._reasoning is None:
            item = wire.reasoning_item(wire.new_id("rs"), "")
            item["content"] = []
            item["status"] = "in_progress"
            self._reasoning = item
            self._reasoning_index = self._add(item)
            where = {"item_id": item["id"], "output_index": self._reasoning_index}
            self.event(
                "response.content_part.added",
                **where,
                content_index=0,
                part=wire.reasoning_text_part(""),
            )
            if self.header.reasoning_summary:
                self.event(
                    "response.reasoning_summary_part.added",
                    **where,
                    summary_index=0,
                    part=wire.summary_text_part(""),
                )
        self._reasoning_text.append(text)
        where = {"item_id": self._reasoning["id"], "output_index": self._reasoning_index}
        self.event("response.reasoning_text.delta", **where, content_index=0, delta=text)
        if self.header.reasoning_summary:
            self.event(
                "response.reasoning_summary_text.delta", **where, summary_index=0, delta=text
            )

    def _close_reasoning(self, status: str = "completed") -> None:
        if self._reasoning is None:
            return
        text = "".join(self._reasoning_text)
        item = self._reasoning
        where = {"item_id": item["id"], "output_index": self._reasoning_index}
        part = wire.reasoning_text_part(text)
        self.event("response.reasoning_text.done", **where, content_index=0, text=text)
        self.event("response.content_part.done", **where, content_index=0, part=part)
        item["content"] = [part]
        if self.header.reasoning_summary:
            summary = wire.summary_text_part(text)
            self.event("response.reasoning_summary_text.done", **where, summary_index=0, text=text)
            self.event(
                "response.reasoning_summary_part.done", **where, summary_index=0, part=summary
            )
            item["summary"] = [summary]
        item["status"] = status
        self._done(self._reasoning_index)
        self._reasoning = None
        self._reasoning_text = []

    def _text_delta(self, text: str) -> None:
        if self._message is None:
            self._close_reasoning()
            item = wire.message_item(wire.new_id("msg"), "", status="in_progress")
            item["content"] = []
            self._message = item
            self._message_index = self._add(item)
            self.event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=self._message_index,
                content_index=0,
                part=wire.output_text_part(""),
            )
        self._message_text.append(text)
        self._delta(
            "response.output_text.delta", self._message["id"], self._message_index, text, True
        )

    def _close_message(self, replacement: str | None = None, status: str = "completed") -> None:
        if self._message is None:
            return
        item = self._message
        text = "".join(self._message_text) if replacement is None else replacement
        part = wire.output_text_part(text)
        common = {"item_id": item["id"], "output_index": self._message_index, "content_index": 0}
        part["annotations"] = url_citations(text, self._sources)
        for number, annotation in enumerate(part["annotations"]):
            self.event(
                "response.output_text.annotation.added",
                **common,
                annotation_index=number,
                annotation=annotation,
            )
        self.event("response.output_text.done", **common, text=text, logprobs=[])
        self.event("response.content_part.done", **common, part=part)
        item["content"] = [part]
        item["status"] = status
        self._done(self._message_index)
        self._message = None
        self._message_text = []

    def close_open_items(self, status: str = "completed") -> None:
        """`status`: "incomplete" for items a run's end cut off (a cancel, a failure)."""
        self._close_reasoning(status)
        self._close_message(status=status)

    # -- calls ----------------------------------------------------------------------------

    def _call_started(self, event: CallStreamStarted) -> None:
        tool = self.header.client_tools.get(event.name)
        if (tool is not None and tool.kind == "custom") or self._is_search(
            event.server_label, event.name
        ):
            return  # shown whole once final: a free-form input or a search is not JSON pieces
        self.close_open_items()
        if event.target is CallTarget.CALLER:
            item = self._caller_item(event.call_id, event.name)
        else:
            item = wire.mcp_call_item(
                wire.new_id("mcp"),
                event.server_label,
                event.name,
                "",
                output=None,
                error=None,
                status="in_progress",
                approval_request_id=None,
            )
        index = self._add(item)
        self._live[event.key] = index
        self._calls[event.call_id] = index
        self._streamed[index] = []
        if item["type"] == "mcp_call":
            self.event("response.mcp_call.in_progress", item_id=item["id"], output_index=index)

    def _arguments_delta(self, event: CallArgumentsDelta) -> None:
        index = self._live.get(event.key)
        if index is None:
            return
        item = self.output[index]
        self._streamed[index].append(event.delta)
        kind = (
            "response.function_call_arguments.delta"
            if item["type"] == "function_call"
            else "response.mcp_call_arguments.delta"
        )
        self._delta(kind, item["id"], index, event.delta, False)

    def _turn_completed(self, event: ModelTurnCompleted) -> None:
        self._close_reasoning()
        self._close_message(event.shown_text)
        for plan in event.calls:
            index = self._calls.get(plan.call.id)
            if plan.target is CallTarget.CALLER:
                if index is None:
                    index = self._add(self._caller_item(plan.call.id, plan.call.name))
                self._close_function_call(index, plan.call, "completed")
            elif index is not None and plan.target is CallTarget.REJECTED:
                # Streamed live, then found malformed: it never runs and is never handed
                # back; the item ends `incomplete` and the model is asked to call again.
                self._close_function_call(index, plan.call, "incomplete")
            elif index is not None:
                item = self.output[index]
                arguments = plan.call.arguments_json()
                item["arguments"] = arguments
                self.event(
                    "response.mcp_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=arguments,
                )

    def _abandon_open_calls(self) -> None:
        """Calls still open when the run ends (the upstream failed mid-call, or the run was
        cancelled) end `incomplete` (function calls) or `failed` (server calls)."""
        for call_id, index in list(self._calls.items()):
            item = self.output[index]
            sent = "".join(self._streamed.get(index, ())) or item.get("arguments") or ""
            error = "the run ended before this call was complete"
            partial = ToolCall(call_id, item["name"], None, sent, error)
            self._close_function_call(index, partial, "incomplete")

    def _caller_item(self, call_id: str, model_name: str) -> Item:
        """The item a caller-side call goes back as, in the shape its tool was declared."""
        tool: ClientTool | None = self.header.client_tools.get(model_name)
        if tool is not None and tool.kind == "custom":
            item: Item = {
                "id": wire.new_id("ctc"),
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": tool.name,
                "input": "",
            }
        else:
            item = wire.function_call_item(
                wire.new_id("fc"), call_id, tool.name if tool else model_name, "", "in_progress"
            )
        if tool is not None and tool.namespace is not None:
            item["namespace"] = tool.namespace
        return item

    def _is_search(self, label: str, name: str) -> bool:
        search = self.header.web_search
        return search is not None and search.serves(label, name)

    def _close_function_call(self, index: int, call: ToolCall, status: str) -> None:
        item = self.output[index]
        if item["type"] == "custom_tool_call":
            text = custom_input(call) or ""
            common = {"item_id": item["id"], "output_index": index}
            if text:
                self.event("response.custom_tool_call_input.delta", **common, delta=text)
            self.event("response.custom_tool_call_input.done", **common, input=text)
            item["input"] = text
            self._calls.pop(call.id, None)
            self._done(index)
            return
        if item["type"] == "web_search_call":
            item["status"] = "failed"
            self._calls.pop(call.id, None)
            self._done(index)
            return
        arguments = call.arguments_json()
        if item["type"] == "function_call":
            if index not in self._streamed and arguments:
                self.event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=arguments,
                )
            self.event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=arguments,
            )
        else:
            item["error"] = call.parse_error
        item["arguments"] = arguments
        item["status"] = status if item["type"] == "function_call" else "failed"
        self._calls.pop(call.id, None)
        self._streamed.pop(index, None)
        self._done(index)

    def _approval_request(self, request: ApprovalRequest) -> None:
        item: Item = {
            "id": request.request_id,
            "type": "mcp_approval_request",
            "server_label": request.server_label,
            "name": request.call.name,
            "arguments": request.call.arguments_json(),
        }
        index = self._add(item)
        self._done(index)

    def _server_call_started(self, call: ToolCall, label: str, approval: str | None) -> None:
        if call.id in self._calls:
            return  # streamed live: already in progress, its arguments done
        if self._is_search(label, call.name):
            self._search_started(call)
            return
        arguments = call.arguments_json()
        item = wire.mcp_call_item(
            wire.new_id("mcp"),
            label,
            call.name,
            arguments,
            output=None,
            error=None,
            status="in_progress",
            approval_request_id=approval,
        )
        index = self._add(item)
        self._calls[call.id] = index
        common = {"item_id": item["id"], "output_index": index}
        self.event("response.mcp_call.in_progress", **common)
        if arguments:
            self.event("response.mcp_call_arguments.delta", **common, delta=arguments)
        self.event("response.mcp_call_arguments.done", **common, arguments=arguments)

    def _server_call_finished(
        self, call: ToolCall, label: str, approval: str | None, ok: bool, output: str, error: str
    ) -> None:
        if call.id not in self._calls:
            self._server_call_started(call, label, approval)
        index = self._calls.pop(call.id)
        item = self.output[index]
        if item["type"] == "web_search_call":
            item["status"] = "completed" if ok else "failed"
            if ok and "web_search_call.action.sources" in self.header.include:
                item["action"]["sources"] = [{"type": "url", "url": url} for url in urls(output)]
            if ok:
                self._sources.update(sources(output))  # what answers may cite
            if ok:
                self.event(
                    "response.web_search_call.completed", item_id=item["id"], output_index=index
                )
            self._done(index)
            return
        item["output"] = output if ok else (output or None)
        item["error"] = None if ok else error
        item["status"] = "completed" if ok else "failed"
        common = {"item_id": item["id"], "output_index": index}
        self.event("response.mcp_call.completed" if ok else "response.mcp_call.failed", **common)
        self._done(index)

    def _search_started(self, call: ToolCall) -> None:
        """A call of the MCP tool serving `web_search`, shown as OpenAI shows its searches."""
        self.close_open_items()
        arguments = call.arguments or {}
        search = self.header.web_search
        named = arguments.get(search.query_argument) if search is not None else None
        query = (
            named
            if isinstance(named, str)
            else next((v for v in arguments.values() if isinstance(v, str)), "")
        )
        item: Item = {
            "id": wire.new_id("ws"),
            "type": "web_search_call",
            "status": "in_progress",
            # `query` is deprecated in OpenAI's document in favour of `queries`: both, for
            # clients of either age
            "action": {"type": "search", "query": query, "queries": [query]},
        }
        index = self._add(item)
        self._calls[call.id] = index
        common = {"item_id": item["id"], "output_index": index}
        self.event("response.web_search_call.in_progress", **common)
        item["status"] = "searching"
        self.event("response.web_search_call.searching", **common)
