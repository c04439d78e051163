"""Turning a call's argument text into an object: strict first, then careful recovery.

Recovery never invents a call: text cut off mid-object is reported as truncated (json-repair would
happily close it and run the tool with half an argument), and anything that does not end up as a
JSON object is an error with the raw text kept.
"""

from __future__ import annotations

import json
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


#: What `balanced_object_end` steps over: a run of brackets together with the text after it up to
#: the next bracket (strings included, whatever brackets they hold), or a quote that no such
#: step could take (a string that never closes). Steps are bracket runs, so even a megabyte of
#: `{` (a model stuck in a loop) or of strings is a handful of steps, each taken in C.
_GAP = r'(?:[^"{}\[\]]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+'
_JSON_STEP = re.compile(rf'([{{\[]++|[}}\]]++){_GAP}|"', re.DOTALL)


def balanced_object_end(text: str, start: int) -> int:
    """Index just past the `}` closing the object opened at `start`, or -1 if it never closes.

    Brackets are counted outside strings (either kind closes either kind, as a repair reads
    them); a string that never closes means the object never does. Long strings and bracket
    runs are stepped over in C; where the steps turn out short (`{}{}{}...`), the rest is
    read character by character, which is then cheaper than a step each."""
    if not text.startswith(("{", "["), start):
        return _balanced_end(text, start, 0)
    depth = 0
    for steps, m in enumerate(_JSON_STEP.finditer(text, start), 1):
        if m.start(1) < 0:
            return -1  # a lone quote: a string that never closes
        run = m.end(1) - m.start(1)
        if text[m.start()] in "{[":
            depth += run
        elif run >= depth:
            return m.start() + depth
        else:
            depth -= run
        if steps % 256 == 0 and m.end() - start < steps * _CHARS_PER_STEP:
            return _balanced_end(text, m.end(), depth)
    return -1


#: Below this many characters per step on average, `balanced_object_end` reads on by character.
_CHARS_PER_STEP = 6


def _balanced_end(text: str, start: int, depth: int) -> int:
    """`balanced_object_end` character by character, from outside any string at `depth`."""
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


_IN_STRING_STOP = re.compile(r'[\x00-\x1f"\\]')
_OUTSIDE = frozenset(' \t\r\n{}[]:,"0123456789-+.eEtruefalsn')
_ESCAPES = frozenset('"\\/bfnrtu')


class SettledArguments:
    """How much of a call's streamed argument text can no longer change.

    A door whose clients build a call's input from the concatenated pieces (Anthropic's
    `input_json_delta`) may send only text that will still be the start of the final arguments.
    The final arguments are the model's own text byte for byte when it was valid JSON
    (`ToolCall.arguments_json`), so clean JSON text is released as it comes, except what a
    repair could still change: a trailing comma (`{"a": 1,}` is repaired), the brace that
    closes the object (a repeated or corrected object may replace it), and everything from the
    first character strict JSON would refuse (a raw newline in a string, single quotes, Python
    literals). Hand-written rather than a partial-JSON parser run on the whole text per piece:
    one pass over each piece keeps a long `Write` call linear.
    """

    __slots__ = ("_depth", "_held", "_in_string", "_stuck", "released")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._stuck = False
        self._held = ""
        self.released = ""

    def feed(self, piece: str) -> str:
        """`piece` appended; returns the text newly released (possibly empty)."""
        if self._stuck:
            return ""
        text = self._held + piece  # held: only commas and whitespace, or a lone backslash
        settled = 0  # text[:settled] is released
        i = 0
        n = len(text)
        while i < n:
            if self._in_string:
                match = _IN_STRING_STOP.search(text, i)
                if match is None:
                    i = n
                    settled = n
                    break
                i = match.start()
                ch = text[i]
                if ch == "\\":
                    if i + 1 >= n:
                        settled = i  # the escape's second half is still to come
                        break
                    if text[i + 1] not in _ESCAPES:
                        self._stuck = True
                        break
                    i += 2
                    settled = i
                    continue
                if ch == '"':
                    self._in_string = False
                    i += 1
                    settled = i
                    continue
                self._stuck = True  # a raw control character: a repair will re-encode it
                break
            ch = text[i]
            if ch not in _OUTSIDE or (self._depth == 0 and ch not in " \t\r\n{"):
                self._stuck = True
                break
            if ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
            elif ch in "}]":
                if text[settled:i].strip().startswith(","):
                    self._stuck = True  # a trailing comma: repaired away
                    break
                self._depth -= 1
                if self._depth == 0:
                    self._stuck = True  # the closing brace waits for the final text
                    break
            i += 1
            if ch != "," and not ch.isspace():
                settled = i  # a comma and whitespace wait for what follows them
        released = text[:settled]
        self._held = "" if self._stuck else text[settled:]
        self.released += released
        return released


_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def light_repair(raw: str) -> str:
    """`raw` with only the repairs that keep the rest of its text as it is: raw control
    characters inside strings escaped, trailing commas dropped. What was released of a call's
    arguments (`SettledArguments`) stays the start of this text where a full re-encoding would
    change its spacing."""
    out: list[str] = []
    in_string = False
    escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            elif ch < " ":
                out.append(_CONTROL.get(ch, f"\\u{ord(ch):04x}"))
                continue
        elif ch == '"':
            in_string = True
        out.append(ch)
    text = "".join(out)
    return _TRAILING_COMMA.sub(r"\1", text) if not in_string else text


def continuation(released: str, final: str, raw: str, arguments: dict[str, Any]) -> str | None:
    """The text that completes `released` into arguments equal to `arguments`: the rest of
    `final` (the call's JSON text) when `released` begins it, else of `raw` lightly repaired;
    None when neither does (the released text can no longer become the call's input)."""
    for text in (final, light_repair(raw)):
        if not text.startswith(released):
            continue
        if _parses_to(text, arguments):
            return text[len(released) :]
    return None


def _parses_to(text: str, arguments: dict[str, Any]) -> bool:
    try:
        if orjson.loads(text) == arguments:
            return True
    except orjson.JSONDecodeError:
        pass
    # orjson reads an integer beyond 64 bits as a float (JSON allows any integer); the
    # standard library reads it exactly
    try:
        return bool(json.loads(text) == arguments)
    except ValueError:
        return False
