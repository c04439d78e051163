"""The library API: `Agent(upstream=..., model=..., tools=[...])`, then `await agent.run(...)`
or `async for event in agent.stream(...)`. A thin door onto `LoopDriver`; it decides nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.loop.driver import LoopDriver
from toolwire.loop.events import LoopEvent, LoopFinished
from toolwire.loop.state import LoopRequest, LoopSettings, LoopState
from toolwire.tools.base import Tool, tool
from toolwire.tools.envelope import EnvelopeLimits
from toolwire.transcript import Transcript, TranscriptMessage, UserMessage
from toolwire.upstream.base import Upstream
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import Usage


@dataclass(slots=True)
class RunResult:
    """What one `Agent.run` produced: the final text, how it ended, and everything on the way."""

    text: str
    status: str
    reason: str | None
    events: list[LoopEvent]
    usage: Usage
    transcript: Transcript = field(default_factory=list)


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

    def _request(self, user_input: str | Sequence[TranscriptMessage]) -> LoopRequest:
        messages: Transcript = (
            [UserMessage(user_input)] if isinstance(user_input, str) else list(user_input)
        )
        return LoopRequest(
            model=self.model,
            input=messages,
            history=list(self.history),
            instructions=self.instructions,
            tools=self.tools,
            settings=self.settings,
            **self.request_options,
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
        queue: asyncio.Queue[LoopEvent] = asyncio.Queue()
        task = asyncio.create_task(self.driver.run(self._request(user_input), queue.put_nowait))
        try:
            while True:
                event = await queue.get()
                yield event
                if isinstance(event, LoopFinished):
                    break
            self.history = (await task).transcript
        finally:
            if not task.done():
                task.cancel()

    def _result(self, state: LoopState, events: list[LoopEvent]) -> RunResult:
        self.history = state.transcript
        return RunResult(
            state.final_text, state.status, state.reason, events, state.usage, state.transcript
        )

    async def aclose(self) -> None:
        await self.upstream.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
