"""What one loop run asks for (`LoopRequest`), how it is bounded (`LoopSettings`), and where it
stands (`LoopState`), plus the `NextAction`s the driver moves between."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.errors import ToolwireError
from toolwire.tools.base import Tool
from toolwire.transcript import ToolCall, ToolSpec, Transcript
from toolwire.upstream.events import Usage

LeakMode = Literal["retry", "salvage", "off"]


@dataclass(slots=True)
class LoopSettings:
    max_tool_calls: int | None = None
    """Soft stop: calls beyond it are not run and one last model call answers without tools."""
    max_iterations: int = 20
    """Hard stop: model calls in one run; reaching it ends the run `incomplete`."""
    leak_mode: LeakMode = "retry"
    leak_retries: int = 2
    """Re-asks per user turn after a call written as text; past it the run ends `incomplete`."""
    repeated_failure_limit: int = 3
    """The same failing call (name and arguments) this many times ends the run."""
    stream: bool = True
    max_concurrent_tools: int = 8


@dataclass(slots=True)
class LoopRequest:
    model: str
    input: Transcript
    history: Transcript = field(default_factory=list)
    instructions: str | None = None
    tools: list[Tool] = field(default_factory=list)
    """Tools the loop runs itself (server-side)."""
    client_tools: list[ToolSpec] = field(default_factory=list)
    """Tools the caller runs: their calls end the run and are returned (Responses `function`)."""
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None
    """Other chat-completions parameters passed upstream untouched (stop, seed, …)."""
    approvals: dict[str, bool] = field(default_factory=dict)
    """Decisions on calls that waited for approval, by call id."""
    resume_calls: list[ToolCall] = field(default_factory=list)
    """Calls of an earlier turn still to run (they waited for approval)."""
    settings: LoopSettings = field(default_factory=LoopSettings)


@dataclass(slots=True)
class LoopState:
    transcript: Transcript
    output_start: int
    """Index in `transcript` where this run's own messages begin."""
    iterations: int = 0
    tool_calls_made: int = 0
    leak_retries: int = 0
    tools_exhausted: bool = False
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    pending_calls: list[ToolCall] = field(default_factory=list)
    pending_approvals: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    status: str = "in_progress"
    reason: str | None = None
    error: ToolwireError | None = None
    final_text: str = ""


@dataclass(slots=True, frozen=True)
class CallModel:
    pass


@dataclass(slots=True, frozen=True)
class ExecuteTools:
    calls: list[ToolCall]


@dataclass(slots=True, frozen=True)
class AwaitApproval:
    calls: list[ToolCall]


@dataclass(slots=True, frozen=True)
class Finish:
    status: Literal["completed", "incomplete", "failed", "cancelled"]
    reason: str | None = None
    error: ToolwireError | None = None


NextAction = CallModel | ExecuteTools | AwaitApproval | Finish
