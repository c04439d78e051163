"""Scanners for calls opened by a family's special tokens (`<|python_tag|>`, `[TOOL_CALLS]`,
DeepSeek's fullwidth tokens, Kimi sections, Harmony headers, Cohere actions, ...). These tokens
never occur in ordinary prose, so the bodies after them are read loosely (any call shape).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from toolwire.leaks import markers as M
from toolwire.leaks.scanning.core import BARE_NAME, Block, Ctx, RawCall, closer, ws
from toolwire.leaks.scanning.json_calls import CUT, json_block, json_span, named_json
from toolwire.leaks.scanning.pythonic import pythonic_calls
from toolwire.leaks.scanning.xml_calls import (
    DSML,
    DSML_WRAPPER,
    DSML_WRAPPER_CLOSE,
    STEP3,
    invoke,
    invokes,
)


def scan_python_tag(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    calls: list[RawCall] = []
    p = ws(s, m.end(), limit)
    end = p
    while True:
        blk = json_block(ctx, p, "llama3_json", strict=False)
        if blk is None:
            break
        calls.extend(blk.calls)
        end = blk.end
        q = ws(s, end, limit)
        if q < limit and s[q] == ";":
            p = ws(s, q + 1, limit)
        else:
            break
    return Block("llama3_json", end, calls) if calls else None


def scan_python_start(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s = ctx.s
    close = s.find(M.PYTHON_END, m.end(), ctx.limit)
    body_end = close if close >= 0 else max(m.end(), ctx.core)
    body = s[m.end() : body_end]
    calls = pythonic_calls(body, listed=False)
    if calls is None:
        return None
    end = close + len(M.PYTHON_END) if close >= 0 else body_end
    return Block("pythonic", end, calls)


_MISTRAL_NAMED = re.compile(
    rf"\s*({BARE_NAME})\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(?:\[ARGS\])?\s*(?=\{{)"
)


def scan_mistral(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p < limit and s[p] in "[{":
        return json_block(ctx, p, "mistral", strict=False)
    nm = _MISTRAL_NAMED.match(s, m.end(), limit)
    if nm is None:
        return None
    found = named_json(ctx, nm.group(1), nm.end())
    if found is None:
        return None
    call, end = found
    return Block("mistral", end, [call])


_DS_CALL_V3 = re.compile(
    rf"<｜tool▁call▁begin｜>\s*function\s*<｜tool▁sep｜>\s*({BARE_NAME})\s*(```(?:json)?)?\s*"
)
_DS_CALL_V31 = re.compile(rf"<｜tool▁call▁begin｜>\s*({BARE_NAME})\s*<｜tool▁sep｜>\s*")


def scan_deepseek(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(M.DS_CALLS_BEGIN, p):
        p = ws(s, p + len(M.DS_CALLS_BEGIN), limit)
    family: str | None = None
    calls: list[RawCall] = []
    end = p
    while True:
        cm = _DS_CALL_V3.match(s, p, limit)
        fam = "deepseek_v3"
        if cm is None:
            cm = _DS_CALL_V31.match(s, p, limit)
            fam = "deepseek_v31"
        if cm is None:
            break
        family = family or fam
        found = named_json(ctx, cm.group(1), cm.end())
        if found is None:
            return None
        call, q = found
        calls.append(call)
        if call.problem:
            return Block(family, limit, calls)
        if fam == "deepseek_v3" and cm.group(2):
            q = closer(ctx, q, "```")
        end = closer(ctx, q, M.DS_CALL_END)
        p = ws(s, end, limit)
    if family is None:
        return None
    return Block(family, closer(ctx, end, M.DS_CALLS_END), calls)


def scan_dsml(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    wm = DSML_WRAPPER.match(s, p, limit)
    if wm is not None:
        p = ws(s, wm.end(), limit)
    blk = invokes(ctx, p, DSML, "deepseek_dsml")
    if blk is not None and wm is not None:
        cm = DSML_WRAPPER_CLOSE.match(s, ws(s, blk.end, limit), limit)
        if cm is not None:
            blk.end = cm.end()
    return blk


_KIMI_CALL = re.compile(
    rf"<\|tool_call_begin\|>\s*(?:functions\.)?({BARE_NAME})(?::\d+)?\s*"
    r"<\|tool_call_argument_begin\|>\s*"
)
_KIMI_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>")
_KIMI_SECTION_END = re.compile(r"\s*<\|tool_calls?_section_end\|>")


def scan_kimi(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    sm = _KIMI_SECTION.match(s, p, limit)
    if sm is not None:
        p = ws(s, sm.end(), limit)
    calls: list[RawCall] = []
    end = p
    while (cm := _KIMI_CALL.match(s, p, limit)) is not None:
        found = named_json(ctx, cm.group(1), cm.end())
        if found is None:
            return None
        call, q = found
        calls.append(call)
        if call.problem:
            return Block("kimi_k2", limit, calls)
        end = closer(ctx, q, M.KIMI_CALL_END)
        p = ws(s, end, limit)
    if not calls:
        return None
    em = _KIMI_SECTION_END.match(s, end, limit)
    return Block("kimi_k2", em.end() if em else end, calls)


def scan_granite_token(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "granite", strict=False)


_INTERNLM_HEAD = re.compile(r"<\|action_start\|>\s*<\|plugin\|>\s*")


def scan_internlm(ctx: Ctx, m: re.Match[str]) -> Block | None:
    hm = _INTERNLM_HEAD.match(ctx.s, m.start(), ctx.limit)
    if hm is None:
        return None
    blk = json_block(ctx, hm.end(), "internlm", strict=False)
    if blk is not None:
        blk.end = closer(ctx, blk.end, M.INTERNLM_ACTION_END)
    return blk


_STEP3_CALL = re.compile(r"<｜tool_call_begin｜>\s*(?:function\s*)?(?:<｜tool_sep｜>\s*)?")


def scan_step3(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(M.STEP3_CALLS_BEGIN, p):
        p = ws(s, p + len(M.STEP3_CALLS_BEGIN), limit)
    calls: list[RawCall] = []
    end = p
    while True:
        cm = _STEP3_CALL.match(s, p, limit)
        q = cm.end() if cm is not None else p
        found = invoke(ctx, q, STEP3)
        if found is None:
            break
        call, end = found
        calls.append(call)
        end = closer(ctx, end, M.STEP3_CALL_END)
        p = ws(s, end, limit)
    if not calls:
        return None
    return Block("step3", closer(ctx, end, M.STEP3_CALLS_END), calls)


HARMONY_HEAD = re.compile(
    r"(?:<\|start\|>\s*)?(?:assistant\s*)?"
    rf"(?:to=functions\.({BARE_NAME}?)\s*(?:<\|channel\|>\s*)?commentary\b"
    rf"|(?:<\|channel\|>\s*)?commentary\s*to=functions\.({BARE_NAME}))"
    r"\s*(?:<\|constrain\|>\s*)?(?:json\s*)?(?:<\|message\|>\s*)?"
)
HARMONY_BACK = re.compile(
    r"(?:<\|start\|>\s*)?(?:assistant\s*)?(?:<\|channel\|>\s*)?(?:commentary\s*)?\Z"
)


def scan_harmony(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """gpt-oss: a commentary message addressed `to=functions.f`, tokenised or stripped."""
    hm = HARMONY_HEAD.match(ctx.s, m.start(), ctx.limit)
    if hm is None:
        return None
    found = named_json(ctx, hm.group(1) or hm.group(2), hm.end())
    if found is None:
        return None
    call, end = found
    return Block("harmony", ctx.limit if call.problem else end, [call])


def scan_phi4(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """Phi-4-mini: `functools[{...}]`, the list opening on the marker's last character."""
    return json_block(ctx, m.end() - 1, "phi4_mini", strict=False)


