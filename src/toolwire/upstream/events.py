"""`ModelEvent`s: what an upstream adapter streams back for one model turn, normalized."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.transcript import ToolCall


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ReasoningDelta:
    text: str


@dataclass(slots=True)
class ToolCallStarted:
    """A call's name became known; `key` ties its later deltas and its `ToolCallDone` together."""

    key: int
    id: str
    name: str


@dataclass(slots=True)
class ToolCallArgumentsDelta:
    key: int
    delta: str


@dataclass(slots=True)
class ToolCallDone:
    """The call is final: arguments parsed (or `parse_error` set), name matched to a tool."""

    key: int
    call: ToolCall


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_tokens += other.cached_tokens


@dataclass(slots=True)
class TurnEnd:
    """The turn is over. `finish_reason` is normalized: stop, tool_calls, length, content_filter."""

    finish_reason: str


ModelEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallDone
    | Usage
    | TurnEnd
)
