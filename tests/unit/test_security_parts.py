"""The security pieces on their own: the SSE size limit, URL redaction, loopback names, key
matching, ownership in the store (and the column added to an older database), the upstream's
bounded non-streamed read, the middlewares on WebSocket scopes."""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolwire.errors import ConfigError, UpstreamTooLargeError
from toolwire.server.gate.auth import AuthMiddleware, KeyRing, presented_key
from toolwire.server.gate.guards import GuardMiddleware, is_loopback_host
from toolwire.server.gate.limits import BodyLimitMiddleware, Limits, check_depth, might_be_deep
from toolwire.server.gate.security import is_loopback_bind, startup_security
from toolwire.server.responses.prepare import approval_tools
from toolwire.server.responses.prepare.mcp_tools import redacted
from toolwire.store.database import Store
from toolwire.store.keys import ActiveKey, hash_key
from toolwire.store.sealed_tools import keep_in
from toolwire.testing import Body, ScriptedUpstream
from toolwire.tools.mcp.connection import McpConnectionError
from toolwire.tools.mcp.pool import McpPool, McpServerSpec
from toolwire.tools.mcp.redact import redact_url, redact_urls
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.wire.sse import SSEDecoder, SSEEventTooLarge


def test_sse_decoder_bounds_lines_and_events() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    assert [e.data for e in decoder.feed(b"data: " + b"a" * 90 + b"\n\n")] == ["a" * 90]
    decoder.feed(b"data: " + b"b" * 60)
    with pytest.raises(SSEEventTooLarge):
        decoder.feed(b"b" * 60)  # a line that never ends
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(SSEEventTooLarge):
        decoder.feed(b"data: " + b"c" * 60 + b"\ndata: " + b"c" * 60 + b"\n")  # many lines
    unlimited = SSEDecoder()
    assert len(unlimited.feed(b"data: " + b"d" * 1000 + b"\n\n")[0].data) == 1000


def test_urls_lose_their_credentials() -> None:
    url = "https://user:pa55@mcp.example/sse?token=t0k&x=1&api_key=k&Signature=s&auth=a"
    assert redact_url(url) == (
        "https://<redacted>@mcp.example/sse?token=<redacted>&x=1&api_key=<redacted>"
        "&Signature=<redacted>&auth=<redacted>"
    )
    assert redact_url("https://mcp.example/mcp") == "https://mcp.example/mcp"
    assert "t0k" not in redact_urls(f"Client error '401' for url '{url}'")
    echo = redacted(
        {"type": "mcp", "server_url": url, "authorization": "sk", "headers": {"X-Key": "v"}}
    )
    assert "pa55" not in str(echo) and "t0k" not in str(echo) and "sk" not in echo.values()


async def test_mcp_connection_errors_do_not_quote_credentials() -> None:
    spec = McpServerSpec("x", url="http://user:pa55@127.0.0.1:9/mcp?access_token=sekrit")
    with pytest.raises(McpConnectionError) as caught:
        await McpPool().acquire(spec)
    assert "sekrit" not in str(caught.value) and "pa55" not in str(caught.value)
    assert "127.0.0.1:9" in str(caught.value)


def test_loopback_names() -> None:
    for host in ("localhost", "localhost:8080", "127.0.0.1:1", "127.9.9.9", "[::1]:80", "::1"):
        assert is_loopback_host(host), host
    for host in ("evil.example", "10.0.0.1:80", "[::]:80", "localhost.evil.example", "0.0.0.0"):
        assert not is_loopback_host(host), host
    assert is_loopback_bind("127.0.0.1") and is_loopback_bind("localhost")
    assert not is_loopback_bind("0.0.0.0") and not is_loopback_bind("::")


def test_key_matching_and_headers() -> None:
    keys = [ActiveKey("key_a", hash_key("tw-a")), ActiveKey("key_b", hash_key("tw-b"))]
    assert KeyRing.match(keys, "tw-b") == "key_b" and KeyRing.match(keys, "tw-c") is None
    assert presented_key([(b"authorization", b"Bearer tw-a")]) == "tw-a"
    assert presented_key([(b"authorization", b"bearer  tw-a ")]) == "tw-a"
    assert presented_key([(b"x-api-key", b"tw-a")]) == "tw-a"
    assert presented_key([(b"authorization", b"Basic abc")]) is None


