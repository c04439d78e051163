"""A `custom` tool's grammar, checked on the text the model wrote for it.

OpenAI constrains custom tools with LLGuidance: its cookbook names LLGuidance's Lark-like syntax
for `syntax: "lark"` and the Rust `regex` crate's syntax for `syntax: "regex"`. An open model is
not constrained while it writes, so toolwire checks the finished text with the same library
(`llguidance`, which implements both) and, when it does not match, the loop sends the call back
to the model with the reason. The matcher runs on bytes (a 256-token byte "tokenizer"), so any
text can be checked without a model's vocabulary. Pure computation, no I/O.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import llguidance

_EOS = 256
_NAMES = {"lark": "Lark grammar", "regex": "regular expression"}


class _ByteTokens:
    """Every byte a token of its own, plus an end-of-text token: what `LLMatcher` needs to
    check text, whatever model wrote it."""

    def __init__(self) -> None:
        self.eos_token_id = _EOS
        self.bos_token_id = None
        self.tokens = [bytes([value]) for value in range(256)] + [b"<eos>"]
        self.special_token_ids = [_EOS]

    def __call__(self, text: Any) -> list[int]:
        return list(text if isinstance(text, bytes) else str(text).encode())


@lru_cache(maxsize=1)
def _tokenizer() -> llguidance.LLTokenizer:
    import llguidance  # ~10 MB, only once a custom tool's grammar is checked

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokens()))


@lru_cache(maxsize=256)
def _matcher(syntax: str, definition: str) -> llguidance.LLMatcher | None:
    """A fresh matcher for the grammar (copied for each check), or None when LLGuidance cannot
    compile it: a grammar that cannot be compiled is described to the model, not enforced."""
    import llguidance

    if syntax == "lark":
        grammar = llguidance.LLMatcher.grammar_from_lark(definition)
    elif syntax == "regex":
        grammar = llguidance.LLMatcher.grammar_from_regex(definition)
    else:
        return None
    matcher = llguidance.LLMatcher(_tokenizer(), grammar, log_level=0)
    return None if matcher.is_error() else matcher


def grammar_problem(syntax: str, definition: str, text: str) -> str | None:
    """Why `text` does not follow the grammar, or None when it does (or cannot be checked)."""
    fresh = _matcher(syntax, definition)
    if fresh is None:
        return None
    matcher = fresh.deep_copy()
    data = text.encode()
    return _verdict(matcher, syntax, data, matcher.try_consume_tokens(list(data)))


#: Bytes checked between two yields to the event loop (a few milliseconds of matching).
CHUNK = 4096


async def grammar_problem_async(syntax: str, definition: str, text: str) -> str | None:
    """`grammar_problem` for the event loop: the matching (which holds the GIL, so a worker
    thread would not free the loop) goes in chunks of `CHUNK` bytes with a yield between them,
    so a megabyte the model wrote costs other requests milliseconds, not seconds."""
    fresh = _matcher(syntax, definition)
    if fresh is None:
        return None
    matcher = fresh.deep_copy()
    data = text.encode()
    taken = 0
    while taken < len(data):
        chunk = list(data[taken : taken + CHUNK])
        consumed = matcher.try_consume_tokens(chunk)
        taken += consumed
        if consumed < len(chunk):
            break
        await asyncio.sleep(0)
    return _verdict(matcher, syntax, data, taken)


def _verdict(matcher: llguidance.LLMatcher, syntax: str, data: bytes, taken: int) -> str | None:
    if taken < len(data):
        where = data[:taken].decode(errors="replace")
        line = where.count("\n") + 1
        column = len(where) - (where.rfind("\n") + 1) + 1
        found = data[taken : taken + 20].decode(errors="replace")
        return (
            f"the input does not follow the tool's {_NAMES[syntax]}: it stops matching at "
            f"line {line}, column {column} (at {found!r})"
        )
    if not matcher.is_accepting():
        return f"the input does not follow the tool's {_NAMES[syntax]}: it ends too early"
    return None
