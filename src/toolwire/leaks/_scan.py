"""Structural scanning of leaked calls, shared by the detector and the salvage parser.

A scanner starts at an opening marker and consumes one block of calls (one `<tool_call>`, one
DeepSeek section, ...), recording each call's raw pieces without interpreting its arguments. The
detector only needs to know that a chain of such blocks runs to the end of the text; salvage
re-runs the same scan and interprets the pieces, so the two can never disagree about the shape.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson

from toolwire.leaks import formats as F
from toolwire.upstream.arguments import balanced_object_end

NAME = r"[^\W\d][\w.\-:]{0,127}"
_NAME_RE = re.compile(NAME)
_BARE_NAME = r"[^\W\d][\w.\-]{0,127}"

RawKind = Literal["envelope", "json", "params", "values"]


@dataclass(slots=True)
class RawCall:
    """One call as written, before its arguments are interpreted.

    `envelope`: `text` is JSON holding the name and arguments (maybe several calls, an array).
    `json`: `name` plus `text`, the arguments' JSON. `params`: `name` plus `(key, value, string)`
    triples from an XML form (`string` is DSML's `string=` attribute, None when absent).
    `values`: `name` plus already-evaluated `values` (pythonic, FunctionGemma). `problem` says
    why salvage must refuse this call (cut off, not a literal, ...).
    """

    kind: RawKind
    name: str = ""
    text: str = ""
    params: list[tuple[str, str, bool | None]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


@dataclass(slots=True)
class Block:
    """Calls found from one marker, and where they stop."""

    family: str
    end: int
    calls: list[RawCall]


@dataclass(slots=True)
class Ctx:
    """The text and the region being judged: `vs` (visible start) to `limit`.

    `core` is `limit` less trailing whitespace, end-of-turn tokens and stray closing tags: where
    a call with missing closers ends.
    """

    s: str
    vs: int
    limit: int
    core: int
    _fences: list[int] | None = None

    def fences(self) -> list[int]:
        """Positions of every ``` in the region, found once."""
        if self._fences is None:
            found: list[int] = []
            i = self.s.find("```", self.vs, self.limit)
            while i >= 0:
                found.append(i)
                i = self.s.find("```", i + 3, self.limit)
            self._fences = found
        return self._fences

    def in_fence(self, pos: int) -> bool:
        """True when `pos` sits inside an open ``` fence."""
        fences = self.fences()
        return bool(fences) and bisect.bisect_left(fences, pos) % 2 == 1


# -- trailers and separators ----------------------------------------------------------------------

_TOKEN = (
    r"</[A-Za-z_][\w:.\-]*\s*>"
    r"|<\|[A-Za-z_]+\|>"
    r"|<｜[^｜<>\n]{1,40}｜>"
    r"|<\s*/\s*[|｜]\s*DSML\s*[|｜]\s*\w+\s*>"
    r"|<end_of_turn>|<end_function_call>|<eos>|\[e~\["
)
_TRAILER = re.compile(rf"(?:\s|{_TOKEN})*")
_TRAILER_FENCED = re.compile(rf"(?:\s|{_TOKEN})*(?:```(?:\s|{_TOKEN})*)?")
_TOKEN_AT_END = re.compile(rf"(?:{_TOKEN})\Z")
_SEP = re.compile(r"(?:\s|;|</[A-Za-z_][\w:.\-]*\s*>)*")
_WS = re.compile(r"\s*")
FENCE_LINE = re.compile(r"```[\w+.\-]*[ \t]*\r?\n\s*")


def is_trailer(s: str, pos: int, limit: int, *, fenced: bool = False) -> bool:
    """True when only whitespace, end tokens and stray closers lie between `pos` and `limit`."""
    pattern = _TRAILER_FENCED if fenced else _TRAILER
    return pattern.fullmatch(s, pos, limit) is not None


def core_end(s: str, vs: int, limit: int) -> int:
    """`limit` moved back over trailing whitespace, end-of-turn tokens and stray closers."""
    end = limit
    while True:
        while end > vs and s[end - 1].isspace():
            end -= 1
        m = _TOKEN_AT_END.search(s, max(vs, end - 80), end)
        if m is None or m.start() < vs:
            return end
        end = m.start()


def ws(s: str, pos: int, limit: int) -> int:
    """`pos` moved past whitespace."""
    m = _WS.match(s, pos, limit)
    return m.end() if m else pos


def line_start(ctx: Ctx, pos: int) -> bool:
    """True when only spaces lie between the start of the line (or region) and `pos`."""
    s, i = ctx.s, pos
    while i > ctx.vs and s[i - 1] in " \t":
        i -= 1
    return i == ctx.vs or s[i - 1] == "\n"


def valid_name(name: str) -> bool:
    """A tool name as models write them: an identifier, maybe dotted, dashed or namespaced."""
    return _NAME_RE.fullmatch(name) is not None


# -- JSON envelopes -------------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
ARG_KEYS = ("arguments", "parameters", "input", "args")
_ENVELOPE_KEYS = frozenset({*ARG_KEYS, "name", "id", "type", "function", "call_id"})
_LOOSE_NAME = re.compile(r"""["']?(?:name|function)["']?\s*:""")
_TRUNCATED_START = re.compile(r"""\[?\s*\{\s*["'](?:name|function)["']\s*:""")
_CUT = "the call is cut off before its JSON closes"


def json_span(s: str, pos: int, limit: int) -> tuple[int, bool]:
    """End of the JSON value opening at `pos`, and whether it never closes before `limit`.

    Valid JSON ends where the decoder says; otherwise at the bracket balancing the first one, so
    single quotes or trailing commas (which salvage may repair) still give a span.
    """
    try:
        # On a slice: the decoder's error counts lines from the start of the string it gets.
        end = pos + _DECODER.raw_decode(s[pos:limit])[1]
    except ValueError:
        end = balanced_object_end(s, pos)
        if end < 0:
            return limit, True
    if end > limit:
        return limit, True
    return end, False


def call_items(value: Any) -> list[tuple[Any, Any, bool, dict[str, Any]]] | None:
    """`(name, arguments, has_arguments, item)` for each call a JSON value holds, or None.

    Knows `{"name", "arguments"|"parameters"|"input"|"args"}`, `{"function": {...}}`, a list of
    those, and `{"tool_calls": [...]}`.
    """
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list) and len(value) == 1:
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    out: list[tuple[Any, Any, bool, dict[str, Any]]] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        inner = item.get("function")
        source: dict[str, Any] = inner if isinstance(inner, dict) else item
        if "name" not in source:
            return None
        key = next((k for k in ARG_KEYS if k in source), None)
        out.append((source["name"], source.get(key) if key else None, key is not None, item))
    return out


