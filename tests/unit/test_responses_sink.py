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
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.response_object import ResponseHeader
from toolwire.server.responses.stream import ResponseStream
from toolwire.transcript import AssistantMessage, ToolCall
from toolwire.upstream.events import Usage


def translate(events: list[LoopEvent]) -> tuple[list[dict[str, Any]], ResponseDraft]:
    emitted: list[dict[str, Any]] = []
    header = ResponseHeader("resp_1", 0, "m", {})
    draft = ResponseDraft(header, ResponseStream(header, emitted.append))  # type: ignore[arg-type]
    for event in events:
        draft(event)
    return emitted, draft


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


def test_delta_frames_from_templates_are_the_events_encoded() -> None:
    """Per-chunk deltas carry an SSE frame made from a template; it must be byte for byte the
    event's own encoding, whatever the text holds."""
    import orjson

    from toolwire.wire.sse import FramedEvent, encode_event

    pieces = ['{"a": "', 'quote " back\\\\slash', "\n\t\u2028é😀", "\x00\x1f", '"}']
    events, _ = translate(
        [
            RunStarted("resp_1"),
            ModelCallStarted(1, True),
            OutputTextDelta("Looking it up: "),
            OutputTextDelta('"quoted"\n\u2028é😀'),
            CallStreamStarted(0, "call_1", "f", CallTarget.CALLER, ""),
            *[CallArgumentsDelta(0, piece) for piece in pieces],
            CallStreamStarted(1, "call_2", "g", CallTarget.CALLER, ""),
            CallArgumentsDelta(1, "{}"),
        ]
    )
    framed = [e for e in events if type(e) is FramedEvent]
    assert [e["type"] for e in framed] == [
        "response.output_text.delta",
        "response.output_text.delta",
        *["response.function_call_arguments.delta"] * (len(pieces) + 1),
    ]
    for event in framed:
        assert event.frame == encode_event(orjson.dumps(event), event["type"])
    sequence = [e["sequence_number"] for e in events]
    assert sequence == list(range(len(events)))


def test_chat_delta_frames_are_the_chunks_encoded() -> None:
    import orjson

    from toolwire.server.chat.proxy import DeltaFrames
    from toolwire.wire.sse import encode_event

    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": 'm"1'}
    frames = DeltaFrames(base)
    for field in ("content", "reasoning_content"):
        for text in ("plain", '"quoted"\n\u2028é😀', "\x00", ""):
            chunk = {
                **base,
                "choices": [
                    {"index": 0, "delta": {field: text}, "finish_reason": None, "logprobs": None}
                ],
            }
            assert frames.delta(field, text) == encode_event(orjson.dumps(chunk))
