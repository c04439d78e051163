"""A scripted upstream that behaves like DeepSeek's thinking mode: a request whose history has
an assistant tool-call turn without its reasoning is refused (HTTP 400), as interleaved-thinking
models require their reasoning back on tool-call turns."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from toolwire.testing import Body, Reply
from toolwire.testing.scripted import Turn

#: DeepSeek's answer to a tool-call turn sent back without its reasoning.
REFUSAL = (
    "Missing `reasoning_content` field in the assistant message at message index {index}. "
    "For more information, please refer to the thinking mode documentation."
)


def missing_reasoning(body: Any, field: str = "reasoning_content") -> int | None:
    """The index of the first assistant tool-call message without its reasoning, if any."""
    for index, message in enumerate(body.get("messages") or []):
        tool_turn = message.get("role") == "assistant" and message.get("tool_calls")
        if tool_turn and not message.get(field):
            return index
    return None


class ThinkingUpstream:
    """`ScriptedUpstream(default=ThinkingUpstream([...]))`: plays the turns in order, each
    only if the request carries every tool-call turn's reasoning in `field`."""

    def __init__(self, turns: Iterable[Turn], field: str = "reasoning_content") -> None:
        self.turns: collections.deque[Turn] = collections.deque(turns)
        self.field = field
        self.refused = 0

    def __call__(self, body: Any) -> Turn:
        index = missing_reasoning(body, self.field)
        if index is not None:
            self.refused += 1
            error = {
                "message": REFUSAL.format(index=index),
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
            return Body({"error": error}, status=400)
        return self.turns.popleft() if self.turns else Reply(text="(script over)")
