"""WebSocket mode of `/v1/responses`, driven by the official `openai` client
(`client.responses.connect()`) and by a bare `websockets` client, against a real `toolwire serve`
with an API key, in front of a ScriptedUpstream."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets

from tests.integration.test_clients import OFFLINE, codex_binary
from tests.processes import free_port, output_so_far, toolwire_process
from toolwire.store.database import Store
from toolwire.testing import Reply, ScriptedUpstream

MAX_BODY = 64 * 1024
TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@dataclass
class Server:
    base: str
    key: str
    upstream: ScriptedUpstream

    @property
    def ws_url(self) -> str:
        return self.base.replace("http://", "ws://") + "/v1/responses"

    def client(self, key: str | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base + "/v1", api_key=key or self.key, max_retries=0
        )


def make_key(db: Path) -> str:
    async def create() -> str:
        store = await Store.open(f"sqlite:///{db}")
        try:
            return (await store.keys.create("ws"))[1]
        finally:
            await store.close()

    return asyncio.run(create())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("db") / "toolwire.db"
    key = make_key(db)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ScriptedUpstream() as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
        args += ["--port", str(port), "--max-body-bytes", str(MAX_BODY)]
        with toolwire_process(*args, health=base + "/health"):
            yield Server(base, key, upstream)


@pytest.fixture
def srv(server: Server) -> Server:
    server.upstream.reset()
    server.upstream.requests.clear()
    return server


async def turn(connection: Any) -> list[Any]:
    """The events of one response (or the one error), in order."""
    events = []
    async for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError(f"the socket closed after {[e.type for e in events]}")


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


async def test_two_responses_on_one_socket(srv: Server) -> None:
    srv.upstream.add(Reply(text="first answer"), Reply(text="second answer"))
    async with srv.client().responses.connect() as connection:
        await connection.response.create(model="m", input="one")
        first = await turn(connection)
        await connection.response.create(model="m", input="two", stream_id="main")
        second = await turn(connection)
    for events, text in ((first, "first answer"), (second, "second answer")):
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert text_of(events) == text
        assert events[-1].response.output_text == text
    assert first[0].response.id != second[0].response.id
    assert {e.stream_id for e in second} == {"main"}  # a request's lane is echoed on its events
    assert {getattr(e, "stream_id", None) for e in first} == {None}
    # the second request is a new conversation: the model does not see the first
    second_request = srv.upstream.chat_requests[1].body
    assert "first answer" not in json.dumps(second_request["messages"])


async def test_store_false_chain_lives_on_its_socket(srv: Server) -> None:
    srv.upstream.add(Reply(text="The code word is cobalt."), Reply(text="cobalt"), Reply(text="ok"))
    async with srv.client().responses.connect() as connection:
        await connection.response.create(model="m", store=False, input="Remember: cobalt.")
        first = (await turn(connection))[-1].response
        await connection.response.create(
            model="m", store=False, previous_response_id=first.id, input="The code word?"
        )
        second = (await turn(connection))[-1]
    assert second.type == "response.completed"
    assert second.response.previous_response_id == first.id
    seen = json.dumps(srv.upstream.chat_requests[1].body["messages"])
    assert "Remember: cobalt." in seen and "The code word is cobalt." in seen
    # nothing was stored: not over HTTP, not on another socket
    async with srv.client() as client:
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(first.id)
        async with client.responses.connect() as other:
            await other.response.create(
                model="m", store=False, previous_response_id=first.id, input="again?"
            )
            refused = await turn(other)
            assert [e.type for e in refused] == ["error"]
            assert refused[0].error.code == "previous_response_not_found"
            # the socket stays open and serves the next response
            await other.response.create(model="m", store=False, input="start over")
            assert (await turn(other))[-1].type == "response.completed"
    assert len(srv.upstream.chat_requests) == 3


async def test_a_stored_response_after_an_unstored_chain_keeps_all_of_it(srv: Server) -> None:
    srv.upstream.add(Reply(text="noted: cobalt"), Reply(text="stored"), Reply(text="cobalt"))
    async with srv.client() as client:
        async with client.responses.connect() as connection:
            await connection.response.create(model="m", store=False, input="Remember: cobalt.")
            first = (await turn(connection))[-1].response
            await connection.response.create(
                model="m", previous_response_id=first.id, input="Now store this."
            )
            stored = (await turn(connection))[-1].response
        # continued over HTTP, from the store: the unstored first turn is part of its history
        await client.responses.create(
            model="m", previous_response_id=stored.id, input="The code word?"
        )
    seen = json.dumps(srv.upstream.chat_requests[2].body["messages"])
    assert "Remember: cobalt." in seen and "noted: cobalt" in seen and "Now store this." in seen


async def test_errors_are_messages_and_the_socket_stays_open(srv: Server) -> None:
    srv.upstream.add(Reply(text="still here"))
    async with websockets.connect(srv.ws_url, additional_headers=auth(srv.key)) as socket:
        refusals = [
            {
                "type": "response.create",
                "model": "m",
                "previous_response_id": "resp_nope",
                "stream_id": "lane-1",
            },
            {"type": "response.cancel"},
            {"type": "response.create", "model": "m", "input": "x", "background": True},
            {"type": "response.create", "model": "m", "input": "x", "temperature": "hot"},
        ]
        answers = []
        for message in refusals:
            await socket.send(json.dumps(message))
            answers.append(json.loads(await socket.recv()))
        await socket.send("not json")
        answers.append(json.loads(await socket.recv()))
        for answer in answers:
            assert answer["type"] == "error"
            assert isinstance(answer["error"]["code"], str) and answer["error"]["message"]
            assert answer["status"] == 400
        assert answers[0]["error"]["code"] == "previous_response_not_found"
        assert answers[0]["error"]["param"] == "previous_response_id"
        assert answers[0]["stream_id"] == "lane-1"  # a refusal names its request's lane
        assert all("stream_id" not in answer for answer in answers[1:])
        assert answers[1]["error"]["param"] == "type"
        assert answers[2]["error"]["param"] == "background"
        assert answers[3]["error"]["param"] == "temperature"
        await socket.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
        kinds = [event["type"] async for event in events_until_terminal(socket)]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert len(srv.upstream.chat_requests) == 1  # no refused message reached the model


async def test_function_call_round_trip(srv: Server) -> None:
    srv.upstream.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="18 °C in Paris.")
    )
    async with srv.client().responses.connect() as connection:
        await connection.response.create(
            model="m", store=False, input="Weather in Paris?", tools=[WEATHER]
        )
        events = await turn(connection)
        kinds = [e.type for e in events]
        assert "response.function_call_arguments.done" in kinds
        first = events[-1].response
        call = next(item for item in first.output if item.type == "function_call")
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
        await connection.response.create(
            model="m",
            store=False,
            previous_response_id=first.id,
            tools=[WEATHER],
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 °C"}],
        )
        final = (await turn(connection))[-1]
        # an output that answers no call is refused, like OpenAI's, and the chain is forgotten
        await connection.response.create(
            model="m",
            store=False,
            previous_response_id=final.response.id,
            input=[{"type": "function_call_output", "call_id": "call_none", "output": "?"}],
        )
        refused = (await turn(connection))[-1]
        await connection.response.create(
            model="m", store=False, previous_response_id=final.response.id, input="more"
        )
        forgotten = (await turn(connection))[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == "18 °C in Paris."
    tool_message = srv.upstream.chat_requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call.call_id
    assert "18 °C" in tool_message["content"]
    assert refused.type == "error" and refused.status == 400
    assert "call_none" in refused.error.message
    assert forgotten.type == "error" and forgotten.error.code == "previous_response_not_found"
    assert len(srv.upstream.chat_requests) == 2


async def test_a_leak_with_prose_after_it_is_re_asked_unseen(srv: Server) -> None:
    """A call written as text with prose after it (issue #35): the socket's events carry the
    prose before it and then the real call; never the markup nor the prose after it."""
    leak = (
        "Let me check.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        "It is sunny in Oslo."
    )
    srv.upstream.add(Reply(text=leak), Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    async with srv.client().responses.connect() as connection:
        await connection.response.create(model="m", input="Oslo?", tools=[WEATHER])
        events = await turn(connection)
    seen = json.dumps([e.model_dump() for e in events])
    assert "<tool_call>" not in seen and "sunny" not in seen
    assert text_of(events).strip() == "Let me check."
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert len(srv.upstream.chat_requests) == 2


async def test_upgrade_needs_the_key_and_an_allowed_origin(srv: Server) -> None:
    for headers in ({}, auth("tw-wrong")):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(srv.ws_url, additional_headers=headers):
                pass
        assert refused.value.response.status_code == 401
        body = json.loads(refused.value.response.body)
        assert body["error"]["code"] == "invalid_api_key"
    with pytest.raises(websockets.InvalidStatus) as refused:  # what the openai client raises
        async with srv.client("tw-wrong").responses.connect() as connection:
            await connection.response.create(model="m", input="x")
    assert refused.value.response.status_code == 401
    headers = {**auth(srv.key), "origin": "https://evil.example"}
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(srv.ws_url, additional_headers=headers):
            pass
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body)["error"]["code"] == "origin_not_allowed"
    # over HTTP the same route still answers POST, with the key
    async with httpx.AsyncClient() as http:
        answer = await http.post(srv.base + "/v1/responses", json={"model": "m", "input": "x"})
    assert answer.status_code == 401
    assert srv.upstream.chat_requests == []


async def test_a_message_over_the_size_limit_closes_the_socket(srv: Server) -> None:
    async with websockets.connect(
        srv.ws_url, additional_headers=auth(srv.key), max_size=None
    ) as socket:
        big = {"type": "response.create", "model": "m", "input": "x" * (MAX_BODY + 1)}
        await socket.send(json.dumps(big))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await socket.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert srv.upstream.chat_requests == []


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def events_until_terminal(socket: Any) -> AsyncIterator[dict[str, Any]]:
    while True:
        event = json.loads(await socket.recv())
        yield event
        if event["type"] in TERMINAL:
            return


async def test_a_message_sent_while_a_response_runs_waits_its_turn(srv: Server) -> None:
    srv.upstream.add(Reply(text="slow first", delay=0.5), Reply(text="second"))
    async with websockets.connect(srv.ws_url, additional_headers=auth(srv.key)) as socket:
        for text in ("one", "two"):  # both sent at once
            await socket.send(json.dumps({"type": "response.create", "model": "m", "input": text}))
        first = [event async for event in events_until_terminal(socket)]
        second = [event async for event in events_until_terminal(socket)]
    assert first[-1]["response"]["output"][0]["content"][0]["text"] == "slow first"
    assert second[-1]["response"]["output"][0]["content"][0]["text"] == "second"
    assert {e["response"]["id"] for e in first if "response" in e} != {
        e["response"]["id"] for e in second if "response" in e
    }


async def test_closing_the_socket_cancels_the_running_response(srv: Server) -> None:
    srv.upstream.add(Reply(text="never read", delay=5))
    async with srv.client() as client:
        async with websockets.connect(srv.ws_url, additional_headers=auth(srv.key)) as socket:
            await socket.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
            created = json.loads(await socket.recv())
            assert created["type"] == "response.created"
            response_id = created["response"]["id"]
            stored = await eventually(client, response_id, lambda s: s == "in_progress")
        stored = await eventually(client, response_id, lambda s: s != "in_progress")
    assert stored.status == "cancelled"


async def eventually(client: openai.AsyncOpenAI, response_id: str, done: Any) -> Any:
    """The stored response once `done(status)`, polled for up to 5 s."""
    for _ in range(100):
        try:
            stored = await client.responses.retrieve(response_id)
        except openai.NotFoundError:
            stored = None
        if stored is not None and done(stored.status):
            return stored
        await asyncio.sleep(0.05)
    raise AssertionError(f"{response_id}: {stored and stored.status}")


async def test_a_socket_open_past_its_limit_is_told_so_and_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_WEBSOCKET_MAX_SECONDS", "1.5")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ScriptedUpstream([Reply(text="in time", delay=1)]) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{tmp_path}/t.db"]
        with toolwire_process(*args, "--port", str(port), health=base + "/health"):
            url = base.replace("http://", "ws://") + "/v1/responses"
            async with websockets.connect(url) as socket:
                await socket.send(
                    json.dumps({"type": "response.create", "model": "m", "input": "hi"})
                )
                answered = [event async for event in events_until_terminal(socket)]
                limit = json.loads(await socket.recv())  # the socket waits, then is told
                with pytest.raises(websockets.ConnectionClosedOK):
                    await socket.recv()
    assert answered[-1]["type"] == "response.completed"
    assert limit["type"] == "error" and limit["status"] == 400
    assert limit["error"]["code"] == "websocket_connection_limit_reached"


def test_codex_cli_over_websocket_mode(tmp_path: Path) -> None:
    """The Codex CLI with `supports_websockets` runs its turns over one socket: a shell call,
    its output sent back, the answer."""
    codex = codex_binary()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    turns = [
        Reply(tool_calls=[("exec_command", {"cmd": "echo ran-over-ws"})]),
        Reply(text="done over the socket"),
    ]
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    config = [
        'model = "scripted-model"',
        'model_provider = "toolwire"',
        "[model_providers.toolwire]",
        'name = "toolwire"',
        f'base_url = "{base}/v1"',
        'wire_api = "responses"',
        "supports_websockets = true",
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    (home / ".codex" / "config.toml").write_text("\n".join(config) + "\n")
    flags = [arg for setting in OFFLINE for arg in ("-c", setting)]
    flags += ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "NO_COLOR": "1"}
    env["CODEX_HOME"] = str(home / ".codex")
    with ScriptedUpstream(turns) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{tmp_path}/t.db"]
        with toolwire_process(*args, "--port", str(port), health=base + "/health") as process:
            result = subprocess.run(
                [str(codex), "exec", *flags, "run echo"],
                env=env,
                cwd=work,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            log = output_so_far(process)
        chat = [request.body for request in upstream.chat_requests]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "done over the socket" in result.stdout
    assert "method=WEBSOCKET path=/v1/responses route=/v1/responses status=101" in log
    assert "method=POST path=/v1/responses" not in log  # no turn fell back to HTTP
    tool_message = chat[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "ran-over-ws" in tool_message["content"]


async def test_a_revoked_key_stops_working_on_an_open_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: revoke a key; the socket opened with it kept working for its whole life
    (the key was checked at the upgrade only)."""
    monkeypatch.setenv("TOOLWIRE_KEY_CACHE_SECONDS", "0")
    db = tmp_path / "t.db"
    store = await Store.open(f"sqlite:///{db}")
    try:
        key = (await store.keys.create("ws"))[1]
    finally:
        await store.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    async def revoke() -> None:
        store = await Store.open(f"sqlite:///{db}")
        try:
            assert await store.keys.revoke("ws") == 1
        finally:
            await store.close()

    create = json.dumps({"type": "response.create", "model": "m", "input": "hi"})
    with ScriptedUpstream([Reply(text="before"), Reply(text="after")]) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
        with toolwire_process(*args, "--port", str(port), health=base + "/health"):
            url = base.replace("http://", "ws://") + "/v1/responses"
            headers = {"Authorization": f"Bearer {key}"}
            async with websockets.connect(url, additional_headers=headers) as socket:
                await socket.send(create)
                first = [event async for event in events_until_terminal(socket)]
                await revoke()
                await socket.send(create)
                refused = json.loads(await socket.recv())
                assert refused["type"] == "error", refused
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await socket.recv()
    assert first[-1]["type"] == "response.completed"
    assert refused["type"] == "error" and refused["status"] == 401
    assert refused["error"]["code"] == "invalid_api_key"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    # nothing ran on the revoked key (the start-up check of the upstream is a GET)
    assert len([r for r in upstream.requests if r.method == "POST"]) == 1


async def test_open_sockets_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: open sockets without end (each may hold a few body-sized messages)."""
    monkeypatch.setenv("TOOLWIRE_MAX_WEBSOCKETS", "2")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ScriptedUpstream([Reply(text="still served")]) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{tmp_path}/t.db"]
        with toolwire_process(*args, "--port", str(port), health=base + "/health"):
            url = base.replace("http://", "ws://") + "/v1/responses"
            async with websockets.connect(url) as first, websockets.connect(url):
                with pytest.raises(websockets.InvalidStatus):
                    async with websockets.connect(url):
                        pass
                await first.send(
                    json.dumps({"type": "response.create", "model": "m", "input": "hi"})
                )
                answered = [event async for event in events_until_terminal(first)]
            # The count goes down as sockets close: the server sees the closes a moment after
            # the client does, so a new socket is accepted within a bounded number of tries.
            accepted = False
            for _ in range(100):
                try:
                    async with websockets.connect(url):
                        accepted = True
                        break
                except websockets.InvalidStatus:
                    await asyncio.sleep(0.05)
            assert accepted
    assert answered[-1]["type"] == "response.completed"
