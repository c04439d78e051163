"""The response being built: `LoopEvent`s -> output items and the response object, in one place.

The draft is the run's sink on the Responses door. The recorder stores what it holds (its
`body` when the run starts and at each step, its `settle`d object at the end), the background
queue starts one from a job's stored output, and a non-streaming answer is its `final`: the items
a client streams and the items it later retrieves are the same by construction. A stream of
events is one more reader of the draft: a `DraftListener` (`stream.py`) is told each change as it
happens (an item opened, a piece of its text or arguments, closed) and renders OpenAI's events
from it; without one, nothing of the event machinery runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import orjson

from toolwire.errors import RunStatus
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
from toolwire.loop.tool_types import ClientTool, custom_input
from toolwire.server.responses.citations import sources, url_citations, urls
from toolwire.server.responses.response_object import ResponseHeader, response_object
from toolwire.transcript import ToolCall
from toolwire.upstream.events import Usage
from toolwire.wire import responses as wire
from toolwire.wire.items import Item, ResponseObject


class DraftListener(Protocol):
    """Told each change of a draft, in order, as it happens (`stream.py` renders the events)."""

    def started(self, body: ResponseObject) -> None:
        """The run started: the response as it stands (a snapshot)."""

    def opened(self, index: int, item: Item) -> None:
        """`item` was added to the output at `index`."""

    def piece(self, index: int, item: Item, delta: str) -> None:
        """A piece of the open item's text, reasoning or call arguments."""

    def arguments(self, index: int, item: Item, arguments: str) -> None:
        """A server-side call's arguments are final (before it runs)."""

    def ran(self, index: int, item: Item, ok: bool) -> None:
        """A server-side call (or search) finished, `ok` or not; `closed` follows."""

    def closed(self, index: int, item: Item) -> None:
        """The item at `index` is done: it will not change again."""

    def finished(self, final: ResponseObject, event: LoopFinished) -> None:
        """The run's outcome, once it is stored."""


