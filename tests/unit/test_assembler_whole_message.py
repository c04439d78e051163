"""A whole (non-streamed) message taken on the assembler's fast path (`_plain_message`) gives
exactly the events and calls the general path (`_message`) gives, whatever its shape."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.upstream.assembler import StreamAssembler, usage_from
from toolwire.upstream.events import Usage

DECLARED = ["get_weather", "write_file", "Search", "odd name."]

names = st.sampled_from(
    [*DECLARED, "functions.get_weather", " get_weather", "GET_WEATHER", "x", ""]
)
ids = st.one_of(st.sampled_from(["call_1", "call_2", "", None]), st.integers(0, 2))
indices = st.one_of(st.none(), st.integers(0, 2), st.booleans(), st.just("0"))
argument_texts = st.sampled_from(['{"city": "Paris"}', "  ", "", '{"a": 1', "[1]", "{}", None])
entries = st.fixed_dictionaries(
    {"function": st.fixed_dictionaries({"name": names, "arguments": argument_texts})},
    optional={"id": ids, "index": indices, "type": st.just("function")},
)
messages = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={
        "content": st.one_of(
            st.none(), st.text(max_size=5), st.just([{"type": "text", "text": "a"}])
        ),
        "tool_calls": st.one_of(st.none(), st.lists(entries, max_size=3), st.just("x")),
        "reasoning_content": st.sampled_from(["", "why", None]),
        "function_call": st.just({"name": "get_weather", "arguments": "{}"}),
    },
)


def _run(message: dict[str, Any], general: bool) -> list[Any]:
    assembler = StreamAssembler(DECLARED)
    with mock.patch("toolwire.upstream.assembler._new_call_id", return_value="call_made"):
        if general:
            with mock.patch.object(StreamAssembler, "_plain_message", return_value=False):
                events = assembler.feed_message(message, "tool_calls")
        else:
            events = assembler.feed_message(message, "tool_calls")
        return [*events, *assembler.finish()]


@settings(max_examples=400, deadline=None)
@given(messages)
def test_the_fast_path_is_the_general_path(message: dict[str, Any]) -> None:
    assert _run(message, general=False) == _run(message, general=True)


def test_the_common_message_takes_the_fast_path() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    with mock.patch.object(StreamAssembler, "_message", side_effect=AssertionError("general")):
        events = StreamAssembler(DECLARED).feed_message(message, "tool_calls")
    assert [type(e).__name__ for e in events] == ["ToolCallStarted", "ToolCallArgumentsDelta"]


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "prompt_tokens",
                "input_tokens",
                "completion_tokens",
                "output_tokens",
                "completion_tokens_details",
                "output_tokens_details",
                "prompt_tokens_details",
                "input_tokens_details",
            ]
        ),
        st.one_of(
            st.integers(0, 9),
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "reasoning_tokens": st.integers(0, 9),
                    "cached_tokens": st.integers(0, 9),
                },
            ),
        ),
    )
)
def test_usage_reads_as_it_did(usage: dict[str, Any]) -> None:
    def before(usage: dict[str, Any]) -> Usage:
        details = usage.get("completion_tokens_details") or usage.get("output_tokens_details") or {}
        prompt = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        return Usage(
            input_tokens=int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or usage.get("output_tokens") or 0),
            reasoning_tokens=int((details or {}).get("reasoning_tokens") or 0),
            cached_tokens=int((prompt or {}).get("cached_tokens") or 0),
        )

    try:
        expected: Any = before(usage)
    except (AttributeError, TypeError) as exc:
        expected = type(exc)
    try:
        got: Any = usage_from(usage)
    except (AttributeError, TypeError) as exc:
        got = type(exc)
    assert got == expected
