"""The Responses door's echo of a request (`prepare/preparer.py` `_echo`), read field by field:
the same JSON, in the same order, as `model_dump` of those fields gave, and no object shared
with the request."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.server.responses.prepare import preparer
from toolwire.server.responses.prepare.request import CreateResponse, parse_create

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_VALUES = {
    "instructions": st.text(max_size=5) | st.none(),
    "tool_choice": st.sampled_from(["auto", "none", "required"])
    | st.fixed_dictionaries({"type": st.just("function"), "name": st.text(max_size=4)}),
    "parallel_tool_calls": st.booleans() | st.none(),
    "max_output_tokens": st.integers(16, 1000) | st.none(),
    "max_tool_calls": st.integers(0, 5) | st.none(),
    "metadata": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3) | st.none(),
    "store": st.booleans() | st.none(),
    "previous_response_id": st.none(),
    "reasoning": _JSON,
    "user": _JSON,
    "safety_identifier": _JSON,
    "prompt_cache_key": _JSON,
    "prompt_cache_retention": _JSON,
    "prompt_cache_options": _JSON,
    "prompt": _JSON,
    "service_tier": _JSON,
    "moderation": _JSON,
    "temperature": st.floats(0, 2) | st.none(),
    "truncation": st.sampled_from(["auto", "disabled", "x"]) | st.none(),
    "top_logprobs": st.integers(0, 20) | st.none(),
}
_NOT_ECHOED_AS_GIVEN = set(CreateResponse.model_fields) - set(preparer._ECHOED)


def _dumped(request: CreateResponse) -> dict[str, Any]:
    """What the echo was made of before: the model's dump of the fields echoed as given."""
    return request.model_dump(exclude=_NOT_ECHOED_AS_GIVEN, by_alias=True)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional=_VALUES))
def test_the_echo_is_the_dump_of_its_fields_in_their_order(extra: dict[str, Any]) -> None:
    request = parse_create({"model": "m", "input": "hi", **extra})
    echo = preparer._echo(request, [])
    dumped = _dumped(request)
    assert list(echo)[: len(dumped)] == list(dumped)
    assert orjson.dumps({name: echo[name] for name in dumped}) == orjson.dumps(dumped)


def test_the_echo_shares_no_object_with_the_request() -> None:
    request = parse_create(
        {
            "model": "m",
            "tool_choice": {"type": "function", "name": "f"},
            "metadata": {"a": "b"},
            "reasoning": {"effort": "low", "more": {"x": [1]}},
            "prompt": {"id": "p"},
            "prompt_cache_options": {"k": 1},
            "moderation": {"m": 1},
        }
    )
    echo = preparer._echo(request, [])
    for name in preparer._NESTED:
        assert echo[name] == getattr(request, name)
        assert echo[name] is not getattr(request, name)
    assert echo["reasoning"]["more"] is not request.reasoning["more"]  # type: ignore[index]


def test_every_echoed_field_that_may_hold_an_object_is_copied() -> None:
    may_hold_object = {
        name
        for name in preparer._ECHOED
        if "dict" in str(CreateResponse.model_fields[name].annotation)
    }
    assert may_hold_object == set(preparer._NESTED)
