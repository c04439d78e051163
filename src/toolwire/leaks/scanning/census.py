"""Scanners for the formats found by the second census of server-side parsers: Kimi K3's XTML
channels, MiniMax M3's namespaced tags, dots, Inkling, IQuest-Q1, K2 Horizon, GigaChat 3.5's
GCML, Muse Glimmer's ATEM blocks and PLaMo 3's request tokens. Each reads one block from its
opener's match; the shared readers (JSON bodies, key/value pairs, `<invoke>` dialects) do the
rest. Their markers never occur in prose, so bodies are read loosely.
"""

from __future__ import annotations

import re

from toolwire.leaks import markers as M
from toolwire.leaks.scanning.core import BARE_NAME, Block, Ctx, RawCall, closer, valid_name, ws
from toolwire.leaks.scanning.json_calls import json_block, named_json
from toolwire.leaks.scanning.xml_calls import (
    ATEM,
    GCML,
    IQUEST_KV,
    K2H_KV,
    M2,
    _value_until,
    glm,
    invokes,
)

# -- Kimi K3: <|open|>tools<|sep|><|open|>call tool="f"<|sep|><|open|>argument key="k" ... -------

_K3_CALL = re.compile(r"<\|open\|>call\s+([^<]{0,400}?)\s*<\|sep\|>")
_K3_ARG = re.compile(r"<\|open\|>argument\s+([^<]{0,400}?)\s*<\|sep\|>")
_K3_ARG_STOP = re.compile(
    r"<\|close\|>argument<\|sep\|>|<\|open\|>argument\s|<\|close\|>call<\|sep\|>"
    r"|<\|close\|>tools<\|sep\|>"
)
_K3_ARG_CLOSE = re.compile(re.escape(M.KIMI_K3_ARG_CLOSE))
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def _attrs(text: str) -> dict[str, str]:
    return {k: v.replace("&quot;", '"').replace("&amp;", "&") for k, v in _ATTR.findall(text)}


