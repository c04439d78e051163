"""Prometheus metrics: defined once here, fed by loop and upstream events (`RunMetrics`, one per
run) and by the request middleware (`observe/requests.py`); served at `GET /metrics`.

Several workers: set `PROMETHEUS_MULTIPROC_DIR` (an empty directory, the same for every worker,
before they start); each process then writes its values to memory-mapped files there and
`/metrics` sums them (`prometheus_client.multiprocess`). Gauges count live processes only.

Every name, label and unit is documented in `docs/operations.md`; keep the two in step.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import values as _values

from toolwire.errors import StopReason, ToolwireError
from toolwire.loop.events import (
    ApprovalRequested,
    ArgumentsMisfit,
    ArgumentsRepaired,
    CallTarget,
    ContextCompacted,
    LeakDetected,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    RunStarted,
    ToolCallsReturned,
    ToolExecutionFinished,
)
from toolwire.loop.state import LoopRequest
from toolwire.upstream.events import FirstToken, Repair, Routed, UpstreamRetry

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

HTTP_REQUESTS = Counter(
    "toolwire_http_requests", "HTTP requests answered", ["route", "method", "status"]
)
HTTP_DURATION = Histogram(
    "toolwire_http_request_duration_seconds",
    "Time from request to the end of the response (a stream's whole life)",
    ["route"],
    buckets=_LATENCY,
)
HTTP_TTFB = Histogram(
    "toolwire_http_time_to_first_byte_seconds",
    "Time from request to the first body byte sent",
    ["route"],
    buckets=_LATENCY,
)
STREAM_DISCONNECTS = Counter(
    "toolwire_stream_disconnects", "Clients that went away before their response ended", ["route"]
)
UPSTREAM_CALLS = Counter(
    "toolwire_upstream_calls", "Model calls, by upstream and outcome", ["upstream", "outcome"]
)
UPSTREAM_DURATION = Histogram(
    "toolwire_upstream_call_duration_seconds",
    "One model call, request to the turn's end (retries included)",
    ["upstream"],
    buckets=_LATENCY,
)
UPSTREAM_TTFT = Histogram(
    "toolwire_upstream_time_to_first_token_seconds",
    "One model call, request to its first content",
    ["upstream"],
    buckets=_LATENCY,
)
UPSTREAM_RETRIES = Counter(
    "toolwire_upstream_retries", "Upstream requests asked again, by cause", ["upstream", "cause"]
)
UPSTREAM_ROUTED = Counter(
    "toolwire_upstream_routed",
    "Model calls a fleet's router sent to each upstream, by why it chose it",
    ["upstream", "reason"],
)
TOKENS = Counter("toolwire_tokens", "Tokens the upstream reported", ["model", "direction"])
TOOL_CALLS = Counter(
    "toolwire_tool_calls", "Tool calls the model made", ["tool", "source", "status"]
)
REPAIRS = Counter(
    "toolwire_stream_repairs", "Model turns whose stream needed a repair, by kind", ["kind"]
)
LEAKS = Counter(
    "toolwire_leaks", "Tool calls written as text, by format and action", ["format", "action"]
)
ARGUMENT_REPAIRS = Counter(
    "toolwire_argument_repairs",
    "Repairs that made a call's arguments fit its tool's schema, by kind",
    ["kind"],
)
ARGUMENT_MISFITS = Counter(
    "toolwire_argument_misfits",
    "Calls whose arguments did not fit their tool's schema, by action (retry: re-asked; "
    "passed: handed on as written after a re-ask; rejected: no JSON object)",
    ["action"],
)
APPROVALS = Counter("toolwire_approvals", "Approval requests and decisions", ["decision"])
APPROVALS_PENDING = Gauge(
    "toolwire_approvals_pending",
    "Approval requests issued and not yet decided (since this process started)",
    multiprocess_mode="livesum",
)
BACKGROUND_JOBS = Gauge(
    "toolwire_background_jobs",
    "Background responses by state",
    ["state"],
    multiprocess_mode="livesum",
)
RUNS = Counter("toolwire_runs", "Runs finished, by how they ended", ["reason"])
COMPACTIONS = Counter(
    "toolwire_compactions", "Transcripts compacted (context_management), by trigger", ["trigger"]
)


_CHILDREN: dict[tuple[Any, ...], Any] = {}


def child(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, remembered: prometheus_client checks and converts the values
    and takes a lock on every call (~1.5 µs; a proxied request made half a dozen). The label
    values are capped (`LabelCap`), so the children are few; past `MAX_CHILDREN_KEPT` they
    are not kept."""
    key = (metric, *values)
    found = _CHILDREN.get(key)
    if found is None:
        found = metric.labels(*values)
        if len(_CHILDREN) < MAX_CHILDREN_KEPT:
            _CHILDREN[key] = found
    return found


