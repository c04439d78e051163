"""The router: an `Upstream` over a fleet of model servers. The loop asks it for a model turn
as it asks any upstream; it picks a replica for the call (`policy.py`), streams the turn from
it, and when the replica fails, fails over without the client seeing it:

- **before anything of the turn came back**: the call is made again on another healthy
  replica (with backoff, at most `failover_attempts` more times);
- **after text came back, nothing else**: the call is made again as a continuation of that
  text (`resume.py`) on a replica that can continue, and the text it adds follows seamlessly;
- **after reasoning or a tool call came back**: the error goes to the loop marked `failover`;
  the loop asks again (avoiding this replica) only if it had shown the client nothing of the
  turn (it holds every tool-call turn of the chat door back), else the client gets the door's
  error event.

Each call's outcome feeds the replica's circuit breaker (`health.py`); a periodic probe
(`GET /models`) feeds it too and refreshes what each replica serves. The address probed is
the configured one: nothing a request carries ever reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from toolwire.errors import (
    NotFoundError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamStreamError,
    UpstreamTooLargeError,
)
from toolwire.upstream.base import TurnRequest, turn_batches
from toolwire.upstream.events import (
    FirstToken,
    ModelEvent,
    ReasoningDelta,
    Routed,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    UpstreamRetry,
    Usage,
)
from toolwire.upstream.fleet.affinity import opening_key, session_key
from toolwire.upstream.fleet.health import CircuitState
from toolwire.upstream.fleet.policy import Selector
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.resume import (
    can_resume,
    continuation,
    estimate_tokens,
    resumable,
)
from toolwire.upstream.fleet.settings import FleetSettings

log = logging.getLogger("toolwire.fleet")

#: Models whose replicas are remembered (requests name models: a client could name many).
MAX_MODELS_KEPT = 1024
CLOSED = CircuitState.CLOSED
#: Longest wait for a replica to take calls again (a `Retry-After`, an open circuit's
#: cool-down) before a call is failed instead.
MAX_WAIT = 10.0
_NOT_TEXT = (ReasoningDelta, ToolCallStarted, ToolCallArgumentsDelta, ToolCallDone)


class FleetUnavailable(UpstreamError):
    """No replica serving the model takes calls now (every circuit open, or busy)."""

    status = 503

    def __init__(self, message: str, wait: float | None) -> None:
        super().__init__(message, code="upstream_unavailable")
        self.wait = wait
        """Seconds until one of them may take a call again (None: not soon)."""
        if wait is not None:
            self.headers = {"retry-after": str(max(1, math.ceil(wait)))}


def model_not_served(model: str, served: Sequence[str]) -> NotFoundError:
    listed = ", ".join(served[:20]) + (f" and {len(served) - 20} more" if len(served) > 20 else "")
    return NotFoundError(
        f"The model '{model}' does not exist or is not served here; the models served are: "
        f"{listed or 'none (no upstream has listed its models yet)'}.",
        param="model",
        code="model_not_found",
    )


#: Statuses that say the server (or what stands before it) is unwell or overloaded, not that
#: the request is bad: they count against its health and the call fails over.
REPLICA_STATUSES = frozenset({408, 429, 502, 503, 504, 401, 403})


class Fault(Enum):
    """Whose fault a failed model call was, as far as the failure tells."""

    REPLICA = "replica"
    """Refused, timed out, cut, 502/503/504, 429, 408, a wrong key: counts against its
    health; another replica may answer."""
    SUSPECT = "suspect"
    """Any other 5xx (llama.cpp answers 500 for a template or grammar error the request
    caused): never counts; the call fails over once, and a second such failure ends it."""
    ABSENT = "absent"
    """404: this server does not have the model (any more); it is alive."""
    REQUEST = "request"
    """A request rightly refused (a 4xx, a prompt too long, an answer over toolwire's
    limits): it would fare no better elsewhere."""

    @property
    def counts(self) -> bool:
        return self is Fault.REPLICA

    @property
    def elsewhere(self) -> bool:
        return self is not Fault.REQUEST


def replica_fault(error: UpstreamError) -> Fault:
    """Whose fault the failure was. Only what says the server is unwell counts against its
    health: a request that makes every server answer 500 must not open every circuit."""
    if isinstance(error, UpstreamTooLargeError) or error.code == "context_length_exceeded":
        return Fault.REQUEST
    if isinstance(error, UpstreamHTTPError):
        status = error.upstream_status or 0
        if status in REPLICA_STATUSES:
            return Fault.REPLICA
        if status >= 500:
            return Fault.SUSPECT
        if status == 404:
            return Fault.ABSENT
        return Fault.REQUEST
    return Fault.REPLICA  # refused, timed out, cut, stalled, garbage


@dataclass(slots=True, frozen=True)
class ReplicaStatus:
    """One replica's state for `/metrics`, the start-up summary and `/ui`."""

    name: str
    url: str
    state: str
    outstanding: int
    calls: int
    failures: int
    error_rate: float
    ttft: float | None
    models: list[str] | None
    weight: float
    last_error: str | None


