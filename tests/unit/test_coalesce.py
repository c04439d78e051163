"""`upstream/events.py`'s `coalesce`: the adjacent pieces of one network read as one delta."""

from __future__ import annotations

from toolwire.upstream.events import (
    FirstToken,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    coalesce,
)


def test_adjacent_pieces_of_one_kind_are_joined_in_order() -> None:
    batch: list[ModelEvent] = [
        FirstToken(),
        ReasoningDelta("th"),
        ReasoningDelta("ink"),
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta("!"),
        ToolCallStarted(0, "call_a", "f"),
        ToolCallArgumentsDelta(0, '{"a"'),
        ToolCallArgumentsDelta(0, ": 1}"),
        ToolCallArgumentsDelta(1, "{}"),
        ToolCallArgumentsDelta(0, " "),
        TextDelta("x"),
    ]
    assert coalesce(batch) == [
        FirstToken(),
        ReasoningDelta("think"),
        TextDelta("Hello!"),
        ToolCallStarted(0, "call_a", "f"),
        ToolCallArgumentsDelta(0, '{"a": 1}'),
        ToolCallArgumentsDelta(1, "{}"),  # another call's piece ends the run
        ToolCallArgumentsDelta(0, " "),
        TextDelta("x"),
    ]


def test_nothing_to_join_leaves_the_events_as_they_are() -> None:
    text = TextDelta("a")
    batch: list[ModelEvent] = [text, ReasoningDelta("b"), TextDelta("c")]
    joined = coalesce(batch)
    assert joined == batch and joined[0] is text
    assert coalesce([]) == []
