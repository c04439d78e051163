"""Every route a key can call counts (issue 39): the requests per minute cover `count_tokens`
(Anthropic's and Gemini's), conversation and item writes, compaction and each WebSocket message,
and are checked before any upstream work; token fields are bounded at validation on every door;
what a key keeps stored has a quota."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway, app_gateway
from tests.minutes import start_in_a_fresh_minute_if_needed_async
from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.testing import Reply, ScriptedUpstream

ANTHROPIC = {"anthropic-version": "2023-06-01"}
MESSAGES = [{"role": "user", "content": "hi"}]
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", **ANTHROPIC}


@pytest.fixture
async def gw(tmp_path: Path) -> Any:
    upstream = ScriptedUpstream.in_process()
    upstream.default = Reply(text="ok")
    async with app_gateway(upstream, tmp_path / "t.db") as gateway:
        gateway.store.quotas.ttl = 0
        yield gateway


async def socket_messages(gw: AppGateway, key: str, messages: list[str]) -> list[dict[str, Any]]:
    """Send `messages` on one WebSocket of `/v1/responses` (raw ASGI, in process) and return
    the error / terminal event each got."""
    offered = [{"type": "websocket.connect"}] + [
        {"type": "websocket.receive", "text": m} for m in messages
    ]
    answers: list[dict[str, Any]] = []
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if offered:
            return offered.pop(0)
        await done.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            event = json.loads(message["text"])
            if event["type"] in ("error", "response.completed", "response.failed"):
                answers.append(event)
                if len(answers) == len(messages):
                    done.set()
        elif message["type"] == "websocket.close":
            done.set()

    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "subprotocols": [],
    }
    await asyncio.wait_for(gw.app(scope, receive, send), 30)
    return answers


async def test_every_route_a_key_calls_counts_before_any_upstream_work(gw: AppGateway) -> None:
    """The attack: under `--rpm 3`, 12 of 12 `count_tokens` calls and 12 of 12 conversation
    creates of 200 KB were answered 200 (and the Messages door asked the upstream's tokenizer
    before its check)."""
    await start_in_a_fresh_minute_if_needed_async(25)
    _, key = await gw.store.keys.create("team", rpm=3)
    _, other = await gw.store.keys.create("other")  # no limits: not affected
    _, talker = await gw.store.keys.create("talker", rpm=2)  # for the WebSocket, below
    headers = auth(key)
    for _ in range(3):
        counted = await gw.http.post(
            "/v1/messages/count_tokens", json={"model": "m", "messages": MESSAGES}, headers=headers
        )
        assert counted.status_code == 200, counted.text
    asked = len(gw.upstream.requests)
    big = [{"type": "message", "role": "user", "content": "x" * 200_000}]
    refused = {
        "count_tokens": await gw.http.post(
            "/v1/messages/count_tokens", json={"model": "m", "messages": MESSAGES}, headers=headers
        ),
        "messages": await gw.http.post(
            "/v1/messages",
            json={"model": "m", "messages": MESSAGES, "max_tokens": 64},
            headers=headers,
        ),
        "conversation create": await gw.http.post(
            "/v1/conversations", json={"items": big}, headers=headers
        ),
        "items add": await gw.http.post(
            "/v1/conversations/conv_x/items", json={"items": big}, headers=headers
        ),
        "item delete": await gw.http.delete(
            "/v1/conversations/conv_x/items/msg_x", headers=headers
        ),
        "compaction": await gw.http.post(
            "/v1/responses/compact", json={"model": "m", "input": "hi"}, headers=headers
        ),
        "responses": await gw.http.post(
            "/v1/responses", json={"model": "m", "input": "hi"}, headers=headers
        ),
        "chat": await gw.http.post(
            "/v1/chat/completions", json={"model": "m", "messages": MESSAGES}, headers=headers
        ),
        "gemini countTokens": await gw.http.post(
            "/v1beta/models/m:countTokens", json=GEMINI, headers=headers
        ),
    }
    unlimited = await gw.http.post("/v1/conversations", json={"items": big}, headers=auth(other))
    assert len(gw.upstream.requests) == asked, "upstream work was done for a refused request"
    for route, answer in refused.items():
        assert answer.status_code == 429, (route, answer.text)
        assert answer.headers["x-ratelimit-limit-requests"] == "3", route
        assert int(answer.headers["retry-after"]) >= 1, route
        error = answer.json()["error"]
        if route in ("count_tokens", "messages"):  # Anthropic's shape on its door
            assert error["type"] == "rate_limit_error", route
        elif route.startswith("gemini"):  # Google's on its
            assert error["status"] == "RESOURCE_EXHAUSTED", route
        else:
            assert error["code"] == "rate_limit_exceeded", route
    assert unlimited.status_code == 200, unlimited.text

    # each WebSocket message counts, a refused one too (the same minute: another key)
    create = json.dumps({"type": "response.create", "model": "m", "input": "hi"})
    answers = await socket_messages(gw, talker, ['{"type": "nonsense"}', create, create])
    assert answers[0]["error"]["code"] == "unknown_event_type"  # a refused message counts too
    assert answers[1]["type"] == "response.completed"
    assert answers[2]["type"] == "error" and answers[2]["status"] == 429, answers[2]
    assert answers[2]["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize("limited", [True, False], ids=["limited key", "unlimited key"])
@pytest.mark.parametrize(
    ("path", "field", "body"),
    [
        ("/v1/responses", "max_output_tokens", {"model": "m", "input": "hi"}),
        ("/v1/chat/completions", "max_tokens", {"model": "m", "messages": MESSAGES}),
        ("/v1/chat/completions", "max_completion_tokens", {"model": "m", "messages": MESSAGES}),
        ("/v1/messages", "max_tokens", {"model": "m", "messages": MESSAGES}),
        ("/v1beta/models/m:generateContent", "generationConfig.maxOutputTokens", GEMINI),
    ],
)
async def test_absurd_token_fields_are_a_clear_400(
    gw: AppGateway, limited: bool, path: str, field: str, body: dict[str, Any]
) -> None:
    """The attack: 2**63 answered 500 (OverflowError) with a limited key, and was sent upstream
    with an unlimited one."""
    _, key = await gw.store.keys.create("team", tpm=100_000 if limited else None)
    answers = [
        await gw.http.post(path, json=with_field(body, field, value), headers=auth(key))
        for value in (2**63, MAX_OUTPUT_TOKENS + 1)
    ]
    fits = await gw.http.post(path, json=with_field(body, field, 1000), headers=auth(key))
    sent = [r.body for r in gw.upstream.requests if r.path.endswith("/chat/completions")]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error.get("type", error.get("status")) in (
            "invalid_request_error",
            "INVALID_ARGUMENT",
        )
        assert str(MAX_OUTPUT_TOKENS) in error["message"]
    assert fits.status_code == 200, fits.text
    assert len(sent) == 1 and max(sent[0].get("max_tokens") or 0, 0) <= 1000


def with_field(body: dict[str, Any], field: str, value: int) -> dict[str, Any]:
    """`body` with `field` (dotted: inside an object) set to `value`."""
    outer, _, inner = field.partition(".")
    if not inner:
        return {**body, field: value}
    return {**body, outer: {inner: value}}


async def test_a_keys_stored_bytes_have_a_quota(gw: AppGateway) -> None:
    """Stored bytes per key are counted (responses with their input, conversation items) and
    refused past the key's quota; deleting makes room; other keys are not affected."""
    gw.store.storage.max_bytes = 500_000
    gw.store.storage.ttl = 0  # the sum read every time (the default caches it 5 s)
    _, key = await gw.store.keys.create("team")
    _, other = await gw.store.keys.create("other")
    big = [{"type": "message", "role": "user", "content": "x" * 200_000}]
    created = [
        await gw.http.post("/v1/conversations", json={"items": big}, headers=auth(key))
        for _ in range(4)
    ]
    refused_response = await gw.http.post(
        "/v1/responses", json={"model": "m", "input": "hi"}, headers=auth(key)
    )
    unstored = await gw.http.post(
        "/v1/responses", json={"model": "m", "input": "hi", "store": False}, headers=auth(key)
    )
    theirs = await gw.http.post("/v1/conversations", json={"items": big}, headers=auth(other))
    assert [c.status_code for c in created] == [200, 200, 200, 429]
    error = created[3].json()["error"]
    assert error["code"] == "storage_quota_exceeded", error
    assert created[3].headers["x-should-retry"] == "false"
    assert refused_response.status_code == 429
    assert unstored.status_code == 200 and theirs.status_code == 200
    deleted = await gw.http.delete(
        f"/v1/conversations/{created[0].json()['id']}", headers=auth(key)
    )
    assert deleted.status_code == 200
    again = await gw.http.post("/v1/conversations", json={"items": big}, headers=auth(key))
    assert again.status_code == 200, again.text
