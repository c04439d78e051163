"""`LoopEvent`s -> Anthropic's content blocks and stream events.

One writer serves both modes: it keeps the message's content blocks (the non-streaming answer)
and returns the frames that build them (the stream). Text and thinking stream live, and so does
a caller-side tool call (`live`): its `tool_use` block starts when its name is known and its
argument pieces go out as the loop releases them. An Anthropic client takes a call's input from
the concatenated `input_json_delta` pieces and nothing sent can be taken back, so only what can
no longer change goes out (`SettledArguments`): the rest follows once the turn has ended and
the driver has repaired and judged the call. A streamed call whose released text cannot become
its final input (the loop rejected it, or a repair changed what was sent) ends the stream with
an `error` event (`CallRetracted`) rather than hand over an input that is not the call's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwire.errors import StopReason, UpstreamStreamError, run_error
from toolwire.loop.events import (
    CallArgumentsDelta,
    CallStreamStarted,
    CallTarget,
    LoopEvent,
    LoopFinished,
    ModelTurnCompleted,
    OutputTextDelta,
    PlannedCall,
    ReasoningTextDelta,
    ToolExecutionFinished,
)
from toolwire.server.messages.history import ThinkingSeal
from toolwire.server.messages.server_tools import server_blocks
from toolwire.transcript import ToolCall
from toolwire.upstream.arguments import SettledArguments, continuation
from toolwire.upstream.events import Usage
from toolwire.wire import anthropic

#: What a stream relays of a run (the rest stays on the driver's side of the queue).
RELAYED = (
    OutputTextDelta,
    ReasoningTextDelta,
    CallStreamStarted,
    CallArgumentsDelta,
    ModelTurnCompleted,
    ToolExecutionFinished,
    LoopFinished,
)


def stop_reason(finished: LoopFinished, stop_sequence: str | None = None) -> anthropic.StopReason:
    """`tool_use` whenever calls are handed back; `stop_sequence` when the upstream said which
    of the request's stop strings ended the answer; a run that ended without an answer the
    client can use raises (an HTTP error before the stream opened, an `error` event after)."""
    if finished.pending_calls:
        return "tool_use"
    if finished.reason is StopReason.MAX_OUTPUT_TOKENS:
        return "max_tokens"
    if finished.reason is StopReason.CONTENT_FILTER:
        return "refusal"
    if finished.reason is StopReason.ANSWERED:
        return "stop_sequence" if stop_sequence else "end_turn"
    raise run_error(finished.reason, finished.message, finished.error)


def usage_of(usage: Usage, counted: int) -> anthropic.Usage:
    """The upstream's counts; the prompt as toolwire counted it where the upstream gave none."""
    return anthropic.usage(usage.input_tokens or counted, usage.output_tokens, usage.cached_tokens)


class CallRetracted(UpstreamStreamError):
    """A call streamed live turned out different from what was sent of it (module docstring)."""


@dataclass(slots=True)
class _LiveCall:
    key: int
    index: int
    call_id: str
    settled: SettledArguments = field(default_factory=SettledArguments)


