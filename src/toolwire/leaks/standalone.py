"""Leaked calls that do not end the turn, told apart from calls quoted in an explanation.

A call that runs to the end of the turn is a leak wherever it stands (`detector`). One with text
after it (`<tool_calls>[...]</tool_calls>\\nThank you!`, the first of two sibling blocks with prose
between them) is held to a stricter rule, because a model explaining a format quotes calls too.
A chain of blocks (`chain.follow_chain`) that stops before the end is a leak only when

1. its opener is one of a family's own markers (`Opener.anywhere`): a tag or special token, not
   a marker-less shape (a bare JSON object or list, a pythonic list) nor the `<tool>`/`<json>`
   wrapper drift, which count only at the end of the turn;
2. it stands on lines of its own: nothing but spaces before its opener on the line, and nothing
   but spaces, end-of-turn tokens or stray closing tags between its last block and a line break;
3. it is not inside a ``` code fence (the caller checks: fences are counted over the whole text);
4. every call in it reads cleanly: complete, named, arguments that parse; and
5. every call names a declared tool: without the declared names (`names=None`) no call before
   the end counts at all.

So `Qwen writes <tool_call>{...}</tool_call> in its output.` (mid-sentence), a call in a code
block, a call cut off, and a call of a tool nobody declared are prose; a declared tool's call
written on its own lines is a leak, whatever follows it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

import orjson

from toolwire.leaks.chain import follow_chain
from toolwire.leaks.registry import OPENER, OPENERS, opener_for
from toolwire.leaks.scanning.core import TOKEN, Block, Ctx, RawCall, core_end, line_start
from toolwire.leaks.scanning.json_calls import call_items
from toolwire.upstream.arguments import ArgumentsError, parse_arguments
from toolwire.upstream.names import ToolNameMatcher

#: After a block: spaces, end tokens and stray closers up to a line break (or the end so far).
_TO_LINE_END = re.compile(rf"(?:[ \t]|{TOKEN})*")
#: Openers looked for in the text before the end: at most this many occurrences of each anchor,
#: and at most `_MAX_PROBES` of them read, each over at most `_MAX_BLOCK` characters. A quoted
#: call costs one read; the bounds keep a turn of hostile text linear.
_MAX_PER_ANCHOR = 64
_MAX_PROBES = 32
_MAX_BLOCK = 64 * 1024

#: The anchors (literal, where the opener starts) of the openers that count anywhere.
_ANCHORS = tuple(dict.fromkeys(a for o in OPENERS if o.anywhere for a in o.anchor_list()))


#: Matchers of the tool sets seen lately: a turn asks for its set's matcher up to three times
#: (two hold-backs, the detector), and a gateway's requests offer the same few sets again.
_MATCHERS: dict[frozenset[str], ToolNameMatcher] = {}
_MAX_MATCHERS = 64


def names_matcher(names: Collection[str] | None) -> ToolNameMatcher | None:
    """The declared tools' names as the rule matches them (None: any name counts). A
    matcher is never changed once made, so one is shared by every turn offering its set."""
    if names is None:
        return None
    key = frozenset(names)
    matcher = _MATCHERS.get(key)
    if matcher is None:
        if len(_MATCHERS) >= _MAX_MATCHERS:
            _MATCHERS.clear()  # atomic: long turns are judged on worker threads too
        matcher = _MATCHERS[key] = ToolNameMatcher(key)
    return matcher


class LineEnd(Enum):
    """What follows a block on its line."""

    BREAK = "break"  # a line break: the block stands on its own lines
    TEXT = "text"  # more text on the same line: the block is quoted in a sentence
    OPEN = "open"  # nothing yet (a stream): undecided


def after_block(s: str, last: int, limit: int) -> LineEnd:
    """How the line goes on after a block ending at `last` (only `s[:limit]` is known)."""
    m = _TO_LINE_END.match(s, last, limit)
    q = m.end() if m is not None else last
    if q >= limit:
        return LineEnd.OPEN
    return LineEnd.BREAK if s[q] in "\r\n" else LineEnd.TEXT


def counts_anywhere(ctx: Ctx, pos: int) -> bool:
    """Whether a block opening at `pos` may be a leak with text after it: a marker opener
    (rule 1) first on its line (rule 2)."""
    m = OPENER.match(ctx.s, pos, ctx.limit)
    return m is not None and opener_for(m).anywhere and line_start(ctx, pos)


def calls_declared(calls: list[RawCall], names: ToolNameMatcher | None) -> bool:
    """Rules 4 and 5: every call complete and readable, and naming a declared tool."""
    if not calls:
        return False
    for raw in calls:
        found = _call_names(raw)
        if found is None:
            return False
        if names is not None and any(names.match(name) is None for name in found):
            return False
    return True


def _call_names(raw: RawCall) -> list[str] | None:
    """The names of the calls `raw` holds, if it reads cleanly; None otherwise."""
    if raw.problem:
        return None
    if raw.kind == "envelope":
        try:
            items = call_items(orjson.loads(raw.text))
        except orjson.JSONDecodeError:
            return None
        if items is None:
            return None
        names = [name for name, *_ in items]
        return names if all(isinstance(n, str) and n for n in names) else None
    if raw.kind == "json":
        try:
            parse_arguments(raw.text)
        except ArgumentsError:
            return None
    return [raw.name] if raw.name else None


@dataclass(slots=True, frozen=True)
class Standalone:
    """A leaked chain of blocks before the end of the turn: `s[start:end]` (end: where its last
    block ends), its family, its calls."""

    start: int
    end: int
    family: str
    calls: tuple[RawCall, ...]


def judge(ctx: Ctx, pos: int, chain: Block, names: ToolNameMatcher | None) -> bool:
    """Rules 1, 2, 4 and 5 for a chain read from `pos` that stopped before the region's end
    with a line break after it (the caller has checked rule 3 and the line end)."""
    return counts_anywhere(ctx, pos) and calls_declared(chain.calls, names)


def standalone_blocks(ctx: Ctx, stop: int, names: ToolNameMatcher) -> list[Standalone]:
    """The leaked chains in `ctx.s[ctx.vs:stop]` that text follows (`stop`: where the call that
    ends the turn begins, or the end), in order, none overlapping."""
    s, vs = ctx.s, ctx.vs
    starts: set[int] = set()
    for anchor, adjust in _ANCHORS:
        i = s.find(anchor, vs, stop)
        for _ in range(_MAX_PER_ANCHOR):
            if i < 0:
                break
            start = adjust(s, i, vs)
            if start is not None and start < stop:
                starts.add(start)
            i = s.find(anchor, i + 1, stop)
    found: list[Standalone] = []
    free = vs  # candidates before this lie inside a chain already taken
    probes = 0
    for pos in sorted(starts):
        if pos < free or ctx.in_fence(pos) or not counts_anywhere(ctx, pos):
            continue
        probes += 1
        if probes > _MAX_PROBES:
            break
        limit = min(stop, pos + _MAX_BLOCK)
        region = Ctx(s, vs, limit, core_end(s, vs, limit))
        chain = follow_chain(region, pos)
        if chain is None or chain.last < 0:
            continue
        free = chain.last  # openers inside it are part of it, leak or quotation
        if after_block(s, chain.last, limit) is not LineEnd.BREAK:
            continue
        if not calls_declared(chain.calls, names):
            continue
        found.append(Standalone(pos, chain.last, chain.family, tuple(chain.calls)))
    return found
