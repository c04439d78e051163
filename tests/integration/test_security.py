"""Security against a real `toolwire serve`: API keys on every route, ownership, Origin / Host /
content-type guards, request and upstream size limits with bounded memory, safe bind defaults."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import orjson
import pytest

from tests.processes import free_port, toolwire_process
from toolwire.store.database import Store
from toolwire.testing import Chunks, Reply, ScriptedUpstream

MiB = 1024 * 1024
LIMITS = (
    "--max-body-bytes", str(1 * MiB),
    "--max-json-depth", "16",
    "--max-input-items", "8",
    "--max-tools", "4",
    "--max-upstream-event-bytes", str(1 * MiB),
    "--max-upstream-response-bytes", str(4 * MiB),
    "--allow-origin", "http://ok.example",
)  # fmt: skip


@dataclass
class Server:
    base: str
    db: Path
    process: subprocess.Popen[bytes]
    upstream: ScriptedUpstream
    alice: str
    bob: str

    def client(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0)

    def rss(self) -> int:
        """The server process's resident memory, in bytes."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kb = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kb.split()[1]) * 1024


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args], capture_output=True, text=True, timeout=60
    )


def make_key(db: Path, name: str) -> str:
    async def create() -> str:
        store = await Store.open(f"sqlite:///{db}")
        try:
            return (await store.keys.create(name))[1]
        finally:
            await store.close()

    return asyncio.run(create())


@contextmanager
def serve(
    db: Path, *extra: str, host: str | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes], ScriptedUpstream]]:
    port = free_port()
    with ScriptedUpstream() as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
        args += ["--port", str(port), *(["--host", host] if host else []), *extra]
        base = f"http://127.0.0.1:{port}"
        saved = os.environ.get("TOOLWIRE_KEY_CACHE_SECONDS")
        os.environ["TOOLWIRE_KEY_CACHE_SECONDS"] = "0.2"
        try:
            with toolwire_process(*args, health=base + "/health") as process:
                yield base, process, upstream
        finally:
            if saved is None:
                os.environ.pop("TOOLWIRE_KEY_CACHE_SECONDS", None)
            else:
                os.environ["TOOLWIRE_KEY_CACHE_SECONDS"] = saved


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("db") / "toolwire.db"
    created = cli("keys", "create", "alice", "--db", f"sqlite:///{db}")
    assert created.returncode == 0, created.stderr
    alice = created.stdout.strip()
    assert alice.startswith("tw-") and "shown only this once" in created.stderr
    bob = make_key(db, "bob")
    with serve(db, *LIMITS) as (base, process, upstream):
        yield Server(base, db, process, upstream, alice, bob)


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