def _json_between(ctx: Ctx, m: re.Match[str], family: str, close: str) -> Block | None:
    """A JSON body right after an opener, then its optional closing token."""
    blk = json_block(ctx, ws(ctx.s, m.end(), ctx.limit), family, strict=False)
    if blk is not None:
        blk.end = closer(ctx, blk.end, close)
    return blk


def _renamed(ctx: Ctx, m: re.Match[str], family: str, close: str, rename: str) -> Block | None:
    """A JSON array of objects whose keys are not the envelope's (Cohere's `tool_name`, Apertus'
    `{"f": {...}}`): found as a span, and each item turned into a `{"name", "arguments"}`
    envelope for salvage. `rename` says which shape the items have."""
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p >= limit or s[p] not in "[{":
        return None
    end, cut = json_span(s, p, limit)
    if cut:
        return Block(family, limit, [RawCall("envelope", text=s[p:end], problem=CUT)])
    try:
        value = orjson.loads(s[p:end])
    except orjson.JSONDecodeError:
        return None
    items = value if isinstance(value, list) else [value]
    calls: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        if rename == "cohere":
            # `tool_name`/`parameters` as the template writes them; `name`/`arguments` as the
            # models also write them (SMG's Cohere parser accepts both).
            name = item.get("tool_name", item.get("name"))
            if not isinstance(name, str):
                return None
            args = item.get("parameters", item.get("arguments", {}))
            calls.append({"name": name, "arguments": args})
        elif len(item) == 1:
            ((name, args),) = item.items()
            calls.append({"name": name, "arguments": args})
        else:
            return None
    if not calls:
        return None
    text = orjson.dumps(calls).decode()
    return Block(family, closer(ctx, end, close), [RawCall("envelope", text=text)])


