"""What real clients send and expect, in process: every documented request field, the tool
types clients declare (namespace, custom, web_search), the history items OpenAI produced,
images in tool outputs, and the chat door's status line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway, sse_events
from toolwire.testing import Body, Chunks, Reply

NAMESPACE = {
    "type": "namespace",
    "name": "agents",
    "description": "Sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "spawn",
            "description": "Start one.",
            "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
        }
    ],
}
PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"},
}
CODE_TOOL = {
    "type": "custom",
    "name": "code",
    "format": {"type": "grammar", "syntax": "regex", "definition": r"[a-z]+\d"},
}


async def create(gw: AppGateway, **body: Any) -> dict[str, Any]:
    response = await gw.http.post("/v1/responses", json={"model": "m", **body})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_every_documented_field_is_accepted_and_extras_pass_through(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="ok"))
    body = await create(
        gw,
        input="hi",
        client_metadata={"session_id": "x" * 750},
        prompt_cache_key="k",
        prompt_cache_retention="24h",
        prompt_cache_options={"ttl": "1h"},
        include=["reasoning.encrypted_content", "web_search_call.action.sources"],
        reasoning={"effort": "low", "summary": "auto"},
        store=False,
        stream=None,
        parallel_tool_calls=None,
        service_tier="auto",
        safety_identifier="u1",
        moderation={"model": "omni-moderation-latest"},
        context_management=[{"type": "compaction", "compact_threshold": 2000}],
        stream_options=None,
        top_k=40,
        min_p=0.05,
        repetition_penalty=1.1,
        presence_penalty=0.5,
        frequency_penalty=0.2,
        seed=7,
        max_output_tokens=16,
    )
    sent = gw.upstream.chat_requests[-1].body
    assert (sent["top_k"], sent["min_p"], sent["repetition_penalty"], sent["seed"]) == (
        40,
        0.05,
        1.1,
        7,
    )
    assert (sent["presence_penalty"], sent["frequency_penalty"]) == (0.5, 0.2)
    assert "client_metadata" not in sent and "include" not in sent
    assert body["presence_penalty"] == 0.5 and body["frequency_penalty"] == 0.2
    assert body["prompt_cache_key"] == "k" and body["store"] is False
    for field in ("tool_choice", "tools", "parallel_tool_calls", "temperature", "top_p"):
        assert field in body


async def test_reasoning_with_include_encrypted_content_round_trips_inline(
    gw: AppGateway,
) -> None:
    """What Codex does (store: false, include reasoning.encrypted_content, the whole history
    sent back): reasoning comes back readable (`reasoning_text`), `encrypted_content` null
    (toolwire has nothing to encrypt: its store is not needed to continue), and the item is
    accepted back as it came."""
    gw.upstream.add(Reply(reasoning="The user greets me.", text="Hello!"), Reply(text="Again."))
    first = await create(gw, input="hi", store=False, include=["reasoning.encrypted_content"])
    reasoning, message = first["output"]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"] is None
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "The user greets me."}]
    history = [{"role": "user", "content": "hi"}, reasoning, message]
    second = await create(
        gw,
        input=[*history, {"role": "user", "content": "again"}],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    assert second["output"][-1]["content"][0]["text"] == "Again."
    roles = [m["role"] for m in gw.upstream.chat_requests[-1].body["messages"]]
    assert roles == ["user", "assistant", "user"]


async def test_client_metadata_beyond_its_bounds_is_accepted_and_not_kept(gw: AppGateway) -> None:
    """Not acted on (forward compatibility): never a 400, but nothing past OpenAI's bounds is
    echoed or stored."""
    gw.upstream.add(Reply(text="ok"), Reply(text="ok"))
    body = {"model": "m", "input": "x", "client_metadata": {"a": "x" * 2049}}
    response = await gw.http.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    assert "x" * 2049 not in response.text
    body["client_metadata"] = {"a": "b"}
    kept = await gw.http.post("/v1/responses", json=body)
    assert kept.json().get("client_metadata") in (None, {"a": "b"})


async def test_namespaced_function_goes_back_as_declared(gw: AppGateway) -> None:
    gw.upstream.add(Reply(tool_calls=[("agents__spawn", {"task": "look"})]))
    body = await create(gw, input="go", tools=[NAMESPACE])
    sent = gw.upstream.chat_requests[-1].body
    assert "agents__spawn" in [t["function"]["name"] for t in sent["tools"]]
    (call,) = body["output"]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "agents", "spawn")
    assert body["tools"][0]["tools"][0]["strict"] is None  # required on echoed functions
    # the call and its output come back as history: the model sees its own name again
    gw.upstream.add(Reply(text="spawned"))
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "started"}
    await create(gw, input=[call, output], tools=[NAMESPACE])
    messages = gw.upstream.chat_requests[-1].body["messages"]
    assert messages[0]["tool_calls"][0]["function"]["name"] == "agents__spawn"


async def test_custom_tool_calls_and_outputs(gw: AppGateway) -> None:
    patch = "*** Begin Patch\n*** End Patch\n"
    gw.upstream.add(Reply(tool_calls=[("apply_patch", {"input": patch})]))
    response = await gw.http.post(
        "/v1/responses",
        json={"model": "m", "input": "edit", "tools": [PATCH_TOOL], "stream": True},
    )
    events = sse_events(response.content)
    kinds = [e["type"] for e in events]
    assert "response.custom_tool_call_input.done" in kinds
    call = events[-1]["response"]["output"][0]
    assert (call["type"], call["name"], call["input"]) == ("custom_tool_call", "apply_patch", patch)
    offered = gw.upstream.chat_requests[-1].body["tools"]
    (tool,) = [t["function"] for t in offered if t["function"]["name"] == "apply_patch"]
    assert "lark" in tool["description"] and "start: /.+/s" in tool["description"]
    gw.upstream.add(Reply(text="patched"))
    output = {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done!"}
    body = await create(gw, input=[call, output], tools=[PATCH_TOOL])
    assert body["output"][0]["content"][0]["text"] == "patched"
    messages = gw.upstream.chat_requests[-1].body["messages"]
    assert '"input"' in messages[0]["tool_calls"][0]["function"]["arguments"]
    assert "Done!" in messages[1]["content"]


async def test_a_regex_grammar_is_checked(gw: AppGateway) -> None:
    gw.upstream.add(
        Reply(tool_calls=[("code", {"input": "NOPE"})]),
        Reply(tool_calls=[("code", {"input": "abc1"})]),
    )
    body = await create(gw, input="go", tools=[CODE_TOOL])
    assert [(i["type"], i.get("input")) for i in body["output"]] == [("custom_tool_call", "abc1")]
    retry = gw.upstream.chat_requests[-1].body["messages"]
    assert "regular expression" in retry[-1]["content"]


# Codex's apply_patch grammar, as it declares it (LLGuidance's Lark: zero-width terminals such as
# /(.*)/ are fine there, which the `lark` package itself refuses)
CODEX_PATCH_GRAMMAR = r"""start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF
%import common.LF
"""


async def test_a_lark_grammar_is_checked(gw: AppGateway) -> None:
    tool = {
        "type": "custom",
        "name": "apply_patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": CODEX_PATCH_GRAMMAR},
    }
    empty = "*** Begin Patch\n*** End Patch\n"  # no hunk: the grammar wants one
    good = "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    x\n+    y\n*** End Patch"
    gw.upstream.add(
        Reply(tool_calls=[("apply_patch", {"input": empty})]),
        Reply(tool_calls=[("apply_patch", {"input": good})]),
    )
    body = await create(gw, input="edit", tools=[tool])
    assert [(i["type"], i.get("input")) for i in body["output"]] == [("custom_tool_call", good)]
    first, retry = (r.body for r in gw.upstream.chat_requests[-2:])
    (offered,) = [t["function"] for t in first["tools"] if t["function"]["name"] == "apply_patch"]
    assert "lark grammar" in offered["description"] and "add_hunk" in offered["description"]
    reason = json.dumps(retry["messages"][-2:])
    assert "Lark grammar" in reason and "line 2, column 5" in reason, reason


async def test_hosted_tools_without_a_backend_are_not_offered_and_say_so(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="no search"))
    response = await gw.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "input": "x",
            "tools": [{"type": "web_search", "external_web_access": False}, {"type": "shell"}],
        },
    )
    assert response.status_code == 200
    assert response.headers["x-toolwire-tools-not-offered"] == "web_search, shell"
    offered = [t["function"]["name"] for t in gw.upstream.chat_requests[-1].body["tools"]]
    assert not any("search" in name or "shell" in name for name in offered)
    assert [t["type"] for t in response.json()["tools"]] == ["web_search", "shell"]


async def test_history_items_openai_produced_are_accepted(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="fine"))
    history = [
        {"type": "message", "role": "user", "content": "earlier"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "encrypted_content": "gAAAA-opaque",
        },
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "weather"},
        },
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "c1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "id": "lsho_1", "call_id": "c1", "output": "a.txt"},
        # (a `compaction` item is toolwire's own or a 400: tests/inprocess/test_compaction.py)
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
        {"type": "message", "role": "user", "content": "now"},
    ]
    await create(gw, input=history, store=False)
    messages = gw.upstream.chat_requests[-1].body["messages"]
    names = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
    assert names == ["web_search", "local_shell", "apply_patch"]
    assert sum(m["role"] == "tool" for m in messages) == 3


async def test_item_reference_resolves_against_history(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="first"), Reply(text="second"))
    first = await create(gw, input="remember me")
    reference = {"type": "item_reference", "id": first["output"][0]["id"]}
    await create(gw, input=[reference], previous_response_id=first["id"])
    response = await gw.http.post(
        "/v1/responses", json={"model": "m", "input": [{"type": "item_reference", "id": "nope"}]}
    )
    assert response.status_code == 404


IMAGE = "data:image/png;base64,iVBORw0KGgo="


async def test_images_in_tool_outputs_reach_the_model(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="a dot"))
    call = {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"}
    output = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_image", "image_url": IMAGE}],
    }
    await create(gw, input=[call, output], store=False)
    messages = gw.upstream.chat_requests[-1].body["messages"]
    assert [m["role"] for m in messages] == ["assistant", "tool", "user"]
    assert messages[2]["content"][1]["image_url"]["url"] == IMAGE


async def test_chat_door_failure_before_content_is_a_real_http_error(gw: AppGateway) -> None:
    gw.upstream.add(Body({"error": {"message": "model not loaded"}}, status=400))
    response = await gw.http.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True},
    )
    assert response.status_code == 400
    assert response.headers["x-should-retry"] == "false"
    assert "model not loaded" in response.json()["error"]["message"]


async def test_chat_door_empty_stream_is_an_error_not_an_empty_turn(gw: AppGateway) -> None:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    gw.upstream.add(*[Chunks([role], done=True)] * 5)
    response = await gw.http.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True},
    )
    assert response.status_code >= 500, response.text


@pytest.mark.parametrize("value", [15, 0])
async def test_max_output_tokens_below_16_is_refused(gw: AppGateway, value: int) -> None:
    response = await gw.http.post(
        "/v1/responses", json={"model": "m", "input": "x", "max_output_tokens": value}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "integer_below_min_value"
