"""The single-turn fast path: a run that needs one model turn and no decision of the driver's.

Most chat-completions requests through the proxy are one model call whose answer is handed
back as it is: the calls are clean (the adapter's assembler made them so) and go to the caller,
or the text is the answer. For those, the driver's machinery (its run state, tool executor,
hold-back, the events of every step) is cost without effect. `run_single_turn` makes that one
model turn itself and, when the turn stands, reports it with the few events a run always ends
with (observers see the same model call, tokens, returned calls and outcome they would have).

The moment the turn needs the driver (a call that must be re-asked because its name or
arguments are wrong, a tool call leaked into the text, an upstream error, an adapter failure),
it hands over (a call to repair or re-ask against its tool's schema included):
`LoopDriver.take_over` replays the turn already received and goes on exactly as
a run that had started in the driver, with no second model call for the same turn. Which
requests qualify (`eligible`) is narrow on purpose: no server-side tools, MCP servers,
approvals, resumed calls or context management, and a non-streaming turn.
"""

from __future__ import annotations

import asyncio

from toolwire.errors import StopReason
from toolwire.loop.deadline import Deadline
from toolwire.loop.driver import (
    CANCELLED,
    LoopDriver,
    Sink,
    caller_problem,
)
from toolwire.loop.events import (
    CallTarget,
    CancelCause,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    PlannedCall,
    ReasoningTextDelta,
    ToolCallsReturned,
)
from toolwire.loop.fitting import Fitting
from toolwire.loop.state import LoopRequest, LoopState, RunOutcome
from toolwire.loop.turn import TurnRead, answered, leaked_call, turn_request
from toolwire.transcript import AssistantMessage, ToolCall, Transcript
from toolwire.upstream.base import turn_batches
from toolwire.upstream.events import (
    ModelEvent,
    ReasoningDelta,
    Routed,
    TextDelta,
    UpstreamNote,
)


def eligible(request: LoopRequest) -> bool:
    """Whether the run can only be one model turn handed back as it is, unless it needs
    repair: nothing runs here, nothing waits, nothing is resumed or compacted."""
    return not (
        request.tools
        or request.toolsets
        or request.approvals
        or request.resume_calls
        or request.context is not None
        or request.settings.stream
        or request.settings.max_iterations < 1
    )


async def run_single_turn(driver: LoopDriver, request: LoopRequest, sink: Sink) -> LoopState:
    """Run `request` as `driver.run` would (same outcome, same events to observers); one
    model turn without the driver when nothing in it needs repair. `sink` sees text and
    reasoning as one delta each, then `LoopFinished`."""
    if not eligible(request):
        return await driver.run(request, sink)
    observed = driver.observe(request, sink) if driver.observe is not None else sink
    transcript: Transcript = [*request.history, *request.input]
    tools = list(request.client_tools)
    turn = turn_request(request, transcript, tools, request.tool_choice, stream=False)
    state = LoopState(transcript=transcript, output_start=len(request.history))
    observed(ModelCallStarted(1, bool(tools)))
    events: list[ModelEvent] = []
    read = TurnRead()
    text, reasoning, calls, usage = read.text, read.reasoning, read.calls, read.usage
    deadline = request.settings.deadline
    timer = Deadline(deadline)
    try:
        with timer:
            async for batch in turn_batches(driver.upstream, turn):
                for event in batch:
                    if isinstance(event, UpstreamNote):
                        if isinstance(event, Routed):
                            state.upstream = event.upstream
                        observed(event)  # repairs, retries, first token: observed as they happen
                        continue
                    events.append(event)
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, ReasoningDelta):
                        reasoning.append(event.text)
                    else:
                        read.take(event)
    except TimeoutError as exc:
        if not timer.expired():
            return await driver.take_over(request, observed, events, exc, upstream=state.upstream)
        state.usage.add(usage)
        message = f"the response ran past its deadline of {deadline:g} s"
        return _finish(state, observed, StopReason.DEADLINE, message, [])
    except asyncio.CancelledError:
        _finish(state, observed, StopReason.CANCELLED, CANCELLED, [], CancelCause.CLIENT)
        raise
    except Exception as exc:  # the driver decides what an upstream failure means
        return await driver.take_over(request, observed, events, exc, upstream=state.upstream)
    full_text = "".join(text)
    full_reasoning = "".join(reasoning)
    names = {spec.name for spec in tools}
    if calls and not _stand(request, calls, names, driver.upstream):
        # to be re-asked
        return await driver.take_over(request, observed, events, upstream=state.upstream)
    if await leaked_call(request, read, full_text, full_reasoning, names) is not None:
        # retried or salvaged
        return await driver.take_over(request, observed, events, upstream=state.upstream)
    state.usage.add(usage)
    if full_text:
        observed(OutputTextDelta(full_text))
    if full_reasoning:
        observed(ReasoningTextDelta(full_reasoning))
    said = AssistantMessage(full_text, calls, full_reasoning)
    transcript.append(said)
    plans = [PlannedCall(call, CallTarget.CALLER, "") for call in calls]
    finish_reason = read.finish_reason
    observed(
        ModelTurnCompleted(said, finish_reason, usage, plans, stop_sequence=read.stop_sequence)
    )
    if calls:
        state.pending_calls = calls
        observed(ToolCallsReturned(calls))
        return _finish(state, observed, StopReason.TOOL_CALLS, None, calls)
    state.final_text = full_text
    outcome = answered(finish_reason)
    return _finish(state, observed, outcome.reason, outcome.message, [])


def _stand(request: LoopRequest, calls: list[ToolCall], names: set[str], upstream: object) -> bool:
    """Whether the turn's calls go to the caller as they are; False: the driver re-asks."""
    declared = request.caller_tools
    fitting = Fitting(request, {}, upstream)
    for call in calls:
        if (
            call.name not in names
            # a grammar's check is CPU-bound in the model's text: the driver judges it in slices
            or (
                declared is not None
                and getattr(declared.get(call.name), "syntax", None) is not None
            )
            or caller_problem(request, call)
            or not fitting.untouched(call)  # to be repaired or re-asked (`loop/fitting.py`)
        ):
            return False
    return True


def _finish(
    state: LoopState,
    observed: Sink,
    reason: StopReason,
    message: str | None,
    calls: list[ToolCall],
    cause: CancelCause | None = None,
) -> LoopState:
    state.outcome = RunOutcome(reason, message)
    observed(
        LoopFinished(
            reason, message, state.final_text, state.usage, None, calls, cause, {}, state.upstream
        )
    )
    return state
