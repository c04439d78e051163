"""The chat door reads a tool list it has seen before once (`server/chat/proxy.py`), and a
schema object seen before is not hashed again (`tools/schema_check.py`): both bounded."""

from __future__ import annotations

import copy

import pytest

from toolwire.errors import InvalidRequestError
from toolwire.server.chat import proxy
from toolwire.tools import schema_check

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": True,
        },
    }
]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    proxy._KNOWN_TOOLS.clear()
    proxy._known_bytes = 0
    schema_check.cache_clear()


def test_a_tool_list_read_before_gives_the_same_specs() -> None:
    first = proxy._tools(copy.deepcopy(TOOLS), None)
    second = proxy._tools(copy.deepcopy(TOOLS), None)
    assert first == second
    assert first[0] is second[0]  # shared, not read again
    assert first is not second  # each request its own list


def test_a_changed_tool_list_is_read_anew() -> None:
    changed = copy.deepcopy(TOOLS)
    changed[0]["function"]["description"] = "Other."
    assert proxy._tools(TOOLS, None)[0].description == "Weather."
    assert proxy._tools(changed, None)[0].description == "Other."


def test_an_invalid_tool_list_is_refused_every_time() -> None:
    bad = [{"type": "function", "function": {"name": ""}}]
    for _ in range(2):
        with pytest.raises(InvalidRequestError):
            proxy._tools(bad, None)
    assert not proxy._KNOWN_TOOLS


def test_known_tool_lists_are_bounded() -> None:
    for n in range(proxy.KNOWN_TOOLS_ENTRIES * 3):
        tools = copy.deepcopy(TOOLS)
        tools[0]["function"]["name"] = f"tool_{n}"
        proxy._tools(tools, None)
        assert len(proxy._KNOWN_TOOLS) <= proxy.KNOWN_TOOLS_ENTRIES
    huge = copy.deepcopy(TOOLS)
    huge[0]["function"]["description"] = "x" * proxy.KNOWN_TOOLS_BYTES
    proxy._tools(huge, None)
    assert proxy._known_bytes <= proxy.KNOWN_TOOLS_BYTES
    assert all(len(key) <= proxy.KNOWN_TOOLS_BYTES for key in proxy._KNOWN_TOOLS)


def test_legacy_functions_are_read_as_before() -> None:
    specs = proxy._tools(None, [{"name": "f", "parameters": {"type": "object"}}])
    assert [s.name for s in specs] == ["f"]
    assert not proxy._KNOWN_TOOLS


def test_a_schema_object_seen_before_is_not_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    compiled = schema_check.checked_schema(schema)
    assert compiled is not None
    monkeypatch.setattr(schema_check, "_checked", lambda _: pytest.fail("hashed again"))
    assert schema_check.checked_schema(schema) is compiled


def test_schema_identities_are_bounded() -> None:
    schemas = [{"type": "object", "title": str(n)} for n in range(schema_check.IDENTITY_SIZE * 2)]
    for schema in schemas:
        schema_check.checked_schema(schema)
        assert len(schema_check._by_identity) <= schema_check.IDENTITY_SIZE
