"""`LoopEvent`s: what the driver tells its sink. Sinks observe; they never decide."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from toolwire.errors import ToolwireError
from toolwire.tools.executor import ToolResult
from toolwire.transcript import AssistantMessage, ToolCall
from toolwire.upstream.events import ToolCallArgumentsDelta, ToolCallStarted, Usage

LoopStatus = Literal["completed", "incomplete", "failed", "cancelled"]


@dataclass(slots=True)
class ModelCallStarted:
    iteration: int
    tools_offered: bool


@dataclass(slots=True)
class OutputTextDelta:
    """Visible answer text. Text that may turn out to be a leaked call is held back until the
    turn ends (see `loop/holdback.py`)."""

    text: str


@dataclass(slots=True)
class ReasoningTextDelta:
    text: str


@dataclass(slots=True)
class ModelTurnCompleted:
    """A model turn as it enters the transcript (leaked text already removed)."""

    message: AssistantMessage
    finish_reason: str
    usage: Usage


@dataclass(slots=True)
class LeakDetected:
    """The model wrote a tool call as text. `action`: retry, salvaged, or gave_up."""

    family: str
    snippet: str
    attempt: int
    action: Literal["retry", "salvaged", "gave_up"]


@dataclass(slots=True)
class ToolExecutionStarted:
    call: ToolCall


@dataclass(slots=True)
class ToolExecutionFinished:
    call: ToolCall
    result: ToolResult


@dataclass(slots=True)
class ToolCallsReturned:
    """Calls of caller-side (function) tools: the loop stops and hands them to the caller."""

    calls: list[ToolCall]


@dataclass(slots=True)
class ApprovalRequested:
    """Calls that wait for a human's approval; the loop stops until the caller answers."""

    calls: list[ToolCall]


@dataclass(slots=True)
class LoopFinished:
    status: LoopStatus
    reason: str | None
    final_text: str
    usage: Usage
    error: ToolwireError | None = None
    pending_calls: list[ToolCall] = field(default_factory=list)


LoopEvent = (
    ModelCallStarted
    | OutputTextDelta
    | ReasoningTextDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ModelTurnCompleted
    | LeakDetected
    | ToolExecutionStarted
    | ToolExecutionFinished
    | ToolCallsReturned
    | ApprovalRequested
    | LoopFinished
)