class ResponseDraft:
    def __init__(
        self,
        header: ResponseHeader,
        listener: DraftListener | None = None,
        *,
        output: list[Item] | None = None,
    ) -> None:
        """`output`: items an earlier attempt of this response stored (a resumed run goes
        on after them)."""
        self.header = header
        self.listener = listener
        self.output: list[Item] = list(output or [])
        self.final: ResponseObject | None = None
        # the settled object the recorder stored, with the JSON it wrote (`stored`)
        self._stored: tuple[ResponseObject, bytes] | None = None
        self._settled: tuple[tuple[object, ...], ResponseObject] | None = None
        self._message: int | None = None  # output index of the open message
        self._message_text: list[str] = []
        self._reasoning: int | None = None  # output index of the open reasoning item
        self._reasoning_text: list[str] = []
        self._live: dict[int, int] = {}  # stream key -> output index, this model turn
        self._streamed: dict[int, list[str]] = {}  # output index -> argument pieces so far
        self._calls: dict[str, int] = {}  # call id -> output index of its open call item
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
        """The response object as it stands, with `status` (and the outcome, once finished)."""
        return response_object(self.header, self.output, status, finished, usage)

    def settle(self, event: LoopFinished) -> ResponseObject:
        """The final response object for an outcome the driver is about to announce: the
        recorder stores it first, then the terminal event carries this same object. Items
        still open close here: the run's end cut them off (a cancel, a failure) unless it
        completed. The same outcome settles to the same object (the recorder may settle the
        outcome it stores before the driver announces it)."""
        outcome = (event.reason, event.message, id(event.error), event.cause)
        if self._settled is not None and self._settled[0] == outcome:
            return self._settled[1]
        completed = event.status is RunStatus.COMPLETED
        self.close_open_items("completed" if completed else "incomplete")
        self._abandon_open_calls()
        body = self.body(event.status.value, finished=event, usage=event.usage)
        self._settled = (outcome, body)
        return body

    def stored(self, body: ResponseObject, body_json: bytes) -> None:
        """The recorder wrote `body` as `body_json`: an answer of the same object sends those
        bytes (`answer`) instead of serializing it again."""
        self._stored = (body, body_json)

    def answer(self) -> ResponseObject | orjson.Fragment:
        """The final object for a JSON answer: the bytes stored for it when it is the object
        the recorder wrote (nothing changes a settled object after its write), else itself."""
        final = self.final
        assert final is not None
        stored = self._stored
        if stored is not None and stored[0] is final:
            return orjson.Fragment(stored[1])
        return final

    # -- the mapping ----------------------------------------------------------------------

    def __call__(self, event: LoopEvent) -> None:
        kind = type(event)
        try:
            handle = _HANDLERS[kind]
        except KeyError:  # a subclass, or an event the draft ignores: matched once
            handle = _HANDLERS[kind] = next(
                (h for base, h in _HANDLED if isinstance(event, base)), None
            )
        if handle is not None:
            handle(self, event)

    def _on_execution_finished(self, event: ToolExecutionFinished) -> None:
        result = event.result
        self._server_call_finished(
            event.call,
            event.server_label,
            event.approval_request_id,
            result.ok,
            result.output_text,
            result.error,
        )

    def _on_approval_requested(self, event: ApprovalRequested) -> None:
        self.close_open_items()
        for request in event.requests:
            self._approval_request(request)

    def _on_model_call_started(self, event: ModelCallStarted) -> None:
        self.close_open_items()
        self._live = {}

    def _on_run_started(self, event: RunStarted) -> None:
        if self.listener is not None:
            initial = self.body("in_progress")
            # A snapshot: events are encoded when the door sends them, and by then the
            # run may have added items (an MCP listing starts right away) to the output.
            initial["output"] = list(initial["output"])
            self.listener.started(initial)

    def _on_finished(self, event: LoopFinished) -> None:
        self.final = self.settle(event)
        if self.listener is not None:
            self.listener.finished(self.final, event)

    # -- plumbing -------------------------------------------------------------------------

    def _add(self, item: Item) -> int:
        index = len(self.output)
        self.output.append(item)
        if self.listener is not None:
            self.listener.opened(index, item)
        return index

    def _close(self, index: int) -> None:
        if self.listener is not None:
            self.listener.closed(index, self.output[index])

    def _piece(self, index: int, delta: str) -> None:
        if self.listener is not None:
            self.listener.piece(index, self.output[index], delta)

    # -- MCP tool listings, compaction ----------------------------------------------------

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
        self._close(self._add(item))

    def _listing_started(self, label: str) -> None:
        if not self._hidden_listing(label):
            self._show_listing(label)

    def _show_listing(self, label: str) -> None:
        item: Item = {
            "id": wire.new_id("mcpl"),
            "type": "mcp_list_tools",
            "server_label": label,
            "tools": [],
            "error": None,
        }
        self._listings[label] = self._add(item)

    def _listing_finished(self, event: ToolListingFinished) -> None:
        if self._hidden_listing(event.label):
            if not event.error:
                return
            self._show_listing(event.label)  # a failure is shown, as any failed listing
        index = self._listings.pop(event.label)
        item = self.output[index]
        item["tools"] = event.tools
        item["error"] = event.error
        self._close(index)

    # -- text -----------------------------------------------------------------------------

    def _reasoning_delta(self, text: str) -> None:
        if self._reasoning is None:
            item = wire.reasoning_item(wire.new_id("rs"), "")
            item["content"] = []
            item["status"] = "in_progress"
            self._reasoning = self._add(item)
        self._reasoning_text.append(text)
        self._piece(self._reasoning, text)

    def _close_reasoning(self, status: str = "completed") -> None:
        index = self._reasoning
        if index is None:
            return
        item = self.output[index]
        text = "".join(self._reasoning_text)
        item["content"] = [wire.reasoning_text_part(text)]
        if self.header.reasoning_summary:
            item["summary"] = [wire.summary_text_part(text)]
        item["status"] = status
        self._reasoning = None
        self._reasoning_text = []
        self._close(index)

    def _text_delta(self, text: str) -> None:
        if self._message is None:
            self._close_reasoning()
            item = wire.message_item(wire.new_id("msg"), "", status="in_progress")
            item["content"] = []
            self._message = self._add(item)
        self._message_text.append(text)
        self._piece(self._message, text)

    def _close_message(self, replacement: str | None = None, status: str = "completed") -> None:
        index = self._message
        if index is None:
            return
        item = self.output[index]
        text = "".join(self._message_text) if replacement is None else replacement
        part = wire.output_text_part(text)
        part["annotations"] = url_citations(text, self._sources)
        item["content"] = [part]
        item["status"] = status
        self._message = None
        self._message_text = []
        self._close(index)

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

    def _arguments_delta(self, event: CallArgumentsDelta) -> None:
        index = self._live.get(event.key)
        if index is None:
            return
        self._streamed[index].append(event.delta)
        self._piece(index, event.delta)

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
                item["arguments"] = plan.call.arguments_json()
                if self.listener is not None:
                    self.listener.arguments(index, item, item["arguments"])

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
        self._calls.pop(call.id, None)
        kind = item["type"]
        if kind == "custom_tool_call":
            item["input"] = custom_input(call) or ""
        elif kind == "web_search_call":
            item["status"] = "failed"
        else:
            if kind != "function_call":
                item["error"] = call.parse_error
            item["arguments"] = call.arguments_json()
            item["status"] = status if kind == "function_call" else "failed"
            self._streamed.pop(index, None)
        self._close(index)

    def _approval_request(self, request: ApprovalRequest) -> None:
        item: Item = {
            "id": request.request_id,
            "type": "mcp_approval_request",
            "server_label": request.server_label,
            "name": request.call.name,
            "arguments": request.call.arguments_json(),
        }
        self._close(self._add(item))

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
        if arguments:
            self._piece(index, arguments)
        if self.listener is not None:
            self.listener.arguments(index, item, arguments)

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
        else:
            item["output"] = output if ok else (output or None)
            item["error"] = None if ok else error
            item["status"] = "completed" if ok else "failed"
        if self.listener is not None:
            self.listener.ran(index, item, ok)
        self._close(index)

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
        index = self._add(item)  # the stream says `in_progress`, then `searching`
        self._calls[call.id] = index
        item["status"] = "searching"


