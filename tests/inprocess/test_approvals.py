"""Approval flows in process, through the Responses door with a server tool that waits for a
human: asked, approved once (a replay runs nothing), denied (reported, the loop goes on),
streamed. The MCP variants over real sockets are in tests/integration/test_mcp.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway, app_gateway, sse_events
from toolwire import tool
from toolwire.testing import Reply, ScriptedUpstream

deleted: list[str] = []


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Deletes a file (asks first)."""
    deleted.append(path)
    return f"deleted {path}"


@pytest.fixture
async def guarded(fake_upstream: ScriptedUpstream) -> AsyncIterator[AppGateway]:
    deleted.clear()
    async with app_gateway(fake_upstream, tools=[delete_file]) as gw:
        yield gw


def approval(request_id: str, approve: bool) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}


async def ask(gw: AppGateway) -> tuple[str, str]:
    gw.upstream.add(Reply(text="I'll delete it.", tool_calls=[("delete_file", {"path": "a.txt"})]))
    asking = await gw.client.responses.create(model="m", input="delete a.txt")
    assert asking.status == "completed"
    requests = [i for i in asking.output if i.type == "mcp_approval_request"]
    assert len(requests) == 1 and requests[0].name == "delete_file"
    assert deleted == []  # nothing runs before a human decides
    return asking.id, requests[0].id


async def test_an_approved_call_runs_exactly_once(guarded: AppGateway) -> None:
    asking, request_id = await ask(guarded)
    guarded.upstream.add(Reply(text="Deleted."))
    approved = await guarded.client.responses.create(
        model="m", previous_response_id=asking, input=[approval(request_id, True)] * 2
    )
    assert approved.output_text == "Deleted."
    calls = [i for i in approved.output if i.type == "mcp_call"]
    assert len(calls) == 1 and calls[0].approval_request_id == request_id
    assert deleted == ["a.txt"]

    guarded.upstream.add(Reply(text="Done already."))
    replay = await guarded.client.responses.create(
        model="m", previous_response_id=asking, input=[approval(request_id, True)]
    )
    assert replay.status == "completed"
    assert deleted == ["a.txt"]  # the replayed approval ran nothing
    assert "already used" in guarded.upstream.chat_requests[-1].body["messages"][-1]["content"]


async def test_a_denied_call_is_reported_and_the_loop_goes_on(guarded: AppGateway) -> None:
    asking, request_id = await ask(guarded)
    guarded.upstream.add(Reply(text="Understood, I left it alone."))
    denied = await guarded.client.responses.create(
        model="m", previous_response_id=asking, input=[approval(request_id, False)]
    )
    assert denied.output_text == "Understood, I left it alone."
    assert [item.type for item in denied.output] == ["message"]  # no mcp_call left behind
    assert deleted == []
    told = guarded.upstream.chat_requests[-1].body["messages"][-1]["content"]
    assert "denied" in told


async def test_an_approval_request_streams_and_its_approval_stream_runs_it(
    guarded: AppGateway,
) -> None:
    guarded.upstream.add(Reply(tool_calls=[("delete_file", {"path": "b.txt"})]))
    response = await guarded.http.post(
        "/v1/responses", json={"model": "m", "input": "delete b.txt", "stream": True}
    )
    events = sse_events(response.content)
    added = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    request = next(item for item in added if item["type"] == "mcp_approval_request")
    assert events[-1]["type"] == "response.completed" and deleted == []

    guarded.upstream.add(Reply(text="Gone."))
    response = await guarded.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "previous_response_id": events[-1]["response"]["id"],
            "input": [approval(request["id"], True)],
            "stream": True,
        },
    )
    events = sse_events(response.content)
    done = [e["item"]["type"] for e in events if e["type"] == "response.output_item.done"]
    assert "mcp_call" in done and events[-1]["type"] == "response.completed"
    assert deleted == ["b.txt"]


async def test_a_stale_approval_id_is_a_400(guarded: AppGateway) -> None:
    guarded.upstream.add(Reply(text="hi"))
    first = await guarded.client.responses.create(model="m", input="x")
    response = await guarded.http.post(
        "/v1/responses",
        json={
            "model": "m",
            "previous_response_id": first.id,
            "input": [approval("mcpr_nope", True)],
        },
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input[0].approval_request_id"
