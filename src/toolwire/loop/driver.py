"""The loop driver (seed 001): one explicit state machine for every surface.

    CallModel -> (ExecuteTools -> CallModel)* -> Finish
                  ExecuteTools -> AwaitApproval  (stops; resumed with decisions)

The library, the CLI and the HTTP server all run `LoopDriver.run`; they only translate requests
in and events out. Events go to a sink, which only observes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import orjson

from toolwire import leaks
from toolwire.errors import ToolwireError, UpstreamError
from toolwire.loop.events import (
    ApprovalRequested,
    LeakDetected,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
    ToolCallsReturned,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from toolwire.loop.holdback import Holdback
from toolwire.loop.state import (
    AwaitApproval,
    CallModel,
    ExecuteTools,
    Finish,
    LoopRequest,
    LoopState,
    NextAction,
)
from toolwire.tools.base import ToolArgumentsError
from toolwire.tools.envelope import EnvelopeLimits
from toolwire.tools.executor import ToolExecutor, ToolResult
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.upstream.base import TurnRequest, Upstream
from toolwire.upstream.events import (
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnEnd,
    Usage,
)

Sink = Callable[[LoopEvent], None]

LEAK_CORRECTION = (
    "Your previous message wrote a tool call as plain text ({family} format) instead of calling "
    "the tool. Text is never executed. If you need a tool, call it now through the tool-calling "
    "interface, with JSON arguments; otherwise answer in plain prose."
)


class LoopDriver:
    """Runs `LoopRequest`s against one upstream."""

    def __init__(self, upstream: Upstream, *, limits: EnvelopeLimits | None = None) -> None:
        self.upstream = upstream
        self.limits = limits or EnvelopeLimits()

    async def run(self, request: LoopRequest, sink: Sink) -> LoopState:
        """Drive the loop to a `Finish` or an `AwaitApproval`; always emits `LoopFinished`."""
        run = _Run(self, request, sink)
        return await run.drive()


class _Run:
    """One run's moving parts; the transitions are the methods named after `NextAction`s."""

    def __init__(self, driver: LoopDriver, request: LoopRequest, sink: Sink) -> None:
        self.upstream = driver.upstream
        self.request = request
        self.settings = request.settings
        self.emit = sink
        self.executor = ToolExecutor(
            request.tools, limits=driver.limits, max_concurrency=self.settings.max_concurrent_tools
        )
        self.client_names = {spec.name for spec in request.client_tools}
        transcript: Transcript = [*request.history]
        self.state = LoopState(transcript=transcript, output_start=len(transcript))
        transcript.extend(request.input)

    async def drive(self) -> LoopState:
        action: NextAction = (
            ExecuteTools(self.request.resume_calls) if self.request.resume_calls else CallModel()
        )
        while True:
            if isinstance(action, CallModel):
                action = await self.call_model()
            elif isinstance(action, ExecuteTools):
                action = await self.execute_tools(action.calls)
            elif isinstance(action, AwaitApproval):
                self.state.pending_approvals = action.calls
                self.emit(ApprovalRequested(action.calls))
                return self.finish(Finish("completed", "awaiting approval"))
            else:
                return self.finish(action)

    # -- CallModel ------------------------------------------------------------------------

    def turn_request(self) -> TurnRequest:
        req = self.request
        offer_tools = not self.state.tools_exhausted
        specs = [t.spec for t in req.tools] + list(req.client_tools) if offer_tools else []
        transcript: Transcript = list(self.state.transcript)
        if req.instructions:
            transcript.insert(0, SystemMessage(req.instructions))
        return TurnRequest(
            model=req.model,
            transcript=transcript,
            tools=specs,
            tool_choice=self.tool_choice() if specs else None,
            parallel_tool_calls=req.parallel_tool_calls if specs else None,
            temperature=req.temperature,
            top_p=req.top_p,
            max_output_tokens=req.max_output_tokens,
            response_format=req.response_format,
            stream=self.settings.stream,
            extra_body=req.extra_body,
        )

    def tool_choice(self) -> str | dict[str, Any] | None:
        """A forced choice (`required`, a named function) applies until a tool has run; after
        that the model must be free to answer, or it could only ever call tools again."""
        choice = self.request.tool_choice
        if self.state.tool_calls_made and choice not in (None, "auto", "none"):
            return "auto"
        return choice

    async def call_model(self) -> NextAction:
        state = self.state
        if state.iterations >= self.settings.max_iterations:
            return Finish(
                "incomplete",
                f"max_iterations: the loop reached its cap of {self.settings.max_iterations} "
                "model calls without a final answer",
            )
        state.iterations += 1
        turn = self.turn_request()
        self.emit(ModelCallStarted(state.iterations, bool(turn.tools)))
        held = Holdback()
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        finish_reason = "stop"
        try:
            async for event in self.upstream.stream_turn(turn):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    shown = held.feed(event.text)
                    if shown:
                        self.emit(OutputTextDelta(shown))
                elif isinstance(event, ReasoningDelta):
                    reasoning.append(event.text)
                    self.emit(ReasoningTextDelta(event.text))
                elif isinstance(event, ToolCallDone):
                    calls.append(event.call)
                elif isinstance(event, Usage):
                    usage.add(event)
                elif isinstance(event, TurnEnd):
                    finish_reason = event.finish_reason
                elif isinstance(event, ToolCallStarted | ToolCallArgumentsDelta):
                    self.emit(event)
        except ToolwireError as exc:
            state.usage.add(usage)
            return Finish("failed", exc.message, exc)
        except Exception as exc:  # an adapter bug must still end the run as a stored failure
            state.usage.add(usage)
            error = UpstreamError(f"the upstream adapter failed: {type(exc).__name__}: {exc}")
            return Finish("failed", error.message, error)
        state.usage.add(usage)
        full_text = "".join(text)
        full_reasoning = "".join(reasoning)

        if state.tools_exhausted:
            calls = []  # the last call was offered no tools; whatever it wrote is its answer
        elif not calls and finish_reason != "length" and self.settings.leak_mode != "off":
            leak = self.find_leak(full_text, full_reasoning)
            if leak is not None:
                return self.on_leak(full_text, full_reasoning, leak, held, usage)

        shown = held.release()
        if shown:
            self.emit(OutputTextDelta(shown))
        message = AssistantMessage(full_text, calls, full_reasoning)
        state.transcript.append(message)
        self.emit(ModelTurnCompleted(message, finish_reason, usage))
        if calls:
            return ExecuteTools(calls)
        state.final_text = full_text
        if finish_reason == "length":
            return Finish(
                "incomplete", "max_output_tokens: the answer was cut off by the token limit"
            )
        if finish_reason == "content_filter":
            return Finish("incomplete", "content_filter: the upstream filtered the answer")
        return Finish("completed")

    # -- leaks ----------------------------------------------------------------------------

    def find_leak(self, text: str, reasoning: str) -> tuple[leaks.LeakMatch, bool] | None:
        """A leaked call at the end of the visible text, or of the reasoning if nothing is
        visible. Only when tools were on offer: otherwise there is nothing to call."""
        if not self.request.tools and not self.request.client_tools:
            return None
        match = leaks.detect_leak(text)
        if match is not None:
            return match, False
        if not text.strip() and reasoning:
            match = leaks.detect_leak_in_reasoning(reasoning, text)
            if match is not None:
                return match, True
        return None

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
                self.close_turn(kept.rstrip(), held, len(kept), usage, calls)
                return ExecuteTools(calls)
        if state.leak_retries >= self.settings.leak_retries:
            self.emit(LeakDetected(match.family, match.snippet, state.leak_retries, "gave_up"))
            self.close_turn(kept.rstrip(), held, len(kept), usage, [])
            return Finish(
                "incomplete",
                f"leaked_tool_call: the model wrote its tool call as text ({match.family} format) "
                f"instead of a structured call, {state.leak_retries + 1} times in a row; nothing "
                "was executed. The model server's tool-call parser is probably missing or does "
                "not match this model (vLLM: --enable-auto-tool-choice --tool-call-parser <name>; "
                "llama.cpp: --jinja; SGLang: --tool-call-parser).",
            )
        state.leak_retries += 1
        self.emit(LeakDetected(match.family, match.snippet, state.leak_retries, "retry"))
        self.close_turn(kept.rstrip(), held, len(kept), usage, [])
        state.transcript.append(
            UserMessage(LEAK_CORRECTION.format(family=match.family), hidden=True)
        )
        return CallModel()

    def close_turn(
        self, kept: str, held: Holdback, upto: int, usage: Usage, calls: list[ToolCall]
    ) -> None:
        """End a turn whose leaked text is dropped: show and keep only what came before it."""
        shown = held.release(upto)
        if shown:
            self.emit(OutputTextDelta(shown))
        if kept or calls:
            message = AssistantMessage(kept, calls)
            self.state.transcript.append(message)
            self.emit(ModelTurnCompleted(message, "tool_calls" if calls else "stop", usage))

    def salvage(self, text: str, match: leaks.LeakMatch) -> list[ToolCall] | None:
        """Leaked calls turned into real ones, only if every name is declared and every set of
        arguments validates; otherwise None and the caller falls back to a retry."""
        try:
            salvaged = leaks.salvage_calls(text, match)
        except leaks.SalvageError:
            return None
        calls: list[ToolCall] = []
        for item in salvaged:
            tool = self.executor.tools.get(item.name)
            if tool is None and item.name not in self.client_names:
                return None
            if tool is not None:
                try:
                    tool.validate(item.arguments)
                except ToolArgumentsError:
                    return None
            raw = orjson.dumps(item.arguments).decode()
            calls.append(ToolCall("call_" + secrets.token_hex(12), item.name, item.arguments, raw))
        return calls or None

    # -- ExecuteTools ---------------------------------------------------------------------

    async def execute_tools(self, calls: list[ToolCall]) -> NextAction:
        state = self.state
        limit = self.settings.max_tool_calls
        runnable: list[ToolCall] = []
        refused: dict[str, ToolResult] = {}
        returned: list[ToolCall] = []
        for call in calls:
            if limit is not None and state.tool_calls_made >= limit:
                state.tools_exhausted = True
                refused[call.id] = self.executor.error(
                    call,
                    f"not executed: this response may make at most {limit} tool calls "
                    "(max_tool_calls) and has made them; answer with what you have",
                )
                continue
            state.tool_calls_made += 1
            if call.name in self.client_names and call.ok and call.name not in self.executor.tools:
                returned.append(call)
            else:
                runnable.append(call)
        if limit is not None and state.tool_calls_made >= limit:
            state.tools_exhausted = True

        waiting = [c for c in runnable if self.needs_decision(c)]
        if waiting:
            runnable = [c for c in runnable if c not in waiting]
            calls = [c for c in calls if c not in waiting]

        for call in runnable:
            self.emit(ToolExecutionStarted(call))
        results = {r.call_id: r for r in await self.run_calls(runnable)}
        results.update(refused)
        for call in calls:
            result = results.get(call.id)
            if result is None:
                continue  # a caller-side call: its output comes back from the caller
            state.transcript.append(ToolMessage(call.id, call.name, result.text))
            self.emit(ToolExecutionFinished(call, result))
        if returned:
            state.pending_calls = returned
            self.emit(ToolCallsReturned(returned))
        if waiting:
            return AwaitApproval(waiting)
        if returned:
            return Finish("completed")
        repeated = self.repeated_failure(calls, results)
        if repeated is not None:
            return Finish("incomplete", repeated)
        return CallModel()

    def needs_decision(self, call: ToolCall) -> bool:
        tool = self.executor.tools.get(call.name)
        if tool is None or not call.ok or call.id in self.request.approvals:
            return False
        return tool.requires_approval(call.arguments or {})

    async def run_calls(self, calls: list[ToolCall]) -> list[ToolResult]:
        approved: list[ToolCall] = []
        denied: list[ToolResult] = []
        for call in calls:
            if self.request.approvals.get(call.id, True):
                approved.append(call)
            else:
                denied.append(
                    self.executor.error(
                        call, "the user denied approval for this call; it did not run"
                    )
                )
        return [*await self.executor.execute(approved), *denied]

    def repeated_failure(self, calls: list[ToolCall], results: dict[str, ToolResult]) -> str | None:
        for call in calls:
            result = results.get(call.id)
            if result is None or result.ok:
                continue
            key = (call.name, call.raw_arguments.strip())
            self.state.failures[key] += 1
            count = self.state.failures[key]
            if count >= self.settings.repeated_failure_limit:
                return (
                    f"repeated_failure: the same failing call {call.name}({call.raw_arguments}) "
                    f"was made {count} times; stopping instead of looping. Last error: "
                    f"{result.error}"
                )
        return None

    # -- Finish ---------------------------------------------------------------------------

    def finish(self, action: Finish) -> LoopState:
        state = self.state
        state.status = action.status
        state.reason = action.reason
        state.error = action.error
        self.emit(
            LoopFinished(
                action.status,
                action.reason,
                state.final_text,
                state.usage,
                action.error,
                list(state.pending_calls),
            )
        )
        return state
