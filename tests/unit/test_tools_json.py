"""The upstream request's tools are encoded once per list of specs (`_tools_json`): the same
bytes `chat_tools` encodes to, the cache bounded."""

from __future__ import annotations

import orjson

from toolwire.transcript import ToolSpec
from toolwire.upstream import chat_completions as cc
from toolwire.upstream.lowering import chat_tools

SPECS = [
    ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}}, True),
    ToolSpec("write_file", "", {"type": "object"}, None),
]


def test_the_tools_encode_as_chat_tools_does() -> None:
    for strict in (False, True):
        body = orjson.dumps({"tools": cc._tools_json(list(SPECS), strict)})
        assert body == orjson.dumps({"tools": chat_tools(SPECS, strict=strict)})


def test_the_same_specs_are_encoded_once() -> None:
    cc._TOOLS_JSON.clear()
    first = cc._tools_json(list(SPECS), False)
    assert cc._tools_json(list(SPECS), False) is first
    assert cc._tools_json(list(SPECS), True) is not first  # `strict` passed on or not


def test_the_encoded_tools_are_bounded() -> None:
    cc._TOOLS_JSON.clear()
    for n in range(cc.TOOLS_JSON_SIZE * 3):
        cc._tools_json([ToolSpec(f"tool_{n}")], False)
        assert len(cc._TOOLS_JSON) <= cc.TOOLS_JSON_SIZE