def _schema_like(args: Any) -> bool:
    return isinstance(args, dict) and args.get("type") == "object" and "properties" in args


def strict_call_value(value: Any) -> bool:
    """A JSON value that can only be read as tool calls: used where there is no marker at all.

    Every item needs a tool-like name and an arguments object (or a JSON string of one), no keys
    beyond a call's, and arguments that are not a JSON schema (that is a tool definition).
    """
    if isinstance(value, list) and len(value) > 1 and not strict_call_value(value[:1]):
        return False  # a long JSON list that is data, not calls: decide on its first item
    items = call_items(value)
    if items is None:
        return False
    for name, args, has_args, item in items:
        if not isinstance(name, str) or not valid_name(name) or not has_args:
            return False
        if not set(item) <= _ENVELOPE_KEYS or item.get("type", "function") != "function":
            return False
        if isinstance(args, str):
            try:
                args = orjson.loads(args)
            except orjson.JSONDecodeError:
                return False
        if not isinstance(args, dict) or _schema_like(args):
            return False
    return True


def loose_call_text(text: str) -> bool:
    """JSON after a strong marker: any call shape, or text that will not parse but names one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _LOOSE_NAME.search(text) is not None
    return call_items(value) is not None


def _json_block(ctx: Ctx, pos: int, family: str, *, strict: bool) -> Block | None:
    """A JSON envelope (object or array) at `pos`."""
    s = ctx.s
    if pos >= ctx.limit or s[pos] not in "{[":
        return None
    end, cut = json_span(s, pos, ctx.limit)
    text = s[pos:end]
    if cut:
        if strict or not _TRUNCATED_START.match(s, pos, ctx.limit):
            return None
        return Block(family, ctx.limit, [RawCall("envelope", text=text, problem=_CUT)])
    if strict:
        try:
            ok = strict_call_value(orjson.loads(text))
        except orjson.JSONDecodeError:
            ok = False
    else:
        ok = loose_call_text(text)
    return Block(family, end, [RawCall("envelope", text=text)]) if ok else None


def _named_json(ctx: Ctx, name: str, pos: int) -> tuple[RawCall, int] | None:
    """Arguments as a JSON object at `pos` for a call whose name came before."""
    if pos >= ctx.limit or ctx.s[pos] != "{":
        return None
    end, cut = json_span(ctx.s, pos, ctx.limit)
    return RawCall("json", name, ctx.s[pos:end], problem=_CUT if cut else None), end


def _closer(ctx: Ctx, pos: int, closer: str) -> int:
    """`pos` moved past an optional closing marker (after whitespace)."""
    q = ws(ctx.s, pos, ctx.limit)
    return q + len(closer) if ctx.s.startswith(closer, q) else pos


# -- XML parameter forms --------------------------------------------------------------------------

# `<tag=name>`, the `<tag_name>` drift and the `<tag name="name">` drift.
_TAG_NAME = (
    r"(?:=\s*([^>\n]{1,200}?)|_([^\W\d][\w.\-:]{0,127})"
    r"""|\s+name\s*=\s*["']?([^"'>\n]{1,200}?)["']?)\s*>"""
)
_FUNC_OPEN = re.compile(r"<function" + _TAG_NAME)
_PARAM_OPEN = re.compile(r"<parameter" + _TAG_NAME)
# Where a value missing its `</parameter>` ends: the next structural tag in one of the three
# spellings (not any `<parameter ...>`, which file contents may well hold).
_PARAM_STOP = re.compile(
    r"</parameter\s*>|<parameter(?:=|_[^\W\d]|\s+name\s*=)|</function\s*>"
    r"|<function(?:=|_[^\W\d]|\s+name\s*=)|</tool_call>|<tool_call>|</seed:tool_call>"
)
_PARAM_CLOSE = re.compile(r"</parameter\s*>")
_FUNC_CLOSE = re.compile(r"</function\s*>")


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


def _functions(ctx: Ctx, pos: int, family: str) -> Block | None:
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
        params: list[tuple[str, str, bool | None]] = []
        closed_any = False
        while True:
            r = ws(s, q, limit)
            pm = _PARAM_OPEN.match(s, r, limit)
            if pm is None:
                break
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


_GLM_HEAD = re.compile(rf"({NAME})[ \t]*(?=\r?\n|<arg_key>|</tool_call>|\Z)")
_GLM_KEY = re.compile(r"<arg_key>\s*([^<\n]{1,200}?)\s*</arg_key>\s*<arg_value>")
_GLM_STOP = re.compile(r"</arg_value>|<arg_key>|</tool_call>|<tool_call>")
_GLM_CLOSE = re.compile(r"</arg_value>")


def _glm(ctx: Ctx, pos: int, open_at: int) -> Block | None:
    """GLM-4.5+ `f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>` after `<tool_call>`."""
    s, limit = ctx.s, ctx.limit
    hm = _GLM_HEAD.match(s, pos, limit)
    if hm is None:
        return None
    at_line = line_start(ctx, open_at)
    q = hm.end()
    params: list[tuple[str, str, bool | None]] = []
    while True:
        r = ws(s, q, limit)
        km = _GLM_KEY.match(s, r, limit)
        if km is None:
            break
        value, q, closed = _value_until(ctx, km.end(), _GLM_STOP, _GLM_CLOSE)
        if not closed and q >= ctx.core and not at_line:
            return None
        params.append((km.group(1).strip(), value, None))
    r = ws(s, q, limit)
    if s.startswith(F.TOOL_CALL_CLOSE, r):
        q = r + len(F.TOOL_CALL_CLOSE)
    elif not params and not at_line:
        return None
    return Block("glm45", q, [RawCall("params", hm.group(1), params=params)])


@dataclass(slots=True, frozen=True)
class _Dialect:
    """The `<invoke name=..><parameter name=..>` family, with its prefix (none, steptml, DSML)."""

    invoke_open: re.Pattern[str]
    invoke_close: re.Pattern[str]
    param_open: re.Pattern[str]
    param_close: re.Pattern[str]
    stop: re.Pattern[str]


def _dialect(op: str, cp: str) -> _Dialect:
    param_close = rf"{cp}parameter\s*>"
    return _Dialect(
        invoke_open=re.compile(rf'{op}invoke\s+name\s*=\s*"([^"\n]{{1,200}})"\s*>'),
        invoke_close=re.compile(rf"{cp}invoke\s*>"),
        param_open=re.compile(
            rf'{op}parameter\s+name\s*=\s*"([^"\n]{{1,200}})"'
            r'(?:\s+string\s*=\s*"(true|false)")?\s*>'
        ),
        param_close=re.compile(param_close),
        stop=re.compile(
            rf"{param_close}|{op}parameter\s+name\s*=|{cp}invoke\s*>|{op}invoke\s+name\s*="
            r"|</minimax:tool_call>|</function_calls>"
        ),
    )


_DSML_OPEN = r"(?:<\s*)?[|｜]\s*DSML\s*[|｜]\s*"
_DSML_CLOSE = r"<\s*/\s*[|｜]\s*DSML\s*[|｜]\s*"
_M2 = _dialect("<", "</")
_STEP3 = _dialect("<steptml:", "</steptml:")
_DSML = _dialect(_DSML_OPEN, _DSML_CLOSE)
_DSML_WRAPPER = re.compile(rf"{_DSML_OPEN}(?:function_calls|tool_calls)\s*>")
_DSML_WRAPPER_CLOSE = re.compile(rf"{_DSML_CLOSE}(?:function_calls|tool_calls)\s*>")


def _invoke(ctx: Ctx, pos: int, d: _Dialect) -> tuple[RawCall, int] | None:
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
        found_json = _named_json(ctx, name, r)
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


def _invokes(ctx: Ctx, pos: int, d: _Dialect, family: str) -> Block | None:
    calls: list[RawCall] = []
    end = pos
    p = pos
    while (found := _invoke(ctx, p, d)) is not None:
        call, end = found
        calls.append(call)
        p = ws(ctx.s, end, ctx.limit)
    return Block(family, end, calls) if calls else None


# -- pythonic -------------------------------------------------------------------------------------


class _JsonNames(ast.NodeTransformer):
    """`true`/`false`/`null` as OLMo writes them become Python constants."""

    _MAP: ClassVar[dict[str, Any]] = {"true": True, "false": False, "null": None}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._MAP:
            return ast.copy_location(ast.Constant(self._MAP[node.id]), node)
        return node


def _jsonable(value: Any) -> Any:
    """A literal as JSON data: tuples become lists; sets, bytes, complex, non-str keys fail."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    raise ValueError(f"not JSON data: {type(value).__name__}")


