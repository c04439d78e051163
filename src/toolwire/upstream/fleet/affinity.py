"""What a session is recognised by, as a 64-bit key: a client's session header, or else the
prompt's opening (its system prompt and first user message, which an agent sends unchanged
every turn, history growing after them). Keys only: the text is hashed, never kept."""

from __future__ import annotations

from collections.abc import Mapping
from zlib import crc32

import orjson

from toolwire.transcript import SystemMessage, Transcript, UserMessage

SESSION_HEADERS = ("x-session-affinity", "x-claude-code-session-id", "session_id")
"""Checked in this order: an explicit affinity header, Claude Code's, Codex's."""
MAX_SESSION_CHARS = 256


_SESSION_RAW = tuple(name.encode("latin-1") for name in SESSION_HEADERS)


def session_of(headers: Mapping[str, str]) -> str | None:
    """The client's session id from its request headers (None: it sent none). Any value is
    accepted (it is only hashed); an overlong one is cut, not refused. Headers that keep their
    raw list (Starlette's) are scanned once: a lookup per name walked the list each time."""
    raw: list[tuple[bytes, bytes]] | None = getattr(headers, "raw", None)
    if raw is not None:
        found: dict[bytes, bytes] = {}
        for key, given in raw:
            if key in _SESSION_RAW and key not in found:
                found[key] = given
        for key in _SESSION_RAW:
            raw_value = found.get(key)
            if raw_value:
                return raw_value.decode("latin-1")[:MAX_SESSION_CHARS]
        return None
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return value[:MAX_SESSION_CHARS]
    return None


def key_of(text: bytes) -> int:
    """A 64-bit key: two CRC-32s (seeded apart) side by side. Not cryptographic, and need
    not be: a collision only puts two sessions on one replica. Deterministic, so every
    toolwire process hashes a session alike; CRC-32 rather than BLAKE2 because this runs on
    every model call over kilobytes of prompt (~10x faster)."""
    return (crc32(text) << 32) | crc32(text, 0x9E3779B9)


_MASK = (1 << 64) - 1


def mix(value: int) -> int:
    """splitmix64's finalizer: any 64-bit value to a uniform one (rendezvous hashing)."""
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


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
    parts = [b"o"]
    for message in transcript:
        if isinstance(message, SystemMessage):
            parts.append(_sample(message.text))
        elif isinstance(message, UserMessage):
            content = message.content
            if not isinstance(content, str):
                content = orjson.dumps(content).decode()
            parts.append(_sample(content))
            return key_of(b"\x00".join(parts))
    return None