#: Whether `add` and `observe` update values in place (`update_in_place`).
_in_place = False


def update_in_place(on: bool = True) -> bool:
    """From now on, `add` and `observe` change a value's float directly: no lock, no checks of
    prometheus_client's per call (~5 µs of a proxied request over its half-dozen updates).
    Only for a process whose metrics change on one thread (`toolwire serve`: the event
    loop's; `RunMetrics` and the request observer are its only writers) and in one process
    (no `PROMETHEUS_MULTIPROC_DIR`: those values live in shared files). Reads stay
    prometheus_client's own. Answers whether it is on: never for values of another kind than
    prometheus_client 0.26's `MutexValue` (the layout this relies on, as constraints.txt pins)."""
    global _in_place
    _in_place = on and _values.ValueClass is _values.MutexValue and _layout_known()
    return _in_place


def _layout_known() -> bool:
    """Whether a counter and a histogram hold their values where `add` and `observe` write."""
    registry = CollectorRegistry()
    counter = Counter("probe", "", registry=registry)
    histogram = Histogram("probe_seconds", "", registry=registry)
    fields = (
        getattr(counter, "_value", None),
        getattr(histogram, "_sum", None),
        *getattr(histogram, "_buckets", [None]),
    )
    bounds = list(getattr(histogram, "_upper_bounds", ()))
    return all(type(v) is _values.MutexValue for v in fields) and bounds == list(
        Histogram.DEFAULT_BUCKETS
    )


def add(counter: Any, amount: float = 1.0) -> None:
    """`counter.inc(amount)` (a child: labels chosen) for a non-negative `amount`."""
    if _in_place:
        counter._value._value += amount
    else:
        counter.inc(amount)


def observe(histogram: Any, value: float) -> None:
    """`histogram.observe(value)` (a child: labels chosen)."""
    if _in_place:
        histogram._sum._value += value
        # the first bucket whose bound holds the value (the last bound is +Inf)
        histogram._buckets[bisect_left(histogram._upper_bounds, value)]._value += 1
    else:
        histogram.observe(value)


def request_done(
    requests: Any, duration: Any, ttfb: Any, seconds: float, to_first_byte: float | None
) -> None:
    """An HTTP request's three updates (children: labels chosen) in one call: one request,
    its duration, and its time to the first body byte when one was sent."""
    if not _in_place:
        requests.inc()
        duration.observe(seconds)
        if to_first_byte is not None:
            ttfb.observe(to_first_byte)
        return
    requests._value._value += 1.0
    duration._sum._value += seconds
    duration._buckets[bisect_left(duration._upper_bounds, seconds)]._value += 1
    if to_first_byte is not None:
        ttfb._sum._value += to_first_byte
        ttfb._buckets[bisect_left(ttfb._upper_bounds, to_first_byte)]._value += 1


