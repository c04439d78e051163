"""Gemma's own argument syntax: FunctionGemma `call:f{k:<escape>v<escape>}` and Gemma 4
`call:f{k:<|"|>v<|"|>}`, a JSON-like value language with its own string delimiters. One value
reader serves both, parameterised by the string delimiter.
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.leaks import markers as M
from toolwire.leaks.scanning.core import (
    BARE_NAME,
    Block,
    Ctx,
    RawCall,
    closer,
    unambiguous_number,
    ws,
)

# -- FunctionGemma --------------------------------------------------------------------------------


class _Cut(Exception):
    """The text ended inside the value."""


_GEMMA_HEAD = re.compile(rf"<start_function_call>\s*call\s*:\s*({BARE_NAME})\s*(?=\{{)")
_GEMMA_KEY = re.compile(r"\s*([^\s:{}\[\],<>]+)\s*:")
_GEMMA_BARE = re.compile(r"[^,}\]<]+")
_GEMMA4_HEAD = re.compile(rf"<\|tool_call>\s*call\s*:\s*({BARE_NAME})\s*(?=\{{)")


def _gemma_scalar(token: str) -> Any:
    t = token.strip()
    if t in ("true", "false"):
        return t == "true"
    if t == "null":
        return None
    number = unambiguous_number(t)
    return t if number is None else number


def _gemma_value(
    s: str, i: int, limit: int, esc: str = M.GEMMA_ESCAPE, depth: int = 0
) -> tuple[Any, int]:
    """One FunctionGemma value: `<escape>text<escape>`, `{k:v,...}`, `[v,...]` or a bare scalar."""
    if depth > 64:
        raise ValueError("nested too deep")
    i = ws(s, i, limit)
    if i >= limit:
        raise _Cut
    if s.startswith(esc, i):
        j = s.find(esc, i + len(esc), limit)
        if j < 0:
            raise _Cut
        return s[i + len(esc) : j], j + len(esc)
    if s[i] in "{[":
        is_obj = s[i] == "{"
        close = "}" if is_obj else "]"
        obj: dict[str, Any] = {}
        items: list[Any] = []
        i += 1
        while True:
            i = ws(s, i, limit)
            if i >= limit:
                raise _Cut
            if s[i] == close:
                return (obj if is_obj else items), i + 1
            if is_obj:
                km = _GEMMA_KEY.match(s, i, limit)
                if km is None:
                    raise ValueError("expected a key")
                value, i = _gemma_value(s, km.end(), limit, esc, depth + 1)
                obj[km.group(1)] = value
            else:
                value, i = _gemma_value(s, i, limit, esc, depth + 1)
                items.append(value)
            i = ws(s, i, limit)
            if i >= limit:
                raise _Cut
            if s[i] == ",":
                i += 1
            elif s[i] != close:
                raise ValueError("expected , or a closing bracket")
    bm = _GEMMA_BARE.match(s, i, limit)
    if bm is None or not bm.group().strip():
        raise ValueError("empty value")
    if bm.end() >= limit:
        raise _Cut
    return _gemma_scalar(bm.group()), bm.end()


def _gemma_call(
    ctx: Ctx, head: re.Match[str] | None, family: str, esc: str, close: str
) -> Block | None:
    if head is None:
        return None
    s, limit = ctx.s, ctx.limit
    name = head.group(1)
    try:
        value, end = _gemma_value(s, head.end(), limit, esc)
    except _Cut:
        problem = "the call is cut off before its arguments close"
        return Block(family, limit, [RawCall("values", name, problem=problem)])
    except ValueError:
        return None
    return Block(family, closer(ctx, end, close), [RawCall("values", name, values=value)])


def scan_gemma(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """FunctionGemma: `<start_function_call>call:f{k:<escape>v<escape>}<end_function_call>`."""
    head = _GEMMA_HEAD.match(ctx.s, m.start(), ctx.limit)
    return _gemma_call(ctx, head, "functiongemma", M.GEMMA_ESCAPE, M.GEMMA_CALL_CLOSE)


def scan_gemma4(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """Gemma 4: `<|tool_call>call:f{k:<|"|>v<|"|>}<tool_call|>`, one call per token pair."""
    head = _GEMMA4_HEAD.match(ctx.s, m.start(), ctx.limit)
    return _gemma_call(ctx, head, "gemma4", M.GEMMA4_STRING, M.GEMMA4_CALL_CLOSE)
