"""What one loop run asks for (`LoopRequest`), how it is bounded (`LoopSettings`), where it
stands (`LoopState`), how it ended (`RunOutcome`), and the `NextAction`s the driver moves
between."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from toolwire.errors import RunStatus, StopReason, ToolwireError
from toolwire.loop.compaction import CompactedContext, ContextPolicy
from toolwire.loop.events import CancelCause
from toolwire.loop.tool_types import ClientTools
from toolwire.tools.base import Tool
from toolwire.tools.mcp.toolset import McpToolset
from toolwire.transcript import ToolCall, ToolSpec, Transcript
from toolwire.upstream.base import NO_HINTS, RoutingHints, Sampling, TurnRequest
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
    check_arguments: bool = True
    """Check every call against its tool's declared schema: one-meaning repairs, else a
    hidden re-ask (`loop/fitting.py`, docs/tool-calls.md). False: calls go on unchecked, and
    a call's arguments stream live as the model writes them."""
    argument_retries: int = 1
    """Re-asks in a row for calls that do not fit; past it such a call goes on as written."""
    deadline: float | None = None
    """Seconds the whole run may take (model calls, tools, approvals claimed); past it the run
    ends `incomplete` (`StopReason.DEADLINE`) with what it had. None: no deadline."""
    live_calls: bool = True
    """Whether a call the model is still writing is shown as it streams (`CallStreamStarted`,
    argument deltas). False for a door that hands calls over whole (the chat door): the turn
    is then held back until it ends, and a model server failing mid-call can be replaced
    without the client seeing anything."""


class ApprovalLedger(Protocol):
    """Where decisions on approval requests are recorded, once each (the store implements it).

    `claim_approval` returns False when the request was already decided: a replayed or
    duplicated approval, which then runs nothing."""

    async def claim_approval(
        self, approval_request_id: str, response_id: str, approve: bool, created_at: int
    ) -> bool: ...


@dataclass(slots=True)
class LoopRequest:
    model: str
    input: Transcript
    history: Transcript = field(default_factory=list)
    instructions: str | None = None
    tools: list[Tool] = field(default_factory=list)
    """Tools the loop runs itself (server-side)."""
    toolsets: list[McpToolset] = field(default_factory=list)
    """MCP servers whose tools the run lists (unless already listed) and runs itself."""
    client_tools: list[ToolSpec] = field(default_factory=list)
    """Tools the caller runs: their calls end the run and are returned (Responses `function`)."""
    caller_tools: ClientTools | None = None
    """How the client declared `client_tools` (namespaces, `custom` tools): judges their calls.
    Without it every caller tool is a plain function."""
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    sampling: Sampling = field(default_factory=Sampling)
    approvals: dict[str, bool] = field(default_factory=dict)
    """Decisions on calls that waited for approval, by call id."""
    resume_calls: list[ToolCall] = field(default_factory=list)
    """Calls of an earlier turn still to run (they waited for approval)."""
    context: ContextPolicy | None = None
    """`context_management`: when and how the run compacts its transcript (None: never)."""
    run_id: str = ""
    """The id the run is stored under (a response id): what an approval claim records."""
    settings: LoopSettings = field(default_factory=LoopSettings)
    routing: RoutingHints = NO_HINTS
    """Where the run's model calls would best go, for a router over several model servers
    (`upstream/fleet/`): the continued turn's server, the client's session. Doors fill it."""

    def prompt_turn(self) -> TurnRequest:
        """The run's first model call as far as its prompt goes (the transcript and every
        tool on offer): what a door counts before the run, to fit the upstream's window."""
        tools = [tool.spec for tool in self.tools] + list(self.client_tools)
        return TurnRequest(self.model, self.input, tools)


@dataclass(slots=True, frozen=True)
class RunServices:
    """What a run uses but does not own, handed to `LoopDriver.run` beside its `LoopRequest`
    (which holds only data, and which the driver never edits)."""

    ledger: ApprovalLedger | None = None
    """Records each decision once; without one, decisions are not deduplicated across runs."""
    approval_ids: Callable[[str, str, str], str] | None = None
    """Issues the id of an approval request from (server label, tool name, arguments); the
    server binds it to the key and signs it (`loop/approvals.py`)."""
    seal: Callable[[CompactedContext], str] | None = None
    """Seals a compaction for the client (the server binds it to the key); None: the
    `ContextPolicy`'s own seal (the library's, for compactions that never leave the process)."""


@dataclass(slots=True)
class Cancellation:
    """Why the task running a run is about to be cancelled: whoever cancels it says so here
    first, and the driver reports it on `LoopFinished.cause` (a typed cause, not a flag a door
    reads after the outcome)."""

    cause: CancelCause | None = None
    """The first cause given stands (a client's cancel during a shutdown stays a cancel)."""

    def cancel(self, cause: CancelCause) -> None:
        if self.cause is None:
            self.cause = cause


@dataclass(slots=True, frozen=True)
class RunOutcome:
    """How a run ended: a typed reason (its status, wire code and HTTP status follow from it in
    `errors.py`), a message for people, and the typed error when something failed."""

    reason: StopReason
    message: str | None = None
    error: ToolwireError | None = None

    @property
    def status(self) -> RunStatus:
        return self.reason.status


@dataclass(slots=True)
class LoopState:
    transcript: Transcript
    output_start: int
    """Index in `transcript` where this run's own messages begin."""
    iterations: int = 0
    tool_calls_made: int = 0
    leak_retries: int = 0
    leak_prose: str = ""
    """The text shown before the last leaked call: a retry that writes it again does not
    show it again (a stuck leak ends with its prose once, not once per attempt)."""
    tools_exhausted: bool = False
    failures: dict[tuple[str, str], int] = field(default_factory=dict)
    """Failed calls by name and arguments (a plain dict: a `Counter` costs ~1 µs a run)."""
    pending_calls: list[ToolCall] = field(default_factory=list)
    pending_approvals: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    compacted_size: int = 0
    """Messages in the transcript right after this run's last compaction: no new one until it
    grows (a transcript compacted as far as it goes is not compacted again and again)."""
    compacted_for_overflow: bool = False
    """The last model call was refused as too long and the transcript compacted for it: a
    second refusal in a row ends the run."""
    outcome: RunOutcome | None = None
    final_text: str = ""
    upstream: str | None = None
    """The model server the last model call went to, when a router chose it (`Routed`)."""
    avoid: set[str] = field(default_factory=set)
    """Model servers a turn failed on before anything of it was shown: asked again, the
    turn goes elsewhere."""
    failovers: int = 0
    """Turns asked again on another model server in this run (bounded: `MAX_FAILOVERS`)."""

    @property
    def status(self) -> str:
        return self.outcome.status.value if self.outcome is not None else "in_progress"


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
    outcome: RunOutcome


NextAction = CallModel | ExecuteTools | AwaitApproval | Finish
