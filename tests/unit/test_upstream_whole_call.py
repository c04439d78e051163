"""A non-streamed model call's cheap path: a body of stated size read in one call, the turn one
generator deep, and no quota generator around a call without a key (the answers unchanged)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from toolwire.errors import UpstreamTooLargeError
from toolwire.server.gate.quotas import QuotaUpstream
from toolwire.testing import Body, Reply, ScriptedUpstream
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream, _read_bounded


class _Answer:
    """An answer that reads its body in one call (`aread`) or by pieces, and says which."""

    def __init__(self, body: bytes, headers: Mapping[str, str]) -> None:
        self.headers = headers
        self.body = body
        self.reads: list[str] = []

    async def aread(self) -> bytes:
        self.reads.append("whole")
        return self.body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        self.reads.append("pieces")
        for start in range(0, len(self.body), 4):
            yield self.body[start : start + 4]


async def test_a_body_of_stated_size_is_read_in_one_call() -> None:
    answer = _Answer(b"0123456789", {"content-length": "10"})
    assert await _read_bounded(answer, 10) == b"0123456789"  # type: ignore[arg-type]
    assert answer.reads == ["whole"]


async def test_a_body_stated_over_the_bound_is_refused_unread() -> None:
    answer = _Answer(b"0123456789", {"content-length": "10"})
    assert await _read_bounded(answer, 9) is None  # type: ignore[arg-type]
    assert answer.reads == []


@pytest.mark.parametrize(
    "headers",
    [{"content-length": "10", "content-encoding": "gzip"}, {"content-length": "1e3"}, {}],
)
async def test_a_body_of_unknown_size_is_read_within_the_bound(headers: dict[str, str]) -> None:
    answer = _Answer(b"0123456789", headers)
    assert await _read_bounded(answer, 9) is None  # type: ignore[arg-type]
    assert await _read_bounded(_Answer(b"0123456789", headers), 10) == b"0123456789"  # type: ignore[arg-type]
    assert answer.reads == ["pieces"]


async def test_truncating_a_body_stated_over_the_bound_keeps_its_first_bytes() -> None:
    answer = _Answer(b"0123456789", {"content-length": "10"})
    assert await _read_bounded(answer, 6, truncate=True) == b"012345"  # type: ignore[arg-type]


async def test_a_non_streamed_turn_is_one_generator_deep(scripted: ScriptedUpstream) -> None:
    scripted.add(Reply(text="hello"))
    scripted.add(Body("x" * 5000))
    upstream = ChatCompletionsUpstream(scripted.base_url, max_response_bytes=1000, max_retries=0)
    request = TurnRequest(model="m", transcript=[], stream=False)
    try:
        batches = upstream.stream_turn_batches(request)
        assert batches.ag_code.co_name == "_whole_turn"  # type: ignore[attr-defined]
        events = [event async for batch in batches for event in batch]
        assert any(getattr(event, "text", None) == "hello" for event in events)
        with pytest.raises(UpstreamTooLargeError, match="max_upstream_response_bytes"):
            async for _ in upstream.stream_turn_batches(request):
                pass
    finally:
        await upstream.aclose()


class _Inner:
    name = "inner"

    def __init__(self) -> None:
        self.handed: list[Any] = []

    def stream_turn_batches(self, request: TurnRequest) -> Any:
        batches = object()
        self.handed.append(batches)
        return batches


def test_a_call_without_a_key_gets_the_inner_batches_as_they_are() -> None:
    inner = _Inner()
    quota = QuotaUpstream(inner, None)  # type: ignore[arg-type]  # never reserves without a key
    batches = quota.stream_turn_batches(TurnRequest(model="m", transcript=[]))
    assert batches is inner.handed[0]
