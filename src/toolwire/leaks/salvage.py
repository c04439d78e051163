"""Opt-in salvage: turning a detected leak into calls, or refusing with a reason.

Salvage re-runs the detector's scan over each leaked block (`LeakMatch.spans`), so it reads
exactly the calls the detector saw, then interprets their arguments:

- JSON bodies: orjson; json-repair only when the brackets balance (it would otherwise "complete"
  a cut-off call); argument strings go through `parse_arguments`, as structured calls do.
- XML parameters (Qwen3-Coder, Seed-OSS, GLM, MiniMax M2, Step-3, DSML): one newline right after
  the opening tag and one right before the closing tag are dropped (templates put them there);
  the rest is kept exactly. A value becomes a typed JSON value only when it is unambiguous: the
  trimmed text is exactly `true`/`false`, an integer of at most 15 digits (longer ones are IDs
  and phone numbers, kept as text), a decimal of at most 15 significant digits, or a JSON object
  or array. Everything else, `null` and quoted strings included, stays a string. DSML's
  `string="true"` always means a string and `string="false"` means JSON (kept as text if
  it does not parse). A value typed by its look keeps its text beside it
  (`SalvagedCall.texts`): the loop puts the text back where the tool's schema wants a string
  (`loop/fitting.py`), as a server's parser reading the schema would.
- Pythonic calls: each keyword value through `ast.literal_eval` (JSON's `true`/`false`/`null`
  allowed, as OLMo writes them); anything else is refused, never evaluated.

It does not check names against the declared tools (the caller does), but never returns a call
without a name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.leaks.chain import scan_chain
from toolwire.leaks.detector import LeakMatch
from toolwire.leaks.scanning.core import (
    FENCE_LINE,
    Block,
    Ctx,
    RawCall,
    core_end,
    unambiguous_number,
)
from toolwire.leaks.scanning.json_calls import call_items
from toolwire.leaks.scanning.whole import scan_whole
from toolwire.upstream.arguments import ArgumentsError, balanced_object_end, parse_arguments
from toolwire.upstream.names import clean_tool_name


@dataclass(slots=True, frozen=True)
class SalvagedCall:
    """A call recovered from leaked text: a non-empty name and a JSON object of arguments."""

    name: str
    arguments: dict[str, object]
    texts: Mapping[str, str] = field(default_factory=dict)
    """The XML parameters typed by how their text looks (`5` a number, `{...}` an object), each
    with its text: what the model meant where the tool wants a string."""


class SalvageError(ValueError):
    """The leaked text does not hold well-formed calls; the message says why (for logs)."""


def salvage_calls(text: str, match: LeakMatch) -> list[SalvagedCall]:
    """The calls of every leaked block of `match` (`LeakMatch.spans`), in order, every one well
    formed, or `SalvageError`. Prose between the blocks is not read."""
    if not 0 <= match.start < match.end <= len(text):
        raise SalvageError("the match does not fit the text")
    calls: list[SalvagedCall] = []
    for start, end in match.spans:
        if not match.start <= start < end <= match.end:
            raise SalvageError("a block of the match does not fit the text")
        block = _rescan(text, start, end)
        if block is None or not block.calls:
            raise SalvageError(f"no {match.family} call could be read at offset {start}")
        for raw in block.calls:
            if raw.problem:
                raise SalvageError(raw.problem)
            calls.extend(_interpret(raw))
    return calls


def _rescan(text: str, start: int, end: int) -> Block | None:
    ctx = Ctx(text, start, end, core_end(text, start, end))
    whole = scan_whole(ctx, start)
    if whole is not None:
        return whole
    fenced = False
    pos = start
    if text.startswith("```", start):
        line = FENCE_LINE.match(text, start, end)
        if line is None:
            return None
        pos, fenced = line.end(), True
    return scan_chain(ctx, pos, fenced=fenced)


def _interpret(raw: RawCall) -> list[SalvagedCall]:
    if raw.kind == "envelope":
        return _from_envelope(raw.text)
    if raw.kind == "json":
        return [_call(raw.name, _arguments_text(raw.text))]
    if raw.kind == "params":
        args: dict[str, object] = {}
        texts: dict[str, str] = {}
        for key, value, string in raw.params:
            if not key:
                raise SalvageError(f"a parameter of {raw.name!r} has no name")
            if key in args:
                raise SalvageError(f"parameter {key!r} of {raw.name!r} is given twice")
            args[key] = typed = xml_value(value, string)
            if string is None and not isinstance(typed, str):
                texts[key] = _trim_newlines(value)
        return [_call(raw.name, args, texts)]
    return [_call(raw.name, dict(raw.values))]


def _call(
    name: Any, arguments: dict[str, object], texts: Mapping[str, str] | None = None
) -> SalvagedCall:
    cleaned = clean_tool_name(name) if isinstance(name, str) else ""
    if not cleaned:
        raise SalvageError(f"a call has no usable name: {name!r}")
    return SalvagedCall(cleaned, arguments, texts or {})


def _load_json(text: str) -> Any:
    """orjson, then json-repair for text whose brackets balance (never for cut-off text)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    if balanced_object_end(text, 0) != len(text):
        raise SalvageError("the call's JSON does not close")
    import json_repair

    value = json_repair.loads(text)
    if value in ({}, [], "", None):
        raise SalvageError(f"the call's JSON could not be repaired: {text[:120]!r}")
    return value


def _from_envelope(text: str) -> list[SalvagedCall]:
    items = call_items(_load_json(text))
    if items is None:
        raise SalvageError(f"not a tool call: {text[:120]!r}")
    return [_call(name, _arguments_value(args)) for name, args, _, _ in items]


def _arguments_value(args: Any) -> dict[str, object]:
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        return _arguments_text(args)
    raise SalvageError(f"arguments must be an object, got {type(args).__name__}")


def _arguments_text(text: str) -> dict[str, object]:
    try:
        return parse_arguments(text)
    except ArgumentsError as exc:
        raise SalvageError(str(exc)) from exc


def _trim_newlines(value: str) -> str:
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def xml_value(raw: str, string: bool | None = None) -> Any:
    """An XML parameter's value, typed only when unambiguous (see the module docstring)."""
    value = _trim_newlines(raw)
    if string is True:
        return value
    text = value.strip()
    if string is False:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return value
    if text in ("true", "false"):
        return text == "true"
    number = unambiguous_number(text)
    if number is not None:
        return number
    if text[:1] in ("{", "["):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return value
        if isinstance(parsed, dict | list):
            return parsed
    return value
