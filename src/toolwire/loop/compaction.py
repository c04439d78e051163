"""Compaction: a long transcript replaced by a summary the upstream model writes, so that a
session goes on past the model's context window.

One mechanism serves `POST /v1/responses/compact`, `context_management` on create (automatic
compaction before a model call once the transcript passes `compact_threshold` tokens, and
whenever the upstream says its context is full), the library and the CLI.

A compaction leaves a `compaction` item (OpenAI's shape: `id`, `type`, `encrypted_content`).
Its `encrypted_content` is toolwire's own: the summary and the user's most recent messages,
encrypted and authenticated (Fernet, a key derived from the server secret) and bound to the API
key that made it. A client can neither read nor alter it, nor use another key's or another
gateway's: those are 400s (`invalid_encrypted_content`). Fed back as input, or met in a stored
history, the latest compaction item stands for everything before it: it expands to the kept user
messages and the summary, and the items before it are not sent to the model
(`expand_compactions`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

from toolwire.errors import ToolwireError, UpstreamError
from toolwire.sealed import Sealer, SealError
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    Transcript,
    UserMessage,
)
from toolwire.upstream.base import Sampling, TurnRequest, Upstream
from toolwire.upstream.events import TextDelta, Usage
from toolwire.wire.chat import ChatFunctionSpec, ChatPart, ImageUrl
from toolwire.wire.items import ContentPart, Item

SUMMARY_PROMPT = (
    "You are compacting a conversation between a user and an AI assistant so that the "
    "assistant can continue it with a much shorter context. Below is the conversation so far "
    "(messages, tool calls and tool results). Write a concise summary that another assistant "
    "can pick the work up from: the user's goals and constraints, decisions made, facts "
    "learned (names, numbers, file paths, results of tool calls), what has been done and what "
    "remains to do. Keep every detail the next step needs; leave out pleasantries and "
    "repetition. Write only the summary."
)
"""What the summarizing model is asked: the one place the compaction prompt lives."""

SUMMARY_PREFIX = (
    "[Summary of the earlier conversation, written when it was compacted to fit the context "
    "window. Continue from it.]\n"
)
"""What the model reads before the summary when the conversation goes on after a compaction."""

BYTES_PER_TOKEN = 4
"""Estimate when the upstream offers no tokenizer: about 4 bytes of English text per token."""
MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds per message (role markers, separators), roughly."""
SUMMARY_TOKENS = 1024
"""Most tokens a summary may take (less with a small threshold: an eighth of it)."""
KEEP_TOKENS = 2048
"""Most tokens of recent user messages kept verbatim (less with a small threshold: an eighth
of it). Together with the summary, a compacted transcript takes about a quarter of the
threshold at most, so that the next compaction is many turns away."""
RESULT_CHARS = 4000
"""A tool result is cut to this many characters in what the summarizer reads."""
SPLIT_DEPTH = 4
"""How often a transcript too long for the summarizer itself is halved."""


