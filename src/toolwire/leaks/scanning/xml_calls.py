"""XML-parameter calls: Qwen3-Coder / Seed-OSS `<function=f><parameter=k>`, GLM's
`<arg_key>/<arg_value>` pairs, and the `<invoke name=..><parameter name=..>` dialects (MiniMax M2,
Step-3's `steptml:`, DeepSeek DSML). Values are kept as raw text; salvage types them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolwire.leaks import markers as M
from toolwire.leaks.scanning.core import (
    NAME,
    Block,
    Ctx,
    RawCall,
    line_start,
    valid_name,
    ws,
)
from toolwire.leaks.scanning.json_calls import named_json

# -- XML parameter forms --------------------------------------------------------------------------

# `<tag=name>`, the `<tag_name>` drift and the `<tag name="name">` drift.
_TAG_NAME = (
    r"(?:=\s*([^>\n]{1,200}?)|_([^\W\d][\w.\-:]{0,127})"
    r"""|\s+name\s*=\s*["']?([^"'>\n]{1,200}?)["']?)\s*>"""
)
_FUNC_OPEN = re.compile(r"<function" + _TAG_NAME)
_PARAM_OPEN = re.compile(r"<parameter" + _TAG_NAME)
# MiniCPM 4 / 5: `<function name="f"><param name="k">v</param></function>`.
_PARAM_SHORT = re.compile(r"""<param\s+name\s*=\s*["']([^"'>\n]{1,200})["']\s*>""")
# Where a value missing its `</parameter>` ends: the next structural tag in one of the three
# spellings (not any `<parameter ...>`, which file contents may well hold).
_PARAM_STOP = re.compile(
    r"</param(?:eter)?\s*>|<parameter(?:=|_[^\W\d]|\s+name\s*=)|<param\s+name\s*=|</function\s*>"
    r"|<function(?:=|_[^\W\d]|\s+name\s*=)|</tool_call>|<tool_call>|</seed:tool_call>"
)
_PARAM_CLOSE = re.compile(r"</param(?:eter)?\s*>")
_FUNC_CLOSE = re.compile(r"</function\s*>")
JSON_FUNCTION = "llama31_function"


def _tag_name(m: re.Match[str]) -> str:
    return (m.group(1) or m.group(2) or m.group(3) or "").strip()


def _value_until(
    ctx: Ctx, pos: int, stop: re.Pattern[str], close: re.Pattern[str]
) -> tuple[str, int, bool]:
    """A parameter value from `pos` to its closing tag, or (the missing-closer drift) to the next
    structural tag or the end of the call. Returns `(value, position after it, closed)`."""
    s = ctx.s
    m = stop.search(s, pos, ctx.limit)
    if m is not None and close.fullmatch(m.group()):
        return s[pos : m.start()], m.end(), True
    end = m.start() if m is not None else max(pos, ctx.core)
    return s[pos:end], end, False


def functions(ctx: Ctx, pos: int, family: str) -> Block | None:
    """Qwen3-Coder / Seed-OSS `<function=f><parameter=k>v</parameter></function>` blocks."""
    s, limit = ctx.s, ctx.limit
    calls: list[RawCall] = []
    end = pos
    p = pos
    while True:
        fm = _FUNC_OPEN.match(s, p, limit)
        if fm is None:
            break
        name = _tag_name(fm)
        if not valid_name(name):
            return None
        at_line = line_start(ctx, fm.start())
        q = fm.end()
        body = ws(s, q, limit)
        if body < limit and s[body] == "{":
            # Llama 3.1's custom tool format `<function=f>{...}</function>` (and its
            # `<function name="f">` drift): JSON arguments instead of parameters.
            found = named_json(ctx, name, body)
            if found is None:
                return None
            call, q = found
            calls.append(call)
            if call.problem:
                return Block(JSON_FUNCTION, limit, calls)
            fc = _FUNC_CLOSE.match(s, ws(s, q, limit), limit)
            end = fc.end() if fc is not None else q
            family = JSON_FUNCTION
            p = ws(s, end, limit)
            continue
        params: list[tuple[str, str, bool | None]] = []
        closed_any = False
        while True:
            r = ws(s, q, limit)
            pm = _PARAM_OPEN.match(s, r, limit)
            if pm is None:
                pm = _PARAM_SHORT.match(s, r, limit)
                if pm is None:
                    break
                family = "minicpm5"
            key = _tag_name(pm)
            if not key:
                return None
            value, q, closed = _value_until(ctx, pm.end(), _PARAM_STOP, _PARAM_CLOSE)
            # A value running to the end with no closer is believed only on its own line.
            if not closed and q >= ctx.core and not (at_line or value.startswith(("\n", "\r\n"))):
                return None
            closed_any = closed_any or closed
            params.append((key, value, None))
        r = ws(s, q, limit)
        fc = _FUNC_CLOSE.match(s, r, limit)
        if fc is not None:
            q = fc.end()
            closed_any = True
        if not closed_any and not params and not at_line:
            return None
        calls.append(RawCall("params", name, params=params))
        end = q
        p = ws(s, q, limit)
    return Block(family, end, calls) if calls else None


@dataclass(slots=True, frozen=True)
class KeyValues:
    """A name then `<key>k</key><value>v</value>` pairs, closed by `close`: GLM-4.5+ (`arg_key`),
    TeleChat4 / Xing (`param_key`), IQuest-Q1 (`arg_key` in `<iquest_tool_call>`), K2 Horizon
    (`<ifm|arg_key>`, with an optional `<ifm|arg_type>`)."""

    family: str
    close: str
    head: re.Pattern[str]
    key: re.Pattern[str]
    stop: re.Pattern[str]
    value_close: re.Pattern[str]


def _key_values(family: str, key: str, value: str, close: str, *, typed: str = "") -> KeyValues:
    k_open, k_close = f"<{key}>", f"</{key}>"
    v_open, v_close = f"<{value}>", f"</{value}>"
    opener = "<" + close[2:]
    kind = ""
    if typed:
        kind = rf"(?:<{re.escape(typed)}>[^<\n]{{0,40}}</{re.escape(typed)}>\s*)?"
    return KeyValues(
        family,
        close,
        re.compile(rf"({NAME})[ \t]*(?=\r?\n|{re.escape(k_open)}|{re.escape(close)}|\Z)"),
        re.compile(
            rf"{re.escape(k_open)}\s*([^<\n]{{1,200}}?)\s*{re.escape(k_close)}\s*{kind}"
            rf"{re.escape(v_open)}"
        ),
        re.compile("|".join(re.escape(t) for t in (v_close, k_open, close, opener))),
        re.compile(re.escape(v_close)),
    )


GLM_KV = _key_values("glm45", "arg_key", "arg_value", M.TOOL_CALL_CLOSE)
TELECHAT_KV = _key_values("telechat4", "param_key", "param_value", M.TOOL_CALL_CLOSE)
IQUEST_KV = _key_values("iquest_q1", "arg_key", "arg_value", M.IQUEST_CALL_CLOSE)
K2H_KV = _key_values(
    "k2_horizon", "ifm|arg_key", "ifm|arg_value", M.K2H_CALL_CLOSE, typed="ifm|arg_type"
)


def glm(ctx: Ctx, pos: int, open_at: int, kv: KeyValues = GLM_KV) -> Block | None:
    """GLM-4.5+ `f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>` after `<tool_call>`, and
    the same shape with other key/value tags (`kv`)."""
    s, limit = ctx.s, ctx.limit
    hm = kv.head.match(s, pos, limit)
    if hm is None:
        return None
    at_line = line_start(ctx, open_at)
    q = hm.end()
    params: list[tuple[str, str, bool | None]] = []
    while True:
        r = ws(s, q, limit)
        km = kv.key.match(s, r, limit)
        if km is None:
            break
        value, q, closed = _value_until(ctx, km.end(), kv.stop, kv.value_close)
        if not closed and q >= ctx.core and not at_line:
            return None
        params.append((km.group(1).strip(), value, None))
    r = ws(s, q, limit)
    if s.startswith(kv.close, r):
        q = r + len(kv.close)
    elif not params and not at_line:
        return None
    return Block(kv.family, q, [RawCall("params", hm.group(1), params=params)])


@dataclass(slots=True, frozen=True)
class Dialect:
    """The `<invoke name=..><parameter name=..>` family, with its prefix (none, steptml, DSML)."""

    invoke_open: re.Pattern[str]
    invoke_close: re.Pattern[str]
    param_open: re.Pattern[str]
    param_close: re.Pattern[str]
    stop: re.Pattern[str]


_QUOTED_NAME = r'"([^"\n]{1,200})"'
# dots (and MiniMax drift) write the name quoted or not.
_ANY_NAME = r"""["']?([^"'>\n]{1,200}?)["']?"""


def _dialect(op: str, cp: str, name: str = _QUOTED_NAME) -> Dialect:
    param_close = rf"{cp}parameter\s*>"
    return Dialect(
        invoke_open=re.compile(rf"{op}invoke\s+name\s*=\s*{name}\s*>"),
        invoke_close=re.compile(rf"{cp}invoke\s*>"),
        param_open=re.compile(
            rf"{op}parameter\s+name\s*=\s*{name}"
            r'(?:\s+string\s*=\s*"(true|false)")?\s*>'
        ),
        param_close=re.compile(param_close),
        stop=re.compile(
            rf"{param_close}|{op}parameter\s+name\s*=|{cp}invoke\s*>|{op}invoke\s+name\s*="
            r"|</minimax:tool_call>|</function_calls>|</dots_function_call>|</atem:function_calls>"
        ),
    )


_DSML_OPEN = r"(?:<\s*)?[|｜]\s*DSML\s*[|｜]\s*"
_DSML_CLOSE = r"<\s*/\s*[|｜]\s*DSML\s*[|｜]\s*"
M2 = _dialect("<", "</", _ANY_NAME)
STEP3 = _dialect("<steptml:", "</steptml:")
DSML = _dialect(_DSML_OPEN, _DSML_CLOSE)
# DeepSeek V4.1 names its block ` calls` (the space is part of the tag name).
DSML_WRAPPER = re.compile(rf"{_DSML_OPEN}(?:function_calls|tool_calls|calls)\s*>")
DSML_WRAPPER_CLOSE = re.compile(rf"{_DSML_CLOSE}(?:function_calls|tool_calls|calls)\s*>")
GCML = _dialect("<｜GCML｜", "</｜GCML｜")
ATEM = _dialect("<atem:", "</atem:")


def invoke(ctx: Ctx, pos: int, d: Dialect) -> tuple[RawCall, int] | None:
    """One `<invoke name="f">` with XML parameters or (DSML) a JSON body."""
    s, limit = ctx.s, ctx.limit
    im = d.invoke_open.match(s, pos, limit)
    if im is None:
        return None
    name = im.group(1).strip()
    if not valid_name(name):
        return None
    at_line = line_start(ctx, im.start())
    q = im.end()
    r = ws(s, q, limit)
    call: RawCall
    if r < limit and s[r] == "{":
        found_json = named_json(ctx, name, r)
        if found_json is None:
            return None
        call, q = found_json
    else:
        params: list[tuple[str, str, bool | None]] = []
        while True:
            r = ws(s, q, limit)
            pm = d.param_open.match(s, r, limit)
            if pm is None:
                break
            value, q, closed = _value_until(ctx, pm.end(), d.stop, d.param_close)
            if not closed and q >= ctx.core and not at_line:
                return None
            string = None if pm.group(2) is None else pm.group(2) == "true"
            params.append((pm.group(1).strip(), value, string))
        call = RawCall("params", name, params=params)
    r = ws(s, q, limit)
    cm = d.invoke_close.match(s, r, limit)
    if cm is not None:
        q = cm.end()
    elif not call.params and call.kind == "params" and not at_line:
        return None
    return call, q


def invokes(ctx: Ctx, pos: int, d: Dialect, family: str) -> Block | None:
    calls: list[RawCall] = []
    end = pos
    p = pos
    while (found := invoke(ctx, p, d)) is not None:
        call, end = found
        calls.append(call)
        p = ws(ctx.s, end, ctx.limit)
    return Block(family, end, calls) if calls else None
