"""`LoopEvent`s -> Anthropic's content blocks and stream events.

One writer serves both modes: it keeps the message's content blocks (the non-streaming answer)
and returns the frames that build them (the stream). Text and thinking stream live. A tool call
goes out once its turn has ended, when the driver has repaired, validated and (if malformed)
re-asked it: an Anthropic client takes a call's input from the concatenated `input_json_delta`
pieces, so nothing may be sent that could still change. The pieces are the upstream's own
argument deltas when they add up to the final arguments, else the repaired JSON in one piece.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwire.errors import StopReason, run_error
from toolwire.loop.events import (
    CallArgumentsDelta,
    CallStreamStarted,
    CallTarget,
    LoopEvent,
    LoopFinished,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
)
from toolwire.server.messages.translate import ThinkingSeal
from toolwire.upstream.events import Usage
from toolwire.wire import anthropic

#: What a stream relays of a run (the rest stays on the driver's side of the queue).
RELAYED = (
    OutputTextDelta,
    ReasoningTextDelta,
    CallStreamStarted,
    CallArgumentsDelta,
    ModelTurnCompleted,
    LoopFinished,
)


def stop_reason(finished: LoopFinished) -> anthropic.StopReason:
    """`tool_use` whenever calls are handed back; a run that ended without an answer the
    client can use raises (an HTTP error before the stream opened, an `error` event after)."""
    if finished.pending_calls:
        return "tool_use"
    if finished.reason is StopReason.MAX_OUTPUT_TOKENS:
        return "max_tokens"
    if finished.reason is StopReason.CONTENT_FILTER:
        return "refusal"
    if finished.reason is StopReason.ANSWERED:
        return "end_turn"
    raise run_error(finished.reason, finished.message, finished.error)


def usage_of(usage: Usage, counted: int) -> anthropic.Usage:
    """The upstream's counts; the prompt as toolwire counted it where the upstream gave none."""
    return anthropic.usage(usage.input_tokens or counted, usage.output_tokens, usage.cached_tokens)


@dataclass(slots=True)
class BlockWriter:
    seal: ThinkingSeal
    owner: str | None
    show_thinking: bool
    omit_thinking: bool
    content: list[anthropic.ContentBlock] = field(default_factory=list)
    _open: str | None = None
    _thinking: list[str] = field(default_factory=list)
    _keys: dict[int, str] = field(default_factory=dict)
    _pieces: dict[str, list[str]] = field(default_factory=dict)

    @property
    def _index(self) -> int:
        return len(self.content) - 1

    def _close(self, frames: list[bytes]) -> None:
        if self._open == "thinking":
            reasoning = "".join(self._thinking)
            signature = self.seal.sign(reasoning, self.owner)
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
        """Frames for `event` onto `frames`; the `LoopFinished` when the run ended."""
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
            if event.target is CallTarget.CALLER:
                self._keys[event.key] = event.call_id
                self._pieces[event.call_id] = []
        elif isinstance(event, CallArgumentsDelta):
            call_id = self._keys.get(event.key)
            if call_id is not None:
                self._pieces[call_id].append(event.delta)
        elif isinstance(event, ModelTurnCompleted):
            self._keys.clear()
        elif isinstance(event, LoopFinished):
            self._close(frames)
            for call in event.pending_calls:
                arguments = call.arguments_json()
                pieces = self._pieces.get(call.id) or []
                if "".join(pieces) != arguments:
                    pieces = [arguments]
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
                frames.extend(anthropic.input_json_delta(self._index, p) for p in pieces if p)
                frames.append(anthropic.block_stop(self._index))
            return event
        return None
