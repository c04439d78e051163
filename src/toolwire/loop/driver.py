"""The loop driver (seed 001): one explicit state machine that owns a run on every door.

    start (claim approvals, list tool servers)
      -> CallModel -> (ExecuteTools -> CallModel)* -> Finish
                       ExecuteTools -> AwaitApproval -> Finish (awaiting_approval)

The driver decides everything about a run: model calls, which calls run here and which go back
to the caller, approvals (request, claim once, run or deny), budgets (`max_tool_calls`,
iterations, leak retries), cancellation, and the typed `RunOutcome`. Doors (library, CLI,
Responses, chat proxy) translate requests in and events out; they decide nothing. Persistence is
driven by the run's events: the optional `checkpoint` is awaited at `RunStarted`, at each
`StepReached` (before and after server-side calls run) and at `LoopFinished`, also when the run
is cancelled. The final write is part of the run: the checkpoint sees `LoopFinished` *before*
any sink does, so a terminal event always follows the write that stored it. A checkpoint that
raises `StoreError`, at any point including the last, ends the run `failed`
(`StopReason.STORE_ERROR`), decided here; `LoopSettings.deadline` bounds the whole run. A
cancelled run reports who cancelled it (`Cancellation`, `LoopFinished.cause`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Literal

import orjson

from toolwire import leaks
from toolwire.errors import (
    StopReason,
    StoreError,
    ToolsUnavailableError,
    ToolwireError,
    UpstreamError,
)
from toolwire.loop.approvals import ALREADY_USED, DENIED
from toolwire.loop.compaction import (
    Compactor,
    context_window,
    count_tokens,
    is_context_overflow,
)
from toolwire.loop.cooperative import Slice
from toolwire.loop.deadline import Deadline
from toolwire.loop.events import (
    ApprovalRequest,
    ApprovalRequested,
    CallArgumentsDelta,
    CallStreamStarted,
    CallTarget,
    CancelCause,
    ContextCompacted,
    LeakDetected,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    PlannedCall,
    ReasoningTextDelta,
    RunStarted,
    StepKind,
    StepReached,
    ToolCallsReturned,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolListingFinished,
    ToolListingStarted,
)
from toolwire.loop.fitting import Fitting, Misfits
from toolwire.loop.holdback import Holdback
from toolwire.loop.state import (
    AwaitApproval,
    CallModel,
    Cancellation,
    ExecuteTools,
    Finish,
    LoopRequest,
    LoopState,
    NextAction,
    RunOutcome,
    RunServices,
)
from toolwire.loop.turn import TurnRead, answered, leaked_call, turn_request
from toolwire.tools.base import ToolArgumentsError
from toolwire.tools.envelope import EnvelopeLimits
from toolwire.tools.executor import ToolExecutor, ToolResult
from toolwire.transcript import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.upstream.base import RoutingHints, TurnRequest, Upstream, turn_batches
from toolwire.upstream.events import (
    ModelEvent,
    ReasoningDelta,
    Routed,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnEnd,
    UpstreamNote,
    Usage,
)
from toolwire.wire.responses import new_id, now

Sink = Callable[[LoopEvent], None]
Checkpoint = Callable[[LoopEvent], Awaitable[None]]
Observe = Callable[[LoopRequest, Sink], Sink]
"""Wraps a run's sink with observers (metrics, traces; see `observe/`): every event reaches
them too, before the checkpoint sees it."""

LEAK_CORRECTION = (
    "Your previous message wrote a tool call as plain text ({family} format) instead of calling "
    "the tool. Text is never executed. If you need a tool, call it now through the tool-calling "
    "interface, with JSON arguments; otherwise answer in plain prose."
)
CANCELLED = "the client disconnected or the response was cancelled"
MAX_FAILOVERS = 3
"""Turns of one run asked again on another model server after one failed before anything of
the turn was shown (a router marks such failures `failover`)."""


async def _finish_despite_cancellation(finish: Coroutine[Any, Any, None]) -> None:
    """Run a cancelled run's last step (its `LoopFinished` and final checkpoint) to the end.
    A plain `shield` returns at the next cancellation (a server cancels a hung-up request's
    task more than once), which let the task end before the outcome was stored."""
    task = asyncio.ensure_future(finish)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
    task.result()


def caller_problem(request: LoopRequest, call: ToolCall) -> str | None:
    """Why a call of a caller-side tool cannot be handed back (None: it can). A `custom`
    tool's call is judged by its kind (free-form input, its grammar), not as JSON."""
    declared = request.caller_tools
    tool = declared.get(call.name) if declared is not None else None
    if tool is not None:
        return tool.problem(call)
    return None if call.ok else (call.parse_error or "arguments are not a JSON object")


