"""toolwire's vocabulary: declared tools, tool calls and the transcript the model has seen.

Plain slotted dataclasses: these travel on hot paths (one per streamed call) and between every
layer, so they carry no I/O and no validation logic of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from toolwire.wire.chat import ChatPart

JSONObject = dict[str, Any]


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """A tool as the model is told about it: a name, what it does, and a JSON schema."""

    name: str
    description: str = ""
    parameters: JSONObject = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for.

    `arguments` is the parsed object, or None when `parse_error` says why it could not be
    recovered; `raw_arguments` always keeps the text as the model produced it.
    """

    id: str
    name: str
    arguments: JSONObject | None
    raw_arguments: str
    parse_error: str | None = None
    index: int = 0

    @property
    def ok(self) -> bool:
        return self.parse_error is None and self.arguments is not None

    def arguments_json(self) -> str:
        """The arguments as a JSON string: the model's own text when it was already valid JSON
        (byte for byte), the recovered object re-encoded when it was not; for a call that could
        not be parsed, the raw text."""
        if not self.ok:
            return self.raw_arguments
        raw = self.raw_arguments.strip()
        if raw:
            try:
                if orjson.loads(raw) == self.arguments:
                    return self.raw_arguments
            except orjson.JSONDecodeError:
                pass
        return orjson.dumps(self.arguments).decode()


@dataclass(slots=True)
class SystemMessage:
    text: str
    role: Literal["system", "developer"] = "system"


@dataclass(slots=True)
class UserMessage:
    """A user turn: plain text, or OpenAI-style content parts (text, images) kept verbatim."""

    content: str | list[ChatPart]
    #: A message toolwire added for the model only (a leak correction); never shown as output.
    hidden: bool = False


@dataclass(slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""


@dataclass(slots=True)
class ToolMessage:
    """A tool's result as the model reads it: always the rendered envelope text."""

    call_id: str
    name: str
    content: str
    attachments: list[ChatPart] = field(default_factory=list)
    """Images (and files) the tool returned, as chat-completions content parts: a vision
    upstream sees them after the result; a text-only one reads a one-line note instead."""


TranscriptMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage
Transcript = list[TranscriptMessage]
