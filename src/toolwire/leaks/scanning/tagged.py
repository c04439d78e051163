"""Scanners for calls opened by an XML-like tag (`<tool_call>`, `<seed:tool_call>`,
`<function_calls>`, `<tool_calls>`, `<minimax:tool_call>`, `<longcat_tool_call>`, wrapper drift)
and for the bare `{"name": ...}` object on its own line. Each takes the opener's match and reads
one block; the registry says which opener goes to which scanner.
"""

from __future__ import annotations

import re

from toolwire.leaks import markers as M
from toolwire.leaks.scanning.core import BARE_NAME, Block, Ctx, RawCall, closer, ws
from toolwire.leaks.scanning.json_calls import json_block, named_json, uses_parameters
from toolwire.leaks.scanning.pythonic import pythonic_calls
from toolwire.leaks.scanning.xml_calls import (
    M2,
    STEP3,
    TELECHAT_KV,
    functions,
    glm,
    invokes,
)

# GLM-5.3-Flash's JSON form `<tool_call>f>{...}` and TeleChat4's `<tool_call>f{...}`.
_NAMED_JSON = re.compile(rf"({BARE_NAME})[ \t]*>?[ \t]*(?=\{{)")
_TELECHAT_HEAD = re.compile(rf"{BARE_NAME}\s*<param_key>")


def scan_tool_call(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s = ctx.s
    p = ws(s, m.end(), ctx.limit)
    if p >= ctx.limit:
        return None
    blk: Block | None
    if s[p] in "{[":
        blk = json_block(ctx, p, "hermes" if s[p] == "{" else "granite", strict=False)
    elif s.startswith("<function", p):
        blk = functions(ctx, p, "qwen3_coder")
    elif (nm := _NAMED_JSON.match(s, p, ctx.limit)) is not None:
        found = named_json(ctx, nm.group(1), nm.end())
        if found is None:
            return None
        call, end = found
        blk = Block("glm45", ctx.limit if call.problem else end, [call])
    elif _TELECHAT_HEAD.match(s, p, ctx.limit):
        return glm(ctx, p, m.start(), TELECHAT_KV)
    else:
        return glm(ctx, p, m.start())
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.TOOL_CALL_CLOSE)
    return blk


def scan_seed(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = functions(ctx, ws(ctx.s, m.end(), ctx.limit), "seed_oss")
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.SEED_TOOL_CALL_CLOSE)
    return blk


def scan_function(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return functions(ctx, m.start(), "qwen3_coder")


def scan_function_calls(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if s.startswith("<invoke", p):
        blk = invokes(ctx, p, M2, "deepseek_dsml")
        if blk is not None:
            blk.end = closer(ctx, blk.end, M.FUNCTION_CALLS_CLOSE)
        return blk
    close = s.find(M.FUNCTION_CALLS_CLOSE, p, limit)
    body_end = close if close >= 0 else max(p, ctx.core)
    calls = pythonic_calls(s[p:body_end], listed=False)
    if calls is None:
        return None
    end = close + len(M.FUNCTION_CALLS_CLOSE) if close >= 0 else body_end
    return Block("olmo3", end, calls)


def scan_function_call(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "granite", strict=False)
    if blk is not None:
        blk.end = closer(ctx, blk.end, "</function_call>")
    return blk


def scan_tool_calls(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p < limit and s[p] == "[":
        blk = json_block(ctx, p, "jamba", strict=False)
    else:
        calls: list[RawCall] = []
        end = p
        while (one := json_block(ctx, p, "minimax_m1", strict=False)) is not None:
            calls.extend(one.calls)
            end = one.end
            p = ws(s, end, limit)
        blk = Block("minimax_m1", end, calls) if calls else None
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.TOOL_CALLS_CLOSE)
    return blk


def scan_steptml_toolcall(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """Step DeepResearch: `<steptml:toolcall>` around `<steptml:invoke>` calls."""
    blk = invokes(ctx, ws(ctx.s, m.end(), ctx.limit), STEP3, "step3")
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.STEPTML_TOOLCALL_CLOSE)
    return blk


def scan_minimax(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    wrapped = s.startswith(M.MINIMAX_TOOL_CALL_OPEN, m.start())
    p = ws(s, m.start() + len(M.MINIMAX_TOOL_CALL_OPEN), limit) if wrapped else m.start()
    blk = invokes(ctx, p, M2, "minimax_m2")
    if blk is not None and wrapped:
        blk.end = closer(ctx, blk.end, M.MINIMAX_TOOL_CALL_CLOSE)
    return blk


def scan_wrapper(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "hermes", strict=True)
    if blk is not None:
        blk.end = closer(ctx, blk.end, "</" + m.group()[1:])
    return blk


def scan_bare_json(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = json_block(ctx, m.start(), "hermes", strict=True)
    if blk is not None and uses_parameters([c.text for c in blk.calls]):
        blk.family = "llama3_json"
    return blk
