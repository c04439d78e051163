"""Trace context that travels with a run to what it calls (upstream HTTP, MCP servers).

Standard library only, so that `upstream/` and `tools/` can read it without depending on
OpenTelemetry: the tracing observer (`observe/tracing.py`) sets the W3C headers of the span that
is current in the run's task; adapters add them to their outgoing requests. When tracing is off
the variable stays None and nothing is added.
"""

from __future__ import annotations

from contextvars import ContextVar

TRACE_HEADERS: ContextVar[dict[str, str] | None] = ContextVar("toolwire_trace", default=None)


def trace_headers() -> dict[str, str] | None:
    """`traceparent` (and `tracestate`) for an outgoing request, or None."""
    return TRACE_HEADERS.get()
