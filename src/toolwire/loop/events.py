"""`LoopEvent`s: what the driver tells its sinks. Sinks translate them to one wire format; they
never decide. Every fact a sink needs (which calls go back to the caller, under which server
label a call shows, which approval it answers) travels on the event, so no sink keeps loop state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from toolwire.errors import RunStatus, StopReason, ToolwireError
from toolwire.tools.argument_fit import ArgumentRepair
from toolwire.tools.executor import ToolResult
from toolwire.transcript import AssistantMessage, ToolCall
from toolwire.upstream.events import FirstToken, Repair, Routed, UpstreamRetry, Usage
from toolwire.wire.items import McpListedTool


class CallTarget(StrEnum):
    """Who runs a call the model made."""

    CALLER = "caller"
    """A caller-side (function) tool: the run hands the call back."""
    SERVER = "server"
    """A tool the loop runs itself (Python, workspace, MCP)."""
    REJECTED = "rejected"
    """Malformed, unknown, or made when no tools were on offer: reported to the model, never
    run, never handed back."""


class CancelCause(StrEnum):
    """Who cancelled a run: told to the driver by whoever cancels its task
    (`loop/state.py` `Cancellation`), reported on `LoopFinished.cause`."""

    CLIENT = "client"
    """The client left, or cancelled the response (`POST /cancel`)."""
    SHUTDOWN = "shutdown"
    """This process is shutting down: a durable run goes back to the queue, to be resumed."""


@dataclass(slots=True)
class RunStarted:
    """The run is about to call its first tool server or model; a persistence point."""

    run_id: str


@dataclass(slots=True)
class ToolListingStarted:
    label: str


@dataclass(slots=True)
class ToolListingFinished:
    """An MCP server's tools were listed (`tools`), or could not be (`error`)."""

    label: str
    tools: list[McpListedTool]
    error: str | None = None


@dataclass(slots=True)
class ModelCallStarted:
    iteration: int
    tools_offered: bool


@dataclass(slots=True)
class OutputTextDelta:
    """Visible answer text, live. Only what could still become a leaked tool call is held back
    (see `loop/holdback.py`)."""

    text: str


@dataclass(slots=True)
class ReasoningTextDelta:
    text: str


@dataclass(slots=True)
class CallStreamStarted:
    """A declared tool's call began streaming: its name is known, its arguments follow as
    `CallArgumentsDelta`s. `key` ties them together within the turn."""

    key: int
    call_id: str
    name: str
    target: CallTarget
    server_label: str


@dataclass(slots=True)
class CallArgumentsDelta:
    key: int
    delta: str


@dataclass(slots=True)
class PlannedCall:
    """A final call of a model turn and what the run does with it."""

    call: ToolCall
    target: CallTarget
    server_label: str


@dataclass(slots=True)
class ModelTurnCompleted:
    """A model turn as it enters the transcript (leaked text already removed); `calls` say what
    happens to each call, so a sink can close what it streamed live."""

    message: AssistantMessage
    finish_reason: str
    usage: Usage
    calls: list[PlannedCall] = field(default_factory=list)
    shown_text: str | None = None
    """Set only when a leak was detected after the hold-back's bound had let part of it out:
    the text this turn really keeps, which replaces what was streamed (`.done` carries it)."""
    stop_sequence: str | None = None
    """The stop string that ended this turn, when the upstream said which (`TurnEnd`)."""


@dataclass(slots=True)
class LeakDetected:
    """The model wrote a tool call as text. `action`: retry, salvaged, or gave_up."""

    family: str
    snippet: str
    attempt: int
    action: Literal["retry", "salvaged", "gave_up"]


@dataclass(slots=True)
class ArgumentsRepaired:
    """A call's arguments did not fit its tool's schema and one-meaning repairs made them fit
    (`loop/fitting.py`): the call goes on with the repaired arguments (`call.arguments`; the
    model's own text stays in `call.raw_arguments`)."""

    call: ToolCall
    repairs: tuple[ArgumentRepair, ...]


