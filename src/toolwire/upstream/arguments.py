"""Turning a call's argument text into an object: strict first, then careful recovery.

Recovery never invents a call: text cut off mid-object is reported as truncated (json-repair would
happily close it and run the tool with half an argument), and anything that does not end up as a
JSON object is an error with the raw text kept.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*(.*?)```", re.DOTALL)


class ArgumentsError(ValueError):
    """The text could not be recovered into a JSON object; the message says why, for the model."""


def parse_arguments(raw: str) -> dict[str, object]:
    """Parse tool-call arguments; raise `ArgumentsError` rather than ever returning a guess."""
    text = raw.strip()
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _recover(text)
    return _as_object(value, text)


def _as_object(value: Any, text: str) -> dict[str, object]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        # Double-encoded: a JSON string whose content is the object.
        try:
            inner = orjson.loads(value)
        except orjson.JSONDecodeError:
            inner = None
        if isinstance(inner, dict):
            return inner
    raise ArgumentsError(
        f"arguments must be a JSON object, got {type(value).__name__}: {_preview(text)}"
    )


def _recover(text: str) -> dict[str, object]:
    fenced = _FENCE.search(text)
    if fenced:
        try:
            return _as_object(orjson.loads(fenced.group(1).strip()), text)
        except (orjson.JSONDecodeError, ArgumentsError):
            text = fenced.group(1).strip() or text
    start = text.find("{")
    if start < 0:
        raise ArgumentsError(f"arguments are not a JSON object: {_preview(text)}")
    end = balanced_object_end(text, start)
    if end < 0:
        raise ArgumentsError(
            f"arguments are incomplete JSON (cut off before the object closed): {_preview(text)}"
        )
    first = text[start:end]
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        value = _repair(first, text)
    obj = _as_object(value, text)
    _reject_second_object(text, end, obj)
    return obj


def _repair(candidate: str, text: str) -> Any:
    # json-repair fixes single quotes, trailing commas, bare keys and Python literals; it only
    # sees text whose braces balance, so it never completes a truncated object.
    import json_repair

    value = json_repair.loads(candidate)
    if value in ({}, [], "", None) and candidate.strip() not in ("{}",):
        raise ArgumentsError(f"arguments could not be parsed as JSON: {_preview(text)}")
    return value


def _reject_second_object(text: str, end: int, first: dict[str, object]) -> None:
    """Two different objects glued together are two calls merged by a server: never run one."""
    nxt = text.find("{", end)
    if nxt < 0:
        return
    close = balanced_object_end(text, nxt)
    if close < 0:
        return
    try:
        second = orjson.loads(text[nxt:close])
    except orjson.JSONDecodeError:
        return
    if isinstance(second, dict) and second != first:
        raise ArgumentsError(
            "arguments hold several different JSON objects (calls merged by the server?): "
            + _preview(text)
        )


def balanced_object_end(text: str, start: int) -> int:
    """Index just past the `}` closing the object opened at `start`, or -1 if it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def is_complete_object(text: str) -> bool:
    """True when `text` is already one whole JSON object (so a new `{` cannot continue it)."""
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _preview(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"
