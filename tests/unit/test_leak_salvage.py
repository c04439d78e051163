"""Salvage: every positive in tests/data/leaks yields exactly its `calls`, or refuses when they
are null; refusals are always `SalvageError`, and nothing is ever evaluated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.leaks import (
    LeakMatch,
    SalvagedCall,
    SalvageError,
    detect_leak,
    detect_leak_in_reasoning,
    salvage_calls,
)
from toolwire.leaks.salvage import xml_value

DATA = Path(__file__).parent.parent / "data" / "leaks"
with (DATA / "positives.jsonl").open(encoding="utf-8") as _f:
    POSITIVES = [json.loads(line) for line in _f if line.strip()]


def _salvage(line: dict[str, Any]) -> list[dict[str, Any]]:
    if "reasoning" in line:
        source = line["reasoning"]
        match = detect_leak_in_reasoning(source, line["text"])
    else:
        source = line["text"]
        match = detect_leak(source)
    assert match is not None
    return [{"name": c.name, "arguments": c.arguments} for c in salvage_calls(source, match)]


@pytest.mark.parametrize(
    "line", POSITIVES, ids=[f"{i + 1}-{p['family']}" for i, p in enumerate(POSITIVES)]
)
def test_salvage_matches_the_corpus(line: dict[str, Any]) -> None:
    if line["calls"] is None:
        with pytest.raises(SalvageError):
            _salvage(line)
    else:
        assert _salvage(line) == line["calls"]


def test_corpus_has_refusals_and_salvageable_lines() -> None:
    assert sum(line["calls"] is None for line in POSITIVES) >= 5
    assert sum(line["calls"] is not None for line in POSITIVES) >= 70


@pytest.mark.parametrize(
    ("raw", "string", "expected"),
    [
        ("\nls -la\n", None, "ls -la"),
        ("  indented\n", None, "  indented"),
        ("42", None, 42),
        ("\n-3.5\n", None, -3.5),
        ("true", None, True),
        ("false", None, False),
        ("null", None, "null"),
        ("007", None, "007"),
        ("+1", None, "+1"),
        ("12345678901234567890", None, "12345678901234567890"),
        ("1e400", None, "1e400"),
        ('"quoted"', None, '"quoted"'),
        ('{"a": [1, 2]}', None, {"a": [1, 2]}),
        ("[1, 2]", None, [1, 2]),
        ("{not json}", None, "{not json}"),
        ("42", True, "42"),
        ('{"a": 1}', True, '{"a": 1}'),
        ("42", False, 42),
        ('"x"', False, "x"),
        ("not json", False, "not json"),
    ],
)
def test_xml_values_are_typed_only_when_unambiguous(
    raw: str, string: bool | None, expected: Any
) -> None:
    assert xml_value(raw, string) == expected
    assert type(xml_value(raw, string)) is type(expected)


def test_xml_values_typed_by_their_look_keep_their_text() -> None:
    # the loop puts the text back where the tool's schema wants a string (loop/fitting.py)
    text = (
        "<tool_call>\n<function=write>\n<parameter=path>\na.json\n</parameter>\n"
        '<parameter=content>\n{"a": 1}\n</parameter>\n<parameter=mode>\n0644\n</parameter>\n'
        "<parameter=lines>\n 12\n</parameter>\n</function>\n</tool_call>"
    )
    match = detect_leak(text)
    assert match is not None and match.family == "qwen3_coder"
    (call,) = salvage_calls(text, match)
    assert call.arguments == {"path": "a.json", "content": {"a": 1}, "mode": "0644", "lines": 12}
    assert call.texts == {"content": '{"a": 1}', "lines": " 12"}  # only the typed ones


def test_pythonic_values_are_never_evaluated() -> None:
    payload = '[run(cmd=__import__("os").system("echo pwned"))]'
    assert detect_leak(payload) is None
    text = "<|python_start|>" + payload + "<|python_end|>"
    match = detect_leak(text)
    assert match is not None and match.family == "pythonic"
    with pytest.raises(SalvageError, match="not a literal"):
        salvage_calls(text, match)


def test_cut_off_json_is_refused_not_repaired() -> None:
    text = '<tool_call>\n{"name": "delete_files", "arguments": {"paths": ["/tmp/a", "/'
    match = detect_leak(text)
    assert match is not None
    with pytest.raises(SalvageError, match="cut off"):
        salvage_calls(text, match)


def test_balanced_but_sloppy_json_is_repaired() -> None:
    text = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Oslo',}}</tool_call>"
    match = detect_leak(text)
    assert match is not None
    assert salvage_calls(text, match) == [SalvagedCall("get_weather", {"city": "Oslo"})]


def test_a_match_that_does_not_fit_the_text_is_refused() -> None:
    with pytest.raises(SalvageError):
        salvage_calls("short", LeakMatch("hermes", 3, 99, ""))
    with pytest.raises(SalvageError):
        salvage_calls("plain prose here", LeakMatch("hermes", 0, 16, "plain prose here"))


def test_salvage_error_is_a_value_error() -> None:
    assert issubclass(SalvageError, ValueError)


NAMES = st.text(alphabet=st.sampled_from(list(" \t\n._-:;,()\"'abcXYZ09")), max_size=12)


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_never_returns_a_call_without_a_name(name: str) -> None:
    body = json.dumps({"name": name, "arguments": {"k": 1}})
    text = f"Calling.\n<tool_call>\n{body}\n</tool_call>"
    match = detect_leak(text)
    if match is None:
        return
    try:
        calls = salvage_calls(text, match)
    except SalvageError:
        return
    assert all(call.name.strip() for call in calls)
