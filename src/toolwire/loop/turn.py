"""One model turn, as the driver and the single-turn fast path (`loop/quick.py`) both make it:
the request it sends, what it said (read from its events), whether its text leaked a call, and
how a turn without calls ends the run. Both paths call these, so a turn judged on the fast path
is judged exactly as the driver would judge it (and handed over to the driver when it must be).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire import leaks
from toolwire.errors import StopReason
from toolwire.loop.cooperative import Slice
from toolwire.loop.state import LoopRequest, RunOutcome
from toolwire.transcript import SystemMessage, ToolCall, ToolSpec, Transcript
from toolwire.upstream.base import RoutingHints, TurnRequest
from toolwire.upstream.events import ModelEvent, ToolCallDone, TurnEnd, Usage

#: Turns longer than this (characters of text and reasoning) are judged for leaked calls
#: off the event loop; shorter ones cost less than the hand-over to a thread.
OFF_LOOP_LEAK_CHECK_CHARS = 64 * 1024

Leak = tuple[leaks.LeakMatch, bool]


def turn_request(
    request: LoopRequest,
    transcript: Transcript,
    specs: Sequence[ToolSpec],
    tool_choice: str | dict[str, Any] | None,
    *,
    stream: bool,
    routing: RoutingHints | None = None,
) -> TurnRequest:
    """The model call for `transcript` with the tools on offer (`specs`): the request's
    instructions first, its sampling, and a tool choice only when tools are offered.
    `routing`: where the call would best go (a fleet's router); None: the request's hints."""
    if request.instructions:
        transcript = [SystemMessage(request.instructions), *transcript]
    else:
        transcript = list(transcript)
    tools = list(specs)
    return TurnRequest(
        model=request.model,
        transcript=transcript,
        tools=tools,
        tool_choice=tool_choice if tools else None,
        parallel_tool_calls=request.parallel_tool_calls if tools else None,
        sampling=request.sampling,
        stream=stream,
        routing=request.routing if routing is None else routing,
    )


@dataclass(slots=True)
class TurnRead:
    """What a turn said, gathered from its events. The text and reasoning pieces are appended
    by the reader (the driver streams them through its hold-back as they come); `take` gathers
    the rest: the finished calls, the usage, how the turn ended."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    stop_sequence: str | None = None

    def take(self, event: ModelEvent) -> None:
        if isinstance(event, ToolCallDone):
            self.calls.append(event.call)
        elif isinstance(event, Usage):
            self.usage.add(event)
        elif isinstance(event, TurnEnd):
            self.finish_reason = event.finish_reason
            self.stop_sequence = event.stop_sequence

    @property
    def said_anything(self) -> bool:
        return bool(self.text or self.reasoning or self.calls)


def find_leak(text: str, reasoning: str, names: Collection[str] | None = None) -> Leak | None:
    """Leaked calls in the visible text, or in the reasoning if nothing is visible (True:
    found in the reasoning). `names`: the declared tools (`leaks.detect_leak`)."""
    match = leaks.detect_leak(text, names)
    if match is not None:
        return match, False
    if not text.strip() and reasoning:
        match = leaks.detect_leak_in_reasoning(reasoning, text, names)
        if match is not None:
            return match, True
    return None


async def leaked_call(
    request: LoopRequest,
    read: TurnRead,
    text: str,
    reasoning: str,
    names: Collection[str],
    work: Slice | None = None,
) -> Leak | None:
    """A call the turn wrote as text instead of calling it: looked for only in a turn that
    made no call, was not cut off, while leak recovery is on and tools were on offer. A long
    turn is judged on a worker thread: the interpreter hands the event loop's thread the GIL
    every few ms, so `/health` and other requests go on. `work`: the turn's slice of the
    event loop (the driver's), given way before judging, which is a step of its own."""
    if read.calls or read.finish_reason == "length" or request.settings.leak_mode == "off":
        return None
    if not names:
        return None  # nothing was on offer: nothing to call
    if work is not None:
        await work.give_way()
    if len(text) + len(reasoning) > OFF_LOOP_LEAK_CHECK_CHARS:
        return await asyncio.to_thread(find_leak, text, reasoning, names)
    return find_leak(text, reasoning, names)


_ENDINGS = {
    "length": (StopReason.MAX_OUTPUT_TOKENS, "the answer was cut off by the token limit"),
    "content_filter": (StopReason.CONTENT_FILTER, "the upstream filtered the answer"),
}


def answered(finish_reason: str) -> RunOutcome:
    """How a turn without calls ends the run: answered, cut off by the token limit, or
    filtered by the upstream."""
    reason, message = _ENDINGS.get(finish_reason, (StopReason.ANSWERED, None))
    return RunOutcome(reason, message)