async def _replayed(
    events: list[ModelEvent], error: BaseException | None
) -> AsyncIterator[list[ModelEvent]]:
    """A model turn already received, as the upstream gave it (`LoopDriver.take_over`)."""
    yield events
    if error is not None:
        raise error


class LoopDriver:
    """Runs `LoopRequest`s against one upstream."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        limits: EnvelopeLimits | None = None,
        observe: Observe | None = None,
    ) -> None:
        self.upstream = upstream
        self.limits = limits or EnvelopeLimits()
        self.observe = observe

    async def run(
        self,
        request: LoopRequest,
        sink: Sink,
        *,
        checkpoint: Checkpoint | None = None,
        cancellation: Cancellation | None = None,
        services: RunServices | None = None,
    ) -> LoopState:
        """Drive the run to its outcome; always emits `LoopFinished` last, also when cancelled
        (then the outcome is `cancelled`, checkpointed, and the cancellation re-raised).
        `cancellation`: where whoever cancels the run's task says why, first. `services`: the
        approval ledger and signer, the compaction seal (the request itself is only data,
        never edited here)."""
        if self.observe is not None:
            sink = self.observe(request, sink)
        run = _Run(self, request, sink, checkpoint, cancellation, services or RunServices())
        return await run.drive()

    async def take_over(
        self,
        request: LoopRequest,
        observed: Sink,
        first_turn: list[ModelEvent],
        error: BaseException | None = None,
        *,
        upstream: str | None = None,
    ) -> LoopState:
        """Take over a run whose first model turn a door's fast path already made
        (`loop/quick.py`), because it needs the driver (a call to repair, a leak, an error):
        the run replays `first_turn` (and then raises `error`, as the upstream did) instead of
        calling the upstream again, and goes on from there as any run would. `observed` is
        the sink the fast path already wrapped with the observers; the turn's
        `ModelCallStarted` and upstream notes have been observed, so they are not again
        (`upstream`: the model server the turn was routed to, from its `Routed` note)."""
        run = _Run(self, request, observed, None, None, RunServices())
        run.replay = (first_turn, error)
        run.state.upstream = upstream
        return await run.drive()


class _Run:
    """One run's moving parts; the transitions are the methods named after `NextAction`s."""

    def __init__(
        self,
        driver: LoopDriver,
        request: LoopRequest,
        sink: Sink,
        checkpoint: Checkpoint | None,
        cancellation: Cancellation | None,
        services: RunServices,
    ) -> None:
        self.upstream = driver.upstream
        self.request = request
        self.services = services
        self.approvals = dict(request.approvals)
        """The decisions this run applies: those of the request, less any already used."""
        self.resume_calls = list(request.resume_calls)
        self.settings = request.settings
        self.emit = sink
        self.checkpoint = checkpoint
        self.cancellation = cancellation
        self.executor = ToolExecutor(
            request.tools, limits=driver.limits, max_concurrency=self.settings.max_concurrent_tools
        )
        self.client_names = {spec.name for spec in request.client_tools}
        self.fitting = Fitting(request, self.executor.tools, driver.upstream)
        """Calls checked against their tools' schemas (`loop/fitting.py`)."""
        self.judged: dict[int, tuple[ToolCall, str | None]] = {}
        """Caller-tool calls already judged (`judge_calls`), by identity: ids may repeat."""
        self.replay: tuple[list[ModelEvent], BaseException | None] | None = None
        transcript: Transcript = [*request.history]
        self.state = LoopState(transcript=transcript, output_start=len(transcript))
        transcript.extend(request.input)

    async def drive(self) -> LoopState:
        deadline = self.settings.deadline
        try:
            timer = Deadline(deadline)
            try:
                with timer:
                    action = await self.advance()
            except TimeoutError:
                if not timer.expired():
                    raise
                message = f"the response ran past its deadline of {deadline:g} s"
                action = Finish(RunOutcome(StopReason.DEADLINE, message))
            except StoreError as exc:
                action = Finish(RunOutcome(StopReason.STORE_ERROR, exc.message, exc))
        except asyncio.CancelledError:
            told = self.cancellation.cause if self.cancellation is not None else None
            cause = told or CancelCause.CLIENT
            await _finish_despite_cancellation(
                self.finish(RunOutcome(StopReason.CANCELLED, CANCELLED), cause)
            )
            raise
        await self.finish(action.outcome)
        return self.state

    async def advance(self) -> Finish:
        await self.record(RunStarted(self.request.run_id))
        action = await self.start()
        while not isinstance(action, Finish):
            if isinstance(action, CallModel):
                action = await self.call_model()
            elif isinstance(action, ExecuteTools):
                action = await self.execute_tools(action.calls)
            else:
                action = self.await_approval(action)
        return action

    async def record(self, event: LoopEvent) -> None:
        self.emit(event)
        if self.checkpoint is not None:
            await self.checkpoint(event)

    # -- start ----------------------------------------------------------------------------

    async def start(self) -> NextAction:
        """Claim the approvals this request decides, then list the tool servers it uses."""
        await self.claim_approvals()
        for toolset in self.request.toolsets:
            listing = toolset.listing
            if listing is None:
                self.emit(ToolListingStarted(toolset.label))
                try:
                    listing = await toolset.list_tools()
                except Exception as exc:  # any failure to list ends the run as OpenAI's 424
                    message = f"could not list the tools of MCP server {toolset.label!r}: {exc}"
                    self.emit(ToolListingFinished(toolset.label, [], message))
                    error = ToolsUnavailableError(message, code=StopReason.TOOLS_UNAVAILABLE)
                    return Finish(RunOutcome(StopReason.TOOLS_UNAVAILABLE, message, error))
                self.emit(ToolListingFinished(toolset.label, listing))
            for tool in toolset.tools(listing):
                self.executor.tools[tool.name] = tool
        context = self.request.context
        if context is not None and context.compact_now:
            return await self.compact("requested") or Finish(RunOutcome(StopReason.ANSWERED))
        resume = self.resume_calls
        return ExecuteTools(list(resume)) if resume else CallModel()

    async def claim_approvals(self) -> None:
        """Each decision runs at most once, across every branch of history: it is recorded
        first, and a decision that was already recorded runs nothing."""
        request = self.request
        ledger = self.services.ledger
        for call in list(self.resume_calls):
            approve = self.approvals[call.id]
            if ledger is None or await ledger.claim_approval(
                call.id, request.run_id, approve, now()
            ):
                continue
            self.resume_calls.remove(call)
            self.approvals.pop(call.id, None)
            result = self.executor.error(call, ALREADY_USED)
            self.state.transcript.append(ToolMessage(call.id, call.name, result.text))

    # -- CallModel ------------------------------------------------------------------------

    def turn_request(self) -> TurnRequest:
        req = self.request
        offer_tools = not self.state.tools_exhausted
        specs = (
            [t.spec for t in self.executor.tools.values()] + list(req.client_tools)
            if offer_tools
            else []
        )
        return turn_request(
            req,
            self.state.transcript,
            specs,
            self.tool_choice(),
            stream=self.settings.stream,
            routing=self.routing(),
        )

    def routing(self) -> RoutingHints:
        """The door's hints, less the model servers this run's turns already failed on."""
        hints = self.request.routing
        avoid = self.state.avoid
        if not avoid:
            return hints
        return RoutingHints(hints.upstream, hints.session, hints.avoid | frozenset(avoid))

    def tool_choice(self) -> str | dict[str, Any] | None:
        """A forced choice (`required`, a named function) applies until a tool has run; after
        that the model must be free to answer, or it could only ever call tools again."""
        choice = self.request.tool_choice
        if self.state.tool_calls_made and choice not in (None, "auto", "none"):
            return "auto"
        return choice

    def live_target(self, name: str) -> tuple[CallTarget, str] | None:
        """Where a call that just began streaming goes, if it may be shown live: a caller's
        function, or a server tool whose calls never wait for approval (one that might must
        first be judged on its final arguments)."""
        if self.state.tools_exhausted or not self.settings.live_calls:
            return None  # a door that hands calls over whole (`LoopSettings.live_calls`)
        if not self.fitting.streams_live(name):
            return None  # judged first (`loop/fitting.py`), then sent whole
        tool = self.executor.tools.get(name)
        if tool is None:
            return (CallTarget.CALLER, "") if name in self.client_names else None
        if tool.may_require_approval():
            return None
        return CallTarget.SERVER, tool.server_label

    def plan(self, call: ToolCall) -> PlannedCall:
        """What the run does with a final call."""
        tool = self.executor.tools.get(call.name)
        if tool is not None:
            return PlannedCall(call, CallTarget.SERVER, tool.server_label)
        if call.name in self.client_names and self.caller_problem(call) is None:
            return PlannedCall(call, CallTarget.CALLER, "")
        return PlannedCall(call, CallTarget.REJECTED, "")

    def caller_problem(self, call: ToolCall) -> str | None:
        """Why a call of a caller-side tool cannot be handed back (None: it can). A `custom`
        tool's call is judged by its kind (free-form input, its grammar), not as JSON."""
        judged = self.judged.get(id(call))
        if judged is not None and judged[0] is call:
            return judged[1]
        return caller_problem(self.request, call)

    async def judge_calls(self, calls: list[ToolCall]) -> None:
        """Judge the calls of caller-side tools with a grammar in slices that yield to the
        event loop: the check is CPU-bound in the model's text (seconds for a megabyte), and
        every other request is served meanwhile."""
        declared = self.request.caller_tools
        if not declared:
            return
        for call in calls:
            tool = declared.get(call.name)
            if tool is not None and tool.syntax is not None:
                known = self.judged.get(id(call))
                if known is None or known[0] is not call:
                    self.judged[id(call)] = (call, await tool.problem_async(call))

    async def call_model(self) -> NextAction:
        state = self.state
        if state.iterations >= self.settings.max_iterations:
            return Finish(
                RunOutcome(
                    StopReason.MAX_ITERATIONS,
                    f"the loop reached its cap of {self.settings.max_iterations} model calls "
                    "without a final answer",
                )
            )
        state.iterations += 1
        turn = self.turn_request()
        policy = self.request.context
        grown = len(state.transcript) > state.compacted_size
        if policy is not None and policy.compact_threshold is not None and grown:
            tokens = await count_tokens(self.upstream, turn)
            if tokens > policy.compact_threshold:
                failed = await self.compact("threshold", tokens)
                if failed is not None:
                    return failed
                turn = self.turn_request()
        replay, self.replay = self.replay, None
        if replay is None:
            self.emit(ModelCallStarted(state.iterations, bool(turn.tools)))
            source = turn_batches(self.upstream, turn)
        else:
            source = _replayed(*replay)
        names = self.declared_names()
        held = Holdback(hold_all=bool(state.leak_prose), names=names)
        thinking = Holdback(names=names)  # calls written in the reasoning are leaks too
        turn_work = Slice()  # the hold-back's judging must not hold the event loop
        read = TurnRead()
        text, reasoning, calls, usage = read.text, read.reasoning, read.calls, read.usage
        live: set[int] = set()
        try:
            async for batch in source:
                for event in batch:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                        if thinking.holding and event.text.strip():
                            # the answer began: the reasoning's calls are no leaks any more
                            self.emit(ReasoningTextDelta(thinking.release()))
                        shown = await held.take(event.text, turn_work)
                        if shown:
                            self.emit(OutputTextDelta(shown))
                    elif isinstance(event, ToolCallArgumentsDelta):
                        if event.key in live:
                            self.emit(CallArgumentsDelta(event.key, event.delta))
                    elif isinstance(event, ReasoningDelta):
                        reasoning.append(event.text)
                        thought = await thinking.take(event.text, turn_work)
                        if thought:
                            self.emit(ReasoningTextDelta(thought))
                    elif isinstance(event, ToolCallStarted):
                        target = self.live_target(event.name)
                        if target is not None:
                            live.add(event.key)
                            self.emit(CallStreamStarted(event.key, event.id, event.name, *target))
                    elif isinstance(event, ToolCallDone | Usage | TurnEnd):
                        read.take(event)
                    elif isinstance(event, UpstreamNote):
                        if isinstance(event, Routed):
                            state.upstream = event.upstream
                        self.emit(event)  # repairs, retries, first token: for observers only
        except ToolwireError as exc:
            state.usage.add(usage)
            if self.fails_over(exc, held, thinking, live):
                return CallModel()
            if self.compacts_for(exc) and not (read.said_anything or live):
                state.compacted_for_overflow = True
                state.iterations -= 1  # the refused call is made again, compacted
                window = context_window(exc)
                return await self.compact("context_full", limit=window) or CallModel()
            return Finish(RunOutcome(StopReason.UPSTREAM_ERROR, exc.message, exc))
        except Exception as exc:  # an adapter bug must still end the run as a stored failure
            state.usage.add(usage)
            error = UpstreamError(f"the upstream adapter failed: {type(exc).__name__}: {exc}")
            return Finish(RunOutcome(StopReason.UPSTREAM_ERROR, error.message, error))
        state.usage.add(usage)
        state.compacted_for_overflow = False
        full_text = "".join(text)
        full_reasoning = "".join(reasoning)

        finish_reason = read.finish_reason
        if state.tools_exhausted:
            calls = []  # the last call was offered no tools; whatever it wrote is its answer
        else:
            names = self.declared_names()
            leak = await leaked_call(
                self.request, read, full_text, full_reasoning, names, turn_work
            )
            if leak is not None:
                in_reasoning = leak[1]
                if thinking.holding:  # the reasoning before a call in it, or all of it
                    upto = leak[0].start if in_reasoning else None
                    self.emit(ReasoningTextDelta(thinking.release(upto)))
                return self.on_leak(full_text, full_reasoning, leak, held, usage)
        if thinking.holding:  # no leak in it: the reasoning held back goes out whole
            self.emit(ReasoningTextDelta(thinking.release()))

        if calls:  # calls that fit their tools: repaired in place, or re-asked
            misfits = self.fitting.judge(calls, self.emit)
            if misfits:
                turn_end = (full_text, full_reasoning, finish_reason)
                return self.reask_misfits(turn_end, calls, misfits, held, usage)

        shown = held.release()
        if shown and not self.repeats_leak_prose(shown):
            self.emit(OutputTextDelta(shown))
        state.leak_prose = ""  # a turn without a leak: the next streams live again
        message = AssistantMessage(full_text, calls, full_reasoning)
        await self.judge_calls(calls)
        plans = [self.plan(call) for call in calls]
        state.transcript.append(message)
        self.emit(
            ModelTurnCompleted(
                message, finish_reason, usage, plans, stop_sequence=read.stop_sequence
            )
        )
        if calls:
            return ExecuteTools(calls)
        state.final_text = full_text
        return Finish(answered(finish_reason))

    def reask_misfits(
        self,
        turn_end: tuple[str, str, str],
        calls: list[ToolCall],
        misfits: Misfits,
        held: Holdback,
        usage: Usage,
    ) -> NextAction:
        """Re-ask a turn whose calls do not fit their tools (`loop/fitting.py`): the model
        reads its turn back with an error result for each call; sinks see a turn without
        calls, so nothing of them reaches the client."""
        text, reasoning, finish_reason = turn_end
        state = self.state
        shown = held.release()
        if shown and not self.repeats_leak_prose(shown):
            self.emit(OutputTextDelta(shown))
        state.transcript.append(AssistantMessage(text, calls, reasoning))
        state.transcript.extend(
            self.fitting.reask(calls, misfits, self.executor.error, self.rejection_of)
        )
        state.leak_prose = state.leak_prose or text.strip()  # the retry's prose is shown once
        self.emit(ModelTurnCompleted(AssistantMessage(text, [], reasoning), finish_reason, usage))
        return CallModel()

    def fails_over(
        self, error: ToolwireError, held: Holdback, thinking: Holdback, live: set[int]
    ) -> bool:
        """A turn whose model server failed (marked `failover` by a router: another one may
        answer) is made again elsewhere if the client was shown nothing of it: no text and
        no reasoning out of their hold-backs, no call streaming live."""
        state = self.state
        replica = getattr(error, "replica", None)
        if not getattr(error, "failover", False) or replica is None:
            return False
        shown = held.released or thinking.released or live
        if shown or state.failovers >= MAX_FAILOVERS:
            return False
        state.failovers += 1
        state.avoid.add(replica)
        state.iterations -= 1  # the failed call is made again, not counted twice
        return True

    # -- compaction (`context_management`) ------------------------------------------------

    def compacts_for(self, error: ToolwireError) -> bool:
        """A model call refused because its prompt does not fit is made again once, after a
        compaction, if the request manages its context."""
        return (
            self.request.context is not None
            and is_context_overflow(error)
            and not self.state.compacted_for_overflow
        )

    async def compact(
        self,
        trigger: Literal["threshold", "context_full", "requested"],
        tokens: int | None = None,
        limit: int | None = None,
    ) -> Finish | None:
        """Replace the transcript with a compaction of it; the `compaction` item goes out.
        A compaction that fails (the summarizing call failed) ends the run with that error.
        `limit`: the context window a refusal named, if smaller than the threshold."""
        policy = self.request.context
        assert policy is not None
        state = self.state
        bounds = [n for n in (policy.compact_threshold, limit) if n]
        compactor = Compactor(self.upstream, self.request.model, min(bounds) if bounds else None)
        try:
            context = await compactor.compact(state.transcript, self.request.instructions)
        except ToolwireError as exc:
            state.usage.add(compactor.usage)
            message = f"the transcript could not be compacted: {exc.message}"
            return Finish(RunOutcome(StopReason.UPSTREAM_ERROR, message, exc))
        state.usage.add(compactor.usage)
        state.transcript[:] = context.transcript()
        state.output_start = 0
        state.compacted_size = len(state.transcript)
        seal = self.services.seal or policy.seal
        item_id, sealed = new_id("cmp"), seal(context)
        self.emit(ContextCompacted(item_id, sealed, compactor.usage, trigger, tokens))
        return None

    # -- leaks ----------------------------------------------------------------------------

    def declared_names(self) -> set[str]:
        """The tools a model call offers by name: a call written as text with prose after it
        is a leak only if it calls one of them (`leaks.standalone`)."""
        return {*self.executor.tools, *self.client_names}

    def on_leak(
        self,
        text: str,
        reasoning: str,
        leak: tuple[leaks.LeakMatch, bool],
        held: Holdback,
        usage: Usage,
    ) -> NextAction:
        match, in_reasoning = leak
        state = self.state
        kept = text if in_reasoning else text[: match.start]
        if self.settings.leak_mode == "salvage":
            calls = self.salvage(reasoning if in_reasoning else text, match)
            if calls is not None:
                self.emit(LeakDetected(match.family, match.snippet, state.leak_retries, "salvaged"))
                # judged as structured calls are (`loop/fitting.py`): repaired, or re-asked
                misfits = self.fitting.judge(calls, self.emit)
                if misfits:
                    reask = self.fitting.reask(
                        calls, misfits, self.executor.error, self.rejection_of
                    )
                    self.close_turn(kept, held, usage, calls, reask)
                    state.leak_prose = state.leak_prose or kept.strip()
                    return CallModel()
                self.close_turn(kept, held, usage, calls)
                return ExecuteTools(calls)
        if state.leak_retries >= self.settings.leak_retries:
            self.emit(LeakDetected(match.family, match.snippet, state.leak_retries, "gave_up"))
            self.close_turn(kept, held, usage, [])
            return Finish(
                RunOutcome(
                    StopReason.LEAKED_TOOL_CALL,
                    f"the model wrote its tool call as text ({match.family} format) instead of "
                    f"a structured call, {state.leak_retries + 1} times in a row; nothing was "
                    "executed. The model server's tool-call parser is probably missing or does "
                    "not match this model (vLLM: --enable-auto-tool-choice --tool-call-parser "
                    "<name>; llama.cpp: --jinja; SGLang: --tool-call-parser).",
                )
            )
        state.leak_retries += 1
        self.emit(LeakDetected(match.family, match.snippet, state.leak_retries, "retry"))
        self.close_turn(kept, held, usage, [])
        state.leak_prose = state.leak_prose or kept.strip()
        state.transcript.append(
            UserMessage(LEAK_CORRECTION.format(family=match.family), hidden=True)
        )
        return CallModel()

    def close_turn(
        self,
        kept: str,
        held: Holdback,
        usage: Usage,
        calls: list[ToolCall],
        reask: list[ToolMessage] | None = None,
    ) -> None:
        """End a turn whose leaked text is dropped: show and keep only what came before it.
        The leak itself was held back, so it never left; if the hold's bound let part of it
        out, `ModelTurnCompleted.shown_text` tells sinks the text the turn really keeps.
        `reask`: the salvaged `calls` did not fit their tools; the model reads them back with
        these results, and sinks see a turn without calls."""
        overflowed = held.released > len(kept)
        shown = held.release(len(kept))
        if shown and not self.repeats_leak_prose(shown):
            self.emit(OutputTextDelta(shown))
        message = AssistantMessage(kept.rstrip(), calls)
        if kept.strip() or calls:
            self.state.transcript.append(message)
        if reask is not None:
            self.state.transcript.extend(reask)
            message, calls = AssistantMessage(kept.rstrip(), []), []
        plans = [self.plan(call) for call in calls]
        finish = "tool_calls" if calls else "stop"
        self.emit(ModelTurnCompleted(message, finish, usage, plans, kept if overflowed else None))

    def repeats_leak_prose(self, shown: str) -> bool:
        """Text a retried turn writes again after a leaked attempt already showed it."""
        prose = self.state.leak_prose
        return bool(prose) and shown.strip() == prose

    def salvage(self, text: str, match: leaks.LeakMatch) -> list[ToolCall] | None:
        """Leaked calls turned into real ones, only if every name is declared; otherwise None
        and the caller falls back to a retry. Their arguments are then judged against the
        tool's schema as a structured call's are (`loop/fitting.py`); where that check is off
        or the tool's schema unusable, a server tool's call must pass the tool's own check."""
        try:
            salvaged = leaks.salvage_calls(text, match)
        except leaks.SalvageError:
            return None
        calls: list[ToolCall] = []
        for item in salvaged:
            tool = self.executor.tools.get(item.name)
            if tool is None and item.name not in self.client_names:
                return None
            checked = self.fitting.enabled and self.fitting.schema(item.name) is not None
            if tool is not None and not checked:
                try:
                    tool.validate(item.arguments)
                except ToolArgumentsError:
                    return None
            arguments = self.fitting.salvaged(item.name, item.arguments, item.texts)
            raw = orjson.dumps(arguments).decode()
            calls.append(ToolCall("call_" + secrets.token_hex(12), item.name, arguments, raw))
        return calls or None

    # -- ExecuteTools ---------------------------------------------------------------------

    async def execute_tools(self, calls: list[ToolCall]) -> NextAction:
        """Run what runs here, hand back what the caller runs, report what cannot run.

        `max_tool_calls` counts the calls the gateway runs (server tools), as OpenAI counts
        built-in tools; calls beyond it are not run and the model answers without tools."""
        state = self.state
        limit = self.settings.max_tool_calls
        await self.judge_calls(calls)  # salvaged calls come here unjudged
        plans = [self.plan(call) for call in calls]
        results: dict[str, ToolResult] = {}
        runnable: list[PlannedCall] = []
        waiting: list[PlannedCall] = []
        returned: list[ToolCall] = []
        for plan in plans:
            call = plan.call
            if plan.target is CallTarget.REJECTED:
                results[call.id] = self.executor.error(call, self.rejection(call))
            elif plan.target is CallTarget.CALLER:
                returned.append(call)
            elif limit is not None and state.tool_calls_made >= limit:
                state.tools_exhausted = True
                refused = self.executor.error(
                    call,
                    f"not executed: this response may make at most {limit} tool calls "
                    "(max_tool_calls) and has made them; answer with what you have",
                )
                results[call.id] = refused
                self.emit(ToolExecutionFinished(call, refused, plan.server_label))
            elif self.needs_decision(call):
                waiting.append(plan)
            else:
                state.tool_calls_made += 1
                runnable.append(plan)
        if limit is not None and state.tool_calls_made >= limit:
            state.tools_exhausted = True

        if runnable:
            results.update(await self.run_calls(runnable))
        for plan in plans:
            result = results.get(plan.call.id)
            if result is not None:
                state.transcript.append(ToolMessage(plan.call.id, plan.call.name, result.text))
        if runnable:
            await self.record(StepReached(StepKind.TOOLS_FINISHED))
        if returned:
            state.pending_calls = returned
            self.emit(ToolCallsReturned(returned))
        if waiting:
            return AwaitApproval([plan.call for plan in waiting])
        if returned:
            return Finish(RunOutcome(StopReason.TOOL_CALLS))
        repeated = self.repeated_failure(calls, results)
        if repeated is not None:
            return Finish(RunOutcome(StopReason.REPEATED_FAILURE, repeated))
        return CallModel()

    def rejection(self, call: ToolCall) -> str:
        """What the model reads about a call that cannot run, so that it can re-issue it."""
        available = ", ".join(sorted([*self.executor.tools, *self.client_names])) or "none"
        if call.name in self.client_names:
            reason = self.caller_problem(call) or "arguments are not a JSON object"
        else:
            reason = call.parse_error or f"unknown tool {call.name!r}"
        parts = [f"the tool call could not be used: {reason}."]
        if call.raw_arguments:
            parts.append(f"Arguments as received: {call.raw_arguments}")
        if call.name in self.client_names:
            parts.append(f"Call {call.name} again with one JSON object as its arguments.")
        else:
            parts.append(f"Available tools: {available}")
        return " ".join(parts)

    def rejection_of(self, call: ToolCall) -> str | None:
        """`rejection(call)` for a call that cannot run at all; None for one that can."""
        return self.rejection(call) if self.plan(call).target is CallTarget.REJECTED else None

    def needs_decision(self, call: ToolCall) -> bool:
        tool = self.executor.tools.get(call.name)
        if tool is None or not call.ok or call.id in self.approvals:
            return False
        return tool.requires_approval(call.arguments or {})

    async def run_calls(self, plans: list[PlannedCall]) -> dict[str, ToolResult]:
        """Approved (or approval-free) calls run; denied ones are only reported to the model:
        a call that never ran leaves no `mcp_call` behind."""
        approvals = self.approvals
        results: dict[str, ToolResult] = {}
        running: list[PlannedCall] = []
        for plan in plans:
            if approvals.get(plan.call.id, True):
                running.append(plan)
            else:
                results[plan.call.id] = self.executor.error(plan.call, DENIED)
        for plan in running:
            self.emit(ToolExecutionStarted(plan.call, plan.server_label, self.answered(plan.call)))
        if running:
            await self.record(StepReached(StepKind.TOOLS_STARTING))
        outcomes = await self.executor.execute([plan.call for plan in running])
        for plan, result in zip(running, outcomes, strict=True):
            results[plan.call.id] = result
            self.emit(
                ToolExecutionFinished(
                    plan.call, result, plan.server_label, self.answered(plan.call)
                )
            )
        return results

    def answered(self, call: ToolCall) -> str | None:
        """The approval request a call answers, if it waited for one."""
        return call.id if call.id in self.approvals else None

    def repeated_failure(self, calls: list[ToolCall], results: dict[str, ToolResult]) -> str | None:
        for call in calls:
            result = results.get(call.id)
            if result is None or result.ok:
                continue
            key = (call.name, call.raw_arguments.strip())
            count = self.state.failures[key] = self.state.failures.get(key, 0) + 1
            if count >= self.settings.repeated_failure_limit:
                return (
                    f"the same failing call {call.name}({call.raw_arguments}) was made {count} "
                    f"times; stopping instead of looping. Last error: {result.error}"
                )
        return None

    # -- AwaitApproval and Finish ---------------------------------------------------------

    def await_approval(self, action: AwaitApproval) -> NextAction:
        self.state.pending_approvals = action.calls
        issue = self.services.approval_ids
        requests = []
        for call in action.calls:
            label = self.plan(call).server_label
            arguments = call.arguments_json()
            request_id = issue(label, call.name, arguments) if issue is not None else new_id("mcpr")
            requests.append(ApprovalRequest(request_id, call, label))
        self.emit(ApprovalRequested(requests))
        return Finish(RunOutcome(StopReason.AWAITING_APPROVAL, "a tool call waits for approval"))

    async def finish(self, outcome: RunOutcome, cause: CancelCause | None = None) -> None:
        """The final write, then the outcome: the checkpoint stores the run's end before any
        sink sees `LoopFinished`; a write that fails makes the outcome `STORE_ERROR`."""
        state = self.state
        finished = self.finished(outcome, cause)
        if self.checkpoint is not None:
            try:
                await self.checkpoint(finished)
            except StoreError as exc:
                outcome = RunOutcome(StopReason.STORE_ERROR, exc.message, exc)
                finished = self.finished(outcome, None)
        state.outcome = outcome
        self.emit(finished)

    def finished(self, outcome: RunOutcome, cause: CancelCause | None) -> LoopFinished:
        state = self.state
        return LoopFinished(
            outcome.reason,
            outcome.message,
            state.final_text,
            state.usage,
            outcome.error,
            list(state.pending_calls),
            cause,
            dict(self.approvals),
            state.upstream,
        )