class CompactionError(ValueError):
    """A compaction item toolwire cannot use: altered, foreign, or made for another key.
    `position`: where it is in the request's input (None: in the history). The server answers
    it as a 400 (`server/responses/prepare/validation/compactions.py`)."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(slots=True, frozen=True)
class CompactedContext:
    """What a compaction item stands for: the summary, and the user's most recent messages
    (their content as the transcript holds it: text, or parts) kept word for word."""

    summary: str
    kept: tuple[str | list[ChatPart], ...] = ()

    def transcript(self) -> Transcript:
        """What the model reads in place of everything the compaction replaced."""
        messages: Transcript = [UserMessage(content) for content in self.kept]
        messages.append(UserMessage(SUMMARY_PREFIX + self.summary))
        return messages

    def items(self) -> list[Item]:
        """The same, as the message items a client would have sent."""
        out: list[Item] = []
        for content in [*self.kept, SUMMARY_PREFIX + self.summary]:
            parts: list[ContentPart] = (
                [{"type": "input_text", "text": content}]
                if isinstance(content, str)
                else [_input_part(part) for part in content]
            )
            out.append({"type": "message", "role": "user", "content": parts})
        return out


def _input_part(part: ChatPart) -> ContentPart:
    """A chat-completions content part (as a transcript keeps it) as a Responses input part."""
    if part.get("type") == "image_url":
        image = part.get("image_url") or ImageUrl()
        return {"type": "input_image", "image_url": image.get("url", ""), "detail": "auto"}
    return {"type": "input_text", "text": str(part.get("text", ""))}


class CompactionCodec:
    """Seals a `CompactedContext` into a compaction item's `encrypted_content`, and opens it.

    Sealed (`toolwire/sealed.py`) under a key derived from the server secret (the one that
    signs approval requests, shared by replicas): a label keeps the two uses apart. The owner
    (API key) is inside the token and checked on opening."""

    def __init__(self, secret: bytes) -> None:
        self._sealer = Sealer(secret, label=b"toolwire compaction v1")

    @staticmethod
    def _owner_tag(owner: str | None) -> str:
        return hashlib.sha256((owner or "").encode()).hexdigest()[:32]

    def seal(self, context: CompactedContext, owner: str | None) -> str:
        payload = {"v": 1, "o": self._owner_tag(owner), "s": context.summary, "u": context.kept}
        return self._sealer.seal(payload)

    def open(self, token: Any, owner: str | None) -> CompactedContext:
        if not isinstance(token, str) or not token:
            raise CompactionError("The compaction item has no encrypted_content string.")
        try:
            payload = self._sealer.open(token)
        except (SealError, UnicodeEncodeError):
            raise CompactionError(
                "The encrypted content of this compaction item could not be verified: it was "
                "altered, or it was not made by this gateway."
            ) from None
        if not isinstance(payload, dict) or payload.get("o") != self._owner_tag(owner):
            raise CompactionError("This compaction item was made for another API key.")
        kept = payload.get("u") or []
        return CompactedContext(str(payload.get("s") or ""), tuple(kept))


def expand_compactions(
    history: list[Item],
    input_items: list[Item],
    codec: CompactionCodec,
    owner: str | None,
) -> list[Item]:
    """History plus input as the model should read them: every compaction item is checked
    (`CompactionError` if any is not ours), and the latest one replaces itself and all items
    before it with the messages it stands for."""
    combined = [*history, *input_items]
    latest: tuple[int, CompactedContext] | None = None
    for index, item in enumerate(combined):
        if item.get("type") != "compaction":
            continue
        position = index - len(history)
        try:
            latest = index, codec.open(item.get("encrypted_content"), owner)
        except CompactionError as exc:
            raise CompactionError(exc.message, position if position >= 0 else None) from None
    if latest is None:
        return combined
    index, context = latest
    return [*context.items(), *_answerable(combined[index + 1 :])]


def _answerable(items: list[Item]) -> list[Item]:
    """Tool outputs whose call was compacted away become a user message saying what came
    back: a chat-completions server refuses a tool result with no call before it."""
    calls = {item.get("call_id") for item in items if item.get("call_id") and "output" not in item}
    out: list[Item] = []
    for item in items:
        call_id = item.get("call_id")
        if call_id and str(item.get("type")).endswith("_output") and call_id not in calls:
            output = item.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            note = f"[result of the earlier tool call {call_id}]\n{text}"
            out.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": note}],
                }
            )
        else:
            out.append(item)
    return out


# -- counting ---------------------------------------------------------------------------------


@runtime_checkable
class TokenCounter(Protocol):
    """An upstream that can count tokens with the model's own tokenizer (llama.cpp, vLLM,
    llama-cpp-python expose one); None when it cannot."""

    async def count_tokens(self, model: str, text: str) -> int | None: ...


def render_for_count(turn: TurnRequest) -> tuple[str, int]:
    """The text of a model call (messages and tool definitions) and its number of messages."""
    parts = [_render_message(message, cut=None) for message in turn.transcript]
    if turn.tools:
        parts.append(orjson.dumps([_spec_json(tool) for tool in turn.tools]).decode())
    return "\n".join(parts), len(turn.transcript)


async def count_tokens(upstream: Upstream, turn: TurnRequest) -> int:
    """Tokens a model call's prompt takes: the upstream's tokenizer where it has one, else
    `BYTES_PER_TOKEN` bytes per token; plus `MESSAGE_OVERHEAD` per message."""
    text, messages = render_for_count(turn)
    counted: int | None = None
    if isinstance(upstream, TokenCounter):
        try:
            counted = await upstream.count_tokens(turn.model, text)
        except ToolwireError:
            counted = None
    if counted is None:
        counted = len(text.encode()) // BYTES_PER_TOKEN
    return counted + MESSAGE_OVERHEAD * messages


def _spec_json(tool: ToolSpec) -> ChatFunctionSpec:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _content_text(content: str | list[ChatPart]) -> str:
    if isinstance(content, str):
        return content
    texts = [str(part.get("text", "")) for part in content if part.get("text") is not None]
    others = len(content) - len(texts)
    return "\n".join(texts) + (f"\n[{others} attachment(s)]" if others else "")


def _render_message(message: Any, cut: int | None) -> str:
    if isinstance(message, SystemMessage):
        return f"[{message.role}]\n{message.text}"
    if isinstance(message, UserMessage):
        return f"[user]\n{_content_text(message.content)}"
    if isinstance(message, AssistantMessage):
        lines = [f"[assistant]\n{message.text}"] if message.text else []
        for call in message.tool_calls:
            lines.append(f"[assistant called {call.name} with {call.raw_arguments}]")
        return "\n".join(lines) or "[assistant]"
    if isinstance(message, ToolMessage):
        text = message.content
        if cut is not None and len(text) > cut:
            text = text[:cut] + f" [... {len(text) - cut} characters cut]"
        return f"[{message.name} returned]\n{text}"
    return ""


# -- compacting -------------------------------------------------------------------------------


def is_context_overflow(error: ToolwireError) -> bool:
    """The upstream refused the prompt because it does not fit the model's context."""
    return error.code == "context_length_exceeded"


