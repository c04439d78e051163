"""Argument recovery: strict, then careful; never a silent `{}` and never a truncated call run."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.upstream.arguments import (
    ArgumentsError,
    SettledArguments,
    continuation,
    parse_arguments,
)
from toolwire.upstream.names import ToolNameMatcher, clean_tool_name


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"city": "Paris"}', {"city": "Paris"}),
        ("  ", {}),
        ('"{\\"city\\": \\"Paris\\"}"', {"city": "Paris"}),  # double-encoded
        ('```json\n{"city": "Paris"}\n```', {"city": "Paris"}),
        ('Sure: {"city": "Paris"} <|call|>', {"city": "Paris"}),
        ('{"city": "Paris"}}}', {"city": "Paris"}),  # stray closers
        ("{'city': 'Paris', 'days': 3,}", {"city": "Paris", "days": 3}),  # repaired
        ('{"a": 1}{"a": 1}', {"a": 1}),  # the same object repeated
        ('{"re": "\\\\.ts$"}', {"re": "\\.ts$"}),
    ],
)
def test_recovers_what_can_be_recovered(raw: str, expected: dict[str, object]) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"city": "Par', "incomplete"),
        ('{"path": "/etc', "incomplete"),
        ("[1, 2]", "json object"),
        ("Paris", "not a json object"),
        ('{"a": 1}{"b": 2}', "several"),
        ("{???}", "could not be parsed"),
    ],
)
def test_refuses_what_cannot(raw: str, reason: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments(raw)
    assert reason in str(info.value).lower()


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("get_weather:", "get_weather"),
        ("  get_weather  ", "get_weather"),
        ('"get_weather"', "get_weather"),
        ("functions.get_weather", "get_weather"),
        ("get_weather();", "get_weather"),
    ],
)
def test_names_are_cleaned(raw: str, clean: str) -> None:
    assert clean_tool_name(raw) == clean


def test_names_match_declared_tools() -> None:
    matcher = ToolNameMatcher(["get_weather", "Terminal"])
    assert matcher.match("get_weather:") == "get_weather"
    assert matcher.match("terminal") == "Terminal"
    assert matcher.match("search") is None
    assert ToolNameMatcher(None).match("anything.") == "anything"


def test_partial_arguments_while_streaming() -> None:
    from toolwire.upstream.assembler import StreamAssembler

    assembler = StreamAssembler(["get_weather"])
    head = {
        "index": 0,
        "id": "c1",
        "function": {"name": "get_weather", "arguments": '{"city": "Par'},
    }
    assembler.feed({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
    assert assembler.partial_arguments(0) == {"city": "Par"}
    more = {"index": 0, "function": {"arguments": 'is", "days": 3'}}
    assembler.feed({"choices": [{"index": 0, "delta": {"tool_calls": [more]}}]})
    assert assembler.partial_arguments(0) == {"city": "Paris", "days": 3}
    assert assembler.partial_arguments(5) is None


# -- what a streamed call may release (SettledArguments) -------------------------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@given(
    st.dictionaries(st.text(max_size=6), _JSON_VALUES, max_size=4),
    st.sampled_from([None, 2]),
    st.lists(st.integers(min_value=0, max_value=200), max_size=6),
)
def test_released_text_always_begins_the_final_arguments(
    value: dict[str, Any], indent: int | None, cuts: list[int]
) -> None:
    raw = json.dumps(value, indent=indent, ensure_ascii=False)
    tracker = SettledArguments()
    bounds = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    for start, end in itertools.pairwise(bounds):
        tracker.feed(raw[start:end])
        assert raw.startswith(tracker.released)
    assert not raw.endswith("}") or len(tracker.released) < len(raw)  # the brace waits
    rest = continuation(tracker.released, raw, raw, value)
    assert rest is not None and json.loads(tracker.released + rest) == value


@pytest.mark.parametrize(
    ("pieces", "released", "repaired"),
    [
        (['{"a": 1,', " }"], '{"a": 1', {"a": 1}),  # a trailing comma never goes out
        (['{"a": "x', "\ny", '"}'], '{"a": "x', {"a": "x\ny"}),  # nor a raw newline
        (['{"a": "x\\', 'ny"}'], '{"a": "x\\ny"', {"a": "x\ny"}),  # an escape split in two
        (["{'a': 1}"], "{", {"a": 1}),  # single quotes: only the brace before them
    ],
)
def test_repairs_keep_what_was_released(
    pieces: list[str], released: str, repaired: dict[str, Any]
) -> None:
    tracker = SettledArguments()
    for piece in pieces:
        tracker.feed(piece)
    assert tracker.released == released
    raw = "".join(pieces)
    final = orjson.dumps(parse_arguments(raw)).decode()
    rest = continuation(released, final, raw, parse_arguments(raw))
    assert rest is not None and json.loads(released + rest) == repaired


def test_released_text_of_an_integer_beyond_64_bits_is_continued() -> None:
    """JSON allows any integer; orjson parses only 64-bit ones (found by the property above)."""
    value = {"": -9223372036854775809}
    raw = json.dumps(value)
    tracker = SettledArguments()
    tracker.feed(raw)
    rest = continuation(tracker.released, raw, raw, value)
    assert rest is not None and json.loads(tracker.released + rest) == value
