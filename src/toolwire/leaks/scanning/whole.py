"""Shapes with no marker at all (a JSON envelope or list, a pythonic `[f(a=1)]`, maybe in one
```json fence): they count only as the whole visible message, and only when strictly a call.
"""

from __future__ import annotations

import re

import orjson

from toolwire.leaks.scanning.core import Block, Ctx, RawCall, ws
from toolwire.leaks.scanning.json_calls import (
    call_items,
    json_span,
    strict_call_value,
    uses_parameters,
)
from toolwire.leaks.scanning.pythonic import pythonic_calls

# -- the whole message as a call ------------------------------------------------------------------

_JSON_FENCE = re.compile(r"```(?:json|JSON|jsonc)?[ \t]*\r?\n")
_PYTHONIC_LIST = re.compile(r"\[\s*[^\W\d][\w.]*\s*\(")


def _json_objects(ctx: Ctx, pos: int, end: int) -> list[str] | None:
    """Consecutive JSON objects from `pos` to `end`, separated by whitespace or `;`."""
    s = ctx.s
    texts: list[str] = []
    p = pos
    while p < end:
        if s[p] != "{":
            return None
        q, cut = json_span(s, p, end)
        if cut:
            return None
        texts.append(s[p:q])
        p = ws(s, q, end)
        if p < end and s[p] == ";":
            p = ws(s, p + 1, end)
    return texts


def _whole_pythonic(ctx: Ctx, p: int, end: int) -> Block | None:
    """`[f(a=1), g()]` as the whole message, every value a literal."""
    s = ctx.s
    if not _PYTHONIC_LIST.match(s, p, end) or not s.endswith("]", p, end):
        return None
    calls = pythonic_calls(s[p:end], listed=True)
    if calls is None or any(c.problem for c in calls):
        return None
    return Block("pythonic", ctx.limit, calls)


def scan_whole(ctx: Ctx, lead: int) -> Block | None:
    """The whole visible message (maybe in one ```json fence) as JSON calls or a pythonic list.

    These shapes carry no marker at all, so nothing but the call may be there.
    """
    s = ctx.s
    p, end = lead, ctx.core
    fenced = s.startswith("```", p)
    if fenced:
        fm = _JSON_FENCE.match(s, p, end)
        if fm is None or not s.endswith("```", fm.end(), end):
            return None
        p, end = fm.end(), end - 3
    p = ws(s, p, end)
    while end > p and s[end - 1].isspace():
        end -= 1
    if p >= end or s[p] not in "[{":
        return None
    if s.find('"name"', p, end) < 0:  # every JSON call shape has one
        return None if fenced else _whole_pythonic(ctx, p, end)
    body = s[p:end]
    try:
        texts, values = [body], [orjson.loads(body)]
    except orjson.JSONDecodeError:
        if s[p] == "[":
            return None if fenced else _whole_pythonic(ctx, p, end)
        # Llama 3 joins several calls with "; ".
        split = _json_objects(ctx, p, end)
        if not split or len(split) < 2:
            return None
        try:
            texts, values = split, [orjson.loads(t) for t in split]
        except orjson.JSONDecodeError:
            return None
    if not all(strict_call_value(v) for v in values):
        return None
    if isinstance(values[0], list):
        items = call_items(values[0]) or []
        plain = all("arguments" in item and "function" not in item for *_, item in items)
        return Block(
            "xlam" if plain else "generic_json", ctx.limit, [RawCall("envelope", text=body)]
        )
    llama = len(texts) > 1 or uses_parameters(texts)
    family = "llama3_json" if llama else "generic_json"
    return Block(family, ctx.limit, [RawCall("envelope", text=t) for t in texts])
