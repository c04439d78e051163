"""OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them.

On when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, or
`OTEL_TRACES_EXPORTER` names `otlp` or `console`; off again with `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none`. `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL` picks `http/protobuf`
(default) or `grpc`; endpoint, headers, timeouts, batching and the resource come from the usual
variables, read by the SDK itself. `OTEL_SERVICE_NAME` defaults to `toolwire`.

One span per run (`invoke_agent`), a child per model call (`chat {model}`) and per tool call
(`execute_tool {name}`), with the GenAI semantic-convention attributes. The run's parent is the
incoming `traceparent` (attached by the request middleware); the model call's context goes to
the upstream as a `traceparent` header and a tool call's to MCP servers in `_meta`
(`trace_context.py`). Prompt and tool content are recorded only with
`TOOLWIRE_TRACE_CONTENT=1`; secrets never.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from toolwire.loop.events import (
    ApprovalRequested,
    ArgumentsMisfit,
    ArgumentsRepaired,
    CallArgumentsDelta,
    CallTarget,
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
from toolwire.loop.state import LoopRequest
from toolwire.observe.tracing_switch import tracing_requested
from toolwire.trace_context import TRACE_HEADERS
from toolwire.upstream.events import FirstToken, Repair, Routed, UpstreamRetry

_CONTENT_LIMIT = 8192


__all__ = ["RunTracer", "Tracing", "tracing_requested"]


class Tracing:
    """The tracer provider and its exporter; `shutdown()` flushes what is still queued."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        attributes: dict[str, Any] = {}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "toolwire"
        resource = Resource.create(attributes)
        self.provider = TracerProvider(resource=resource)
        exporter: SpanExporter
        kind = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
        if kind == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporter = ConsoleSpanExporter()
        else:
            protocol = (
                os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf"
            ).strip()
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter as GrpcExporter,
                )

                exporter = GrpcExporter()
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter as HttpExporter,
                )

                exporter = HttpExporter()
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("toolwire")
        self.content = os.environ.get("TOOLWIRE_TRACE_CONTENT", "").strip() in ("1", "true")

    async def shutdown(self) -> None:
        self.provider.shutdown()


def _headers_of(span: Span) -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def _clip(text: str) -> str:
    return text if len(text) <= _CONTENT_LIMIT else text[:_CONTENT_LIMIT] + "…"


