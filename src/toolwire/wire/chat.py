"""Typed shapes of the chat-completions API: messages, tool calls, chunks, completions.

Pure data: `TypedDict`s, as in `wire/items.py` — these are the JSON objects toolwire sends
upstream and reads back (and serves on `/v1/chat/completions`), kept as dicts on the hot path
(one chunk per token) at no run-time cost, with every key and value type checked by mypy.
Chunks read from an upstream are open (`total=False`): a server may leave any field out, and
the assembler checks the values it reads (a TypedDict promises nothing at run time).
"""

from __future__ import annotations

from typing import TypedDict


class ImageUrl(TypedDict, total=False):
    url: str
    detail: str


class ChatPart(TypedDict, total=False):
    """A content part: `text` or `image_url` (what the transcript keeps of a user's parts)."""

    type: str
    text: str
    image_url: ImageUrl
    file: dict[str, object]
    """A file part's `file` (`file_id` / `file_data` / `filename`), passed on."""
    input_audio: dict[str, object]


class ChatFunction(TypedDict):
    name: str
    arguments: str


class ChatToolCall(TypedDict):
    id: str
    type: str
    function: ChatFunction


class ChatMessage(TypedDict, total=False):
    """A message of a request's `messages` or a completion's `message`."""

    role: str
    content: str | list[ChatPart] | None
    tool_calls: list[ChatToolCall]
    tool_call_id: str
    name: str
    refusal: str | None
    reasoning_content: str | None


class FunctionDelta(TypedDict, total=False):
    name: str | None
    arguments: str | None


class ToolCallDelta(TypedDict, total=False):
    """A piece of a streamed tool call: `index` says which call it continues."""

    index: int
    id: str | None
    type: str
    function: FunctionDelta


class ChatDelta(TypedDict, total=False):
    role: str
    content: str | None
    reasoning_content: str | None
    reasoning: str | None
    refusal: str | None
    tool_calls: list[ToolCallDelta]
    function_call: FunctionDelta


class ChunkChoice(TypedDict, total=False):
    index: int
    delta: ChatDelta
    finish_reason: str | None
    logprobs: object


class CompletionChoice(TypedDict, total=False):
    index: int
    message: ChatMessage
    finish_reason: str | None
    logprobs: object


class ChatUsage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int] | None
    completion_tokens_details: dict[str, int] | None


class ChatChunk(TypedDict, total=False):
    """One `chat.completion.chunk` of a stream."""

    id: str
    object: str
    created: int
    model: str | None
    choices: list[ChunkChoice]
    usage: ChatUsage | None
    system_fingerprint: str | None


class ChatCompletion(TypedDict, total=False):
    """A whole `chat.completion` (a non-streamed reply)."""

    id: str
    object: str
    created: int
    model: str | None
    choices: list[CompletionChoice]
    usage: ChatUsage | None
    system_fingerprint: str | None


class ChatFunctionSpec(TypedDict, total=False):
    name: str
    description: str
    parameters: dict[str, object]
    """A JSON Schema: arbitrary JSON, passed on."""
    strict: bool


class ChatTool(TypedDict):
    type: str
    function: ChatFunctionSpec


class ChunkMeta(TypedDict):
    """What every chunk of one reply repeats: its id, time and model."""

    id: str
    created: int
    model: str | None


class ChatRequest(TypedDict, total=False):
    """The fields of a `/chat/completions` request toolwire sets itself (a door's other
    parameters ride along untouched: `Sampling.extra_body`)."""

    model: str
    messages: list[ChatMessage]
    stream: bool
    stream_options: dict[str, bool]
    tools: list[ChatTool]
    tool_choice: str | dict[str, object] | None
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    max_tokens: int
    response_format: dict[str, object]
