"""A run's timeline: what happened, in order, with timings, as the `/ui` page shows it.

`Timeline` is an observer: it reads the run's loop events (never the sink's output) and keeps
short entries; the Responses service stores them with the finished response. Each entry is a
dict with `type`, `t` (seconds since the run started) and summary fields; tool arguments and
outputs are clipped to `CLIP` characters.
"""

from __future__ import annotations

from time import perf_counter, time
from typing import Any, cast

from toolwire.loop.events import (
    ApprovalRequested,
    ArgumentsMisfit,
    ArgumentsRepaired,
    CallTarget,
    LeakDetected,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    RunStarted,
    ToolCallsReturned,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolListingFinished,
)
from toolwire.loop.state import LoopRequest
from toolwire.upstream.events import FirstToken, Repair, Routed, UpstreamRetry
from toolwire.wire.timeline import TimelineEntry

CLIP = 4000


def _micros(seconds: float) -> float:
    """`round(seconds, 6)` at a fraction of its cost (with digits, `round` goes through a
    decimal string; 8 calls were ~1% of a stored response's CPU): the nearest whole number
    of microseconds, as the float nearest to it."""
    return round(seconds * 1e6) / 1e6


def _clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= CLIP else text[:CLIP] + f"… ({len(text)} characters)"


