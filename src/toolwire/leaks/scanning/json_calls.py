"""JSON-bodied calls: spans of JSON values (cut-off ones too), the envelope shapes that mean "a
call" (`{"name", "arguments"}` and its variants), and the strict test used where there is no
marker at all, so that JSON data in an answer is never taken for a call.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from toolwire.leaks.scanning.core import Block, Ctx, RawCall, valid_name
from toolwire.upstream.arguments import balanced_object_end

# -- JSON envelopes -------------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
ARG_KEYS = ("arguments", "parameters", "input", "args")
ENVELOPE_KEYS = frozenset({*ARG_KEYS, "name", "id", "type", "function", "call_id"})
_LOOSE_NAME = re.compile(r"""["']?(?:name|function)["']?\s*:""")
TRUNCATED_START = re.compile(r"""\[?\s*\{\s*["'](?:name|function)["']\s*:""")
CUT = "the call is cut off before its JSON closes"


def json_span(s: str, pos: int, limit: int) -> tuple[int, bool]:
    """End of the JSON value opening at `pos`, and whether it never closes before `limit`.

    Valid JSON ends where the decoder says; otherwise at the bracket balancing the first one, so
    single quotes or trailing commas (which salvage may repair) still give a span.
    """
    if s.startswith(("{", "["), pos):
        # Brackets are balanced by a loop, not a recursive decoder: a model writing thousands
        # of nested `{"name": ` must not end the turn in a RecursionError. For valid JSON the
        # end is the decoder's; invalid JSON (single quotes, trailing commas) gets one too.
        end = balanced_object_end(s, pos)
        if end < 0:
            return limit, True
    else:
        try:
            # On a slice: the decoder's error counts lines from the start of the string.
            end = pos + _DECODER.raw_decode(s[pos:limit])[1]
        except ValueError:
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
        if not set(item) <= ENVELOPE_KEYS or item.get("type", "function") != "function":
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


def json_block(ctx: Ctx, pos: int, family: str, *, strict: bool) -> Block | None:
    """A JSON envelope (object or array) at `pos`."""
    s = ctx.s
    if pos >= ctx.limit or s[pos] not in "{[":
        return None
    end, cut = json_span(s, pos, ctx.limit)
    text = s[pos:end]
    if cut:
        if strict or not TRUNCATED_START.match(s, pos, ctx.limit):
            return None
        return Block(family, ctx.limit, [RawCall("envelope", text=text, problem=CUT)])
    if strict:
        try:
            ok = strict_call_value(orjson.loads(text))
        except orjson.JSONDecodeError:
            ok = False
    else:
        ok = loose_call_text(text)
    return Block(family, end, [RawCall("envelope", text=text)]) if ok else None


def named_json(ctx: Ctx, name: str, pos: int) -> tuple[RawCall, int] | None:
    """Arguments as a JSON object at `pos` for a call whose name came before."""
    if pos >= ctx.limit or ctx.s[pos] != "{":
        return None
    end, cut = json_span(ctx.s, pos, ctx.limit)
    return RawCall("json", name, ctx.s[pos:end], problem=CUT if cut else None), end


def uses_parameters(texts: list[str]) -> bool:
    """Llama 3 names the arguments `parameters`; most others say `arguments`."""
    for text in texts:
        try:
            items = call_items(orjson.loads(text)) or []
        except orjson.JSONDecodeError:
            continue
        if any("parameters" in item for *_, item in items):
            return True
    return False
