"""A stored non-streaming response is serialized once: the recorder writes `body_json` and the
JSON answer sends those same bytes (`ResponseDraft.answer`), unless the final object is not the
one that was stored."""

from __future__ import annotations

from pathlib import Path

import orjson
import sqlalchemy as sa

from toolwire.errors import StopReason
from toolwire.loop.events import LoopFinished, OutputTextDelta
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.response_object import ResponseHeader
from toolwire.store.database import Store
from toolwire.upstream.events import Usage


def _finished(draft: ResponseDraft) -> None:
    draft(OutputTextDelta("hello"))
    draft(LoopFinished(StopReason.ANSWERED, None, "hello", Usage()))


def test_the_answer_is_the_stored_json_of_the_final_object() -> None:
    draft = ResponseDraft(ResponseHeader("resp_1", 0, "m", {}))
    _finished(draft)
    assert draft.final is not None
    draft.stored(draft.final, b'{"stored":true}')
    answer = draft.answer()
    assert isinstance(answer, orjson.Fragment)
    assert orjson.dumps(answer) == b'{"stored":true}'


def test_without_a_write_of_the_final_object_the_answer_is_the_object() -> None:
    draft = ResponseDraft(ResponseHeader("resp_1", 0, "m", {}))
    _finished(draft)
    assert draft.answer() is draft.final  # nothing stored (`store: false`)
    draft.stored(draft.body("in_progress"), b"{}")  # another object's write
    assert draft.answer() is draft.final


async def test_the_store_writes_the_bytes_it_is_given(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 't.db'}")
    try:
        body = {"id": "resp_a", "created_at": 1, "status": "completed", "output": []}
        body_json = orjson.dumps(body)
        await store.save_response(
            body,  # type: ignore[arg-type]
            input_items=[],
            conversation_id=None,
            fresh=True,
            body_json=body_json,
        )
        raw = await store.read(
            lambda c: c.execute(sa.text("SELECT body, stored_bytes FROM responses")).one()
        )
        assert raw.body == body_json.decode()
        assert raw.stored_bytes == len(body_json) + len(b"[]") + len(b"null")
        assert await store.get_response("resp_a") == body
    finally:
        await store.close()
