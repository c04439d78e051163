"""What `toolwire serve` observes, built once: the per-run observers composed with the driver's
sink (metrics, traces), the request middleware's settings, and shutdown.

`Observability.observe` is the driver's `observe` hook (`LoopDriver.observe`): it wraps a run's
sink so every loop event also reaches `RunMetrics` (and `RunTracer` when tracing is on), then
the door's own sink.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolwire.loop.driver import Sink
from toolwire.loop.events import LoopEvent
from toolwire.loop.state import LoopRequest
from toolwire.observe.metrics import HANDLERS as METRIC_HANDLERS
from toolwire.observe.metrics import RunMetrics
from toolwire.observe.requests import LogFormat
from toolwire.observe.tracing_switch import tracing_requested
from toolwire.tools.base import Tool

if TYPE_CHECKING:  # OpenTelemetry is imported only when tracing is on
    from toolwire.observe.tracing import Tracing


def tool_sources(tools: Iterable[Tool]) -> dict[str, str]:
    """Each server-side tool's source label: `workspace` for the built-in workspace tools,
    `python` for `--tool` tools (MCP tools are labelled `mcp` as they run)."""
    sources: dict[str, str] = {}
    for tool in tools:
        module = type(tool).__module__
        function = getattr(tool, "function", None)
        if function is not None:
            module = getattr(function, "__module__", module) or module
        sources[tool.name] = (
            "workspace" if module.startswith("toolwire.tools.workspace") else ("python")
        )
    return sources


def compose(*sinks: Sink) -> Sink:
    """One sink that hands each event to every sink, in order."""
    if len(sinks) == 1:
        return sinks[0]
    if len(sinks) == 2:
        first, second = sinks

        def both(event: LoopEvent) -> None:
            first(event)
            second(event)

        return both

    def every(event: LoopEvent) -> None:
        for sink in sinks:
            sink(event)

    return every


class Observability:
    def __init__(
        self,
        *,
        upstream_name: str = "default",
        sources: dict[str, str] | None = None,
        log_format: LogFormat = "text",
        log_level: str = "info",
        tracing: Tracing | None = None,
    ) -> None:
        self.upstream_name = upstream_name
        self.sources = sources or {}
        self.log_format = log_format
        self.log_level = log_level
        self.tracing = tracing

    @classmethod
    def from_env(
        cls,
        *,
        upstream_name: str,
        tools: Iterable[Tool],
        log_format: LogFormat,
        log_level: str = "info",
    ) -> Observability:
        tracing = None
        if tracing_requested():
            from toolwire.observe.tracing import Tracing

            tracing = Tracing()
        return cls(
            upstream_name=upstream_name,
            sources=tool_sources(tools),
            log_format=log_format,
            log_level=log_level,
            tracing=tracing,
        )

    def observe(self, request: LoopRequest, sink: Sink) -> Sink:
        """The driver's hook: observers first (so they see an event before the checkpoint
        stores the outcome), then the door's sink. Inlined for the per-chunk events: one dict
        lookup on the event's type, no extra call."""
        run_metrics = RunMetrics(request, self.upstream_name, self.sources)
        handlers = METRIC_HANDLERS
        if self.tracing is not None:
            from toolwire.observe.tracing import RunTracer

            tracer = RunTracer(self.tracing, request, self.upstream_name)

            def traced(event: LoopEvent) -> None:
                handler = handlers.get(type(event))
                if handler is not None:
                    handler(run_metrics, event)
                tracer(event)
                sink(event)

            return traced

        def observed(event: LoopEvent) -> None:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(run_metrics, event)
            sink(event)

        return observed

    async def shutdown(self) -> None:
        if self.tracing is not None:
            await self.tracing.shutdown()

    def middleware_options(self) -> dict[str, Any]:
        return {
            "log_format": self.log_format,
            "log_level": self.log_level,
            "tracing": self.tracing is not None,
        }
