"""The Responses sink: `LoopEvent`s -> output items and OpenAI's exact stream event lifecycle.

One builder serves streaming and non-streaming alike (non-streaming just drops the events), so
the items a client streams and the items it later retrieves are the same by construction.
`sequence_number` increases strictly; every item goes added -> deltas -> done at one
`output_index`; text deltas concatenate to the done text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolwire.loop.events import (
    ApprovalRequested,
    LoopEvent,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from toolwire.transcript import ToolCall
from toolwire.wire import responses as wire

Emit = Callable[[dict[str, Any]], None]

SERVER_TOOL_LABEL = "toolwire"


def arguments_text(call: ToolCall) -> str:
    return call.arguments_json()


class ResponseBuilder:
    def __init__(self, emit: Emit | None, client_tools: set[str]) -> None:
        self._emit = emit
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.client_tools = client_tools
        self._message: dict[str, Any] | None = None
        self._message_text: list[str] = []
        self._reasoning: dict[str, Any] | None = None
        self._reasoning_text: list[str] = []
        self._calls: dict[str, int] = {}  # call id -> output index of its mcp_call item
        self.server_labels: dict[str, str] = {}  # tool name -> server_label (MCP servers)
        self.approval_ids: set[str] = set()  # call ids that are answered approval requests

    # -- plumbing -------------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> None:
        if self._emit is None:
            return
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        self._emit(payload)

    def _add(self, item: dict[str, Any]) -> int:
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
        elif isinstance(event, ReasoningTextDelta):
            self._reasoning_delta(event.text)
        elif isinstance(event, ModelTurnCompleted):
            self.close_open_items()
            for call in event.message.tool_calls:
                if call.name in self.client_tools and call.ok:
                    self._function_call(call)
        elif isinstance(event, ToolExecutionStarted):
            self._server_call_started(event.call)
        elif isinstance(event, ToolExecutionFinished):
            self._server_call_finished(
                event.call, event.result.ok, event.result.output_text, event.result.error
            )
        elif isinstance(event, ApprovalRequested):
            self.close_open_items()
            for call in event.calls:
                self._approval_request(call)
        elif isinstance(event, ModelCallStarted):
            self.close_open_items()

    def _approval_request(self, call: ToolCall) -> None:
        item = {
            "id": wire.new_id("mcpr"),
            "type": "mcp_approval_request",
            "server_label": self.server_labels.get(call.name, SERVER_TOOL_LABEL),
            "name": call.name,
            "arguments": arguments_text(call),
        }
        index = self._add(item)
        self._done(index)

    def add_item(self, item: dict[str, Any]) -> int:
        """An item made outside the loop (an `mcp_list_tools`), opened; `finish_item` closes it."""
        return self._add(item)

    def finish_item(self, index: int) -> None:
        self._done(index)

    def _reasoning_delta(self, text: str) -> None:
        if self._reasoning is None:
            item = wire.reasoning_item(wire.new_id("rs"), "")
            item["content"] = []
            item["status"] = "in_progress"
            self._reasoning = item
            self._reasoning_index = self._add(item)
        self._reasoning_text.append(text)
        self.event(
            "response.reasoning_text.delta",
            item_id=self._reasoning["id"],
            output_index=self._reasoning_index,
            content_index=0,
            delta=text,
        )

    def _close_reasoning(self) -> None:
        if self._reasoning is None:
            return
        text = "".join(self._reasoning_text)
        item = self._reasoning
        self.event(
            "response.reasoning_text.done",
            item_id=item["id"],
            output_index=self._reasoning_index,
            content_index=0,
            text=text,
        )
        item["content"] = [{"type": "reasoning_text", "text": text}]
        item["status"] = "completed"
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
        self.event(
            "response.output_text.delta",
            item_id=self._message["id"],
            output_index=self._message_index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def _close_message(self) -> None:
        if self._message is None:
            return
        item = self._message
        text = "".join(self._message_text)
        part = wire.output_text_part(text)
        common = {"item_id": item["id"], "output_index": self._message_index, "content_index": 0}
        self.event("response.output_text.done", **common, text=text, logprobs=[])
        self.event("response.content_part.done", **common, part=part)
        item["content"] = [part]
        item["status"] = "completed"
        self._done(self._message_index)
        self._message = None
        self._message_text = []

    def close_open_items(self) -> None:
        self._close_reasoning()
        self._close_message()

    def _function_call(self, call: ToolCall) -> None:
        arguments = arguments_text(call)
        item = wire.function_call_item(wire.new_id("fc"), call.id, call.name, "", "in_progress")
        index = self._add(item)
        common = {"item_id": item["id"], "output_index": index}
        if arguments:
            self.event("response.function_call_arguments.delta", **common, delta=arguments)
        self.event(
            "response.function_call_arguments.done", **common, name=call.name, arguments=arguments
        )
        item["arguments"] = arguments
        item["status"] = "completed"
        self._done(index)

    def _server_call_started(self, call: ToolCall) -> None:
        label = self.server_labels.get(call.name, SERVER_TOOL_LABEL)
        arguments = arguments_text(call)
        item = wire.mcp_call_item(
            wire.new_id("mcp"),
            label,
            call.name,
            arguments,
            output=None,
            error=None,
            status="in_progress",
            approval_request_id=call.id if call.id in self.approval_ids else None,
        )
        index = self._add(item)
        self._calls[call.id] = index
        common = {"item_id": item["id"], "output_index": index}
        self.event("response.mcp_call.in_progress", **common)
        if arguments:
            self.event("response.mcp_call_arguments.delta", **common, delta=arguments)
        self.event("response.mcp_call_arguments.done", **common, arguments=arguments)

    def _server_call_finished(self, call: ToolCall, ok: bool, output: str, error: str) -> None:
        if call.id not in self._calls:
            self._server_call_started(call)
        index = self._calls[call.id]
        item = self.output[index]
        item["output"] = output if ok else (output or None)
        item["error"] = None if ok else error
        item["status"] = "completed" if ok else "failed"
        common = {"item_id": item["id"], "output_index": index}
        self.event("response.mcp_call.completed" if ok else "response.mcp_call.failed", **common)
        self._done(index)
