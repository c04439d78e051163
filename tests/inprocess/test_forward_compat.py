"""Forward compatibility on every door (docs/server.md, "Forward compatibility"): a request
carrying unknown values in every field toolwire does not act on, and new sibling fields
everywhere, is answered as if those fields were absent; an unknown value of a field toolwire
acts on is a 400 in the door's own shape naming the field and the values it knows.

The ignored fields come from each door's own list (`IGNORED` in server/messages/translate.py,
`IGNORED_FIELDS` in server/responses/prepare/request.py), so a field added there is tested
here."""

from __future__ import annotations

from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway
from toolwire.server.messages.translate import IGNORED
from toolwire.server.responses.prepare.request import IGNORED_FIELDS
from toolwire.testing import Reply

#: Values no schema of today allows: another type, and a new value of the documented type.
ODD_VALUES: list[Any] = [{"from_a_later_release": [1, "two", None]}, "a-value-from-2030", 7]
NEW_SIBLINGS = {"a_field_from_2030": {"nested": True}, "another_new_one": [1, 2]}


def put(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`body` with `value` at the dotted `path` (objects made on the way)."""
    node = body
    *parents, last = path.split(".")
    for name in parents:
        node = node.setdefault(name, {})
    node[last] = value
    return body


# -- Anthropic Messages -------------------------------------------------------------------------


def messages_body(**fields: Any) -> dict[str, Any]:
    return {
        "model": "qwen3-coder",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi", **NEW_SIBLINGS}],
        **fields,
    }


@pytest.mark.parametrize("value", ODD_VALUES)
async def test_messages_accepts_any_value_in_every_ignored_field(
    gw: AppGateway, value: Any
) -> None:
    body = messages_body(thinking={"type": "adaptive"}, **NEW_SIBLINGS)
    for path in IGNORED:
        put(body, path, value)
    gw.upstream.add(Reply(text="still answered"))
    response = await gw.http.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": "still answered"}]


async def test_claude_codes_interactive_thinking_display_is_accepted(gw: AppGateway) -> None:
    """Interactive Claude Code 2.1.332 with a non-Claude model name sends this (logged from the
    real binary); before the rule it was a 400 on every request."""
    gw.upstream.add(Reply(text="hello", reasoning="thinking it over"))
    response = await gw.http.post(
        "/v1/messages",
        json=messages_body(stream=False, thinking={"type": "adaptive", "display": "updates"}),
    )
    assert response.status_code == 200, response.text
    kinds = [block["type"] for block in response.json()["content"]]
    assert kinds == ["thinking", "text"]  # an unknown display shows the reasoning


@pytest.mark.parametrize(
    ("field", "body", "known"),
    [
        (
            "thinking.type",
            messages_body(thinking={"type": "auto"}),
            "enabled, adaptive, disabled",
        ),
        (
            "tool_choice.type",
            messages_body(tool_choice={"type": "sometimes"}),
            "auto, any, tool, none",
        ),
        (
            "messages[0].content[0].type",
            messages_body(messages=[{"role": "user", "content": [{"type": "hologram"}]}]),
            "text, image, document",
        ),
    ],
)
async def test_messages_unknown_value_of_an_acted_on_field_names_it(
    gw: AppGateway, field: str, body: dict[str, Any], known: str
) -> None:
    response = await gw.http.post("/v1/messages", json=body)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"] and known in error["error"]["message"]
    assert not gw.upstream.requests  # nothing reached the upstream


# -- OpenAI Responses ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ODD_VALUES)
async def test_responses_accepts_any_value_in_every_ignored_field(
    gw: AppGateway, value: Any
) -> None:
    body: dict[str, Any] = {"model": "m", "input": "hi", **NEW_SIBLINGS}
    for path in IGNORED_FIELDS:
        put(body, path, value)
    body["context_management"] = [{"type": "compaction", **NEW_SIBLINGS}]
    gw.upstream.add(Reply(text="still answered"))
    response = await gw.http.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "completed" and answer["output"][-1]["content"][0]["text"] == (
        "still answered"
    )
    # an ignored value not of the documented shape is echoed as the default
    assert answer["truncation"] == "disabled" and answer["text"]["verbosity"] == "medium"


async def test_responses_echoes_a_documented_value_of_an_ignored_field(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="ok"))
    answer = await gw.client.responses.create(
        model="m", input="hi", truncation="auto", service_tier="flex", user="u1"
    )
    assert (answer.truncation, answer.service_tier, answer.user) == ("auto", "flex", "u1")


async def test_compact_accepts_new_fields(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="the summary"))
    response = await gw.http.post(
        "/v1/responses/compact",
        json={"model": "m", "input": "x", "prompt_cache_key": 5, **NEW_SIBLINGS},
    )
    assert response.status_code == 200, response.text


async def test_responses_unknown_value_of_an_acted_on_field_names_it(gw: AppGateway) -> None:
    response = await gw.http.post(
        "/v1/responses",
        json={"model": "m", "input": "hi", "context_management": [{"type": "forgetting"}]},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "context_management[0].type" and "'compaction'" in error["message"]


# -- OpenAI Chat Completions --------------------------------------------------------------------


@pytest.mark.parametrize("value", ODD_VALUES)
async def test_chat_accepts_any_value_in_fields_it_does_not_act_on(
    gw: AppGateway, value: Any
) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi", **NEW_SIBLINGS}],
        "stream_options": {"include_usage": True, "include_obfuscation": value, **NEW_SIBLINGS},
        **NEW_SIBLINGS,
    }
    gw.upstream.add(Reply(text="still answered"))
    response = await gw.http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "still answered"
    sent = gw.upstream.chat_requests[-1].body
    assert sent["a_field_from_2030"] == {"nested": True}  # passed to the upstream as sent


async def test_chat_unknown_value_of_an_acted_on_field_names_it(gw: AppGateway) -> None:
    response = await gw.http.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "oracle", "content": "hi"}]},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "messages[0].role" and "assistant" in error["message"]
