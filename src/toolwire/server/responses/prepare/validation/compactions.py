"""Compaction items checked: one toolwire cannot open (altered, foreign, made for another key) is
a 400 `invalid_encrypted_content` naming the item's `encrypted_content`."""

from __future__ import annotations

from toolwire.errors import InvalidRequestError
from toolwire.loop.compaction import CompactedContext, CompactionCodec, CompactionError
from toolwire.loop.compaction import expand_compactions as _expand
from toolwire.wire.items import Item


def _refused(exc: CompactionError, param: str | None) -> InvalidRequestError:
    return InvalidRequestError(exc.message, param=param, code="invalid_encrypted_content")


def open_compaction(
    codec: CompactionCodec, token: object, owner: str | None, param: str | None
) -> CompactedContext:
    try:
        return codec.open(token, owner)
    except CompactionError as exc:
        raise _refused(exc, param) from None


def expand_compactions(
    history: list[Item], input_items: list[Item], codec: CompactionCodec, owner: str | None
) -> list[Item]:
    """`loop.compaction.expand_compactions`, its refusals answered as 400s."""
    try:
        return _expand(history, input_items, codec, owner)
    except CompactionError as exc:
        at = None if exc.position is None else f"input[{exc.position}].encrypted_content"
        raise _refused(exc, at) from None
