"""What a model call cost, counted by toolwire itself: the usage a key is charged for a call the
upstream never reported (the client hung up before the usage chunk, the upstream sends none,
the stream was cut, the call failed midway).

A call that ran to its end with reported usage is charged that usage. Any other call is charged
the larger of what was reported and what toolwire counted: the prompt it sent (the transcript
and tools, by the upstream's own tokenizer where it has one, else `BYTES_PER_TOKEN` bytes a
token plus `MESSAGE_OVERHEAD` a message: `loop/compaction.py`'s `count_tokens`) and the output
it received (text, reasoning, call names and arguments; the tokenizer again, else the same
estimate). Never 0, and never more than the call's reservation unless its output alone went
beyond the output it reserved (then the output really was that large, and is charged). A
non-streamed call stopped before its answer arrived (its client left) costs its whole
reservation: how much the upstream produced cannot be known, and charging the prompt alone
would make hanging up just before the answer a way to spend output for free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwire.errors import ToolwireError
from toolwire.loop.compaction import BYTES_PER_TOKEN, TokenCounter, count_tokens
from toolwire.upstream.base import TurnRequest, Upstream
from toolwire.upstream.events import (
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    Usage,
)


@dataclass(slots=True)
class Meter:
    """One model call's events, seen as they pass (`see`), and the tokens to charge for it
    (`charge`). Only keys with token limits are metered: nothing is kept for the others."""

    reported: int | None = None
    """The usage the upstream reported (input + output), if any."""
    finished: bool = False
    """The stream ran to its end (set by the caller)."""
    cancelled: bool = False
    """The call was stopped by toolwire (its client left, the run was cancelled), not ended by
    an upstream error (set by the caller)."""
    received: list[str] = field(default_factory=list)
    """Output text as it arrived: text, reasoning, call names, argument pieces."""
    _streamed_arguments: set[int] = field(default_factory=set)

    def see(self, event: ModelEvent) -> None:
        if isinstance(event, TextDelta | ReasoningDelta):
            self.received.append(event.text)
        elif isinstance(event, ToolCallArgumentsDelta):
            self._streamed_arguments.add(event.key)
            self.received.append(event.delta)
        elif isinstance(event, ToolCallStarted):
            self.received.append(event.name)
        elif isinstance(event, ToolCallDone):
            if event.key not in self._streamed_arguments:  # a whole call (not streamed)
                self.received.append(event.call.raw_arguments)
        elif isinstance(event, Usage):
            self.reported = (self.reported or 0) + event.input_tokens + event.output_tokens

    async def charge(
        self, upstream: Upstream, turn: TurnRequest, reserved: int, reserved_output: int
    ) -> int:
        """The tokens to settle the call on (see the module docstring). `reserved`: what the
        call's reservation took, `reserved_output` the part of it for the output."""
        if self.finished and self.reported is not None:
            return self.reported
        if self.cancelled and not turn.stream and not self.received and self.reported is None:
            # a whole (non-streamed) answer that never arrived: what the upstream made of it
            # cannot be known, so the call costs what it reserved
            return reserved
        prompt = await count_tokens(upstream, turn)
        output = await _output_tokens(upstream, turn.model, "".join(self.received))
        counted = prompt + output
        if output <= reserved_output:
            counted = min(counted, reserved)
        return max(counted, self.reported or 0, 1)


async def _output_tokens(upstream: Upstream, model: str, text: str) -> int:
    if not text:
        return 0
    if isinstance(upstream, TokenCounter):
        try:
            counted = await upstream.count_tokens(model, text)
        except ToolwireError:
            counted = None
        if counted is not None:
            return counted
    return -(-len(text.encode()) // BYTES_PER_TOKEN)
