"""`ModelEvent`s: what an upstream adapter streams back for one model turn, normalized."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.transcript import ToolCall


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ReasoningDelta:
    text: str


@dataclass(slots=True)
class ToolCallStarted:
    """A call's name became known; `key` ties its later deltas and its `ToolCallDone` together."""

    key: int
    id: str
    name: str


@dataclass(slots=True)
class ToolCallArgumentsDelta:
    key: int
    delta: str


@dataclass(slots=True)
class ToolCallDone:
    """The call is final: arguments parsed (or `parse_error` set), name matched to a tool."""

    key: int
    call: ToolCall


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_tokens += other.cached_tokens


@dataclass(slots=True)
class TurnEnd:
    """The turn is over. `finish_reason` is normalized: stop, tool_calls, length, content_filter.
    `stop_sequence`: which of the request's stop strings ended a `stop` turn, when the server
    says (vLLM's choice `stop_reason`, SGLang's `matched_stop`); None when it does not."""

    finish_reason: str
    stop_sequence: str | None = None


# -- observations: facts about the call itself, for observers (metrics, traces, the timeline).
# The driver forwards them to its sink unchanged; sinks that translate to a wire format ignore
# them. Each is rare (at most a few per turn), so they cost nothing on the per-chunk path.


@dataclass(slots=True)
class Repair:
    """The assembler (or adapter) repaired a deviation from the chat-completions stream spec;
    `kind` names the stream-variants row (see `docs/operations.md`). Once per kind per turn."""

    kind: str


@dataclass(slots=True)
class UpstreamRetry:
    """The adapter is about to ask the upstream again: `cause` e.g. `http_429`, `connect`,
    `stream_dropped`, `streaming_refused`; `delay` seconds of backoff."""

    cause: str
    attempt: int
    delay: float


@dataclass(slots=True)
class FirstToken:
    """The upstream's first content of this turn arrived (time to first token)."""


@dataclass(slots=True)
class Routed:
    """A router picked the model server for this model call (`upstream/fleet/`): `upstream`
    is its name, `reason` why (`continuation`, `session`, `prompt`, `load`, `round_robin`,
    `least_outstanding`, `failover`, `resume`). The last one of a run is stored with the
    response, so a continuation goes where its previous turn went."""

    upstream: str
    reason: str


UpstreamNote = Repair | UpstreamRetry | FirstToken | Routed

ModelEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallDone
    | Usage
    | TurnEnd
    | Repair
    | UpstreamRetry
    | FirstToken
    | Routed
)


def coalesce(events: list[ModelEvent]) -> list[ModelEvent]:
    """The events of one network read with adjacent pieces joined: text pieces into one
    `TextDelta`, reasoning pieces into one `ReasoningDelta`, argument pieces of one call into
    one `ToolCallArgumentsDelta`. They arrived together, so no piece reaches anyone later than
    it would have, and the concatenation is the same; what is saved is the per-event work of
    every stage after (the driver, the observers, a door's builder and its frames). Pieces
    from separate reads are never joined (each read is its own batch)."""
    out: list[ModelEvent] = []
    append = out.append
    head: TextDelta | ReasoningDelta | ToolCallArgumentsDelta | None = None
    pieces: list[str] = []
    for event in events:
        kind = type(event)
        if head is not None and kind is type(head):
            if kind is ToolCallArgumentsDelta:
                if event.key == head.key:  # type: ignore[union-attr]
                    pieces.append(event.delta)  # type: ignore[union-attr]
                    continue
            else:
                pieces.append(event.text)  # type: ignore[union-attr]
                continue
        if head is not None:
            append(_joined(head, pieces))
            head = None
        if kind is TextDelta or kind is ReasoningDelta:
            head = event  # type: ignore[assignment]
            pieces = [event.text]  # type: ignore[union-attr]
        elif kind is ToolCallArgumentsDelta:
            head = event  # type: ignore[assignment]
            pieces = [event.delta]  # type: ignore[union-attr]
        else:
            append(event)
    if head is not None:
        append(_joined(head, pieces))
    return out


def _joined(
    head: TextDelta | ReasoningDelta | ToolCallArgumentsDelta, pieces: list[str]
) -> ModelEvent:
    if len(pieces) == 1:
        return head
    if isinstance(head, ToolCallArgumentsDelta):
        return ToolCallArgumentsDelta(head.key, "".join(pieces))
    return type(head)("".join(pieces))