def scan_cohere(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """Cohere Command R7B / A: `<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]`."""
    return _renamed(ctx, m, "cohere_command", M.COHERE_ACTION_END, "cohere")


def scan_apertus(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """Apertus: `<|tools_prefix|>[{"f": {...}}]<|tools_suffix|>`, the name as the only key."""
    return _renamed(ctx, m, "apertus", M.APERTUS_SUFFIX, "apertus")


def scan_lfm2(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """LFM2 / MiniCPM: `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`, pythonic or a JSON list
    (MiniCPM may fence the Python in ```python)."""
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p < limit and s[p] == "[" and s.startswith("{", ws(s, p + 1, limit)):
        return _json_between(ctx, m, "lfm2", M.LFM2_CALL_END)
    close = s.find(M.LFM2_CALL_END, p, limit)
    body_end = close if close >= 0 else max(p, ctx.core)
    body = s[p:body_end].strip()
    fence = _PY_FENCE.fullmatch(body)
    if fence is not None:
        body = fence.group(1)
    calls = pythonic_calls(body, listed=False)
    if calls is None:
        named = _PYTHONIC_HEAD.match(body)
        if close < 0 or named is None:
            return None
        # Between its own tokens a call is a call even when its Python does not parse (then
        # it is re-asked, never run).
        problem = f"the call to {named.group(1)} is not valid Python"
        calls = [RawCall("values", named.group(1), problem=problem)]
    end = close + len(M.LFM2_CALL_END) if close >= 0 else body_end
    return Block("lfm2", end, calls)


_PYTHONIC_HEAD = re.compile(r"\[\s*([^\W\d][\w.]*)\s*\(")


_PY_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)\n?```", re.DOTALL)


def scan_longcat(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """LongCat-Flash: Hermes JSON inside `<longcat_tool_call>`."""
    return _json_between(ctx, m, "longcat", M.LONGCAT_CLOSE)


def scan_gigachat(ctx: Ctx, m: re.Match[str]) -> Block | None:
    """GigaChat 3 (`function call<|role_sep|>`) and 3.1 (`<|function_call|>`): one
    `{"name", "arguments"}` object after the header."""
    return json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "gigachat3", strict=False)
