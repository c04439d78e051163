"""Reading calls from an opener to the end of the text, with the registry's scanners.

A leak is a chain of blocks (one `<tool_call>`, one DeepSeek section, ...) separated only by
whitespace, `;` or stray closers, that runs to the end of the region. The detector, salvage and
the streaming hold-back all read chains through these two functions, so they agree on shapes.
"""

from __future__ import annotations

from toolwire.leaks.registry import OPENER, opener_for
from toolwire.leaks.scanning.core import SEP, Block, Ctx, RawCall, is_trailer, line_start


def is_opener(ctx: Ctx, pos: int) -> bool:
    """True when a registered opener starts at `pos` (cheap; nothing is parsed)."""
    return OPENER.match(ctx.s, pos, ctx.limit) is not None


def scan_block(ctx: Ctx, pos: int, *, first: bool) -> Block | None:
    """The block of calls whose opener is at `pos`, or None."""
    m = OPENER.match(ctx.s, pos, ctx.limit)
    if m is None:
        return None
    opener = opener_for(m)
    if first and opener.line_start and not line_start(ctx, pos):
        return None
    return opener.scanner(ctx, m)


def scan_chain(ctx: Ctx, pos: int, *, fenced: bool = False) -> Block | None:
    """Blocks of calls from `pos` that run, separated only by whitespace, `;` or stray closers,
    to the end of the region. The family is the first block's."""
    chain = follow_chain(ctx, pos, fenced=fenced)
    return chain if chain is not None and chain.end == ctx.limit else None


def follow_chain(ctx: Ctx, pos: int, *, fenced: bool = False) -> Block | None:
    """Blocks of calls from `pos` as far as they go: `end` is `ctx.limit` when the chain runs
    to the end (trailers aside), else where the text after the last block begins (and `last`
    where that block ends). None when no block starts at `pos`."""
    s = ctx.s
    family: str | None = None
    calls: list[RawCall] = []
    p = pos
    last = -1
    for index in range(256):
        blk = scan_block(ctx, p, first=index == 0)
        if blk is None or blk.end <= p:
            return None if family is None else Block(family, p, calls, last)
        family = family or blk.family
        calls.extend(blk.calls)
        if is_trailer(s, blk.end, ctx.limit, fenced=fenced):
            return Block(family, ctx.limit, calls)
        last = blk.end
        sep = SEP.match(s, blk.end, ctx.limit)
        p = sep.end() if sep else blk.end
    return None
