"""The library API: `Agent(upstream=..., model=..., tools=[...])`, then `await agent.run(...)`
or `async for event in agent.stream(...)`. A thin door onto `LoopDriver`; it decides nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from toolwire.errors import StopReason
from toolwire.loop.driver import LoopDriver
from toolwire.loop.events import LoopEvent
from toolwire.loop.pump import pump
from toolwire.loop.state import LoopRequest, LoopSettings, LoopState
from toolwire.tools.base import Tool, tool
from toolwire.tools.envelope import EnvelopeLimits
from toolwire.transcript import ToolCall, Transcript, TranscriptMessage, UserMessage
from toolwire.upstream.base import Sampling, Upstream
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import Usage


@dataclass(slots=True)
class RunResult:
    """What one `Agent.run` produced: the final text, how it ended, and everything on the way."""

    text: str
    status: str
    """completed, incomplete, failed or cancelled."""
    reason: StopReason | None
    """Why it stopped (a `str` enum: `answered`, `max_iterations`, `leaked_tool_call`, …)."""
    events: list[LoopEvent]
    usage: Usage
    transcript: Transcript = field(default_factory=list)
    message: str | None = None
    """The reason in words, for people (e.g. the upstream's error)."""
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """With `reason` `awaiting_approval`: the calls of `needs_approval` tools that wait for a
    decision; answer them with `Agent.approve`."""


class Agent:
    """An agent over any chat-completions server. `upstream` is an `Upstream` or a base URL."""

    def __init__(
        self,
        upstream: Upstream | str,
        model: str,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        instructions: str | None = None,
        *,
        settings: LoopSettings | None = None,
        limits: EnvelopeLimits | None = None,
        **request_options: Any,
    ) -> None:
        self.upstream: Upstream = (
            ChatCompletionsUpstream(upstream) if isinstance(upstream, str) else upstream
        )
        self.model = model
        self.tools = [t if isinstance(t, Tool) else tool(t) for t in tools]
        self.instructions = instructions
        self.settings = settings or LoopSettings()
        self.request_options = request_options
        self.driver = LoopDriver(self.upstream, limits=limits)
        self.history: Transcript = []
        self.pending_approvals: list[ToolCall] = []
        """Calls the last run left waiting for approval (see `approve`)."""

    def _request(self, user_input: str | Sequence[TranscriptMessage]) -> LoopRequest:
        messages: Transcript = (
            [UserMessage(user_input)] if isinstance(user_input, str) else list(user_input)
        )
        options = dict(self.request_options)
        sampling = {f.name: options.pop(f.name) for f in fields(Sampling) if f.name in options}
        return LoopRequest(
            model=self.model,
            input=messages,
            history=list(self.history),
            instructions=self.instructions,
            tools=self.tools,
            settings=self.settings,
            sampling=Sampling(**sampling),
            **options,
        )

    async def run(self, user_input: str | Sequence[TranscriptMessage]) -> RunResult:
        """Run the loop to its end. Later calls continue the same conversation."""
        events: list[LoopEvent] = []
        state = await self.driver.run(self._request(user_input), events.append)
        return self._result(state, events)

    async def stream(
        self, user_input: str | Sequence[TranscriptMessage]
    ) -> AsyncIterator[LoopEvent]:
        """The loop's events as they happen; the last is always `LoopFinished`."""
        states: list[LoopState] = []

        async def run(emit: Callable[[LoopEvent], None]) -> None:
            states.append(await self.driver.run(self._request(user_input), emit))

        async for event in pump(run):
            yield event
        self.history = states[0].transcript
        self.pending_approvals = list(states[0].pending_approvals)

    async def approve(self, decisions: bool | Mapping[str, bool] = True) -> RunResult:
        """Answer the calls the last run left awaiting approval, and go on: the approved ones
        run, a denied one is reported to the model as denied, then the loop continues to its
        end. `decisions`: True / False for all of them, or call id -> approve (a call left out
        is denied)."""
        pending = self.pending_approvals
        if not pending:
            raise ValueError("no tool call is awaiting approval")
        approvals = {
            call.id: decisions if isinstance(decisions, bool) else decisions.get(call.id, False)
            for call in pending
        }
        request = self._request([])
        request.resume_calls = list(pending)
        request.approvals = approvals
        events: list[LoopEvent] = []
        state = await self.driver.run(request, events.append)
        return self._result(state, events)

    def _result(self, state: LoopState, events: list[LoopEvent]) -> RunResult:
        self.history = state.transcript
        self.pending_approvals = list(state.pending_approvals)
        outcome = state.outcome
        return RunResult(
            state.final_text,
            state.status,
            outcome.reason if outcome else None,
            events,
            state.usage,
            state.transcript,
            outcome.message if outcome else None,
            list(state.pending_approvals),
        )

    async def aclose(self) -> None:
        await self.upstream.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