def render_metrics() -> tuple[bytes, str]:
    """The exposition text and its content type; sums every worker's files in multiprocess
    mode."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        from toolwire.observe.fleet import add_to

        add_to(registry)  # a fleet's upstream state, as this worker sees it
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def _outcome(error: ToolwireError | None) -> str:
    from toolwire.errors import (
        UpstreamConnectionError,
        UpstreamHTTPError,
        UpstreamStreamError,
        UpstreamTimeoutError,
    )

    if isinstance(error, UpstreamTimeoutError):
        return "timeout"
    if isinstance(error, UpstreamHTTPError):
        return "http_error"
    if isinstance(error, UpstreamConnectionError):
        return "connection_error"
    if isinstance(error, UpstreamStreamError):
        return "stream_error"
    return "error"


#: Label values a request or a model chooses (the request's `model`, tool names the model
#: invents, the HTTP method) are capped: at most `LABEL_MAX_CHARS` characters and
#: `LABEL_MAX_VALUES` distinct values per label; past the count, `other`. Every value is a time
#: series kept until restart, so unbounded ones are a memory leak any client can drive.
LABEL_MAX_CHARS = 64
LABEL_MAX_VALUES = 100
OTHER = "other"


class LabelCap:
    """The distinct values one label has taken, capped (see above)."""

    __slots__ = ("_seen", "limit", "max_chars")

    def __init__(self, limit: int = LABEL_MAX_VALUES, max_chars: int = LABEL_MAX_CHARS) -> None:
        self.limit = limit
        self.max_chars = max_chars
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if len(value) > self.max_chars:
            value = value[: self.max_chars - 1] + "…"
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


#: Label children kept, at most: `labels()` (a lock, a key built and checked) at an event
#: that comes with every model call is worth skipping.
MAX_CHILDREN_KEPT = 4096
_ROUTED_CHILDREN: dict[tuple[str, str], tuple[str, Any]] = {}
"""A `Routed`'s (upstream, reason) to its capped upstream label and its `UPSTREAM_ROUTED`
child. Kept answers stay right: a label cap never takes back a value it let in, nor lets in
one it refused."""

MODEL_LABEL = LabelCap()
TOOL_LABEL = LabelCap()
METHOD_LABEL = LabelCap(limit=16, max_chars=16)
UPSTREAM_LABEL = LabelCap(limit=64)

# The children a run updates on every model call, remembered by the run's model and upstream
# (one lookup per run, not a `child` per update: ~1% of a proxied chat request), and by the
# values that pick them (short ones: a client may invent long ones). Kept answers stay right
# for the same reason as `_ROUTED_CHILDREN`'s.
_MODELS: dict[str, tuple[str, tuple[Any, Any]]] = {}
_CALLS: dict[str, tuple[Any, Any, Any]] = {}
_RETURNED: dict[str, Any] = {}
_RUNS: dict[StopReason, Any] = {}


def _model_children(model: str) -> tuple[str, tuple[Any, Any]]:
    """A run's model label and its `TOKENS` children (input, output)."""
    found = _MODELS.get(model)
    if found is None:
        label = MODEL_LABEL(model)
        found = (label, (child(TOKENS, label, "input"), child(TOKENS, label, "output")))
        if len(_MODELS) < MAX_CHILDREN_KEPT and len(model) <= LABEL_MAX_CHARS:
            _MODELS[model] = found
    return found


def _call_children(upstream: str) -> tuple[Any, Any, Any]:
    """An upstream's children for a model call: time to first token, duration, `ok` calls."""
    found = _CALLS.get(upstream)
    if found is None:
        found = (
            child(UPSTREAM_TTFT, upstream),
            child(UPSTREAM_DURATION, upstream),
            child(UPSTREAM_CALLS, upstream, "ok"),
        )
        if len(_CALLS) < MAX_CHILDREN_KEPT:
            _CALLS[upstream] = found
    return found