ROUTES = [
    ("POST", "/v1/responses"),
    ("GET", "/v1/responses/resp_x"),
    ("DELETE", "/v1/responses/resp_x"),
    ("GET", "/v1/responses/resp_x/input_items"),
    ("POST", "/v1/responses/resp_x/cancel"),
    ("POST", "/v1/conversations"),
    ("GET", "/v1/conversations/conv_x"),
    ("POST", "/v1/conversations/conv_x"),
    ("DELETE", "/v1/conversations/conv_x"),
    ("GET", "/v1/conversations/conv_x/items"),
    ("POST", "/v1/conversations/conv_x/items"),
    ("GET", "/v1/conversations/conv_x/items/msg_x"),
    ("DELETE", "/v1/conversations/conv_x/items/msg_x"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
]


# -- keys --------------------------------------------------------------------------------------


def test_every_route_refuses_a_missing_or_wrong_key(server: Server) -> None:
    wrong = "tw-" + "x" * 43
    forms = [{}, auth(wrong), {"api-key": wrong}, {"x-api-key": wrong}, {"authorization": wrong}]
    with httpx.Client(base_url=server.base) as http:
        for method, path in ROUTES:
            for headers in forms:
                r = http.request(
                    method, path, headers=headers, json={} if method == "POST" else None
                )
                assert r.status_code == 401, (method, path, headers, r.text)
                error = r.json()["error"]
                assert error["code"] == "invalid_api_key" and error["param"] is None
                assert error["type"] == "invalid_request_error" and wrong not in error["message"]
        assert http.get("/health").json() == {"status": "ok"}


def test_the_official_client_gets_authentication_errors(server: Server) -> None:
    with pytest.raises(openai.AuthenticationError):
        server.client("tw-wrong").models.list()
    with pytest.raises(openai.AuthenticationError):
        server.client("tw-wrong").responses.create(model="m", input="hi")
    assert [m.id for m in server.client(server.alice).models.list()] == ["scripted-model"]


def test_each_header_form_is_accepted(server: Server) -> None:
    with httpx.Client(base_url=server.base) as http:
        for headers in (auth(server.alice), {"api-key": server.alice}, {"x-api-key": server.bob}):
            assert http.post("/v1/conversations", headers=headers, json={}).status_code == 200


def test_keys_created_and_revoked_while_running_take_effect(server: Server) -> None:
    db = f"sqlite:///{server.db}"
    created = cli("keys", "create", "carol", "--db", db)
    carol = created.stdout.strip()
    assert cli("keys", "create", "carol", "--db", db).returncode == 1  # name taken
    listed = cli("keys", "list", "--db", db).stdout
    assert "alice" in listed and "carol" in listed and carol not in listed

    def status() -> int:
        return httpx.get(server.base + "/v1/models", headers=auth(carol)).status_code

    deadline = time.monotonic() + 10
    while status() != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status() == 200
    assert cli("keys", "revoke", "carol", "--db", db).returncode == 0
    while status() != 401 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status() == 401


# -- ownership ---------------------------------------------------------------------------------


def test_another_key_sees_nothing_of_a_response(server: Server) -> None:
    server.upstream.add(Reply(text="alice's answer"))
    alice, bob = server.client(server.alice), server.client(server.bob)
    response = alice.responses.create(model="scripted-model", input="secret question")
    for call in (
        lambda: bob.responses.retrieve(response.id),
        lambda: bob.responses.input_items.list(response.id),
        lambda: bob.responses.delete(response.id),
        lambda: bob.responses.cancel(response.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    # as an unknown previous_response_id: 400, as OpenAI answers
    with pytest.raises(openai.BadRequestError) as unknown:
        bob.responses.create(model="scripted-model", input="and?", previous_response_id=response.id)
    assert unknown.value.code == "previous_response_not_found"
    assert alice.responses.retrieve(response.id).output_text == "alice's answer"
    assert alice.responses.input_items.list(response.id).data[0].type == "message"
    alice.responses.delete(response.id)


def test_streamed_and_background_responses_belong_to_their_key(server: Server) -> None:
    alice, bob = server.client(server.alice), server.client(server.bob)
    server.upstream.add(Reply(text="streamed"), Reply(text="in the background"))
    with alice.responses.stream(model="scripted-model", input="hi") as stream:
        streamed = stream.get_final_response()
    background = alice.responses.create(model="scripted-model", input="hi", background=True)
    deadline = time.monotonic() + 10
    while alice.responses.retrieve(background.id).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for response_id in (streamed.id, background.id):
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(response_id)
    assert alice.responses.retrieve(background.id).output_text == "in the background"
    server.upstream.add(Reply(text="continued"))
    follow = alice.responses.create(
        model="scripted-model", input="and?", previous_response_id=streamed.id
    )
    assert follow.output_text == "continued"


def test_another_key_sees_nothing_of_a_conversation(server: Server) -> None:
    alice, bob = server.client(server.alice), server.client(server.bob)
    conversation = alice.conversations.create(
        items=[{"type": "message", "role": "user", "content": "private"}], metadata={"a": "1"}
    )
    item = alice.conversations.items.list(conversation.id).data[0]
    for call in (
        lambda: bob.conversations.retrieve(conversation.id),
        lambda: bob.conversations.update(conversation.id, metadata={"b": "2"}),
        lambda: bob.conversations.items.list(conversation.id),
        lambda: bob.conversations.items.create(
            conversation.id, items=[{"type": "message", "role": "user", "content": "x"}]
        ),
        lambda: bob.conversations.items.retrieve(item.id, conversation_id=conversation.id),
        lambda: bob.conversations.items.delete(item.id, conversation_id=conversation.id),
        lambda: bob.conversations.delete(conversation.id),
        lambda: bob.responses.create(
            model="scripted-model", input="more", conversation=conversation.id
        ),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert alice.conversations.retrieve(conversation.id).metadata == {"a": "1"}
    assert len(alice.conversations.items.list(conversation.id).data) == 1
    alice.conversations.delete(conversation.id)


def test_item_ids_are_per_key_no_oracle_no_squatting(server: Server) -> None:
    """A key cannot learn another key's item ids from `duplicate_item_id`, nor take one first;
    an id is still unique among one key's own conversation items."""
    alice, bob = server.client(server.alice), server.client(server.bob)

    def message(item_id: str, content: str = "alice's") -> dict[str, object]:
        return {"type": "message", "role": "user", "content": content, "id": item_id}

    mine = alice.conversations.create(items=[message("msg_alice_1")])  # type: ignore[list-item]
    # bob probing alice's id learns nothing: it is free for him
    theirs = bob.conversations.create(items=[message("msg_alice_1", "bob's")])  # type: ignore[list-item]
    # bob taking alice's next id first does not stop alice from using it
    bob.conversations.items.create(theirs.id, items=[message("msg_alice_2", "bob's")])  # type: ignore[list-item]
    alice.conversations.items.create(mine.id, items=[message("msg_alice_2")])  # type: ignore[list-item]
    # alice's own ids stay unique for her
    with pytest.raises(openai.BadRequestError) as duplicate:
        alice.conversations.items.create(mine.id, items=[message("msg_alice_1")])  # type: ignore[list-item]
    assert duplicate.value.code == "duplicate_item_id"
    # each key's references resolve to its own item, never the other's
    server.upstream.add(Reply(text="ok"))
    bob.responses.create(
        model="scripted-model", input=[{"type": "item_reference", "id": "msg_alice_2"}]
    )
    assert server.upstream.requests[-1].body["messages"][-1]["content"] == "bob's"
    with pytest.raises(openai.NotFoundError):
        bob.conversations.items.retrieve("msg_alice_1", conversation_id=mine.id)
    listed = alice.conversations.items.list(mine.id).data
    assert sorted(str(item.id) for item in listed) == ["msg_alice_1", "msg_alice_2"]
    assert bob.conversations.items.retrieve("msg_alice_1", conversation_id=theirs.id).id == (
        "msg_alice_1"
    )


def test_a_reference_to_another_keys_response_item_is_not_found(server: Server) -> None:
    server.upstream.add(Reply(text="alice's answer"))
    alice, bob = server.client(server.alice), server.client(server.bob)
    response = alice.responses.create(model="scripted-model", input="secret question")
    output_id = response.output[0].id
    assert isinstance(output_id, str)
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(
            model="scripted-model", input=[{"type": "item_reference", "id": output_id}]
        )
    server.upstream.add(Reply(text="again"))
    again = alice.responses.create(
        model="scripted-model",
        input=[
            {"type": "item_reference", "id": output_id},
            {"type": "message", "role": "user", "content": "and?"},
        ],
    )
    assert again.output_text == "again"


# -- guards ------------------------------------------------------------------------------------


def test_origin_host_and_content_type_are_checked(server: Server) -> None:
    key = auth(server.alice)
    with httpx.Client(base_url=server.base) as http:
        r = http.post(
            "/v1/conversations", headers={**key, "origin": "http://evil.example"}, json={}
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
        r = http.post("/v1/conversations", headers={**key, "origin": "http://ok.example"}, json={})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "http://ok.example"
        same = http.post("/v1/conversations", headers={**key, "origin": server.base}, json={})
        assert same.status_code == 200  # the gateway's own /ui page is same-origin
        preflight = http.options(
            "/v1/responses",
            headers={
                "origin": "http://ok.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-headers"] == "authorization, content-type"
        port = server.base.rsplit(":", 1)[1]
        r = http.get("/v1/models", headers={**key, "host": f"rebound.example:{port}"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"
        for host in (f"localhost:{port}", f"127.0.0.2:{port}", f"[::1]:{port}"):
            assert http.get("/v1/models", headers={**key, "host": host}).status_code == 200
        # a "simple" cross-site request: text/plain, no preflight
        r = http.post(
            "/v1/responses",
            headers={**key, "content-type": "text/plain"},
            content=b'{"model": "scripted-model", "input": "hi"}',
        )
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"


# -- limits ------------------------------------------------------------------------------------


def test_request_limits(server: Server) -> None:
    alice = server.client(server.alice)
    message = {"type": "message", "role": "user", "content": "hi"}
    with pytest.raises(openai.BadRequestError) as caught:
        alice.responses.create(model="scripted-model", input=[message] * 9)  # type: ignore[list-item]
    assert caught.value.param == "input" and caught.value.code == "too_many_items"
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    with pytest.raises(openai.BadRequestError) as caught:
        alice.responses.create(model="scripted-model", input="hi", tools=[tool] * 5)  # type: ignore[list-item]
    assert caught.value.param == "tools" and caught.value.code == "too_many_tools"
    deep: object = "x"
    for _ in range(20):
        deep = [deep]
    with pytest.raises(openai.BadRequestError) as caught:
        alice.responses.create(model="scripted-model", input="hi", metadata={"x": deep})  # type: ignore[dict-item]
    assert caught.value.code == "json_too_deep"
    with pytest.raises(openai.APIStatusError) as too_big:
        alice.responses.create(model="scripted-model", input="x" * (2 * MiB))
    assert too_big.value.status_code == 413 and too_big.value.code == "request_too_large"


def _chunked(total: int, piece: int = 256 * 1024) -> Iterator[bytes]:
    """`total` bytes of a JSON body that never ends, in pieces."""
    block = b"x" * piece
    yield b'{"input": "' + block[11:]
    for _ in range(total // piece - 1):
        yield block


def test_a_100_mb_body_is_refused_in_bounded_memory(server: Server) -> None:
    headers = {**auth(server.alice), "content-type": "application/json"}
    before = server.rss()
    # without Content-Length (chunked): counted as it arrives, refused at the limit
    try:
        r = httpx.post(
            server.base + "/v1/responses", headers=headers, content=_chunked(100 * MiB), timeout=30
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    except httpx.TransportError:
        pass  # the server answered 413 and closed while the client was still sending
    # with Content-Length: refused before a byte is read
    try:
        r = httpx.post(
            server.base + "/v1/responses",
            headers={**headers, "content-length": str(100 * MiB)},
            content=_chunked(100 * MiB),
            timeout=30,
        )
        assert r.status_code == 413
    except httpx.TransportError:
        pass
    assert server.rss() - before < 50 * MiB
    assert httpx.get(server.base + "/health").status_code == 200


def test_a_50_mb_upstream_chunk_fails_in_bounded_memory(server: Server) -> None:
    alice = server.client(server.alice)
    before = server.rss()
    server.upstream.add(Chunks(["data: " + "x" * (50 * MiB)], done=False))
    with pytest.raises(openai.APIStatusError) as caught:
        alice.responses.create(model="scripted-model", input="hi", timeout=60)
    assert caught.value.status_code == 502 and caught.value.code == "upstream_response_too_large"
    assert "max_upstream_event_bytes" in caught.value.message
    assert server.rss() - before < 50 * MiB


def test_an_upstream_answer_over_the_total_limit_fails(server: Server) -> None:
    delta = {"choices": [{"index": 0, "delta": {"content": "y" * 60_000}}]}
    frame = "data: " + orjson.dumps(delta).decode() + "\n\n"
    server.upstream.add(Chunks([frame] * 80))  # ~4.6 MiB, every event small
    with pytest.raises(openai.APIStatusError) as caught:
        server.client(server.alice).responses.create(model="scripted-model", input="hi")
    assert caught.value.status_code == 502 and caught.value.code == "upstream_response_too_large"
    assert "max_upstream_response_bytes" in caught.value.message


# -- binding -----------------------------------------------------------------------------------


def test_binding_beyond_loopback_needs_a_key_or_an_explicit_opt_out(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'open.db'}"
    refused = cli("serve", "--upstream", "http://127.0.0.1:9/v1", "--db", db, "--host", "0.0.0.0")
    assert refused.returncode == 2
    assert "toolwire keys create" in refused.stderr and "--allow-unauthenticated" in refused.stderr
    with serve(tmp_path / "open.db", "--allow-unauthenticated", host="0.0.0.0") as (base, _, _):
        port = base.rsplit(":", 1)[1]
        # open to addresses; a name (what a DNS-rebinding page sends) only when allowed
        r = httpx.post(base + "/v1/conversations", json={}, headers={"host": f"10.1.2.3:{port}"})
        assert r.status_code == 200
        r = httpx.post(base + "/v1/conversations", json={}, headers={"host": f"lan.example:{port}"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"
    args = ("--allow-unauthenticated", "--allow-host", "lan.example")
    with serve(tmp_path / "open.db", *args, host="0.0.0.0") as (base, _, _):
        port = base.rsplit(":", 1)[1]
        r = httpx.post(base + "/v1/conversations", json={}, headers={"host": f"lan.example:{port}"})
        assert r.status_code == 200


def test_an_approval_request_of_one_key_cannot_be_approved_by_another(tmp_path: Path) -> None:
    """Inline history lets a client send any request item; the id's signature binds it to the
    key it was issued to, so another key's approval is a 400 and nothing runs."""
    root = tmp_path / "ws"
    root.mkdir()
    config = tmp_path / "toolwire.yaml"
    workspace = {"root": str(root), "allow_exec": True, "exec_needs_approval": True}
    config.write_text(orjson.dumps({"workspace": workspace}).decode())
    db = tmp_path / "toolwire.db"
    alice, bob = make_key(db, "alice"), make_key(db, "bob")
    with serve(db, "--config", str(config)) as (base, _process, upstream):
        upstream.add(Reply(tool_calls=[("exec", {"command": "touch pwned"})]))
        as_alice = openai.OpenAI(base_url=base + "/v1", api_key=alice, max_retries=0)
        as_bob = openai.OpenAI(base_url=base + "/v1", api_key=bob, max_retries=0)
        asking = as_alice.responses.create(model="m", input="touch it", store=False)
        request = next(i for i in asking.output if i.type == "mcp_approval_request")
        inline = [
            {"type": "message", "role": "user", "content": "touch it"},
            request.model_dump(),
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True},
        ]
        with pytest.raises(openai.BadRequestError) as info:
            as_bob.responses.create(model="m", input=inline, store=False)  # type: ignore[arg-type]
        assert info.value.code == "invalid_approval_request"
        assert not (root / "pwned").exists()
        assert len(upstream.chat_requests) == 1  # bob's request never reached the model