_HANDLED: tuple[tuple[type, Callable[[ResponseDraft, Any], None]], ...] = (
    (OutputTextDelta, lambda draft, event: draft._text_delta(event.text)),
    (CallArgumentsDelta, ResponseDraft._arguments_delta),
    (ReasoningTextDelta, lambda draft, event: draft._reasoning_delta(event.text)),
    (CallStreamStarted, ResponseDraft._call_started),
    (ModelTurnCompleted, ResponseDraft._turn_completed),
    (
        ToolExecutionStarted,
        lambda draft, event: draft._server_call_started(
            event.call, event.server_label, event.approval_request_id
        ),
    ),
    (ToolExecutionFinished, ResponseDraft._on_execution_finished),
    (ApprovalRequested, ResponseDraft._on_approval_requested),
    (ModelCallStarted, ResponseDraft._on_model_call_started),
    (ToolListingStarted, lambda draft, event: draft._listing_started(event.label)),
    (ToolListingFinished, ResponseDraft._listing_finished),
    (ContextCompacted, ResponseDraft._compacted),
    (RunStarted, ResponseDraft._on_run_started),
    (LoopFinished, ResponseDraft._on_finished),
)
"""What the draft does with each kind of event, in the order an event is matched (the first
base it is an instance of)."""
_HANDLERS: dict[type, Callable[[ResponseDraft, Any], None] | None] = dict(_HANDLED)
"""The handler by an event's exact type (None: ignored): one lookup per event, not a walk of
`isinstance` checks; a type not seen yet is matched once (event types are a fixed set)."""