class RunMetrics:
    """One run's metrics, from its loop events. Called for every event, so it returns at once
    for the per-chunk ones (text and argument deltas)."""

    __slots__ = (
        "_calls",
        "_model",
        "_request",
        "_sources",
        "_started",
        "_tokens",
        "_ttft_seen",
        "_upstream",
    )

    def __init__(self, request: LoopRequest, upstream: str, sources: dict[str, str]) -> None:
        self._request = request
        self._model, self._tokens = _model_children(request.model)
        self._upstream = upstream
        self._calls = _call_children(upstream)
        self._sources = sources
        self._started: float | None = None
        self._ttft_seen = False

    def __call__(self, event: LoopEvent) -> None:
        handler = HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _model_call(self, event: Any) -> None:
        self._started = time.perf_counter()
        self._ttft_seen = False

    def _first_token(self, event: Any) -> None:
        if self._started is not None and not self._ttft_seen:
            self._ttft_seen = True
            observe(self._calls[0], time.perf_counter() - self._started)

    def _end_call(self, outcome: str) -> None:
        started = self._started
        if started is None:
            return
        calls = self._calls
        observe(calls[1], time.perf_counter() - started)
        add(calls[2] if outcome == "ok" else child(UPSTREAM_CALLS, self._upstream, outcome))
        self._started = None

    def _turn(self, event: ModelTurnCompleted) -> None:
        if self._started is not None:
            self._end_call("ok")
        usage = event.usage
        if usage.input_tokens:
            add(self._tokens[0], usage.input_tokens)
        if usage.output_tokens:
            add(self._tokens[1], usage.output_tokens)
        for plan in event.calls:
            if plan.target is CallTarget.REJECTED:
                source = self._sources.get(plan.call.name, "unknown")
                name = TOOL_LABEL(plan.call.name or "(unnamed)")
                TOOL_CALLS.labels(name, source, "rejected").inc()

    def _tool_finished(self, event: ToolExecutionFinished) -> None:
        name = event.call.name
        source = self._sources.get(name) or (
            "mcp" if event.server_label != "toolwire" else "python"
        )
        TOOL_CALLS.labels(TOOL_LABEL(name), source, "ok" if event.result.ok else "error").inc()

    def _returned(self, event: ToolCallsReturned) -> None:
        for call in event.calls:
            counter = _RETURNED.get(call.name)
            if counter is None:
                counter = child(TOOL_CALLS, TOOL_LABEL(call.name), "function", "returned")
                if len(_RETURNED) < MAX_CHILDREN_KEPT and len(call.name) <= LABEL_MAX_CHARS:
                    _RETURNED[call.name] = counter
            add(counter)

    def _repair(self, event: Repair) -> None:
        REPAIRS.labels(event.kind).inc()

    def _arguments_repaired(self, event: ArgumentsRepaired) -> None:
        for repair in event.repairs:
            ARGUMENT_REPAIRS.labels(repair.kind).inc()

    def _arguments_misfit(self, event: ArgumentsMisfit) -> None:
        ARGUMENT_MISFITS.labels(event.action).inc()

    def _retry(self, event: UpstreamRetry) -> None:
        UPSTREAM_RETRIES.labels(self._upstream, event.cause).inc()

    def _routed(self, event: Routed) -> None:
        """A fleet's router chose the call's upstream: the call is labelled with it."""
        key = (event.upstream, event.reason)
        found = _ROUTED_CHILDREN.get(key)
        if found is None:
            label = UPSTREAM_LABEL(event.upstream)
            found = (label, UPSTREAM_ROUTED.labels(label, event.reason))
            if len(_ROUTED_CHILDREN) < MAX_CHILDREN_KEPT:
                _ROUTED_CHILDREN[key] = found
        self._upstream, counter = found
        self._calls = _call_children(self._upstream)
        counter.inc()

    def _leak(self, event: LeakDetected) -> None:
        LEAKS.labels(event.family, "detected").inc()
        LEAKS.labels(event.family, event.action).inc()

    def _compacted(self, event: ContextCompacted) -> None:
        COMPACTIONS.labels(event.trigger).inc()
        TOKENS.labels(self._model, "input").inc(event.usage.input_tokens)
        TOKENS.labels(self._model, "output").inc(event.usage.output_tokens)

    def _approval(self, event: ApprovalRequested) -> None:
        count = len(event.requests)
        APPROVALS.labels("requested").inc(count)
        APPROVALS_PENDING.inc(count)

    def _run_started(self, event: RunStarted) -> None:
        pass

    def _finished(self, event: LoopFinished) -> None:
        if self._started is not None:
            reason = event.reason
            self._end_call("cancelled" if reason is StopReason.CANCELLED else _outcome(event.error))
        decisions = event.decisions
        if decisions:
            approved = sum(1 for value in decisions.values() if value)
            denied = len(decisions) - approved
            if approved:
                APPROVALS.labels("approved").inc(approved)
            if denied:
                APPROVALS.labels("denied").inc(denied)
            APPROVALS_PENDING.dec(len(decisions))
        counter = _RUNS.get(event.reason)
        if counter is None:  # (a few reasons: all kept)
            counter = _RUNS[event.reason] = child(RUNS, event.reason.value)
        add(counter)


HANDLERS: dict[type, Any] = {
    ModelCallStarted: RunMetrics._model_call,
    FirstToken: RunMetrics._first_token,
    ModelTurnCompleted: RunMetrics._turn,
    ToolExecutionFinished: RunMetrics._tool_finished,
    ToolCallsReturned: RunMetrics._returned,
    Repair: RunMetrics._repair,
    UpstreamRetry: RunMetrics._retry,
    Routed: RunMetrics._routed,
    LeakDetected: RunMetrics._leak,
    ArgumentsRepaired: RunMetrics._arguments_repaired,
    ArgumentsMisfit: RunMetrics._arguments_misfit,
    ContextCompacted: RunMetrics._compacted,
    ApprovalRequested: RunMetrics._approval,
    LoopFinished: RunMetrics._finished,
}