class Timeline:
    __slots__ = ("_call", "_ended", "_request", "_start", "_tools", "entries", "started_at")

    def __init__(self, request: LoopRequest) -> None:
        self._request = request
        self._start = perf_counter()
        self.started_at = time()
        self.entries: list[TimelineEntry] = []
        self._call: TimelineEntry | None = None
        self._tools: dict[str, tuple[TimelineEntry, float]] = {}
        self._ended: LoopFinished | None = None

    def _t(self) -> float:
        return round((perf_counter() - self._start) * 1e6) / 1e6  # `_micros`, inlined

    def _add(self, entry_type: str, **fields: Any) -> TimelineEntry:
        # the keyword names are `TimelineEntry`'s fields (mypy cannot check **fields)
        entry = cast(TimelineEntry, {"type": entry_type, "t": self._t(), **fields})
        self.entries.append(entry)
        return entry

    def __call__(self, event: LoopEvent) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # The handlers of every run's events (started, model call, first token, turn, returned,
    # finished) build their entry as a literal, not through `_add`'s keywords, and read an
    # enum's value as `_value_` (`.value` is a Python-level property in 3.11): the timeline
    # was ~4% of a stored /v1/responses request's instructions.

    def _run_started(self, event: RunStarted) -> None:
        request = self._request
        self.entries.append(
            {"type": "run_started", "t": self._t(), "at": self.started_at, "model": request.model}
        )
        for request_id, approve in request.approvals.items():
            self._add("approval_decided", approval_request_id=request_id, approve=bool(approve))

    def _listed(self, event: ToolListingFinished) -> None:
        self._add(
            "tools_listed", server_label=event.label, count=len(event.tools), error=event.error
        )

    def _model_call(self, event: ModelCallStarted) -> None:
        call: TimelineEntry = {
            "type": "model_call",
            "t": self._t(),
            "iteration": event.iteration,
            "tools_offered": event.tools_offered,
        }
        self.entries.append(call)
        self._call = call

    def _first_token(self, event: FirstToken) -> None:
        call = self._call
        if call is not None and "ttft" not in call:
            call["ttft"] = _micros(self._t() - call["t"])

    def _turn(self, event: ModelTurnCompleted) -> None:
        call = self._call
        if call is None:
            return
        self._call = None
        call["duration"] = _micros(self._t() - call["t"])
        usage = event.usage
        call["input_tokens"] = usage.input_tokens
        call["output_tokens"] = usage.output_tokens
        call["finish_reason"] = event.finish_reason
        call["text"] = _clip(event.message.text)
        plans = event.calls
        call["calls"] = [
            {"name": plan.call.name, "call_id": plan.call.id, "target": plan.target._value_}
            for plan in plans
        ]
        for plan in plans:
            if plan.target is CallTarget.REJECTED:
                self._add(
                    "tool_rejected",
                    name=plan.call.name,
                    call_id=plan.call.id,
                    arguments=_clip(plan.call.raw_arguments),
                    error=_clip(plan.call.parse_error or "unknown tool"),
                )

    def _routed(self, event: Routed) -> None:
        """A fleet's router chose the call's model server (the last choice stands: a
        failover replaces it, `upstream_retry` entries say why)."""
        call = self._call
        if call is not None:
            call["upstream"] = event.upstream
            call["routed"] = event.reason

    def _repair(self, event: Repair) -> None:
        self._add("repair", kind=event.kind)

    def _arguments_repaired(self, event: ArgumentsRepaired) -> None:
        call = event.call
        for repair in event.repairs:
            self._add(
                "arguments_repaired",
                name=call.name,
                call_id=call.id,
                kind=repair.kind,
                path=repair.path,
                arguments=_clip(call.raw_arguments),
            )

    def _arguments_misfit(self, event: ArgumentsMisfit) -> None:
        call = event.call
        self._add(
            "arguments_misfit",
            name=call.name,
            call_id=call.id,
            action=event.action,
            attempt=event.attempt,
            error=_clip(event.problems),
            arguments=_clip(call.raw_arguments),
        )

    def _retry(self, event: UpstreamRetry) -> None:
        self._add("upstream_retry", cause=event.cause, attempt=event.attempt, delay=event.delay)

    def _leak(self, event: LeakDetected) -> None:
        self._add(
            "leak",
            format=event.family,
            action=event.action,
            attempt=event.attempt,
            snippet=_clip(event.snippet),
        )

    def _tool_started(self, event: ToolExecutionStarted) -> None:
        call = event.call
        entry = self._add(
            "tool_call",
            name=call.name,
            call_id=call.id,
            server_label=event.server_label,
            arguments=_clip(call.raw_arguments),
            approval_request_id=event.approval_request_id,
        )
        self._tools[call.id] = (entry, perf_counter())

    def _tool_finished(self, event: ToolExecutionFinished) -> None:
        known = self._tools.pop(event.call.id, None)
        if known is None:  # refused before it started (max_tool_calls)
            entry = self._add(
                "tool_call",
                name=event.call.name,
                call_id=event.call.id,
                server_label=event.server_label,
                arguments=_clip(event.call.raw_arguments),
                approval_request_id=event.approval_request_id,
            )
            started = perf_counter()
        else:
            entry, started = known
        result = event.result
        entry["ok"] = result.ok
        entry["duration"] = _micros(perf_counter() - started)
        entry["output"] = _clip(result.output_text)
        if result.error:
            entry["error"] = _clip(result.error)

    def _returned(self, event: ToolCallsReturned) -> None:
        self.entries.append(
            {
                "type": "calls_returned",
                "t": self._t(),
                "calls": [
                    {"name": c.name, "call_id": c.id, "arguments": _clip(c.raw_arguments)}
                    for c in event.calls
                ],
            }
        )

    def _approval(self, event: ApprovalRequested) -> None:
        self._add(
            "approval_requested",
            requests=[
                {
                    "approval_request_id": r.request_id,
                    "name": r.call.name,
                    "server_label": r.server_label,
                    "arguments": _clip(r.call.raw_arguments),
                }
                for r in event.requests
            ],
        )

    def _finished(self, event: LoopFinished) -> None:
        """Once per outcome: the recorder shows it the outcome before the final write (the
        timeline is stored in that write), then the run's sink shows it again."""
        if self._ended is event:
            return
        self._ended = event
        call = self._call
        if call is not None:  # the model call failed or was cancelled
            call["duration"] = _micros(self._t() - call["t"])
            call["error"] = event.message
            self._call = None
        error = event.error
        usage = event.usage
        self.entries.append(
            {
                "type": "finished",
                "t": self._t(),
                "reason": event.reason._value_,
                "status": event.status._value_,
                "message": event.message,
                "code": error.code if error is not None else None,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }
        )


_HANDLERS: dict[type, Any] = {
    RunStarted: Timeline._run_started,
    ToolListingFinished: Timeline._listed,
    ModelCallStarted: Timeline._model_call,
    FirstToken: Timeline._first_token,
    ModelTurnCompleted: Timeline._turn,
    Repair: Timeline._repair,
    UpstreamRetry: Timeline._retry,
    Routed: Timeline._routed,
    LeakDetected: Timeline._leak,
    ArgumentsRepaired: Timeline._arguments_repaired,
    ArgumentsMisfit: Timeline._arguments_misfit,
    ToolExecutionStarted: Timeline._tool_started,
    ToolExecutionFinished: Timeline._tool_finished,
    ToolCallsReturned: Timeline._returned,
    ApprovalRequested: Timeline._approval,
    LoopFinished: Timeline._finished,
}
