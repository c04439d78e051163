"""A streamed tool call's argument chunks read without parsing each one whole.

A model server sends a call's arguments as hundreds of chunks that differ only in their piece:
`{"id":"chatcmpl-1","object":"chat.completion.chunk",...,"choices":[{"index":0,"delta":
{"tool_calls":[{"index":0,"function":{"arguments":"PIECE"}}]},"finish_reason":null}]}`.
Parsing each into five nested dicts to read one string was a third of a chunk's cost. Once one
such chunk was parsed (`StreamAssembler.piece_of` read it as one piece), the text around its
piece is the template: a later chunk with the same text before and after the piece is that
chunk with another piece, and only the piece is parsed. Exact, not a guess: the middle must
parse as one JSON string (a string token swapped for another leaves every other field as it
was), else the chunk is parsed whole as before. A server whose chunks differ elsewhere (a
counter, random padding) never matches and costs a prefix compare a chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

Reader = Callable[[Any], "tuple[int, str] | None"]
"""A parsed chunk to (call index, its one argument piece), or None (the assembler's)."""

_KEY = '"arguments":'
_PROBE = "\x00toolwire: the piece goes here\x00"
_PROBE_TEXT = orjson.dumps(_PROBE).decode()
#: learning attempts per stream: a server whose chunks never repeat stops paying for them
_TRIES = 4


class PieceTemplate:
    """The text around the argument piece of one call's chunks, learned from one of them."""

    __slots__ = ("index", "prefix", "suffix", "tries")

    def __init__(self) -> None:
        self.index = -1
        self.prefix = ""
        self.suffix = ""
        self.tries = 0

    @property
    def learning(self) -> bool:
        return self.tries < _TRIES

    def learn(self, data: str, index: int, arguments: str, read: Reader) -> None:
        """`data`, parsed, was one piece `arguments` of call `index`: its text around the piece
        becomes the template if the piece is found there once, encoded as orjson would (a
        server escaping otherwise, `\\u00e9` for `é`, is not matched: parsed whole), and if a
        probe put in its place is what `read` (the assembler's reading of a parsed chunk)
        finds as the call's piece: the same text elsewhere in the chunk (another field that
        happens to hold it, the real one escaped otherwise) would make the template read the
        wrong string."""
        self.tries += 1
        marker = _KEY + orjson.dumps(arguments).decode()
        at = data.find(marker)
        if at < 0 or data.find(marker, at + 1) >= 0:
            return
        prefix, suffix = data[: at + len(_KEY)], data[at + len(marker) :]
        try:
            probe = orjson.loads(prefix + _PROBE_TEXT + suffix)
        except orjson.JSONDecodeError:
            return
        if read(probe) != (index, _PROBE):
            return
        self.index = index
        self.prefix = prefix
        self.suffix = suffix

    def piece(self, data: str) -> str | None:
        """The argument piece of `data` when `data` is the template's chunk with another piece
        (its call: `index`); None when it is not (parse it whole)."""
        prefix = self.prefix
        if not prefix or not data.startswith(prefix):
            return None
        suffix = self.suffix
        end = len(data) - len(suffix)
        if end < len(prefix) + 2 or not data.endswith(suffix):
            return None
        try:
            value = orjson.loads(data[len(prefix) : end])
        except orjson.JSONDecodeError:
            return None
        return value if type(value) is str else None