_WINDOW = re.compile(
    r"(?:maximum context length is|context window of|context length \(|context size \("
    r"|maximum model length of|\"n_ctx\":)\s*(\d+)",
    re.IGNORECASE,
)


def context_window(error: ToolwireError) -> int | None:
    """The context window a refusal names, where it names one (vLLM, OpenAI, SGLang, llama.cpp,
    llama-cpp-python all do): what a compaction for it must fit well inside."""
    texts = [error.message, str(getattr(error, "upstream_body", None) or "")]
    for text in texts:
        match = _WINDOW.search(text)
        if match:
            return int(match.group(1))
    return None


@dataclass(slots=True)
class Compactor:
    """Writes a compaction with the upstream model: the summary of a transcript, and the most
    recent user messages kept as they are. `limit` (tokens) bounds both so that what replaces
    the transcript stays well under a compaction threshold."""

    upstream: Upstream
    model: str
    limit: int | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def summary_tokens(self) -> int:
        return min(SUMMARY_TOKENS, self.limit // 8) if self.limit else SUMMARY_TOKENS

    @property
    def keep_tokens(self) -> int:
        return min(KEEP_TOKENS, self.limit // 8) if self.limit else KEEP_TOKENS

    async def compact(
        self, transcript: Transcript, instructions: str | None = None
    ) -> CompactedContext:
        kept = self.recent_user_messages(transcript)
        body = "\n\n".join(
            _render_message(message, cut=RESULT_CHARS)
            for message in transcript
            if not (isinstance(message, UserMessage) and message.hidden)
        )
        if instructions:
            body = f"[the assistant's instructions]\n{instructions}\n\n{body}"
        summary = (await self.summarize(body, SPLIT_DEPTH)).strip()
        if not summary:
            # The model wrote nothing: keep the end of the conversation itself, bounded.
            budget = self.summary_tokens * BYTES_PER_TOKEN
            summary = body[-budget:]
        return CompactedContext(summary, tuple(kept))

    def recent_user_messages(self, transcript: Transcript) -> list[str | list[ChatPart]]:
        """The latest user messages, newest first until `keep_tokens` is spent, in order. The
        summary of an earlier compaction is not one of them (the new summary covers it)."""
        budget = self.keep_tokens * BYTES_PER_TOKEN
        kept: list[str | list[ChatPart]] = []
        for message in reversed(transcript):
            if not isinstance(message, UserMessage) or message.hidden:
                continue
            content = message.content
            if isinstance(content, str) and content.startswith(SUMMARY_PREFIX):
                continue
            size = len(orjson.dumps(content))
            if size > budget:
                break
            budget -= size
            kept.append(content)
        kept.reverse()
        return kept

    async def summarize(self, text: str, depth: int) -> str:
        """The model's summary of `text`. If `text` is too long for the model itself, its first
        half is summarized first and that summary read with the second half."""
        try:
            return await self._ask(text)
        except UpstreamError as exc:
            if not is_context_overflow(exc) or depth <= 0 or len(text) < 200:
                raise
        middle = text.rfind("\n", 0, len(text) // 2)
        middle = middle if middle > 0 else len(text) // 2
        first = await self.summarize(text[:middle], depth - 1)
        return await self.summarize(
            f"[summary of the conversation before this point]\n{first}\n\n{text[middle:]}",
            depth - 1,
        )

    async def _ask(self, text: str) -> str:
        turn = TurnRequest(
            model=self.model,
            transcript=[SystemMessage(SUMMARY_PROMPT), UserMessage(text)],
            sampling=Sampling(max_output_tokens=self.summary_tokens),
            stream=False,
        )
        pieces: list[str] = []
        async for event in self.upstream.stream_turn(turn):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
            elif isinstance(event, Usage):
                self.usage.add(event)
        return "".join(pieces)


def _process_seal() -> Callable[[CompactedContext], str]:
    """For the library and the CLI, whose compactions never leave the process: sealed with a
    secret of this process's own."""
    codec = CompactionCodec(secrets.token_bytes(32))
    return lambda context: codec.seal(context, None)


@dataclass(slots=True)
class ContextPolicy:
    """`context_management` as the loop applies it: compact before a model call whose prompt
    passes `compact_threshold` tokens (None: only when the upstream reports its context full),
    sealing each compaction with `seal` (the server binds it to the key and encrypts it).

    Library: `Agent(upstream, model, context=ContextPolicy(compact_threshold=8000))`."""

    compact_threshold: int | None = None
    seal: Callable[[CompactedContext], str] = field(default_factory=_process_seal)
    compact_now: bool = False
    """The input ended with a `compaction_trigger` item: the run compacts and ends there."""
