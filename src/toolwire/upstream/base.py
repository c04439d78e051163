"""The `Upstream` protocol every model adapter implements, and what one turn asks of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from toolwire.transcript import ToolSpec, Transcript
from toolwire.upstream.events import ModelEvent


@dataclass(slots=True, frozen=True)
class Sampling:
    """How the model should generate: defined once, carried from every door to every adapter.

    None means "the upstream's default". `extra_body` holds the other chat-completions
    parameters a door passes through untouched (stop, seed, top_k, min_p, …).
    """

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    response_format: dict[str, object] | None = None
    """Chat-completions' `response_format` (a JSON Schema inside: arbitrary JSON)."""
    extra_body: dict[str, object] | None = None
    """Other parameters, passed on as the client sent them (arbitrary JSON)."""


@dataclass(slots=True, frozen=True)
class RoutingHints:
    """What a door and the loop know about where a model call should go, for an upstream
    that routes over several model servers (`upstream/fleet/`); a single upstream ignores it.

    Doors fill `upstream` and `session`; the loop adds `avoid`. The prompt's opening (the
    other affinity key) is read from the turn itself, so no door computes it."""

    upstream: str | None = None
    """The model server that served the turn this request continues (stored with it)."""
    session: str | None = None
    """A client's session id (a header such as `x-claude-code-session-id`)."""
    avoid: frozenset[str] = frozenset()
    """Model servers this turn already failed on: asked again, it goes elsewhere if it can."""


NO_HINTS = RoutingHints()


@dataclass(slots=True)
class TurnRequest:
    """One model call: the transcript so far, the tools on offer, and sampling settings."""

    model: str
    transcript: Transcript
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str | dict[str, object] | None = None
    """A mode, or the Responses-style object naming a function (checked at the door)."""
    parallel_tool_calls: bool | None = None
    sampling: Sampling = field(default_factory=Sampling)
    stream: bool = True
    routing: RoutingHints = NO_HINTS


class Upstream(Protocol):
    """A model server. `stream_turn` yields one turn's `ModelEvent`s, ending with `TurnEnd`."""

    name: str

    def stream_turn(self, request: TurnRequest) -> AsyncIterator[ModelEvent]: ...

    async def list_models(self) -> list[dict[str, object]]:
        """The upstream's `/models` entries, as it sent them (JSON, passed on)."""
        ...

    async def aclose(self) -> None: ...


def routes_models(upstream: object) -> bool:
    """Whether `upstream` routes each call among several model servers (a fleet's router):
    then doors pass routing hints, and the store keeps which server served each turn."""
    return bool(getattr(upstream, "routes", False))


def ensure_served(upstream: object, model: str) -> None:
    """Refuse, before anything runs, a model that an upstream knowing its models does not
    serve (a fleet's router raises OpenAI's 404 `model_not_found`, naming those it serves).
    A single upstream is asked as it is: it answers for itself."""
    check = getattr(upstream, "check_model", None)
    if check is not None:
        check(model)


def turn_batches(upstream: Upstream, turn: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
    """A model turn's events in lists: the adapter's own batches when it offers them
    (`stream_turn_batches`: the events of one network read), else one event a list."""
    batches = getattr(upstream, "stream_turn_batches", None)
    if batches is not None:
        return batches(turn)  # type: ignore[no-any-return]
    return one_by_one(upstream.stream_turn(turn))


async def one_by_one(events: AsyncIterator[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
    """`events` as batches of one (an adapter without batches of its own)."""
    async for event in events:
        yield [event]
