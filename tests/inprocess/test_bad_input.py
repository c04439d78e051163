"""A corpus of hand-made bad requests: each gets a 4xx in the OpenAI error shape naming the
field, nothing is stored as completed, and the server keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from tests.inprocess_gateway import AppGateway
from toolwire.store.tables import responses
from toolwire.testing import Reply

JSON = {"content-type": "application/json"}


def deep(levels: int) -> bytes:
    return (
        b'{"model": "m", "stream": true, "input": "hi", "metadata": '
        + b"[" * levels
        + b"]" * levels
        + b"}"
    )


# (name, method, path, raw body or JSON, status, code, param)
CASES: list[tuple[str, str, str, Any, int, str | None, str | None]] = [
    ("deep nesting", "POST", "/v1/responses", deep(300), 400, "json_too_deep", None),
    (
        "deep nesting, chat",
        "POST",
        "/v1/chat/completions",
        b'{"messages": ' + b"[" * 200 + b"]" * 200 + b"}",
        400,
        "json_too_deep",
        None,
    ),
    (
        "item type object",
        "POST",
        "/v1/responses",
        {"model": "m", "input": [{"type": {"x": 1}, "role": "user", "content": "hi"}]},
        400,
        None,
        "input[0].type",
    ),
    (
        "item id object",
        "POST",
        "/v1/responses",
        {"model": "m", "input": [{"id": {"x": 1}, "role": "user", "content": "hi"}]},
        400,
        None,
        "input[0].id",
    ),
    (
        "item id list, conversation",
        "POST",
        "/v1/conversations",
        {"items": [{"id": [1], "role": "user", "content": "hi"}]},
        400,
        None,
        "items[0].id",
    ),
    (
        "same id twice",
        "POST",
        "/v1/responses",
        {
            "model": "m",
            "input": [
                {"id": "msg_a", "role": "user", "content": "a"},
                {"id": "msg_a", "role": "user", "content": "b"},
            ],
        },
        400,
        "duplicate_item_id",
        "input[1].id",
    ),
    (
        "mcp_call without name",
        "POST",
        "/v1/responses",
        {"model": "m", "input": [{"type": "mcp_call", "id": "mcp_1", "arguments": 5}]},
        400,
        None,
        "input[0].name",
    ),
    (
        "output parts not objects",
        "POST",
        "/v1/responses",
        {
            "model": "m",
            "input": [{"type": "function_call_output", "call_id": "c", "output": [1, 2]}],
        },
        400,
        None,
        "input[0].output",
    ),
    (
        "stream_options yes, chat",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream_options": "yes"},
        400,
        "invalid_value",
        "stream_options",
    ),
    (
        "stream not a bool, chat",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
        400,
        "invalid_value",
        "stream",
    ),
    (
        "n=2, chat",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 2},
        400,
        "invalid_value",
        "n",
    ),
    (
        "negative max_tokens, chat",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -5},
        400,
        "invalid_value",
        "max_tokens",
    ),
    (
        "role not a string, chat",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": 7}]},
        400,
        "invalid_value",
        "messages[0].role",
    ),
    (
        "huge number",
        "POST",
        "/v1/responses",
        b'{"model": "m", "input": "hi", "temperature": 1e999}',
        400,
        None,
        None,
    ),
    (
        "negative max_output_tokens",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "max_output_tokens": -1},
        400,
        "integer_below_min_value",
        "max_output_tokens",
    ),
    (
        "enum out of range",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "context_management": [{"type": "sometimes"}]},
        400,
        "invalid_value",
        "context_management[0].type",
    ),
    (
        "wrong type at depth",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "text": {"format": {"type": 3}}},
        400,
        "invalid_value",
        "text.format.type",
    ),
    (
        "metadata value not a string",
        "POST",
        "/v1/conversations",
        {"metadata": {"a": 1}},
        400,
        None,
        "metadata",
    ),
    (
        "items not a list",
        "POST",
        "/v1/conversations",
        {"items": "hi"},
        400,
        "invalid_value",
        "items",
    ),
    (
        "lone surrogate",
        "POST",
        "/v1/responses",
        b'{"model": "m", "input": "\\ud800"}',
        400,
        None,
        None,
    ),
    (
        "invalid UTF-8",
        "POST",
        "/v1/responses",
        b'{"model": "m", "input": "\xff\xfe"}',
        400,
        None,
        None,
    ),
    ("not JSON", "POST", "/v1/responses", b"{model", 400, None, None),
    ("empty body", "POST", "/v1/responses", b"", 400, None, None),
    ("body not an object", "POST", "/v1/chat/completions", [1, 2], 400, None, None),
    (
        "limit not a number",
        "GET",
        "/v1/conversations/conv_x/items?limit=abc",
        None,
        404,
        None,
        "conversation_id",
    ),
    (
        "tool_choice type a list",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "tool_choice": {"type": ["function"], "name": "f"}},
        400,
        "invalid_type",
        "tool_choice.type",
    ),
    (
        "tool_choice type an object",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "tool_choice": {"type": {"x": 1}}},
        400,
        "invalid_type",
        "tool_choice.type",
    ),
    (
        "conversation without an id",
        "POST",
        "/v1/responses",
        {"model": "m", "input": "hi", "conversation": {}},
        400,
        "missing_required_parameter",
        "conversation.id",
    ),
    (
        "chat tool parameters a string",
        "POST",
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}],
        },
        400,
        None,
        "tools[0].function.parameters",
    ),
    (
        "chat tool_choice unknown",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "always"},
        400,
        "invalid_value",
        "tool_choice",
    ),
    (
        # was a 500 (a TypeError lowering the messages); now refused where requests are checked
        "chat tool_calls not an array",
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "assistant", "tool_calls": 5}]},
        400,
        None,
        "messages[0].tool_calls",
    ),
    (
        "chat tool_choice names no declared function",
        "POST",
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": {"type": "function", "function": {"name": "g"}},
        },
        400,
        "invalid_value",
        "tool_choice",
    ),
    ("unknown route", "GET", "/v1/nothing-here", None, 404, "unknown_url", None),
    ("unknown method", "PUT", "/v1/responses", {"x": 1}, 405, "method_not_allowed", None),
    ("path id with odd bytes", "GET", "/v1/responses/%ED%A0%80%00", None, 404, None, "response_id"),
]


async def send(gw: AppGateway, method: str, path: str, body: Any) -> Any:
    if isinstance(body, bytes):
        return await gw.http.request(method, path, content=body, headers=JSON)
    if body is None:
        return await gw.http.request(method, path)
    return await gw.http.request(method, path, json=body)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code", "param"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
async def test_bad_request(
    gw: AppGateway,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str | None,
    param: str | None,
) -> None:
    answer = await send(gw, method, path, body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    assert gw.upstream.chat_requests == []  # nothing reached the model
    assert (await gw.http.get("/health")).status_code == 200


async def test_method_not_allowed_lists_every_method(gw: AppGateway) -> None:
    answer = await gw.http.request("PUT", "/v1/conversations/conv_x")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "DELETE, GET, HEAD, POST"


async def test_wrong_content_type(gw: AppGateway) -> None:
    answer = await gw.http.post(
        "/v1/responses",
        content=b"model=m",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "unsupported_media_type"


async def stored_statuses(gw: AppGateway) -> list[str]:
    query = sa.select(responses.c.status)
    return await gw.store.read(lambda connection: list(connection.scalars(query)))


async def test_item_id_reused_across_the_database(gw: AppGateway) -> None:
    first = (
        await gw.http.post(
            "/v1/conversations",
            json={"items": [{"id": "msg_taken", "role": "user", "content": "a"}]},
        )
    ).json()
    second = (await gw.http.post("/v1/conversations", json={})).json()
    # in another conversation, as a response's input: refused before anything runs or is stored
    answer = await gw.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "conversation": second["id"],
            "input": [{"id": "msg_taken", "role": "user", "content": "b"}],
        },
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": "input[0].id",
        "code": "duplicate_item_id",
    }
    assert await stored_statuses(gw) == []
    assert gw.upstream.chat_requests == []
    # added to a conversation (its own or another)
    for conversation in (first["id"], second["id"]):
        answer = await gw.http.post(
            f"/v1/conversations/{conversation}/items",
            json={"items": [{"id": "msg_taken", "role": "user", "content": "c"}]},
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "items[0].id"
    # creating a conversation: nothing is created
    answer = await gw.http.post(
        "/v1/conversations", json={"items": [{"id": "msg_taken", "role": "user", "content": "d"}]}
    )
    assert answer.status_code == 400
    # without a conversation the items are only the response's own: earlier ids may be resent
    gw.upstream.add(Reply(text="ok"))
    answer = await gw.http.post(
        "/v1/responses",
        json={"model": "m", "input": [{"id": "msg_taken", "role": "user", "content": "e"}]},
    )
    assert answer.status_code == 200
    assert await stored_statuses(gw) == ["completed"]


async def test_openapi_document_is_served(gw: AppGateway) -> None:
    document = (await gw.http.get("/openapi.json")).json()
    assert document["openapi"] == "3.1.0"
    assert "/v1/responses" in document["paths"]


async def test_item_lists_take_only_openais_include_values(gw: AppGateway) -> None:
    """Found by schemathesis against OpenAI's document: `include=` (empty) was accepted."""
    conversation = (await gw.http.post("/v1/conversations", json={})).json()["id"]
    path = f"/v1/conversations/{conversation}/items"
    for query in ("include=", "include=everything", "include[]=message.nope"):
        answer = await gw.http.get(f"{path}?{query}")
        assert answer.status_code == 400, (query, answer.text)
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == ("include", "invalid_value")
    both = "include=reasoning.encrypted_content&include[]=message.output_text.logprobs"
    assert (await gw.http.get(f"{path}?{both}")).status_code == 200
    page = await gw.client.conversations.items.list(
        conversation, include=["message.input_image.image_url"]
    )
    assert page.data == []