def literal_value(node: ast.expr) -> Any:
    """A keyword value via `ast.literal_eval` (never eval), JSON's `true`/`false`/`null` allowed."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        fixed = _JsonNames().visit(node)
        try:
            value = ast.literal_eval(fixed)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ValueError("not a literal") from exc
    return _jsonable(value)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def pythonic_calls(source: str, *, listed: bool) -> list[RawCall] | None:
    """Calls written as Python, `name(kw=literal, ...)` only, parsed with `ast` (never run).

    `listed`: the source must be one list `[f(a=1), g()]`; otherwise one call per statement (a
    single list statement is accepted too). Positional arguments or `**kw` reject the whole text.
    """
    src = source.strip()
    if not src or len(src) > 200_000:
        return None
    try:
        with warnings.catch_warnings():
            # Prose parsed as Python warns ("invalid decimal literal"); that is only noise here.
            warnings.simplefilter("ignore")
            tree = ast.parse(src, mode="eval" if listed else "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    exprs: list[ast.expr]
    if isinstance(tree, ast.Expression):
        if not isinstance(tree.body, ast.List):
            return None
        exprs = list(tree.body.elts)
    else:
        assert isinstance(tree, ast.Module)
        exprs = []
        for stmt in tree.body:
            if not isinstance(stmt, ast.Expr):
                return None
            if isinstance(stmt.value, ast.List) and len(tree.body) == 1:
                exprs.extend(stmt.value.elts)
            else:
                exprs.append(stmt.value)
    if not exprs:
        return None
    calls: list[RawCall] = []
    for expr in exprs:
        if not isinstance(expr, ast.Call) or expr.args:
            return None
        name = _dotted(expr.func)
        if name is None or not valid_name(name):
            return None
        values: dict[str, Any] = {}
        problem = None
        for kw in expr.keywords:
            if kw.arg is None:
                return None
            try:
                values[kw.arg] = literal_value(kw.value)
            except ValueError:
                problem = f"argument {kw.arg!r} of {name} is not a literal"
        calls.append(RawCall("values", name, values=values, problem=problem))
    return calls


# -- FunctionGemma --------------------------------------------------------------------------------


class _Cut(Exception):
    """The text ended inside the value."""


_GEMMA_HEAD = re.compile(rf"<start_function_call>\s*call\s*:\s*({_BARE_NAME})\s*(?=\{{)")
_GEMMA_KEY = re.compile(r"\s*([^\s:{}\[\],<>]+)\s*:")
_GEMMA_BARE = re.compile(r"[^,}\]<]+")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def unambiguous_number(text: str) -> int | float | None:
    """`text` as a number when it is exactly a JSON number of at most 15 significant digits
    (longer ones are IDs or phone numbers and would lose digits as floats), finite; else None."""
    if not _JSON_NUMBER.fullmatch(text):
        return None
    mantissa = re.split(r"[eE]", text.lstrip("-"), maxsplit=1)[0]
    if len(mantissa.replace(".", "").lstrip("0")) > 15:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, int | float) else None


def _gemma_scalar(token: str) -> Any:
    t = token.strip()
    if t in ("true", "false"):
        return t == "true"
    if t == "null":
        return None
    number = unambiguous_number(t)
    return t if number is None else number


def _gemma_value(s: str, i: int, limit: int, depth: int = 0) -> tuple[Any, int]:
    """One FunctionGemma value: `<escape>text<escape>`, `{k:v,...}`, `[v,...]` or a bare scalar."""
    if depth > 64:
        raise ValueError("nested too deep")
    i = ws(s, i, limit)
    if i >= limit:
        raise _Cut
    if s.startswith(F.GEMMA_ESCAPE, i):
        j = s.find(F.GEMMA_ESCAPE, i + len(F.GEMMA_ESCAPE), limit)
        if j < 0:
            raise _Cut
        return s[i + len(F.GEMMA_ESCAPE) : j], j + len(F.GEMMA_ESCAPE)
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
                value, i = _gemma_value(s, km.end(), limit, depth + 1)
                obj[km.group(1)] = value
            else:
                value, i = _gemma_value(s, i, limit, depth + 1)
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


def _scan_gemma(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    hm = _GEMMA_HEAD.match(s, m.start(), limit)
    if hm is None:
        return None
    name = hm.group(1)
    try:
        value, end = _gemma_value(s, hm.end(), limit)
    except _Cut:
        problem = "the call is cut off before its arguments close"
        return Block("functiongemma", limit, [RawCall("values", name, problem=problem)])
    except ValueError:
        return None
    end = _closer(ctx, end, F.GEMMA_CALL_CLOSE)
    return Block("functiongemma", end, [RawCall("values", name, values=value)])


# -- one scanner per opening marker ---------------------------------------------------------------

Scanner = Callable[[Ctx, re.Match[str]], Block | None]


def _scan_tool_call(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s = ctx.s
    p = ws(s, m.end(), ctx.limit)
    if p >= ctx.limit:
        return None
    blk: Block | None
    if s[p] in "{[":
        blk = _json_block(ctx, p, "hermes" if s[p] == "{" else "granite", strict=False)
    elif s.startswith("<function", p):
        blk = _functions(ctx, p, "qwen3_coder")
    else:
        return _glm(ctx, p, m.start())
    if blk is not None:
        blk.end = _closer(ctx, blk.end, F.TOOL_CALL_CLOSE)
    return blk


def _scan_seed(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = _functions(ctx, ws(ctx.s, m.end(), ctx.limit), "seed_oss")
    if blk is not None:
        blk.end = _closer(ctx, blk.end, F.SEED_TOOL_CALL_CLOSE)
    return blk


def _scan_function(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return _functions(ctx, m.start(), "qwen3_coder")


def _scan_function_calls(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if s.startswith("<invoke", p):
        blk = _invokes(ctx, p, _M2, "deepseek_dsml")
        if blk is not None:
            blk.end = _closer(ctx, blk.end, F.FUNCTION_CALLS_CLOSE)
        return blk
    close = s.find(F.FUNCTION_CALLS_CLOSE, p, limit)
    body_end = close if close >= 0 else max(p, ctx.core)
    calls = pythonic_calls(s[p:body_end], listed=False)
    if calls is None:
        return None
    end = close + len(F.FUNCTION_CALLS_CLOSE) if close >= 0 else body_end
    return Block("olmo3", end, calls)


def _scan_function_call(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = _json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "granite", strict=False)
    if blk is not None:
        blk.end = _closer(ctx, blk.end, "</function_call>")
    return blk


def _scan_python_tag(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    calls: list[RawCall] = []
    p = ws(s, m.end(), limit)
    end = p
    while True:
        blk = _json_block(ctx, p, "llama3_json", strict=False)
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


def _scan_python_start(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s = ctx.s
    close = s.find(F.PYTHON_END, m.end(), ctx.limit)
    body_end = close if close >= 0 else max(m.end(), ctx.core)
    body = s[m.end() : body_end]
    calls = pythonic_calls(body, listed=False)
    if calls is None:
        return None
    end = close + len(F.PYTHON_END) if close >= 0 else body_end
    return Block("pythonic", end, calls)


_MISTRAL_NAMED = re.compile(
    rf"\s*({_BARE_NAME})\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(?:\[ARGS\])?\s*(?=\{{)"
)


def _scan_mistral(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p < limit and s[p] in "[{":
        return _json_block(ctx, p, "mistral", strict=False)
    nm = _MISTRAL_NAMED.match(s, m.end(), limit)
    if nm is None:
        return None
    found = _named_json(ctx, nm.group(1), nm.end())
    if found is None:
        return None
    call, end = found
    return Block("mistral", end, [call])


_DS_CALL_V3 = re.compile(
    rf"<｜tool▁call▁begin｜>\s*function\s*<｜tool▁sep｜>\s*({_BARE_NAME})\s*(```(?:json)?)?\s*"
)
_DS_CALL_V31 = re.compile(rf"<｜tool▁call▁begin｜>\s*({_BARE_NAME})\s*<｜tool▁sep｜>\s*")


def _scan_deepseek(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(F.DS_CALLS_BEGIN, p):
        p = ws(s, p + len(F.DS_CALLS_BEGIN), limit)
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
        found = _named_json(ctx, cm.group(1), cm.end())
        if found is None:
            return None
        call, q = found
        calls.append(call)
        if call.problem:
            return Block(family, limit, calls)
        if fam == "deepseek_v3" and cm.group(2):
            q = _closer(ctx, q, "```")
        end = _closer(ctx, q, F.DS_CALL_END)
        p = ws(s, end, limit)
    if family is None:
        return None
    return Block(family, _closer(ctx, end, F.DS_CALLS_END), calls)


def _scan_dsml(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    wm = _DSML_WRAPPER.match(s, p, limit)
    if wm is not None:
        p = ws(s, wm.end(), limit)
    blk = _invokes(ctx, p, _DSML, "deepseek_dsml")
    if blk is not None and wm is not None:
        cm = _DSML_WRAPPER_CLOSE.match(s, ws(s, blk.end, limit), limit)
        if cm is not None:
            blk.end = cm.end()
    return blk


_KIMI_CALL = re.compile(
    rf"<\|tool_call_begin\|>\s*(?:functions\.)?({_BARE_NAME})(?::\d+)?\s*"
    r"<\|tool_call_argument_begin\|>\s*"
)
_KIMI_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>")
_KIMI_SECTION_END = re.compile(r"\s*<\|tool_calls?_section_end\|>")


def _scan_kimi(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    sm = _KIMI_SECTION.match(s, p, limit)
    if sm is not None:
        p = ws(s, sm.end(), limit)
    calls: list[RawCall] = []
    end = p
    while (cm := _KIMI_CALL.match(s, p, limit)) is not None:
        found = _named_json(ctx, cm.group(1), cm.end())
        if found is None:
            return None
        call, q = found
        calls.append(call)
        if call.problem:
            return Block("kimi_k2", limit, calls)
        end = _closer(ctx, q, F.KIMI_CALL_END)
        p = ws(s, end, limit)
    if not calls:
        return None
    em = _KIMI_SECTION_END.match(s, end, limit)
    return Block("kimi_k2", em.end() if em else end, calls)


def _scan_granite_token(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return _json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "granite", strict=False)


_INTERNLM_HEAD = re.compile(r"<\|action_start\|>\s*<\|plugin\|>\s*")


def _scan_internlm(ctx: Ctx, m: re.Match[str]) -> Block | None:
    hm = _INTERNLM_HEAD.match(ctx.s, m.start(), ctx.limit)
    if hm is None:
        return None
    blk = _json_block(ctx, hm.end(), "internlm", strict=False)
    if blk is not None:
        blk.end = _closer(ctx, blk.end, F.INTERNLM_ACTION_END)
    return blk


def _scan_tool_calls(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = ws(s, m.end(), limit)
    if p < limit and s[p] == "[":
        blk = _json_block(ctx, p, "jamba", strict=False)
    else:
        calls: list[RawCall] = []
        end = p
        while (one := _json_block(ctx, p, "minimax_m1", strict=False)) is not None:
            calls.extend(one.calls)
            end = one.end
            p = ws(s, end, limit)
        blk = Block("minimax_m1", end, calls) if calls else None
    if blk is not None:
        blk.end = _closer(ctx, blk.end, F.TOOL_CALLS_CLOSE)
    return blk


def _scan_minimax(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    wrapped = s.startswith(F.MINIMAX_TOOL_CALL_OPEN, m.start())
    p = ws(s, m.start() + len(F.MINIMAX_TOOL_CALL_OPEN), limit) if wrapped else m.start()
    blk = _invokes(ctx, p, _M2, "minimax_m2")
    if blk is not None and wrapped:
        blk.end = _closer(ctx, blk.end, F.MINIMAX_TOOL_CALL_CLOSE)
    return blk


_STEP3_CALL = re.compile(r"<｜tool_call_begin｜>\s*(?:function\s*)?(?:<｜tool_sep｜>\s*)?")


def _scan_step3(ctx: Ctx, m: re.Match[str]) -> Block | None:
    s, limit = ctx.s, ctx.limit
    p = m.start()
    if s.startswith(F.STEP3_CALLS_BEGIN, p):
        p = ws(s, p + len(F.STEP3_CALLS_BEGIN), limit)
    calls: list[RawCall] = []
    end = p
    while True:
        cm = _STEP3_CALL.match(s, p, limit)
        q = cm.end() if cm is not None else p
        found = _invoke(ctx, q, _STEP3)
        if found is None:
            break
        call, end = found
        calls.append(call)
        end = _closer(ctx, end, F.STEP3_CALL_END)
        p = ws(s, end, limit)
    if not calls:
        return None
    return Block("step3", _closer(ctx, end, F.STEP3_CALLS_END), calls)


_HARMONY_HEAD = re.compile(
    r"(?:<\|start\|>\s*)?(?:assistant\s*)?"
    rf"(?:to=functions\.({_BARE_NAME}?)\s*(?:<\|channel\|>\s*)?commentary\b"
    rf"|(?:<\|channel\|>\s*)?commentary\s*to=functions\.({_BARE_NAME}))"
    r"\s*(?:<\|constrain\|>\s*)?(?:json\s*)?(?:<\|message\|>\s*)?"
)
HARMONY_BACK = re.compile(
    r"(?:<\|start\|>\s*)?(?:assistant\s*)?(?:<\|channel\|>\s*)?(?:commentary\s*)?\Z"
)


def _scan_harmony_at(ctx: Ctx, pos: int) -> Block | None:
    hm = _HARMONY_HEAD.match(ctx.s, pos, ctx.limit)
    if hm is None:
        return None
    found = _named_json(ctx, hm.group(1) or hm.group(2), hm.end())
    if found is None:
        return None
    call, end = found
    return Block("harmony", ctx.limit if call.problem else end, [call])


def _scan_harmony(ctx: Ctx, m: re.Match[str]) -> Block | None:
    return _scan_harmony_at(ctx, m.start())


def _scan_wrapper(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = _json_block(ctx, ws(ctx.s, m.end(), ctx.limit), "hermes", strict=True)
    if blk is not None:
        blk.end = _closer(ctx, blk.end, "</" + m.group()[1:])
    return blk


def _uses_parameters(texts: list[str]) -> bool:
    """Llama 3 names the arguments `parameters`; most others say `arguments`."""
    for text in texts:
        try:
            items = call_items(orjson.loads(text)) or []
        except orjson.JSONDecodeError:
            continue
        if any("parameters" in item for *_, item in items):
            return True
    return False


def _scan_bare_json(ctx: Ctx, m: re.Match[str]) -> Block | None:
    blk = _json_block(ctx, m.start(), "hermes", strict=True)
    if blk is not None and _uses_parameters([c.text for c in blk.calls]):
        blk.family = "llama3_json"
    return blk


def _scan_phi4(ctx: Ctx, pos: int) -> Block | None:
    return _json_block(ctx, pos + len(F.PHI4_FUNCTOOLS) - 1, "phi4_mini", strict=False)


# Opening markers, matched only at candidate positions the detector found with `str.rfind`.
OPENER = re.compile(
    r"<tool_call>|<seed:tool_call>|<function_calls>|<function_call>"
    r"|<function(?:=|_(?!calls?>)|\s+name\s*=)"
    r"|<\|python_tag\|>|<\|python_start\|>|\[TOOL_CALLS\]"
    r"|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>"
    r"|<\s*[|｜]\s*DSML\s*[|｜]\s*(?:function_calls|tool_calls|invoke)\b"
    r"|[|｜]\s*DSML\s*[|｜]\s*(?:function_calls|tool_calls|invoke)\b"
    r"|<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<\|tool_call\|>"
    r"|<\|action_start\|>|<tool_calls>|<minimax:tool_call>|<invoke\s+name\s*="
    r"|<｜tool_calls_begin｜>|<｜tool_call_begin｜>|<steptml:invoke\b"
    r"|<\|start\|>\s*assistant|<\|channel\|>\s*commentary"
    r"|<start_function_call>|<(?:tools?|json)>"
    r'|\{\s*"(?:name|type)"\s*:'
)


def _scanner_for(marker: str) -> Scanner:
    """Which scanner a marker found by `OPENER` belongs to."""
    if marker.startswith("{"):
        return _scan_bare_json
    if "DSML" in marker:
        return _scan_dsml
    table: tuple[tuple[str, Scanner], ...] = (
        ("<tool_call>", _scan_tool_call),
        ("<seed:", _scan_seed),
        ("<function_calls>", _scan_function_calls),
        ("<function_call>", _scan_function_call),
        ("<function", _scan_function),
        ("<|python_tag|>", _scan_python_tag),
        ("<|python_start|>", _scan_python_start),
        ("[TOOL_CALLS]", _scan_mistral),
        ("<｜tool▁", _scan_deepseek),
        ("<|tool_call|>", _scan_granite_token),
        ("<|tool_call", _scan_kimi),
        ("<|action_start|>", _scan_internlm),
        ("<tool_calls>", _scan_tool_calls),
        ("<minimax:", _scan_minimax),
        ("<invoke", _scan_minimax),
        ("<｜tool_call", _scan_step3),
        ("<steptml:", _scan_step3),
        ("<|start|>", _scan_harmony),
        ("<|channel|>", _scan_harmony),
        ("<start_function_call>", _scan_gemma),
    )
    for prefix, scanner in table:
        if marker.startswith(prefix):
            return scanner
    return _scan_wrapper


def is_opener(ctx: Ctx, pos: int) -> bool:
    """True when a call's opening marker starts at `pos` (cheap; nothing is parsed)."""
    s = ctx.s
    return (
        OPENER.match(s, pos, ctx.limit) is not None
        or s.startswith(F.PHI4_FUNCTOOLS, pos, ctx.limit)
        or _HARMONY_HEAD.match(s, pos, ctx.limit) is not None
    )


