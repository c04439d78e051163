"""What a session is recognised by, as a 64-bit key: a client's session header, or else the
prompt's opening (its system prompt and first user message, which an agent sends unchanged
every turn, history growing after them). Keys only: the text is hashed, never kept."""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b

import orjson

from toolwire.transcript import SystemMessage, Transcript, UserMessage

SESSION_HEADERS = ("x-session-affinity", "x-claude-code-session-id", "session_id")
"""Checked in this order: an explicit affinity header, Claude Code's, Codex's."""
MAX_SESSION_CHARS = 256


def session_of(headers: Mapping[str, str]) -> str | None:
    """The client's session id from its request headers (None: it sent none). Any value is
    accepted (it is only hashed); an overlong one is cut, not refused."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return value[:MAX_SESSION_CHARS]
    return None


def key_of(text: bytes) -> int:
    return int.from_bytes(blake2b(text, digest_size=8).digest(), "big")


def session_key(session: str) -> int:
    return key_of(b"s\x00" + session.encode("utf-8", "replace"))


#: Characters of a long text the opening key reads: its head, its tail and its length. An
#: agent's system prompt runs to tens of kilobytes and is hashed every turn; its head and tail
#: and its length tell sessions apart as well as the whole would (a collision only puts two
#: sessions on one replica), at a bounded cost.
HEAD_CHARS = 2048
TAIL_CHARS = 1024


def _sample(text: str) -> bytes:
    if len(text) > HEAD_CHARS + TAIL_CHARS:
        text = f"{text[:HEAD_CHARS]}\x00{text[-TAIL_CHARS:]}\x00{len(text)}"
    return text.encode("utf-8", "replace")


def opening_key(transcript: Transcript) -> int | None:
    """The prompt's opening: every system message before the first user message, and that
    user message. None when the transcript has no user message (nothing to recognise)."""
    hasher = blake2b(b"o\x00", digest_size=8)
    for message in transcript:
        if isinstance(message, SystemMessage):
            hasher.update(_sample(message.text))
            hasher.update(b"\x00")
        elif isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                hasher.update(_sample(content))
            else:
                hasher.update(_sample(orjson.dumps(content).decode()))
            return int.from_bytes(hasher.digest(), "big")
    return None