class FleetRouter:
    """An `Upstream` over several model servers (see the module docstring)."""

    name = "fleet"
    routes = True  # `upstream/base.py` routes_models: doors pass routing hints

    def __init__(
        self,
        replicas: Sequence[Replica],
        settings: FleetSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        names = [replica.name for replica in replicas]
        if not replicas:
            raise ValueError("a fleet needs at least one upstream")
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must be unique: {names}")
        self.replicas = list(replicas)
        self.settings = settings or FleetSettings()
        self.selector = Selector(
            self.settings.policy, self.settings.load_bound, self.settings.sessions_kept
        )
        self._clock = clock
        self._prober: asyncio.Task[None] | None = None
        self._serving: dict[str, list[Replica]] = {}
        """The replicas serving each model asked for, until a listing changes."""
        self._served: frozenset[str] | None = None
        self._served_known = False

    # -- models -------------------------------------------------------------------------

    def served(self) -> list[str] | None:
        """Every model some replica serves; None while a replica's models are unknown."""
        models: set[str] = set()
        for replica in self.replicas:
            known = replica.models()
            if known is None:
                return None
            models |= known
        return sorted(models)

    def check_model(self, model: str) -> None:
        """Raise OpenAI's 404 `model_not_found`, naming the models served, for a model no
        replica serves (while every replica's models are known). Every request asks: the
        answer is kept until a listing changes."""
        if not self._served_known:
            served = self.served()
            self._served = frozenset(served) if served is not None else None
            self._served_known = True
        if self._served is not None and model not in self._served:
            raise model_not_served(model, sorted(self._served))

    async def list_models(self) -> list[dict[str, object]]:
        """The union of the replicas' `/models` entries (the first replica's entry of a
        model shared by several)."""
        seen: dict[str, dict[str, object]] = {}
        for replica in self.replicas:
            for entry in replica.entries():
                seen.setdefault(str(entry["id"]), entry)
        return list(seen.values())

    async def count_tokens(self, model: str, text: str) -> int | None:
        """With the tokenizer of a replica serving the model (they serve the same model)."""
        now = self._clock()
        for replica in self.replicas:
            counter = getattr(replica.adapter, "count_tokens", None)
            if counter is not None and replica.serves(model) and replica.health.admits(now):
                result: int | None = await counter(model, text)
                return result
        return None

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """List every replica's models once, then keep probing them in the background."""
        await self.probe()
        if self.settings.health.probe_interval > 0 and self._prober is None:
            self._prober = asyncio.get_running_loop().create_task(self._probe_forever())

    async def probe(self) -> None:
        await asyncio.gather(*(self._probe_one(replica) for replica in self.replicas))

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.health.probe_interval)
            await self.probe()

    async def _probe_one(self, replica: Replica) -> None:
        """`GET /models` at the replica's configured address: health and its model list."""
        try:
            async with asyncio.timeout(self.settings.health.probe_timeout):
                listed = await replica.adapter.list_models()
        except TimeoutError:
            replica.health.probe_failed(self._clock(), "the probe (GET /models) timed out")
            return
        except UpstreamError as exc:
            replica.health.probe_failed(self._clock(), exc.message)
            return
        before = replica.models()
        replica.take_listing([dict(entry) for entry in listed])
        if replica.models() != before:
            self._serving = {}
            self._served_known = False
        replica.health.probe_answered(self._clock())

    async def aclose(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
            self._prober = None
        for replica in self.replicas:
            await replica.adapter.aclose()

    # -- routing ------------------------------------------------------------------------

    def choose(
        self, request: TurnRequest, avoid: frozenset[str] = frozenset(), resuming: bool = False
    ) -> tuple[Replica, str]:
        """The replica for this model call, and why (`Routed.reason`)."""
        now = self._clock()
        model = request.model
        serving = self._serving.get(model)
        if serving is None:
            serving = [replica for replica in self.replicas if replica.serves(model)]
            if len(self._serving) < MAX_MODELS_KEPT:
                self._serving[model] = serving
        if not serving:
            raise model_not_served(model, self.served() or [])
        admitted = [
            replica
            for replica in serving
            if (replica.health.state is CLOSED and now >= replica.health.busy_until)
            or replica.health.admits(now)
        ]
        if resuming:
            admitted = [replica for replica in admitted if can_resume(replica.resume)]
        hints = request.routing
        if hints.avoid:
            avoid = avoid | hints.avoid
        fresh = admitted  # a first try avoids nothing: no second pass over the replicas
        if avoid:
            fresh = [replica for replica in admitted if replica.name not in avoid] or admitted
        if not fresh:
            raise self._unavailable(model, serving, now, resuming)
        if hints.session is not None:
            key: int | None = session_key(hints.session)
        else:
            key = opening_key(request.transcript)
        return self.selector.pick(
            fresh,
            key=key,
            continues=hints.upstream,
            keyed_by_session=hints.session is not None,
            now=now,
        )

    def _unavailable(
        self, model: str, serving: list[Replica], now: float, resuming: bool
    ) -> FleetUnavailable:
        if resuming and not any(can_resume(replica.resume) for replica in serving):
            return FleetUnavailable(
                "the answer was cut off mid-stream and no replica serving "
                f"{model!r} can continue a cut answer (every one has `resume: off`)",
                None,
            )
        waits = []
        for replica in serving:
            health = replica.health
            ready = health.busy_until
            if health.state is CircuitState.OPEN:
                ready = max(ready, health.opened_at + health.settings.cooldown)
            waits.append(max(0.0, ready - now))
        wait = min(waits) if waits else None
        # which servers and in what state is for the operator (the log, `/ui`), not for
        # every API client: it names the fleet's addresses
        states = ", ".join(f"{r.name} ({r.health.state.value})" for r in serving)
        log.warning("no upstream serving %r takes calls now: %s", model, states)
        return FleetUnavailable(
            f"no model server for {model!r} is available now; try again shortly",
            wait if wait else None,
        )

    def _unresumable(self, request: TurnRequest) -> str | None:
        """Why a cut answer of this request cannot be continued (None: it can)."""
        if not resumable(request):
            return (
                "an answer under structured output (a response format, a grammar, a forced "
                "tool choice) is not continued: the replica would begin it again"
            )
        if not any(can_resume(r.resume) and r.serves(request.model) for r in self.replicas):
            return "no replica can continue it (`resume: off`)"
        return None

    def _elsewhere(self, model: str, avoid: set[str]) -> bool:
        """Whether a replica other than those in `avoid` could take the model's call now."""
        now = self._clock()
        return any(
            replica.name not in avoid and replica.serves(model) and replica.health.admits(now)
            for replica in self.replicas
        )

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ModelEvent]:
        async for batch in self.stream_turn_batches(request):
            for event in batch:
                yield event

    async def stream_turn_batches(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """The turn from a chosen replica, failed over as the module docstring says."""
        settings = self.settings
        clock = self._clock
        avoid = set(request.routing.avoid)
        text: list[str] = []  # the turn's text that has gone out, for a continuation
        beyond_text = False  # reasoning or a call went out: no continuation
        attempt = 0
        spent = 0  # the output of the cut call, estimated, counted once
        suspect = False  # a replica failed it as a bad request might (`Fault.SUSPECT`)
        after: str | None = None  # why this call is another try
        while True:
            try:
                replica, reason = self.choose(request, frozenset(avoid), resuming=bool(text))
            except FleetUnavailable as exc:
                if exc.wait is None or exc.wait > MAX_WAIT or attempt >= settings.failover_attempts:
                    raise
                yield [UpstreamRetry("upstream_unavailable", attempt + 1, exc.wait)]
                await asyncio.sleep(exc.wait)
                attempt += 1
                continue
            call = continuation(request, "".join(text), replica.resume) if text else request
            health = replica.health
            ticket = health.begin()
            replica.outstanding += 1
            started = clock()
            first: float | None = None
            judged = False
            note: list[ModelEvent] | None = [Routed(replica.name, after or reason)]
            # read until the first token and then something beyond text: such a turn is never
            # continued, so its later events (text included) need no reading
            watching = True
            try:
                async for batch in turn_batches(replica.adapter, call):
                    if watching:
                        for event in batch:
                            if isinstance(event, TextDelta):
                                text.append(event.text)
                            elif isinstance(event, FirstToken):
                                if first is None:
                                    first = clock() - started
                            elif isinstance(event, _NOT_TEXT):
                                beyond_text = True
                                if first is not None:
                                    watching = False
                                    break
                    if note is not None:  # the choice goes out with the call's first events
                        batch, note = note + batch, None
                    yield batch
                if note is not None:
                    yield note
                health.succeeded(clock(), first, ticket)
                judged = True
                return
            except UpstreamError as exc:
                if note is not None:  # observers see which replica failed
                    yield note
                fault = replica_fault(exc)
                # a second failure that may be the request's own (on another replica, or on
                # the only one again): it is the request's; another try would fail the same
                elsewhere = fault.elsewhere and not (fault is Fault.SUSPECT and suspect)
                suspect = suspect or fault is Fault.SUSPECT
                if fault.counts:
                    health.failed(clock(), exc.message, exc.retry_after, ticket)
                    judged = True
                exc.replica = replica.name
                avoid.add(replica.name)
                exhausted = attempt >= settings.failover_attempts
                if not elsewhere or exhausted or beyond_text:
                    exc.failover = (
                        elsewhere and not exhausted and self._elsewhere(request.model, avoid)
                    )
                    raise
                if text:
                    why = self._unresumable(request)
                    if why is not None:
                        cut = UpstreamStreamError(
                            f"{exc.message}; the answer was cut off after its text began to "
                            f"stream, and {why}"
                        )
                        cut.replica = replica.name
                        cut.failover = self._elsewhere(request.model, avoid)
                        raise cut from exc
                    # the cut call's output is part of the answer: it counts in the turn's
                    # usage (the continuation reports the prefix as its input)
                    if not spent:
                        spent = estimate_tokens("".join(text))
                        yield [Usage(output_tokens=spent)]
            finally:
                replica.outstanding -= 1
                if not judged:
                    health.released(ticket)
            # asked again, elsewhere if it can be, after a backoff (the replica no longer
            # counts this call as in flight while it waits)
            ceiling = min(settings.failover_max_backoff, settings.failover_backoff * 2**attempt)
            delay = random.uniform(ceiling / 2, ceiling)
            yield [UpstreamRetry("failover", attempt + 1, delay)]
            await asyncio.sleep(delay)
            attempt += 1
            after = "resume" if text else "failover"

    # -- status -------------------------------------------------------------------------

    def status(self) -> list[ReplicaStatus]:
        now = self._clock()
        rows = []
        for replica in self.replicas:
            health = replica.health
            health.admits(now)  # an open circuit past its cool-down shows as half-open
            models = replica.models()
            rows.append(
                ReplicaStatus(
                    name=replica.name,
                    url=replica.url,
                    state=health.state.value,
                    outstanding=replica.outstanding,
                    calls=health.calls,
                    failures=health.failures,
                    error_rate=health.error_rate(now),
                    ttft=health.ttft,
                    models=sorted(models) if models is not None else None,
                    weight=replica.weight,
                    last_error=health.last_error,
                )
            )
        return rows


def fleet_of(upstream: Any) -> FleetRouter | None:
    """The router behind `upstream` (itself, or the one a wrapper such as the quota layer
    holds in `.inner`); None when the gateway fronts a single upstream."""
    seen = 0
    while upstream is not None and seen < 8:
        if isinstance(upstream, FleetRouter):
            return upstream
        upstream = getattr(upstream, "inner", None)
        seen += 1
    return None
