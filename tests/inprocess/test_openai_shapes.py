"""What toolwire answers, checked against the schemas of OpenAI's own OpenAPI document
(tests/openai_schemas.py): responses, chat completions, and conversation items of the types a
client sends back as history. Each case is one a long schemathesis run against OpenAI's
document found breaking it (tests/fuzz/test_schemathesis.py::test_openai_document)."""

from __future__ import annotations

from typing import Any

from tests.inprocess_gateway import AppGateway
from tests.openai_schemas import violations
from toolwire.testing import Reply

# History items as a client may send them: OpenAI's input shapes, which leave out (or null)
# fields its returned shapes require.
HISTORY = [
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
    {"type": "message", "role": "assistant", "content": "plain", "status": None},
    {
        "type": "computer_call_output",
        "call_id": "c1",
        "output": {"type": "computer_screenshot", "image_url": "https://example.com/a.png"},
        "status": None,
        "acknowledged_safety_checks": None,
    },
    {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}},
    {
        "type": "shell_call_output",
        "call_id": "s1",
        "output": [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    {"type": "apply_patch_call_output", "call_id": "p1", "status": "completed"},
    {"type": "function_call_output", "call_id": "f1", "output": "4", "namespace": None},
    {
        "type": "function_call_output",
        "call_id": "f2",
        "output": [
            {"type": "input_file", "file_url": "https://example.com/a.pdf", "file_data": None},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
        ],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "see", "prompt_cache_breakpoint": None}],
    },
    {"type": "additional_tools", "role": "developer", "tools": [{"type": "web_search"}]},
    {"type": "tool_search_call", "arguments": {"query": "weather"}},
    {
        "type": "mcp_list_tools",
        "server_label": "files",
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
    },
]


async def test_a_response_matches_openais_schema(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="ok"))
    response = await gw.http.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert violations(body, "post", "/responses") == []
    assert body["usage"]["input_tokens_details"]["cache_write_tokens"] == 0
    assert "user" not in body  # no null: the document's `user` is a string when present


async def test_a_chat_completion_matches_openais_schema(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="ok"))
    messages = [{"role": "user", "content": "hi"}]
    response = await gw.http.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 200, response.text
    body = response.json()
    assert violations(body, "post", "/chat/completions") == []
    assert body["choices"][0]["message"]["refusal"] is None


async def test_history_items_come_back_in_openais_returned_shapes(gw: AppGateway) -> None:
    created = await gw.http.post("/v1/conversations", json={})
    conversation = created.json()["id"]
    items_path = f"/v1/conversations/{conversation}/items"
    empty = await gw.http.get(items_path)
    assert empty.json()["first_id"] is None  # a documented deviation (tests/openai_schemas.py)
    assert violations(empty.json(), "get", "/conversations/{conversation_id}/items") == []

    added = await gw.http.post(items_path, json={"items": HISTORY})
    assert added.status_code == 200, added.text
    assert violations(added.json(), "post", "/conversations/{conversation_id}/items") == []
    listed = (await gw.http.get(items_path, params={"order": "asc"})).json()
    assert [item["type"] for item in listed["data"]] == [item["type"] for item in HISTORY]
    assert violations(listed, "get", "/conversations/{conversation_id}/items") == []
    for item in listed["data"]:
        one = await gw.http.get(f"{items_path}/{item['id']}")
        assert one.json() == item
        where = "/conversations/{conversation_id}/items/{item_id}"
        assert violations(one.json(), "get", where) == []
    by_type = {item["type"]: item for item in listed["data"]}
    assert by_type["computer_call_output"]["status"] == "completed"
    assert "acknowledged_safety_checks" not in by_type["computer_call_output"]
    assert by_type["shell_call"]["action"]["timeout_ms"] is None
    assert listed["data"][0]["content"][0]["annotations"] == []
    assert "namespace" not in by_type["function_call_output"]


async def test_item_references_in_a_conversation_name_items_it_holds(gw: AppGateway) -> None:
    items = [{"type": "message", "role": "user", "content": "hi"}]
    conversation = (await gw.http.post("/v1/conversations", json={"items": items})).json()["id"]
    items_path = f"/v1/conversations/{conversation}/items"
    held = (await gw.http.get(items_path)).json()["data"][0]["id"]

    again = await gw.http.post(items_path, json={"items": [{"type": "item_reference", "id": held}]})
    assert again.status_code == 200, again.text
    assert again.json()["data"] == []
    missing = {"type": "item_reference", "id": "msg_missing"}
    unknown = await gw.http.post(items_path, json={"items": [missing]})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["param"] == "items[0]"
    listed = (await gw.http.get(items_path)).json()
    assert [item["id"] for item in listed["data"]] == [held]


async def _refused(gw: AppGateway, item: dict[str, Any]) -> dict[str, Any]:
    conversation = (await gw.http.post("/v1/conversations", json={})).json()["id"]
    response = await gw.http.post(f"/v1/conversations/{conversation}/items", json={"items": [item]})
    assert response.status_code == 400, response.text
    stored = await gw.http.get(f"/v1/conversations/{conversation}/items")
    assert stored.json()["data"] == []
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_items_openai_would_refuse_are_refused_not_stored(gw: AppGateway) -> None:
    listing = {"type": "mcp_list_tools", "server_label": "s", "tools": [{"name": "t"}]}
    error = await _refused(gw, listing)
    assert error["param"] == "items[0].tools[0].input_schema"
    schema_text = {**listing, "tools": [{"name": "t", "input_schema": ""}]}
    assert (await _refused(gw, schema_text))["param"] == "items[0].tools[0].input_schema"
    described = {**listing, "tools": [{"name": "t", "input_schema": {}, "description": []}]}
    assert (await _refused(gw, described))["param"] == "items[0].tools[0].description"
    no_action = {"type": "shell_call", "call_id": "s1"}
    assert (await _refused(gw, no_action))["param"] == "items[0].action"
    limits = {**no_action, "action": {"commands": ["ls"], "max_output_length": 1.5}}
    assert (await _refused(gw, limits))["param"] == "items[0].action.max_output_length"
    commands = {**no_action, "action": {"commands": [["ls"]]}}
    assert (await _refused(gw, commands))["param"] == "items[0].action.commands"
    screen = {"type": "computer_call_output", "call_id": "c1", "output": {"text": "no"}}
    assert (await _refused(gw, screen))["param"] == "items[0].output.type"
    tools = {"type": "additional_tools", "role": "developer", "tools": [1.5]}
    assert (await _refused(gw, tools))["param"] == "items[0].tools[0].type"
    message = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_file", "file_id": True}],
    }
    assert (await _refused(gw, message))["param"] == "items[0].content[0].file_id"
    # a tool definition's fields, checked against OpenAI's own `Tool` schema
    located = {"type": "web_search", "user_location": {"type": "approximate", "timezone": 5}}
    located_tools = {**tools, "tools": [located]}
    error = await _refused(gw, located_tools)
    assert error["param"] == "items[0].tools[0].user_location.timezone"
    boxed = {"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "huge"}}
    searched = {"type": "tool_search_output", "tools": [boxed]}
    assert (await _refused(gw, searched))["param"] == "items[0].tools[0].container.memory_limit"
    trigger = {"type": "compaction_trigger"}
    assert (await _refused(gw, trigger))["param"] == "items[0].type"