def test_json_depth() -> None:
    deep: object = 1
    for _ in range(10):
        deep = {"a": [deep]}
    check_depth(deep, 20)
    with pytest.raises(Exception, match="deeper than"):
        check_depth(deep, 19)
    assert not might_be_deep(b'{"a": [1, 2]}', 2)


async def test_store_scopes_everything_by_owner(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 't.db'}")
    body = {"id": "resp_1", "created_at": 1, "status": "completed"}
    await store.save_response(body, input_items=[], history=[], conversation_id=None, owner="k1")
    assert await store.get_response("resp_1", owner="k1") == body
    assert await store.get_response("resp_1", owner="k2") is None
    assert await store.get_response("resp_1", owner=None) is None
    assert not await store.delete_response("resp_1", owner="k2")
    await store.create_conversation("conv_1", 1, {}, owner="k1")
    item = {"id": "msg_1", "type": "message"}
    assert not await store.add_items("conv_1", [item], 1, owner="k2")
    assert await store.add_items("conv_1", [item], 1, owner="k1")
    assert await store.list_items("conv_1", owner="k2") == []
    assert await store.get_item("conv_1", "msg_1", owner="k2") is None
    assert not await store.delete_item("conv_1", "msg_1", owner="k2")
    assert not await store.delete_conversation("conv_1", owner="k2")
    assert await store.list_items("conv_1", owner="k1") == [item]
    assert await store.delete_conversation("conv_1", owner="k1")
    await store.close()


async def test_an_older_database_gets_the_owner_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE responses (id VARCHAR(80) PRIMARY KEY, created_at INTEGER NOT NULL, "
            "status VARCHAR(20) NOT NULL, previous_response_id VARCHAR(80), "
            "conversation_id VARCHAR(80), body JSON NOT NULL, input_items JSON NOT NULL, "
            "history JSON NOT NULL)"
        )
        old.execute(
            "INSERT INTO responses VALUES ('resp_old', 1, 'completed', NULL, NULL, "
            "'{\"id\": \"resp_old\"}', '[]', '[]')"
        )
        old.execute(
            "CREATE TABLE conversations (id VARCHAR(80) PRIMARY KEY, created_at INTEGER NOT NULL, "
            "metadata JSON NOT NULL)"
        )
    store = await Store.open(f"sqlite:///{path}")
    assert await store.get_response("resp_old", owner=None) == {"id": "resp_old"}
    assert await store.get_response("resp_old", owner="key_x") is None
    await store.close()


async def test_a_non_streamed_answer_over_the_limit_fails(scripted: ScriptedUpstream) -> None:
    scripted.add(Body("x" * 5000))
    upstream = ChatCompletionsUpstream(scripted.base_url, max_response_bytes=1000, max_retries=0)
    try:
        with pytest.raises(UpstreamTooLargeError, match="max_upstream_response_bytes"):
            async for _ in upstream.stream_turn(
                TurnRequest(model="m", transcript=[], stream=False)
            ):
                pass
    finally:
        await upstream.aclose()


async def test_startup_refuses_an_open_server_beyond_loopback(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 's.db'}")
    limits = Limits()
    try:
        with pytest.raises(ConfigError, match="toolwire keys create"):
            await startup_security(
                store, host="0.0.0.0", port=1, allow_unauthenticated=False, limits=limits
            )
        opted = await startup_security(
            store, host="0.0.0.0", port=1, allow_unauthenticated=True, limits=limits
        )
        assert not opted.require_keys and opted.check_host and opted.ip_hosts
        local = await startup_security(
            store, host="127.0.0.1", port=1, allow_unauthenticated=False, limits=limits
        )
        assert local.check_host and not local.require_keys
        await store.keys.create("k")
        keyed = await startup_security(
            store, host="0.0.0.0", port=1, allow_unauthenticated=False, limits=limits
        )
        assert keyed.require_keys  # stays closed even if every key is revoked later
    finally:
        await store.close()


class _Keys:
    """A key store holding one key."""

    async def active(self) -> list[ActiveKey]:
        return [ActiveKey("key_a", hash_key("tw-a"))]


def _socket_scope(headers: list[tuple[bytes, bytes]], *, extension: bool) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "websocket", "path": "/v1/responses", "headers": headers}
    if extension:
        scope["extensions"] = {"websocket.http.response": {}}
    return scope


