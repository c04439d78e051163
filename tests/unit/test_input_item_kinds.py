"""Every item type OpenAI's `InputItem` schema defines is either lowered into the transcript,
kept in history, resolved, or refused with a 400: none is accepted and then silently lost."""

from __future__ import annotations

from typing import Any

import pytest

from tests.openai_schemas import document
from toolwire.errors import InvalidRequestError
from toolwire.loop import items
from toolwire.transcript import AssistantMessage, ToolMessage


def _types_of(schemas: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """The `type` values a schema (or any branch of its unions) allows."""
    if "$ref" in schema:
        return _types_of(schemas, schemas[schema["$ref"].rsplit("/", 1)[1]])
    found: set[str] = set()
    for key in ("oneOf", "anyOf"):
        for branch in schema.get(key, []):
            found |= _types_of(schemas, branch)
    kind = schema.get("properties", {}).get("type")
    if kind is not None:
        for variant in [kind, *kind.get("anyOf", [])]:
            found |= set(variant.get("enum", []))
            if "const" in variant:
                found.add(variant["const"])
    return found


def input_item_types() -> list[str]:
    schemas = document()["components"]["schemas"]
    return sorted(_types_of(schemas, schemas["InputItem"]))


def test_the_schema_walk_finds_openais_item_types() -> None:
    found = input_item_types()
    assert {"message", "function_call_output", "item_reference", "reasoning"} <= set(found)
    assert len(found) >= 30


@pytest.mark.parametrize("kind", input_item_types())
def test_every_input_item_type_has_a_fate(kind: str) -> None:
    fate = items.disposition(kind)
    if fate is None:
        with pytest.raises(InvalidRequestError) as refused:
            items.normalize_input([{"type": kind}])
        assert refused.value.param == "input[0].type"
    else:
        assert fate in ("lowered", "kept", "resolved")


def test_a_lowered_kind_reaches_the_transcript_and_an_unknown_one_is_never_dropped() -> None:
    call = {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}}
    output = {"type": "shell_call_output", "call_id": "c1", "output": []}
    transcript = items.items_to_transcript([call, output])
    assert isinstance(transcript[0], AssistantMessage) and transcript[0].tool_calls[0].id == "c1"
    assert isinstance(transcript[1], ToolMessage)
    with pytest.raises(ValueError, match="no lowering"):
        items.items_to_transcript([{"type": "some_future_item"}])