class RunTracer:
    """One run's spans, from its loop events."""

    __slots__ = (
        "_model",
        "_model_span",
        "_request",
        "_run_headers",
        "_run_span",
        "_running",
        "_tools",
        "_tracing",
        "_upstream",
    )

    def __init__(self, tracing: Tracing, request: LoopRequest, upstream: str) -> None:
        self._tracing = tracing
        self._request = request
        self._model = request.model
        self._upstream = upstream
        self._run_span = tracing.tracer.start_span(
            "invoke_agent toolwire",
            context=otel_context.get_current(),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "toolwire",
                "gen_ai.request.model": request.model,
                "gen_ai.response.id": request.run_id,
            },
        )
        self._run_headers = _headers_of(self._run_span)
        TRACE_HEADERS.set(self._run_headers)
        self._model_span: Span | None = None
        self._tools: dict[str, Span] = {}
        self._running = 0

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        parent = trace.set_span_in_context(self._run_span)
        return self._tracing.tracer.start_span(
            name, context=parent, kind=kind, attributes=attributes
        )

    def __call__(self, event: LoopEvent) -> None:
        kind = type(event)
        if kind is OutputTextDelta or kind is CallArgumentsDelta or kind is ReasoningTextDelta:
            return  # the per-chunk events: nothing to trace
        if isinstance(event, ModelCallStarted):
            self._end_model(None)
            self._model_span = self._child(
                f"chat {self._model}",
                SpanKind.CLIENT,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": self._model,
                    "toolwire.upstream": self._upstream,
                    "toolwire.iteration": event.iteration,
                },
            )
            TRACE_HEADERS.set(_headers_of(self._model_span))
        elif isinstance(event, ModelTurnCompleted):
            self._turn(event)
        elif isinstance(event, ToolExecutionStarted):
            self._tool_started(event)
        elif isinstance(event, ToolExecutionFinished):
            self._tool_finished(event)
        elif isinstance(event, Repair):
            if self._model_span is not None:
                self._model_span.add_event("toolwire.repair", {"toolwire.repair.kind": event.kind})
        elif isinstance(event, UpstreamRetry):
            if self._model_span is not None:
                self._model_span.add_event(
                    "toolwire.upstream_retry",
                    {"toolwire.retry.cause": event.cause, "toolwire.retry.attempt": event.attempt},
                )
        elif isinstance(event, FirstToken):
            if self._model_span is not None:
                self._model_span.add_event("gen_ai.first_token")
        elif isinstance(event, Routed):  # a fleet's router chose the model server
            if self._model_span is not None:
                self._model_span.set_attribute("toolwire.upstream", event.upstream)
                self._model_span.set_attribute("toolwire.routed", event.reason)
        elif isinstance(event, LeakDetected):
            self._run_span.add_event(
                "toolwire.leak",
                {"toolwire.leak.format": event.family, "toolwire.leak.action": event.action},
            )
        elif isinstance(event, ArgumentsRepaired | ArgumentsMisfit):
            self._fitted(event)
        elif isinstance(event, ApprovalRequested):
            self._run_span.add_event(
                "toolwire.approval_requested", {"toolwire.approval.count": len(event.requests)}
            )
        elif isinstance(event, ToolCallsReturned):
            self._run_span.set_attribute("toolwire.returned_calls", len(event.calls))
        elif isinstance(event, LoopFinished):
            self._finished(event)

    def _fitted(self, event: ArgumentsRepaired | ArgumentsMisfit) -> None:
        """A call checked against its tool's schema: repaired, or not fitting (never its
        arguments: they may hold what a trace must not)."""
        attributes: dict[str, str | int] = {"gen_ai.tool.name": event.call.name}
        if isinstance(event, ArgumentsRepaired):
            attributes["toolwire.repair.kinds"] = ",".join(r.kind for r in event.repairs)
            self._run_span.add_event("toolwire.arguments_repaired", attributes)
        else:
            attributes["toolwire.misfit.action"] = event.action
            attributes["toolwire.misfit.attempt"] = event.attempt
            self._run_span.add_event("toolwire.arguments_misfit", attributes)

    def _end_model(self, error: str | None) -> None:
        span = self._model_span
        if span is None:
            return
        if error is not None:
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", error)
        span.end()
        self._model_span = None
        TRACE_HEADERS.set(self._run_headers)

    def _turn(self, event: ModelTurnCompleted) -> None:
        span = self._model_span
        if span is None:
            return
        usage = event.usage
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        if self._tracing.content:
            message = event.message
            parts: list[dict[str, Any]] = []
            if message.text:
                parts.append({"type": "text", "content": _clip(message.text)})
            for call in message.tool_calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.name,
                        "arguments": _clip(call.raw_arguments),
                    }
                )
            output = [{"role": "assistant", "parts": parts, "finish_reason": event.finish_reason}]
            span.set_attribute("gen_ai.output.messages", orjson.dumps(output).decode())
        rejected = sum(1 for plan in event.calls if plan.target is CallTarget.REJECTED)
        if rejected:
            span.set_attribute("toolwire.rejected_calls", rejected)
        self._end_model(None)

    def _tool_started(self, event: ToolExecutionStarted) -> None:
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "extension" if event.server_label != "toolwire" else "function",
            "toolwire.server_label": event.server_label,
        }
        if event.approval_request_id:
            attributes["toolwire.approval_request_id"] = event.approval_request_id
        if self._tracing.content:
            attributes["gen_ai.tool.call.arguments"] = _clip(call.raw_arguments)
        span = self._child(f"execute_tool {call.name}", SpanKind.INTERNAL, attributes)
        self._tools[call.id] = span
        self._running += 1
        # Calls start together and then run concurrently: a lone call passes its own span
        # to the MCP server; several share the run's.
        TRACE_HEADERS.set(_headers_of(span) if self._running == 1 else self._run_headers)

    def _tool_finished(self, event: ToolExecutionFinished) -> None:
        span = self._tools.pop(event.call.id, None)
        if span is None:  # a call refused by max_tool_calls never started
            return
        self._running = max(0, self._running - 1)
        result = event.result
        if not result.ok:
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", "tool_error")
        if self._tracing.content:
            span.set_attribute("gen_ai.tool.call.result", _clip(result.output_text or result.error))
        span.end()
        if self._running == 0:
            TRACE_HEADERS.set(self._run_headers)

    def _finished(self, event: LoopFinished) -> None:
        self._end_model(
            event.error.code or type(event.error).__name__ if event.error else event.reason.value
        )
        for span in self._tools.values():
            span.end()
        self._tools.clear()
        run = self._run_span
        run.set_attribute("gen_ai.usage.input_tokens", event.usage.input_tokens)
        run.set_attribute("gen_ai.usage.output_tokens", event.usage.output_tokens)
        run.set_attribute("toolwire.stop_reason", event.reason.value)
        if event.status.value == "failed":
            run.set_status(Status(StatusCode.ERROR))
            run.set_attribute("error.type", event.reason.value)
        run.end()
        TRACE_HEADERS.set(None)


def extract_context(headers: list[tuple[bytes, bytes]]) -> Any:
    """The OTel context of an incoming `traceparent` / `tracestate`, or None."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    if "traceparent" not in carrier:
        return None
    return propagate.extract(carrier)


def attach(ctx: Any) -> object:
    return otel_context.attach(ctx)


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]