@dataclass(slots=True)
class ArgumentsMisfit:
    """A call's arguments do not fit its tool's schema and no repair makes them. `action`:
    `retry` (the model is asked again, the call hidden from the client), `passed` (the model
    was already asked again: the call goes on as the model wrote it) or `rejected` (likewise,
    but its arguments are no JSON object: the loop reports it to the model, as any such call)."""

    call: ToolCall
    problems: str
    """The validator's messages, each with its place (`at $.limit: ...`)."""
    attempt: int
    action: Literal["retry", "passed", "rejected"]


@dataclass(slots=True)
class ToolExecutionStarted:
    call: ToolCall
    server_label: str
    approval_request_id: str | None = None


@dataclass(slots=True)
class ToolExecutionFinished:
    call: ToolCall
    result: ToolResult
    server_label: str
    approval_request_id: str | None = None


@dataclass(slots=True)
class ToolCallsReturned:
    """Calls of caller-side (function) tools: the loop stops and hands them to the caller."""

    calls: list[ToolCall]


@dataclass(slots=True)
class ApprovalRequest:
    """One call waiting for a decision, under the id the gateway issued for it."""

    request_id: str
    call: ToolCall
    server_label: str


@dataclass(slots=True)
class ApprovalRequested:
    """Calls that wait for a human's approval; the loop stops until the caller answers."""

    requests: list[ApprovalRequest]


class StepKind(StrEnum):
    """The persistence points inside a run (beside `RunStarted` and `LoopFinished`)."""

    TOOLS_STARTING = "tools_starting"
    """Server-side calls are about to run (their `ToolExecutionStarted` already went out): a
    run resumed from a later copy must treat them as possibly run, never run them again."""
    TOOLS_FINISHED = "tools_finished"
    """Their results are in: a resumed run goes on from here with the next model call."""


@dataclass(slots=True)
class ContextCompacted:
    """The transcript was compacted (`context_management`): what came before is now a
    summary. A `compaction` item with this id and opaque content goes into the output, and the
    run goes on from the compacted transcript. `tokens`: the prompt size that passed the
    threshold (None for the other triggers)."""

    item_id: str
    encrypted_content: str
    usage: Usage
    trigger: Literal["threshold", "context_full", "requested"] = "threshold"
    """Why: the prompt passed `compact_threshold`, the upstream refused it as too long, or the
    input ended with a `compaction_trigger` item."""
    tokens: int | None = None


@dataclass(slots=True)
class StepReached:
    """A step boundary the checkpoint is awaited at, so that a durable run (a background
    response) can be picked up from it by another process. Sinks ignore it."""

    kind: StepKind


@dataclass(slots=True)
class LoopFinished:
    """The run's last event, always: its typed outcome and everything a door reports. The
    driver hands it to the checkpoint (the final write) before any sink sees it, so the outcome
    a sink reports was stored, or is `StopReason.STORE_ERROR`."""

    reason: StopReason
    message: str | None
    final_text: str
    usage: Usage
    error: ToolwireError | None = None
    pending_calls: list[ToolCall] = field(default_factory=list)
    cause: CancelCause | None = None
    """Why a cancelled run was cancelled (None unless `reason` is `CANCELLED`)."""
    decisions: dict[str, bool] = field(default_factory=dict)
    """The approval decisions this run claimed and applied, by call id (a decision that was
    already used elsewhere is not among them)."""
    upstream: str | None = None
    """The model server that served the run's last model call, when a router chose it among
    several (stored with the response: a continuation goes back there)."""

    @property
    def status(self) -> RunStatus:
        return self.reason.status


LoopEvent = (
    RunStarted
    | ToolListingStarted
    | ToolListingFinished
    | ModelCallStarted
    | OutputTextDelta
    | ReasoningTextDelta
    | CallStreamStarted
    | CallArgumentsDelta
    | ModelTurnCompleted
    | LeakDetected
    | ToolExecutionStarted
    | ToolExecutionFinished
    | ArgumentsRepaired
    | ArgumentsMisfit
    | ToolCallsReturned
    | ApprovalRequested
    | ContextCompacted
    | StepReached
    | LoopFinished
    | Repair
    | UpstreamRetry
    | FirstToken
    | Routed
)
"""`Repair`, `UpstreamRetry`, `FirstToken` and `Routed` come from the upstream unchanged:
observations for observers (metrics, traces, the timeline); sinks that speak a wire format
ignore them."""
