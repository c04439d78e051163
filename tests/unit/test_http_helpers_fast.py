"""`read_body`: the request body read without Starlette's async generator, leaving the request
as `Request.body()` would; `ORJSONResponse`: a plain answer's headers made without Starlette's
checks, the same."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from starlette.requests import ClientDisconnect, Request

from toolwire.server.http.helpers import ORJSONResponse, read_body


def _request(*messages: dict[str, Any]) -> tuple[Request, list[dict[str, Any]]]:
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    return Request(scope, receive), pending


def test_one_message_is_the_body_and_is_kept() -> None:
    request, pending = _request({"type": "http.request", "body": b'{"a": 1}'})

    async def read() -> tuple[bytes, bytes, bytes]:
        return await read_body(request), await read_body(request), await request.body()

    assert asyncio.run(read()) == (b'{"a": 1}',) * 3
    assert not pending


def test_a_body_in_several_messages_is_joined() -> None:
    request, _ = _request(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"cd"},
    )
    assert asyncio.run(read_body(request)) == b"abcd"


def test_a_client_that_leaves_mid_body_raises_client_disconnect() -> None:
    request, _ = _request(
        {"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"}
    )
    with pytest.raises(ClientDisconnect):
        asyncio.run(read_body(request))
    assert request._is_disconnected


def test_a_consumed_stream_is_refused_as_starlette_refuses_it() -> None:
    request, _ = _request({"type": "http.request", "body": b"ab"})

    async def stream_then_read() -> bytes:
        async for _ in request.stream():
            pass
        return await read_body(request)

    with pytest.raises(RuntimeError, match="Stream consumed"):
        asyncio.run(stream_then_read())


def test_a_plain_json_answer_has_the_headers_starlette_would_give_it() -> None:
    content = {"id": "chatcmpl-1", "choices": [{"message": {"content": "héllo"}}]}
    fast = ORJSONResponse(content)
    slow = ORJSONResponse(content, headers={})  # Starlette's own `init_headers`
    assert fast.body == slow.body == orjson.dumps(content)
    assert fast.raw_headers == slow.raw_headers
    assert (fast.status_code, fast.background, fast.media_type) == (200, None, "application/json")
    assert ORJSONResponse(content, status_code=201).status_code == 201
