"""The draft finds an event's handler by its type (`server/responses/draft.py`): a subclass of
an event it handles is handled as that event, and an event it does not handle changes nothing,
as the `isinstance` chain it replaced did."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.loop.events import OutputTextDelta, StepKind, StepReached
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.response_object import ResponseHeader


@dataclass(slots=True)
class _LouderText(OutputTextDelta):
    """A subclass no handler names."""


def test_a_subclass_of_a_handled_event_is_handled_as_its_base() -> None:
    draft = ResponseDraft(ResponseHeader("resp_1", 0, "m", {}))
    draft(_LouderText("hello"))
    draft(_LouderText(" world"))
    draft.close_open_items()
    assert [part["text"] for part in draft.output[0]["content"]] == ["hello world"]


def test_an_event_the_draft_does_not_handle_changes_nothing() -> None:
    draft = ResponseDraft(ResponseHeader("resp_1", 0, "m", {}))
    draft(StepReached(next(iter(StepKind))))
    draft(StepReached(next(iter(StepKind))))
    assert draft.output == [] and draft.final is None
