"""A sink that prints a loop's events live with rich: model turns, tool calls, the exact
envelope each tool returned, and the final answer. Used by `toolwire run` and `toolwire demo`."""

from __future__ import annotations

import orjson
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from toolwire.loop.events import (
    ApprovalRequested,
    ContextCompacted,
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
from toolwire.upstream.events import UpstreamRetry


class TracePrinter:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._mid_line = False

    def _newline(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def __call__(self, event: LoopEvent) -> None:
        c = self.console
        if isinstance(event, ModelCallStarted):
            self._newline()
            tools = "with tools" if event.tools_offered else "without tools"
            c.rule(f"[bold]model call {event.iteration}[/] ({tools})", style="blue")
        elif isinstance(event, OutputTextDelta):
            c.print(Text(event.text), end="")
            self._mid_line = True
        elif isinstance(event, ReasoningTextDelta):
            c.print(Text(event.text, style="dim italic"), end="")
            self._mid_line = True
        elif isinstance(event, ModelTurnCompleted):
            self._newline()
            for call in event.message.tool_calls:
                args = (
                    call.raw_arguments
                    if call.arguments is None
                    else orjson.dumps(call.arguments).decode()
                )
                label = "[red]malformed call[/]" if call.parse_error else "[cyan]tool call[/]"
                c.print(
                    f"{label} [bold]{call.name or '(no name)'}[/]({Text(args).markup}) id={call.id}"
                )
        elif isinstance(event, LeakDetected):
            self._newline()
            family, attempt, action = event.family, event.attempt, event.action
            c.print(f"[yellow]leaked tool call[/] ({family}) attempt {attempt}: {action}")
        elif isinstance(event, UpstreamRetry):
            self._newline()
            c.print(
                f"[yellow]upstream retry[/] {event.attempt} ({event.cause}): "
                f"asking again in {event.delay:.1f} s"
            )
        elif isinstance(event, ToolExecutionStarted):
            c.print(f"[cyan]→ running[/] {event.call.name}")
        elif isinstance(event, ToolExecutionFinished):
            style = "green" if event.result.ok else "red"
            c.print(
                Panel(
                    Text(event.result.text),
                    title=f"envelope: {event.call.name}",
                    border_style=style,
                )
            )
        elif isinstance(event, ToolCallsReturned):
            names = ", ".join(call.name for call in event.calls)
            c.print(f"[magenta]returned to the caller:[/] {names}")
        elif isinstance(event, ContextCompacted):
            self._newline()
            why = {
                "threshold": f"{event.tokens} tokens",
                "context_full": "the upstream's context was full",
                "requested": "asked for",
            }[event.trigger]
            c.print(
                f"[yellow]compacted the transcript[/] ({why}): the model goes on from a summary"
            )
        elif isinstance(event, ApprovalRequested):
            names = ", ".join(request.call.name for request in event.requests)
            c.print(f"[magenta]awaiting approval:[/] {names}")
        elif isinstance(event, LoopFinished):
            self._newline()
            style = "green" if event.status == "completed" else "red"
            c.rule(f"[{style}]{event.status}[/]", style=style)
            if event.message:
                c.print(f"[{style}]reason:[/] {event.reason}: {event.message}")
            if event.final_text:
                c.print(Panel(Text(event.final_text), title="final answer", border_style=style))
            u = event.usage
            c.print(f"[dim]tokens: {u.input_tokens} in, {u.output_tokens} out[/]")
