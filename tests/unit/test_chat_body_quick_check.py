"""The chat door's quick check of a body (`server/chat/schemas.py` `_plainly_valid`): it may
only accept what `ChatCompletionRequest` accepts, so every verdict and every error stays the
model's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from toolwire.server.chat import schemas
from toolwire.server.chat.schemas import ChatCompletionRequest, check_chat_body

#: Per field: valid values and the near misses a lax check would let through (a float where an
#: integer is due, a bool where a number is, the bounds and just past them, NaN).
TRICKY = [
    None,
    True,
    False,
    0,
    1,
    2,
    -1,
    3,
    10**9,
    0.0,
    0.5,
    1.0,
    2.0,
    2.5,
    -0.1,
    float("nan"),
    float("inf"),
    "",
    "auto",
    "1",
    [],
    [{}],
    [1],
    {},
    {"type": "text"},
]
FIELD = {
    "model": ["m", None, 1, ["m"]],
    "tools": [None, [], [{"type": "function"}], [1], "x", {}],
    "functions": [None, [], [{"name": "f"}], [None]],
    "tool_choice": [None, "auto", {"type": "function"}, 1, [], True],
    "function_call": [None, "none", {"name": "f"}, 0, []],
    "parallel_tool_calls": [None, True, False, 0, 1, "true"],
    "stream": [None, True, False, 0, 1, "true"],
    "stream_options": [
        None,
        {},
        {"include_usage": True},
        {"include_usage": 1},
        {"include_usage": None},
        {"include_obfuscation": False},
        [],
        "x",
    ],
    "temperature": [None, 0, 1, 2, 0.0, 0.7, 2.0, 2.0001, -0.0, -1, True, "1", float("nan")],
    "top_p": [None, 0, 1, 0.5, 1.0, 1.5, True, float("inf")],
    "max_tokens": [None, 1, 100, 0, -5, 1.0, 100.0, True, "5", 10**12],
    "max_completion_tokens": [None, 1, 2, 0, 1.5, False, 10**12],
    "response_format": [None, {}, {"type": "json_object"}, [], "json"],
    "n": [None, 1, 2, 0, 1.0, True],
}
CONTENT = st.sampled_from(
    ["hi", None, [], [{"type": "text", "text": "x"}], [1], [None], 1, {}, True]
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "", 1, None])},
        optional={"content": CONTENT, "name": st.sampled_from(["n", 1])},
    ),
    st.sampled_from(TRICKY),
)
BODY = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(MESSAGE, min_size=1, max_size=3), st.sampled_from(TRICKY))},
    optional={
        **{name: st.sampled_from(values) for name, values in FIELD.items()},
        "extra_field": st.sampled_from(TRICKY),
    },
)


def model_accepts(body: dict[str, Any]) -> bool:
    try:
        ChatCompletionRequest.model_validate(body)
    except ValidationError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(BODY)
@example({"messages": [{"role": "user"}], "stream_options": {"include_usage": 1}})
@example({"messages": [{"role": "user"}], "n": True, "max_tokens": 1.0})
def test_the_quick_check_accepts_only_what_the_model_accepts(body: dict[str, Any]) -> None:
    if schemas._plainly_valid(body):
        assert model_accepts(body), body


def test_the_generated_bodies_hold_both_verdicts() -> None:
    """The property above is only as good as its examples: many pass the quick check, many
    are refused."""
    seen = {"quick": 0, "model only": 0, "invalid": 0}

    @settings(max_examples=1500, deadline=None, database=None)
    @given(BODY)
    def count(body: dict[str, Any]) -> None:
        if schemas._plainly_valid(body):
            seen["quick"] += 1
        elif model_accepts(body):
            seen["model only"] += 1
        else:
            seen["invalid"] += 1

    count()
    assert seen["quick"] >= 50 and seen["invalid"] >= 50, seen


def test_every_field_of_the_model_has_a_quick_check() -> None:
    """A field added to the model without one would pass the quick check unchecked."""
    assert set(schemas._PLAIN_CHECKS) == set(ChatCompletionRequest.model_fields)


def test_a_plain_body_is_not_built_into_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model was built")

    monkeypatch.setattr(ChatCompletionRequest, "model_validate", refuse)
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "auto",
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.7,
        "max_tokens": 100,
        "seed": 3,
    }
    assert check_chat_body(body) is body