async def _drive(middleware: Any, scope: dict[str, Any], messages: list[Any]) -> tuple[Any, Any]:
    """(what the app received, or None if it never ran; what went to the client)."""
    sent: list[Any] = []
    received: list[Any] = []
    incoming = iter(messages)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        received.append(await receive())

    async def receive() -> Any:
        return next(incoming)

    async def send(message: Any) -> None:
        sent.append(message)

    await middleware(app)(scope, receive, send)
    return (received or None), sent


async def test_websocket_upgrades_are_checked_like_requests() -> None:
    connect = [{"type": "websocket.connect"}]
    auth = partial(AuthMiddleware, keyring=KeyRing(_Keys(), 60))  # type: ignore[arg-type]
    guard = partial(GuardMiddleware, allowed_origins=())
    host = (b"host", b"127.0.0.1:8080")
    # without the denial-response extension: closed (the server answers the upgrade with 403)
    for middleware, headers in (
        (auth, [host]),
        (auth, [host, (b"authorization", b"Bearer tw-wrong")]),
        (guard, [host, (b"origin", b"https://evil.example")]),
        (guard, [(b"host", b"evil.example")]),
    ):
        reached, sent = await _drive(middleware, _socket_scope(headers, extension=False), connect)
        assert reached is None
        assert [m["type"] for m in sent] == ["websocket.close"] and sent[0]["code"] == 1008
    # with it: the HTTP status and the OpenAI error body
    reached, sent = await _drive(auth, _socket_scope([host], extension=True), connect)
    assert reached is None
    assert sent[0] == {**sent[0], "type": "websocket.http.response.start", "status": 401}
    assert orjson.loads(sent[1]["body"])["error"]["code"] == "invalid_api_key"
    # the right key passes, and names the owner
    scope = _socket_scope([host, (b"authorization", b"Bearer tw-a")], extension=True)
    reached, sent = await _drive(auth, scope, connect)
    assert reached == connect and sent == [] and scope["state"]["owner"] == "key_a"


async def test_websocket_messages_over_the_size_limit_close_the_socket() -> None:
    limit = partial(BodyLimitMiddleware, max_bytes=10)
    scope = _socket_scope([], extension=False)
    fits = {"type": "websocket.receive", "text": "é" * 5}  # 10 bytes
    reached, sent = await _drive(limit, scope, [fits])
    assert reached == [fits] and sent == []
    for big in (
        {"type": "websocket.receive", "text": "é" * 6},
        {"type": "websocket.receive", "bytes": b"x" * 11},
    ):
        reached, sent = await _drive(limit, scope, [big])
        assert reached == [{"type": "websocket.disconnect", "code": 1009}]
        assert sent == [{"type": "websocket.close", "code": 1009, "reason": "message too big"}]


async def test_sealed_mcp_credentials_come_back_only_to_their_owner(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'tw.db'}")
    try:
        tool = {
            "type": "mcp",
            "server_label": "demo",
            "server_url": "https://mcp.example/mcp?token=abc123secret",
            "authorization": "tok-alice",
        }
        echo = redacted(tool)
        sealed = await approval_tools.seal(store, [tool])
        assert sealed is not None
        await store.transact(partial(keep_in, "resp_1", "key_alice", sealed))
        row = await store.read(
            lambda connection: connection.exec_driver_sql(
                "SELECT sealed FROM sealed_tools"
            ).scalar()
        )
        assert row is not None and "tok-alice" not in row and "abc123secret" not in row
        assert await approval_tools.restore(store, "resp_1", [echo], "key_alice") == [tool]
        # another key, another response, or a tool not exactly as echoed: the copy stays redacted
        assert await approval_tools.restore(store, "resp_1", [echo], "key_bob") == [echo]
        assert await approval_tools.restore(store, "resp_2", [echo], "key_alice") == [echo]
        moved = {**echo, "server_url": "https://evil.example/mcp"}
        assert await approval_tools.restore(store, "resp_1", [moved], "key_alice") == [moved]
        # deleting the response deletes its sealed credentials
        await store.save_response(
            {"id": "resp_1", "created_at": 1, "status": "completed", "output": []},
            input_items=[],
            conversation_id=None,
            owner="key_alice",
        )
        assert await store.delete_response("resp_1", owner="key_alice")
        assert await approval_tools.restore(store, "resp_1", [echo], "key_alice") == [echo]
    finally:
        await store.close()