def scan_kimi_k3(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    section = s.startswith(M.KIMI_K3_TOOLS_OPEN, p)
    if section:
        p = ws(s, p + len(M.KIMI_K3_TOOLS_OPEN), limit)
    calls: list[RawCall] = []
    end = p
    while (cm := _K3_CALL.match(s, p, limit)) is not None:
        name = _attrs(cm.group(1)).get("tool", "")
        if not valid_name(name):
            return None
        q = cm.end()
        params: list[tuple[str, str, bool | None]] = []
        while (am := _K3_ARG.match(s, ws(s, q, limit), limit)) is not None:
            attrs = _attrs(am.group(1))
            key = attrs.get("key", "")
            if not key:
                return None
            value, q, _ = _value_until(ctx, am.end(), _K3_ARG_STOP, _K3_ARG_CLOSE)
            params.append((key, value, attrs.get("type", "string") == "string"))
        calls.append(RawCall("params", name, params=params))
        end = closer(ctx, q, M.KIMI_K3_CALL_CLOSE)
        p = ws(s, end, limit)
    if not calls:
        return None
    end = closer(ctx, end, M.KIMI_K3_TOOLS_CLOSE)
    return Block("kimi_k3", closer(ctx, end, M.KIMI_K3_MESSAGE_CLOSE), calls)


# -- MiniMax M3: every tag carries the ]<]minimax[>[ namespace token -------------------------------

_NS = re.escape(M.MINIMAX_M3_NS) + r"\s*"
_M3_OPEN = re.compile(_NS + r"<tool_call>\s*")
_M3_INVOKE = re.compile(_NS + r'<invoke\s+name\s*=\s*"([^"\n]{1,200})"\s*>\s*')
_M3_INVOKE_CLOSE = re.compile(_NS + r"</invoke\s*>\s*")
_M3_CLOSE = re.compile(_NS + r"</tool_call\s*>")
_M3_PARAM = re.compile(_NS + r"<([^\W\d][\w.\-]{0,127})\s*>")
_M3_STRUCTURE = re.compile(_NS + r"</(?:invoke|tool_call)\s*>|" + _NS + r"<invoke\s")
NESTED = "a nested value (an object or array written as tags) is not read"


def scan_minimax_m3(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    om = _M3_OPEN.match(s, m.start(), limit)
    if om is None:
        return None
    p = om.end()
    calls: list[RawCall] = []
    end = p
    while (im := _M3_INVOKE.match(s, p, limit)) is not None:
        name = im.group(1).strip()
        if not valid_name(name):
            return None
        call = RawCall("params", name)
        q = im.end()
        while (pm := _M3_PARAM.match(s, q, limit)) is not None:
            key = pm.group(1)
            close = re.compile(_NS + rf"</{re.escape(key)}\s*>")
            cm = close.search(s, pm.end(), limit)
            if cm is None:  # missing closer: the value runs to the next structural tag
                sm = _M3_STRUCTURE.search(s, pm.end(), limit)
                stop = sm.start() if sm is not None else max(pm.end(), ctx.core)
                value, q = s[pm.end() : stop], stop
            else:
                value, q = s[pm.end() : cm.start()], cm.end()
            if M.MINIMAX_M3_NS in value:
                call.problem = NESTED
            call.params.append((key, value, None))
            q = ws(s, q, limit)
        calls.append(call)
        end = q
        if (cm := _M3_INVOKE_CLOSE.match(s, q, limit)) is not None:
            end = cm.end()
        p = ws(s, end, limit)
    if not calls:
        return None
    if (cm := _M3_CLOSE.match(s, ws(s, end, limit), limit)) is not None:
        end = cm.end()
    return Block("minimax_m3", end, calls)


# -- dots: <dots_function_call> around <invoke> calls (or one JSON object) -------------------------


def scan_dots(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    blk = (
        json_block(ctx, p, "dots", strict=False)
        if p < limit and s[p] == "{"
        else invokes(ctx, p, M2, "dots")
    )
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.DOTS_CALL_CLOSE)
    return blk


# -- Inkling: <|message_model|>f<|content_invoke_tool_json|>{"name", "args"}<|end_message|> --------


def scan_inkling(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    at = s.find(M.INKLING_INVOKE_JSON, m.start(), min(limit, m.end() + 1))
    if at < 0:
        return None
    blk = json_block(ctx, ws(s, at + len(M.INKLING_INVOKE_JSON), limit), "inkling", strict=False)
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.INKLING_END)
    return blk


# -- IQuest-Q1: GLM key/value pairs inside <iquest_tool_call> -------------------------------------


def scan_iquest(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return glm(ctx, ws(ctx.s, m.end(), ctx.limit), m.start(), IQUEST_KV)


# -- K2 Horizon: <ifm|tool_calls><ifm|tool_call>f<ifm|arg_key>... or a JSON body -------------------


def scan_k2_horizon(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    grouped = s.startswith(M.K2H_CALLS_OPEN, p)
    if grouped:
        p = ws(s, p + len(M.K2H_CALLS_OPEN), limit)
    calls: list[RawCall] = []
    end = p
    while s.startswith(M.K2H_CALL_OPEN, p):
        q = ws(s, p + len(M.K2H_CALL_OPEN), limit)
        blk = (
            json_block(ctx, q, "k2_horizon", strict=False)
            if q < limit and s[q] in "{["
            else glm(ctx, q, p, K2H_KV)
        )
        if blk is None:
            return None
        calls.extend(blk.calls)
        end = closer(ctx, blk.end, M.K2H_CALL_CLOSE)
        p = ws(s, end, limit)
    if not calls:
        return None
    return Block("k2_horizon", closer(ctx, end, M.K2H_CALLS_CLOSE), calls)


# -- GigaChat 3.5: GCML <｜GCML｜invoke name="f"><｜GCML｜parameter name="k" string="true">


def scan_gcml(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    wrapped = s.startswith(M.GCML_TOOL_CALLS, p)
    if wrapped:
        p = ws(s, p + len(M.GCML_TOOL_CALLS), limit)
    blk = invokes(ctx, p, GCML, "gigachat35")
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.GCML_TOOL_CALLS_CLOSE)
    return blk


# -- Muse Glimmer: <atem:function_calls><atem:invoke name="f"><atem:parameter name="k"> -----------


def scan_atem(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(M.ATEM_FUNCTION_CALLS, p):
        p = ws(s, p + len(M.ATEM_FUNCTION_CALLS), limit)
    blk = invokes(ctx, p, ATEM, "muse_glimmer")
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.ATEM_FUNCTION_CALLS_CLOSE)
    return blk


# -- PLaMo 3: request tokens around a name and `<|plamo:constrain|>json<|plamo:msg|>{...}` ---------

_PLAMO_CALL = re.compile(
    r"<\|plamo:begin_tool_request:plamo\|>\s*<\|plamo:begin_tool_name:plamo\|>\s*"
    rf"({BARE_NAME})\s*<\|plamo:end_tool_name:plamo\|>\s*<\|plamo:begin_tool_arguments:plamo\|>"
    r"\s*(?:<\|plamo:constrain\|>\s*json\s*)?(?:<\|plamo:msg\|>\s*)?"
)


def scan_plamo(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(M.PLAMO_REQUESTS_OPEN, p):
        p = ws(s, p + len(M.PLAMO_REQUESTS_OPEN), limit)
    calls: list[RawCall] = []
    end = p
    while (cm := _PLAMO_CALL.match(s, p, limit)) is not None:
        found = named_json(ctx, cm.group(1), cm.end())
        if found is None:
            return None
        call, q = found
        calls.append(call)
        if call.problem:
            return Block("plamo3", limit, calls)
        end = closer(ctx, closer(ctx, q, M.PLAMO_ARGS_CLOSE), M.PLAMO_REQUEST_CLOSE)
        p = ws(s, end, limit)
    if not calls:
        return None
    return Block("plamo3", closer(ctx, end, M.PLAMO_REQUESTS_CLOSE), calls)
