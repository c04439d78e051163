"""Argument recovery: strict, then careful; never a silent `{}` and never a truncated call run."""

from __future__ import annotations

import pytest

from toolwire.upstream.arguments import ArgumentsError, parse_arguments
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
