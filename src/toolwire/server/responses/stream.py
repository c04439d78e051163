"""The Responses stream: a draft's changes (`draft.py`) -> OpenAI's exact stream events.

A pure renderer: the draft decides what the response holds, this says it in OpenAI's event
lifecycle. `sequence_number` increases strictly; every item goes added -> deltas -> done at one
`output_index`; text deltas concatenate to the done text; a call's argument deltas go out as the
model writes them (or whole, once, when nothing of them was streamed) and its `.done` carries the
final, repaired arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import orjson

from toolwire.errors import RunStatus
from toolwire.loop.events import LoopFinished
from toolwire.server.responses.response_object import ResponseHeader
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
_ARGUMENT_DELTAS = {
    "function_call": "response.function_call_arguments.delta",
    "mcp_call": "response.mcp_call_arguments.delta",
}


class ResponseStream:
    """A `DraftListener` that emits each change as stream events."""

    def __init__(self, header: ResponseHeader, emit: Emit) -> None:
        self.header = header
        self._emit = emit
        self.sequence = 0
        self._templates: dict[str, tuple[str, bytes, bytes, bytes]] = {}  # item id -> frame parts
        self._pieced: set[int] = set()  # output indexes that had argument pieces streamed

    def event(self, kind: str, **fields: Any) -> None:
        # the keyword names are `StreamEvent`'s fields (mypy cannot check **fields)
        payload = cast(StreamEvent, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        self._emit(payload)

    def _delta(self, kind: str, item_id: str, index: int, delta: str, text: bool) -> None:
        """A per-chunk delta event, its SSE frame made from a template kept per item: this
        runs once per upstream chunk, so no kwargs dict, no merge, no dump of the whole event.
        `text`: an `output_text` delta (with `content_index` and `logprobs`)."""
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

    # -- the changes ----------------------------------------------------------------------

    def started(self, body: ResponseObject) -> None:
        self.event("response.created", response=body)
        self.event("response.in_progress", response=body)

    def opened(self, index: int, item: Item) -> None:
        self.event("response.output_item.added", output_index=index, item=dict(item))
        kind = item["type"]
        where = {"item_id": item["id"], "output_index": index}
        if kind == "message":
            self.event(
                "response.content_part.added",
                **where,
                content_index=0,
                part=wire.output_text_part(""),
            )
        elif kind == "reasoning":
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
        elif kind == "mcp_call":
            self.event("response.mcp_call.in_progress", **where)
        elif kind == "mcp_list_tools":
            self.event("response.mcp_list_tools.in_progress", **where)
        elif kind == "web_search_call":
            self.event("response.web_search_call.in_progress", **where)
            self.event("response.web_search_call.searching", **where)

    def piece(self, index: int, item: Item, delta: str) -> None:
        kind = item["type"]
        if kind == "message":
            self._delta("response.output_text.delta", item["id"], index, delta, True)
        elif kind == "reasoning":
            where = {"item_id": item["id"], "output_index": index}
            self.event("response.reasoning_text.delta", **where, content_index=0, delta=delta)
            if self.header.reasoning_summary:
                self.event(
                    "response.reasoning_summary_text.delta", **where, summary_index=0, delta=delta
                )
        else:
            self._pieced.add(index)
            self._delta(_ARGUMENT_DELTAS[kind], item["id"], index, delta, False)

    def arguments(self, index: int, item: Item, arguments: str) -> None:
        self.event(
            "response.mcp_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            arguments=arguments,
        )

    def ran(self, index: int, item: Item, ok: bool) -> None:
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "web_search_call":
            if ok:
                self.event("response.web_search_call.completed", **where)
        else:
            self.event("response.mcp_call.completed" if ok else "response.mcp_call.failed", **where)

    def closed(self, index: int, item: Item) -> None:
        kind = item["type"]
        where = {"item_id": item["id"], "output_index": index}
        if kind == "message":
            part = item["content"][0]
            for number, annotation in enumerate(part["annotations"]):
                self.event(
                    "response.output_text.annotation.added",
                    **where,
                    content_index=0,
                    annotation_index=number,
                    annotation=annotation,
                )
            self.event(
                "response.output_text.done",
                **where,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            self.event("response.content_part.done", **where, content_index=0, part=part)
        elif kind == "reasoning":
            part = item["content"][0]
            text = part["text"]
            self.event("response.reasoning_text.done", **where, content_index=0, text=text)
            self.event("response.content_part.done", **where, content_index=0, part=part)
            if self.header.reasoning_summary:
                summary = item["summary"][0]
                self.event(
                    "response.reasoning_summary_text.done", **where, summary_index=0, text=text
                )
                self.event(
                    "response.reasoning_summary_part.done", **where, summary_index=0, part=summary
                )
        elif kind == "function_call":
            arguments = item["arguments"]
            if index not in self._pieced and arguments:
                self.event("response.function_call_arguments.delta", **where, delta=arguments)
            self.event(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=arguments,
            )
        elif kind == "custom_tool_call":
            text = item["input"]
            if text:
                self.event("response.custom_tool_call_input.delta", **where, delta=text)
            self.event("response.custom_tool_call_input.done", **where, input=text)
        elif kind == "mcp_list_tools":
            state = "failed" if item["error"] else "completed"
            self.event(f"response.mcp_list_tools.{state}", **where)
        self._pieced.discard(index)
        self.event("response.output_item.done", output_index=index, item=item)

    def finished(self, final: ResponseObject, event: LoopFinished) -> None:
        status = event.status
        if status is RunStatus.FAILED:
            error = final["error"]
            code = error["code"] if error else None
            if event.error is not None and event.error.status == 400 and event.error.code:
                # The `error` event's code is free (the response's is OpenAI's enum): a
                # refused request keeps its exact code there (`context_length_exceeded`).
                code = event.error.code
            self.event("error", code=code, message=error["message"] if error else None, param=None)
        self.event(_TERMINAL_EVENT[status], response=final)
