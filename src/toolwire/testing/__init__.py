"""Test helpers that users can use too: a scripted, real-HTTP chat-completions server."""

from toolwire.testing.scripted import (
    Body,
    Chunks,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    reply_chunks,
)

__all__ = ["Body", "Chunks", "RecordedRequest", "Reply", "ScriptedUpstream", "reply_chunks"]
