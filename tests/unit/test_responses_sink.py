"""The Responses sink as a pure translator: loop events in, OpenAI stream events and the response
object out, with no loop, no HTTP and no store."""

from __future__ import annotations

from typing import Any

from toolwire.errors import StopReason, UpstreamError
from toolwire.loop.events import (
    CallArgumentsDelta,
    CallStreamStarted,
    CallTarget,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    PlannedCall,
    RunStarted,
)
from toolwire.server.responses_sink import ResponseBuilder, ResponseHeader
from toolwire.transcript import AssistantMessage, ToolCall
from toolwire.upstream.events import Usage


def translate(events: list[LoopEvent]) -> tuple[list[dict[str, Any]], ResponseBuilder]:
    emitted: list[dict[str, Any]] = []
    builder = ResponseBuilder(ResponseHeader("resp_1", 0, "m", {}), emitted.append)
    for event in events:
        builder(event)
    return emitted, builder


def finished(reason: StopReason, error: Exception | None = None) -> LoopFinished:
    return LoopFinished(reason, "why", "", Usage(), error)  # type: ignore[arg-type]


def test_a_leak_let_out_past_the_hold_bound_is_replaced_at_done() -> None:
    leak = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    events, builder = translate(
        [
            RunStarted("resp_1"),
            ModelCallStarted(1, True),
            OutputTextDelta("Sure. " + leak),
            ModelTurnCompleted(AssistantMessage("Sure."), "stop", Usage(), [], "Sure. "),
            finished(StopReason.LEAKED_TOOL_CALL),
        ]
    )
    done = [e for e in events if e["type"] == "response.output_text.done"]
    assert [d["text"] for d in done] == ["Sure. "]
    assert builder.final is not None and "tool_call" not in str(builder.final["output"])
    assert builder.final["status"] == "incomplete"
    assert builder.final["incomplete_details"] == {
        "reason": "max_output_tokens",  # OpenAI's enum; toolwire's own reason alongside
        "toolwire_reason": "leaked_tool_call",
        "message": "why",
    }


def test_a_call_cut_off_by_a_failure_ends_incomplete_in_a_failed_response() -> None:
    events, builder = translate(
        [
            RunStarted("resp_1"),
            ModelCallStarted(1, True),
            CallStreamStarted(0, "call_1", "f", CallTarget.CALLER, ""),
            CallArgumentsDelta(0, '{"a": '),
            finished(StopReason.UPSTREAM_ERROR, UpstreamError("boom", code="upstream_error")),
        ]
    )
    assert builder.final is not None
    assert builder.final["status"] == "failed"
    assert builder.final["error"]["code"] == "server_error"  # OpenAI's ResponseErrorCode
    item = builder.final["output"][0]
    assert (item["type"], item["status"], item["arguments"]) == (
        "function_call",
        "incomplete",
        '{"a": ',
    )
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["error", "response.failed"]


def test_live_deltas_are_not_repeated_when_the_call_completes() -> None:
    call = ToolCall("call_1", "f", {"a": 1}, '{"a": 1}')
    events, builder = translate(
        [
            RunStarted("resp_1"),
            ModelCallStarted(1, True),
            CallStreamStarted(0, "call_1", "f", CallTarget.CALLER, ""),
            CallArgumentsDelta(0, '{"a"'),
            CallArgumentsDelta(0, ": 1}"),
            ModelTurnCompleted(
                AssistantMessage("", [call]),
                "tool_calls",
                Usage(),
                [PlannedCall(call, CallTarget.CALLER, "")],
            ),
            finished(StopReason.TOOL_CALLS),
        ]
    )
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert deltas == ['{"a"', ": 1}"]
    assert builder.final is not None and builder.final["status"] == "completed"
    assert builder.final["output"][0]["arguments"] == '{"a": 1}'
