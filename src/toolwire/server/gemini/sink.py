"""`LoopEvent`s -> Gemini's parts, candidates and stream chunks.

One writer serves both modes. Streamed, each batch of events the pump hands over becomes at
most one chunk (a whole `GenerateContentResponse` carrying that batch's new parts: text and
thoughts live, neighbours of one kind merged into one part); the run's end is one more chunk
with the calls, `finishReason` and `usageMetadata`. Whole, the parts are gathered in Gemini's
order (thoughts, text, calls).

A function call goes out only once the loop has judged it, whole, with its repaired `args`:
Gemini's clients take a call's arguments from one part (there are no argument deltas to take
back), so a split, repeated, leaked or malformed call never reaches them half-made. The
reasoning of the run's last model turn goes out sealed as `thoughtSignature` (`ThoughtSeal`),
on the first call, as Gemini places it, else on the answer's last part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwire.errors import StopReason, run_error
from toolwire.loop.events import (
    LoopEvent,
    LoopFinished,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
)
from toolwire.server.gemini.contents import ThoughtSeal
from toolwire.transcript import ToolCall
from toolwire.upstream.events import Usage
from toolwire.wire import gemini

#: What a stream relays of a run (the rest stays on the driver's side of the queue).
RELAYED = (OutputTextDelta, ReasoningTextDelta, ModelTurnCompleted, LoopFinished)

#: How a run that ended with no answer to hand over is told in `finishReason`; the rest
#: (`STOP` for an answer or calls, or an error) is `finish_reason`'s.
_FINISH: dict[StopReason, gemini.FinishReason] = {
    StopReason.MAX_OUTPUT_TOKENS: "MAX_TOKENS",
    StopReason.CONTENT_FILTER: "SAFETY",
    StopReason.LEAKED_TOOL_CALL: "MALFORMED_FUNCTION_CALL",
    StopReason.REPEATED_FAILURE: "MALFORMED_FUNCTION_CALL",
    StopReason.MAX_ITERATIONS: "TOO_MANY_TOOL_CALLS",
    StopReason.DEADLINE: "OTHER",
}


def finish_reason(finished: LoopFinished) -> tuple[gemini.FinishReason, str | None]:
    """(`finishReason`, `finishMessage`): `STOP` for an answer or calls handed back,
    `MALFORMED_FUNCTION_CALL` only when the loop gave up on a call (a leak past its retries,
    the same failing call again and again). A run that ended with nothing a Gemini client
    can read raises (an HTTP error before a stream opened, an error object after)."""
    if finished.pending_calls or finished.reason is StopReason.ANSWERED:
        return "STOP", None
    reason = _FINISH.get(finished.reason)
    if reason is None:
        raise run_error(finished.reason, finished.message, finished.error)
    return reason, finished.message


def usage_of(use: Usage, counted: int) -> gemini.UsageMetadata:
    """The upstream's counts; the prompt as toolwire counted it where the upstream gave
    none."""
    return gemini.usage(
        use.input_tokens or counted, use.output_tokens, use.reasoning_tokens, use.cached_tokens
    )


@dataclass(slots=True)
class PartWriter:
    seal: ThoughtSeal
    owner: str | None
    show_thoughts: bool
    thoughts: list[str] = field(default_factory=list)
    """Thought text gathered for the whole answer (shown ones only)."""
    text: list[str] = field(default_factory=list)
    """Answer text gathered for the whole answer."""
    _turn_reasoning: list[str] = field(default_factory=list)
    _last_reasoning: str = ""

    def parts(self, events: list[LoopEvent], live: list[gemini.Part]) -> LoopFinished | None:
        """Parts for a batch of events onto `live` (the stream's next chunk; merged by kind);
        the `LoopFinished` when the run ended (its parts are `final_parts`')."""
        for event in events:
            if isinstance(event, OutputTextDelta):
                if event.text:
                    self.text.append(event.text)
                    _append(live, event.text, thought=False)
            elif isinstance(event, ReasoningTextDelta):
                if event.text:
                    self._turn_reasoning.append(event.text)
                    if self.show_thoughts:
                        self.thoughts.append(event.text)
                        _append(live, event.text, thought=True)
            elif isinstance(event, ModelTurnCompleted):
                if self._turn_reasoning:  # a turn that did not reason keeps the one before
                    self._last_reasoning = "".join(self._turn_reasoning)
                self._turn_reasoning = []
            elif isinstance(event, LoopFinished):
                return event
        return None

    def final_parts(self, finished: LoopFinished, whole: bool) -> list[gemini.Part]:
        """The calls handed back, and the signature. `whole`: for the non-streamed answer,
        which also holds the thoughts and the text gathered."""
        parts: list[gemini.Part] = []
        if whole:
            if self.thoughts:
                parts.append({"text": "".join(self.thoughts), "thought": True})
            if self.text:
                parts.append({"text": "".join(self.text)})
        calls = [_call_part(call) for call in finished.pending_calls]
        if self._last_reasoning:
            # the model server of the run's last call (a fleet's): its prefix is there
            signature = self.seal.sign(self._last_reasoning, self.owner, finished.upstream)
            if calls:
                calls[0]["thoughtSignature"] = signature
            elif parts and "thought" not in parts[-1]:
                parts[-1]["thoughtSignature"] = signature
            else:
                parts.append({"text": "", "thoughtSignature": signature})
        return parts + calls


def _append(parts: list[gemini.Part], text: str, *, thought: bool) -> None:
    last = parts[-1] if parts else None
    if last is not None and "functionCall" not in last and last.get("thought", False) is thought:
        last["text"] = last.get("text", "") + text
    elif thought:
        parts.append({"text": text, "thought": True})
    else:
        parts.append({"text": text})


def _call_part(call: ToolCall) -> gemini.Part:
    return {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments or {}}}