@dataclass(slots=True)
class BlockWriter:
    seal: ThinkingSeal
    owner: str | None
    show_thinking: bool
    omit_thinking: bool
    live: bool = False
    """Stream caller-side calls as they arrive (the stream); else write them when the run ends."""
    stop_sequences: list[str] = field(default_factory=list)
    """The request's `stop_sequences`: only one of them is reported as `stop_sequence`."""
    stop_sequence: str | None = None
    """Which of them ended the last model turn, as the upstream said (None: it did not)."""
    upstream: str | None = None
    """The model server of the turn being written (a fleet's `Routed`): sealed into thinking
    signatures, so the block coming back says where its session's prefix is."""
    web_tools: frozenset[str] = frozenset()
    """The Anthropic server tools the request declared (`web_search`, `web_fetch`): their
    calls are shown as `server_tool_use` and result blocks."""
    content: list[anthropic.ContentBlock] = field(default_factory=list)
    _open: str | None = None
    _thinking: list[str] = field(default_factory=list)
    _call: _LiveCall | None = None
    _deferred: list[LoopEvent] = field(default_factory=list)
    _written: set[str] = field(default_factory=set)

    @property
    def _index(self) -> int:
        return len(self.content) - 1

    def _close(self, frames: list[bytes]) -> None:
        if self._open == "thinking":
            reasoning = "".join(self._thinking)
            signature = self.seal.sign(reasoning, self.owner, self.upstream)
            block = self.content[-1]
            block["thinking"] = "" if self.omit_thinking else reasoning
            block["signature"] = signature
            frames.append(anthropic.signature_delta(self._index, signature))
            self._thinking = []
        if self._open is not None:
            frames.append(anthropic.block_stop(self._index))
        self._open = None

    def _start(self, kind: str, block: anthropic.ContentBlock, frames: list[bytes]) -> None:
        self._close(frames)
        self.content.append(block)
        self._open = kind
        frames.append(anthropic.block_start(self._index, block.copy()))

    def write(self, event: LoopEvent, frames: list[bytes]) -> LoopFinished | None:
        """Frames for `event` onto `frames`; the `LoopFinished` when the run ended. Raises
        `CallRetracted` when a live call cannot be completed as sent."""
        if self._call is not None and isinstance(
            event, OutputTextDelta | ReasoningTextDelta | CallStreamStarted
        ):
            # One block at a time: what comes while a call's block waits for its final
            # arguments follows it (a later call of the turn goes out whole at the turn's end).
            if not isinstance(event, CallStreamStarted):
                self._deferred.append(event)
            return None
        if isinstance(event, OutputTextDelta):
            if not event.text:
                return None
            if self._open != "text":
                self._start("text", {"type": "text", "text": ""}, frames)
            self.content[-1]["text"] += event.text
            frames.append(anthropic.text_delta(self._index, event.text))
        elif isinstance(event, ReasoningTextDelta):
            if not self.show_thinking or not event.text:
                return None
            if self._open != "thinking":
                self._start(
                    "thinking", {"type": "thinking", "thinking": "", "signature": ""}, frames
                )
            self._thinking.append(event.text)
            if not self.omit_thinking:
                frames.append(anthropic.thinking_delta(self._index, event.text))
        elif isinstance(event, CallStreamStarted):
            if self.live and event.target is CallTarget.CALLER:
                block: anthropic.ContentBlock = {
                    "type": "tool_use",
                    "id": event.call_id,
                    "name": event.name,
                    "input": {},
                }
                self._start("tool_use", block, frames)
                self._call = _LiveCall(event.key, self._index, event.call_id)
        elif isinstance(event, CallArgumentsDelta):
            call = self._call
            if call is not None and event.key == call.key:
                released = call.settled.feed(event.delta)
                if released:
                    frames.append(anthropic.input_json_delta(call.index, released))
        elif isinstance(event, ToolExecutionFinished):
            if event.call.name in self.web_tools:
                self._close(frames)
                for block in server_blocks(event.call, event.result):
                    start = block.copy()
                    if block["type"] == "server_tool_use":
                        start["input"] = {}
                    self.content.append(block)
                    frames.append(anthropic.block_start(self._index, start))
                    if block["type"] == "server_tool_use" and block.get("input"):
                        arguments = event.call.arguments_json()
                        frames.append(anthropic.input_json_delta(self._index, arguments))
                    frames.append(anthropic.block_stop(self._index))
        elif isinstance(event, ModelTurnCompleted):
            matched = event.stop_sequence
            self.stop_sequence = matched if matched in self.stop_sequences else None
            self._turn_completed(event.calls, frames)
        elif isinstance(event, LoopFinished):
            if self._call is not None:  # the run broke off mid-call: never closed as if whole
                self._open = self._call = None
            self._close(frames)
            for pending in event.pending_calls:
                if pending.id not in self._written:
                    self._whole_call(pending, frames)
            return event
        return None

    def _turn_completed(self, plans: list[PlannedCall], frames: list[bytes]) -> None:
        live = self._call
        if live is None:
            return
        self._call = None
        plan = next((p for p in plans if p.call.id == live.call_id), None)
        rest: str | None = None
        if plan is not None and plan.target is CallTarget.CALLER and plan.call.ok:
            call = plan.call
            released = live.settled.released
            rest = continuation(
                released, call.arguments_json(), call.raw_arguments, call.arguments or {}
            )
        if plan is None or rest is None:
            raise CallRetracted(
                "the model's tool call was found malformed after its input began streaming "
                "and cannot be handed over as sent; retry the request",
                code="tool_call_retracted",
            )
        if rest:
            frames.append(anthropic.input_json_delta(live.index, rest))
        self.content[live.index]["input"] = plan.call.arguments or {}
        self._written.add(live.call_id)
        self._close(frames)
        deferred, self._deferred = self._deferred, []
        for event in deferred:
            self.write(event, frames)

    def _whole_call(self, call: ToolCall, frames: list[bytes]) -> None:
        """A call not streamed live (a leaked call recovered from text, a later call of a
        turn, or any call of a non-streamed answer): its final JSON in one piece."""
        self._close(frames)
        block: anthropic.ContentBlock = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": {},
        }
        whole = block.copy()
        whole["input"] = call.arguments or {}
        self.content.append(whole)
        frames.append(anthropic.block_start(self._index, block))
        arguments = call.arguments_json()
        if arguments:
            frames.append(anthropic.input_json_delta(self._index, arguments))
        frames.append(anthropic.block_stop(self._index))
        self._written.add(call.id)