def scan_block(ctx: Ctx, pos: int, *, first: bool) -> Block | None:
    """The block of calls whose opening marker is at `pos`, or None."""
    s = ctx.s
    m = OPENER.match(s, pos, ctx.limit)
    if m is not None:
        marker = m.group()
        if first and marker.startswith("{") and not line_start(ctx, pos):
            return None
        return _scanner_for(marker)(ctx, m)
    if s.startswith(F.PHI4_FUNCTOOLS, pos, ctx.limit):
        return _scan_phi4(ctx, pos)
    return _scan_harmony_at(ctx, pos)


def scan_chain(ctx: Ctx, pos: int, *, fenced: bool = False) -> Block | None:
    """Blocks of calls from `pos` that run, separated only by whitespace, `;` or stray closers,
    to the end of the region. The family is the first block's."""
    s = ctx.s
    family: str | None = None
    calls: list[RawCall] = []
    p = pos
    for index in range(256):
        blk = scan_block(ctx, p, first=index == 0)
        if blk is None or blk.end <= p:
            return None
        family = family or blk.family
        calls.extend(blk.calls)
        if is_trailer(s, blk.end, ctx.limit, fenced=fenced):
            return Block(family, ctx.limit, calls)
        sep = _SEP.match(s, blk.end, ctx.limit)
        p = sep.end() if sep else blk.end
    return None


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
    llama = len(texts) > 1 or _uses_parameters(texts)
    family = "llama3_json" if llama else "generic_json"
    return Block(family, ctx.limit, [RawCall("envelope", text=t) for t in texts])
