"""A fleet behind one gateway, in process: every door serves through the router over several
scripted model servers. A call that fails before anything reached the client is answered by
another replica; a turn cut after its text began continues on another replica from that text
(the client sees one answer); a chat tool-call turn (held back) cut mid-call is made again
elsewhere, as is a Responses call held back until judged against its tool's schema; a call
streamed live and cut ends with the door's error event; where each turn was served is stored (or
sealed into a thinking block's or thought's signature), so a continuation on another toolwire
process goes back there; an unknown model is a 404 naming the models served, in each door's
shape (OpenAI's, Anthropic's, Google's)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.inprocess.test_messages import assemble, events_of
from tests.inprocess_gateway import app_gateway, chat_chunks, sse_events, websocket_scope
from toolwire.loop.state import LoopSettings
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.fleet.health import Health
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.router import FleetRouter
from toolwire.upstream.fleet.settings import FleetSettings, HealthSettings, ResumeMode

TEXT_SO_FAR = ["Hello, ", "wor"]
REST = "ld!"
WEATHER = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def text_chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def call_chunk(arguments: str, *, first: bool) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
    if first:
        call.update(id="call_1", type="function")
        call["function"]["name"] = "lookup"
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


CUT_TEXT = Chunks([text_chunk(piece) for piece in TEXT_SO_FAR], disconnect_after=2)
CUT_CALL = Chunks([call_chunk("", first=True), call_chunk('{"ci', first=False)], disconnect_after=2)


def continuing(body: Any) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[-1].get("role") == "assistant"


def cut_then_continue(body: Any) -> Chunks | Reply:
    """Whichever replica gets the first call cuts it after "Hello, wor"; the continuation
    (a trailing assistant message) is answered with the rest."""
    return Reply(text=REST) if continuing(body) else CUT_TEXT


def refusing() -> httpx.AsyncBaseTransport:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    return httpx.MockTransport(refuse)


def replica(
    name: str,
    transport: httpx.AsyncBaseTransport,
    *,
    weight: float = 1.0,
    resume: ResumeMode = "auto",
    threshold: int = 3,
) -> Replica:
    adapter = ChatCompletionsUpstream(
        "http://fleet.invalid/v1", transport=transport, max_retries=0, name=name
    )
    settings = HealthSettings(failure_threshold=threshold, probe_interval=0)
    return Replica(name, adapter, weight=weight, resume=resume, health=Health(settings))


def router(*replicas: Replica) -> FleetRouter:
    return FleetRouter(replicas, FleetSettings(failover_backoff=0.001, failover_max_backoff=0.002))


def pair(
    default: Callable[[Any], Any], **options: Any
) -> tuple[FleetRouter, list[ScriptedUpstream]]:
    scripted = [ScriptedUpstream.in_process(models=["m"]) for _ in range(2)]
    for upstream in scripted:
        upstream.default = default
    fleet = router(*(replica(f"r{i}", up.transport, **options) for i, up in enumerate(scripted)))
    return fleet, scripted


def continuation_of(scripted: list[ScriptedUpstream]) -> dict[str, Any]:
    [request] = [r.body for up in scripted for r in up.chat_requests if continuing(r.body)]
    return dict(request)


def assert_continued(scripted: list[ScriptedUpstream]) -> None:
    """The second call went to the other replica, asking it to go on from the text so far."""
    body = continuation_of(scripted)
    assert body["messages"][-1] == {"role": "assistant", "content": "".join(TEXT_SO_FAR)}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert [len(up.chat_requests) for up in scripted] == [1, 1]


# -- a turn cut after its text began: continued, on every door --------------------------------


async def test_responses_sse_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        )
        events = sse_events(raw.content)
    assert events[-1]["type"] == "response.completed"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Hello, world!"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello, world!"
    assert_continued(scripted)


async def test_responses_json_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        response = await gw.client.responses.create(model="m", input="hi")
    assert response.status == "completed" and response.output_text == "Hello, world!"
    assert_continued(scripted)


async def test_responses_websocket_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        events = await socket_turn(gw.app, {"type": "response.create", "model": "m", "input": "hi"})
    assert events[-1]["type"] == "response.completed"
    assert "".join(e["delta"] for e in events if e["type"].endswith("text.delta")) == (
        "Hello, world!"
    )
    assert_continued(scripted)


async def test_chat_stream_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        )
    chunks, done = chat_chunks(raw.content)
    assert raw.status_code == 200 and done
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello, world!"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert_continued(scripted)


async def test_messages_stream_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    message = assemble(events_of(raw.content))
    assert message["content"] == [{"type": "text", "text": "Hello, world!"}]
    assert message["stop_reason"] == "end_turn"
    assert_continued(scripted)


async def test_gemini_stream_a_cut_answer_continues_on_another_replica() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    chunks = gemini_chunks(raw.content)
    assert raw.status_code == 200 and "error" not in chunks[-1]
    assert gemini_text(chunks) == "Hello, world!"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert_continued(scripted)


async def test_a_cut_answer_where_no_replica_can_continue_ends_with_the_error_event() -> None:
    fleet, scripted = pair(cut_then_continue, resume="off")
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        )
        events = sse_events(raw.content)
        chat = await gw.http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        )
    assert events[-1]["type"] == "response.failed"
    assert "no replica can continue it" in events[-1]["response"]["error"]["message"]
    chunks, done = chat_chunks(chat.content)
    assert not done and "no replica can continue it" in chunks[-1]["error"]["message"]
    assert not any(continuing(r.body) for up in scripted for r in up.chat_requests)


async def test_a_cut_continuation_writes_only_the_budget_left_and_counts_the_cut_output() -> None:
    fleet, scripted = pair(cut_then_continue)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
                "max_completion_tokens": 10,
                "stream_options": {"include_usage": True},
            },
        )
    chunks, done = chat_chunks(raw.content)
    assert done
    body = continuation_of(scripted)
    # "Hello, wor" took 3 tokens (10 bytes, 4 a token, as usage metering estimates)
    assert body["max_tokens"] == 7
    [usage] = [c["usage"] for c in chunks if c.get("usage")]
    assert usage["completion_tokens"] == 5 + 3  # the continuation's own, and the cut call's


async def test_a_prefilled_answer_cut_continues_the_client_s_own_assistant_message() -> None:
    def script(body: Any) -> Chunks | Reply:
        return CUT_TEXT if body["messages"][-1]["content"] == "Say: " else Reply(text=REST)

    fleet, scripted = pair(script)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "stream": True,
                "continue_final_message": True,
                "add_generation_prompt": False,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "Say: "},
                ],
            },
        )
    chunks, done = chat_chunks(raw.content)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert done and text == "Hello, world!"
    resumed = [r.body["messages"] for up in scripted for r in up.chat_requests]
    assert (
        len(resumed) == 2
        and [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Say: Hello, wor"},
        ]
        in resumed
    )


PERSON = {
    "type": "json_schema",
    "json_schema": {
        "name": "person",
        "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
CUT_JSON = Chunks([text_chunk('["Al'), text_chunk("ice")], disconnect_after=2)


def cut_json_then_whole(seen: list[Any]) -> Callable[[Any], Any]:
    """The first call is cut mid-answer; any later one answers the whole of it."""

    def script(body: Any) -> Any:
        seen.append(body)
        return CUT_JSON if len(seen) == 1 else Reply(text='["Alice"]')

    return script


async def test_a_structured_answer_cut_mid_stream_is_never_continued() -> None:
    seen: list[Any] = []
    fleet, scripted = pair(cut_json_then_whole(seen))
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "stream": True,
                "response_format": PERSON,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    chunks, done = chat_chunks(raw.content)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert text == '["Alice' and not done  # what was shown, and no more
    assert "structured output" in chunks[-1]["error"]["message"]
    assert not any(continuing(body) for body in seen) and len(seen) == 1


async def test_a_structured_answer_nothing_of_which_was_sent_is_made_again_whole() -> None:
    for extra in ({"response_format": PERSON}, {"guided_json": {"type": "object"}}):
        seen: list[Any] = []
        fleet, scripted = pair(cut_json_then_whole(seen))
        async with app_gateway(scripted[0], fleet=fleet) as gw:
            answer = await gw.http.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra},
            )
        assert answer.json()["choices"][0]["message"]["content"] == '["Alice"]'
        assert not any(continuing(body) for body in seen) and len(seen) == 2


# -- failures before anything reached the client ---------------------------------------------


async def test_a_refused_or_failing_replica_is_never_seen_by_the_client() -> None:
    live = ScriptedUpstream.in_process(models=["m"])
    live.default = Reply(text="from the live one")
    failing = ScriptedUpstream.in_process(models=["m"])
    failing.default = Body({"error": {"message": "overloaded"}}, status=503)
    dead = refusing()
    fleet = router(
        replica("dead", dead),
        replica("failing", failing.transport),
        replica("live", live.transport),
    )
    async with app_gateway(live, fleet=fleet) as gw:
        for n in range(8):  # distinct sessions: each hashed onto a replica of its own
            answer = await gw.client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"session {n}"}]
            )
            assert answer.choices[0].message.content == "from the live one"
            response = await gw.client.responses.create(model="m", input=f"other {n}")
            assert response.output_text == "from the live one"
    health = {r.name: r.health for r in fleet.replicas}
    assert health["dead"].failures >= 1 and health["failing"].failures >= 1
    # past three failures in a row each was taken out: calls stopped going to it
    assert health["dead"].failures <= 3 and len(failing.chat_requests) <= 3
    assert health["live"].failures == 0 and health["live"].calls == 16


async def test_a_request_every_server_answers_500_opens_no_circuit() -> None:
    """llama.cpp answers 500 for a template or grammar error the request caused: such a
    failure fails over once, and on a second one the client gets the error; no circuit
    counts it, so an unrelated request is served as before."""

    def script(body: Any) -> Body | Reply:
        if "POISON" in json.dumps(body["messages"]):
            return Body({"error": {"message": "Failed to parse tools"}}, status=500)
        return Reply(text="ok")

    fleet, scripted = pair(script)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        for n in range(3):
            poisoned = await gw.http.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": f"POISON {n}"}]},
            )
            assert poisoned.status_code >= 500
            assert "Failed to parse tools" in poisoned.text
        answer = await gw.client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "innocent"}]
        )
    assert answer.choices[0].message.content == "ok"
    assert [r.health.state.value for r in fleet.replicas] == ["closed", "closed"]
    assert all(r.health.failures == 0 for r in fleet.replicas)
    # each poisoned request was tried on two replicas, no more
    assert sum(len(up.chat_requests) for up in scripted) == 3 * 2 + 1


async def test_with_every_replica_out_the_client_reads_no_server_s_name() -> None:
    settings = HealthSettings(failure_threshold=1, probe_interval=0, cooldown=60.0)
    down = [
        Replica(
            f"10.0.0.{n}:8000",
            ChatCompletionsUpstream(
                "http://fleet.invalid/v1", transport=refusing(), max_retries=0, name=f"r{n}"
            ),
            health=Health(settings),
            configured=frozenset(["m"]),
        )
        for n in range(2)
    ]
    live = ScriptedUpstream.in_process(models=["m"])
    async with app_gateway(live, fleet=router(*down)) as gw:
        answers = [
            await gw.http.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": f"x{n}"}]},
            )
            for n in range(2)
        ]
    last = answers[-1]
    assert last.status_code == 503 and "10.0.0." not in last.text
    assert last.json()["error"]["message"] == (
        "no model server for 'm' is available now; try again shortly"
    )
    assert 1 <= int(last.headers["retry-after"]) <= 60


async def test_a_chat_tool_call_cut_mid_call_is_made_again_unseen() -> None:
    calls: list[int] = []

    def first_cut(body: Any) -> Chunks | Reply:
        calls.append(1)
        return CUT_CALL if len(calls) == 1 else Reply(tool_calls=[("lookup", {"city": "Oslo"})])

    fleet, scripted = pair(first_cut)
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [WEATHER],
    }
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post("/v1/chat/completions", json={**request, "stream": True})
    chunks, done = chat_chunks(raw.content)
    assert raw.status_code == 200 and done
    [call] = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert [len(up.chat_requests) for up in scripted] == [1, 1]  # the second on the other


RESPONSES_TOOLS = [
    {"type": "function", "name": "lookup", "parameters": WEATHER["function"]["parameters"]}
]


async def test_a_responses_call_judged_before_it_is_shown_and_cut_is_made_again_unseen() -> None:
    """With calls checked against their tool's schema (the default), a call is held until
    judged: cut mid-call, nothing of it was shown, so another replica answers the turn."""
    calls: list[int] = []

    def first_cut(body: Any) -> Chunks | Reply:
        calls.append(1)
        return CUT_CALL if len(calls) == 1 else Reply(tool_calls=[("lookup", {"city": "Oslo"})])

    fleet, scripted = pair(first_cut)
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        raw = await gw.http.post(
            "/v1/responses",
            json={"model": "m", "input": "weather?", "tools": RESPONSES_TOOLS, "stream": True},
        )
    events = sse_events(raw.content)
    assert events[-1]["type"] == "response.completed"
    [call] = [i for i in events[-1]["response"]["output"] if i["type"] == "function_call"]
    assert json.loads(call["arguments"]) == {"city": "Oslo"}
    assert [len(up.chat_requests) for up in scripted] == [1, 1]  # the second on the other


async def test_a_responses_call_streamed_live_and_cut_ends_with_the_error_event() -> None:
    fleet, scripted = pair(lambda body: CUT_CALL)
    tools = RESPONSES_TOOLS
    # without the argument check a call streams live (`loop/fitting.py`: as with a strict
    # tool on an upstream that enforces it): once shown, it cannot be made again unseen
    live = LoopSettings(check_arguments=False)
    async with app_gateway(scripted[0], fleet=fleet, settings=live) as gw:
        raw = await gw.http.post(
            "/v1/responses",
            json={"model": "m", "input": "weather?", "tools": tools, "stream": True},
        )
    events = sse_events(raw.content)
    assert any(e["type"] == "response.function_call_arguments.delta" for e in events)
    assert events[-1]["type"] == "response.failed"
    assert "broke mid-turn" in events[-1]["response"]["error"]["message"]
    assert sum(len(up.chat_requests) for up in scripted) == 1  # shown: not made again


# -- models ------------------------------------------------------------------------------------


async def test_models_are_the_union_and_an_unknown_one_is_a_404_in_each_door_s_shape() -> None:
    a = ScriptedUpstream.in_process(models=["qwen-coder", "small"])
    b = ScriptedUpstream.in_process(models=["gpt-oss"])
    fleet = router(replica("a", a.transport), replica("b", b.transport))
    await fleet.probe()
    async with app_gateway(a, fleet=fleet) as gw:
        listed = (await gw.http.get("/v1/models")).json()["data"]
        assert sorted(m["id"] for m in listed) == ["gpt-oss", "qwen-coder", "small"]
        served = "gpt-oss, qwen-coder, small"
        responses = await gw.http.post("/v1/responses", json={"model": "llama", "input": "hi"})
        chat = await gw.http.post(
            "/v1/chat/completions",
            json={
                "model": "llama",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
            },
        )
        messages = await gw.http.post(
            "/v1/messages",
            json={
                "model": "llama",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        gemini = await gw.http.post(
            "/v1beta/models/llama:generateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
        b.default = Reply(text="from b")
        routed = await gw.client.chat.completions.create(
            model="gpt-oss", messages=[{"role": "user", "content": "hi"}]
        )
    for answer in (responses, chat):
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert error["code"] == "model_not_found" and served in error["message"]
    assert messages.status_code == 404
    assert messages.json()["error"]["type"] == "not_found_error"
    assert served in messages.json()["error"]["message"]
    assert gemini.status_code == 404  # Google's shape: code, message, status
    assert gemini.json()["error"]["status"] == "NOT_FOUND" and gemini.json()["error"]["code"] == 404
    assert served in gemini.json()["error"]["message"]
    assert routed.choices[0].message.content == "from b" and not a.chat_requests


# -- where a turn was served is stored: a continuation goes back there -------------------------


async def test_a_continuation_goes_to_the_replica_that_served_it_on_another_gateway(
    tmp_path: Path,
) -> None:
    """Gateway 1: replica `b` (much heavier, so every new session hashes to it) refuses, so
    `a` serves. Gateway 2 (a fresh router on the same database, `b` alive): the continuation
    goes to `a`, where its prefix is, although a new session would go to `b`."""
    db = tmp_path / "toolwire.db"
    a = ScriptedUpstream.in_process(models=["m"])
    b = ScriptedUpstream.in_process(models=["m"])
    a.default = Reply(text="from a")
    b.default = Reply(text="from b")
    first = router(replica("a", a.transport), replica("b", refusing(), weight=1000))
    async with app_gateway(a, db, fleet=first) as gw:
        response = await gw.client.responses.create(model="m", input="start", store=True)
        conversation = await gw.client.conversations.create()
        await gw.client.responses.create(model="m", input="begin", conversation=conversation.id)
    assert response.output_text == "from a"
    second = router(replica("a", a.transport), replica("b", b.transport, weight=1000))
    async with app_gateway(a, db, fleet=second) as gw:
        fresh = await gw.client.responses.create(model="m", input="another session")
        continued = await gw.client.responses.create(
            model="m", input="go on", previous_response_id=response.id
        )
        in_conversation = await gw.client.responses.create(
            model="m", input="and on", conversation=conversation.id
        )
        referenced = await gw.client.responses.create(
            model="m", input=[{"type": "item_reference", "id": response.output[0].id}]
        )
    assert fresh.output_text == "from b"  # where a new session goes
    assert continued.output_text == "from a"
    assert in_conversation.output_text == "from a"
    assert referenced.output_text == "from a"


async def test_a_thinking_block_brings_its_session_back_to_the_replica_that_wrote_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "toolwire.db"
    a = ScriptedUpstream.in_process(models=["m"])
    b = ScriptedUpstream.in_process(models=["m"])
    a.default = Reply(text="from a", reasoning="thinking on a")
    b.default = Reply(text="from b")
    ask = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    first = router(replica("a", a.transport), replica("b", refusing(), weight=1000))
    async with app_gateway(a, db, fleet=first) as gw:
        answer = (await gw.http.post("/v1/messages", json=ask)).json()
    thinking = next(block for block in answer["content"] if block["type"] == "thinking")
    history = [
        *ask["messages"],
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "and then?"},
    ]
    second = router(replica("a", a.transport), replica("b", b.transport, weight=1000))
    async with app_gateway(a, db, fleet=second) as gw:
        fresh = (await gw.http.post("/v1/messages", json=ask)).json()
        continued = (await gw.http.post("/v1/messages", json={**ask, "messages": history})).json()
    assert thinking["signature"]
    assert text_of(fresh) == "from b"
    assert text_of(continued) == "from a"


async def test_a_thought_signature_brings_its_session_back_to_the_replica_that_wrote_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "toolwire.db"
    a = ScriptedUpstream.in_process(models=["m"])
    b = ScriptedUpstream.in_process(models=["m"])
    a.default = Reply(text="from a", reasoning="thinking on a")
    b.default = Reply(text="from b")
    path = "/v1beta/models/m:generateContent"
    ask = [{"role": "user", "parts": [{"text": "hi"}]}]
    first = router(replica("a", a.transport), replica("b", refusing(), weight=1000))
    async with app_gateway(a, db, fleet=first) as gw:
        answer = (await gw.http.post(path, json={"contents": ask})).json()
    said = answer["candidates"][0]["content"]
    assert any(part.get("thoughtSignature") for part in said["parts"])
    history = [*ask, said, {"role": "user", "parts": [{"text": "and then?"}]}]
    second = router(replica("a", a.transport), replica("b", b.transport, weight=1000))
    async with app_gateway(a, db, fleet=second) as gw:
        fresh = (await gw.http.post(path, json={"contents": ask})).json()
        continued = (await gw.http.post(path, json={"contents": history})).json()
    assert gemini_text([fresh]) == "from b"
    assert gemini_text([continued]) == "from a"


def gemini_chunks(raw: bytes) -> list[dict[str, Any]]:
    """`alt=sse` frames (an error after the stream opened is the bare error object)."""
    frames = [frame.strip() for frame in raw.decode().split("\r\n\r\n")]
    return [orjson.loads(frame.removeprefix("data: ")) for frame in frames if frame]


def gemini_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for chunk in chunks
        if "candidates" in chunk
        for part in chunk["candidates"][0]["content"]["parts"]
        if not part.get("thought")
    )


def text_of(message: dict[str, Any]) -> str:
    return "".join(block["text"] for block in message["content"] if block["type"] == "text")


async def test_a_session_header_keeps_a_client_on_one_replica() -> None:
    scripted = [ScriptedUpstream.in_process(models=["m"]) for _ in range(4)]
    for upstream in scripted:
        upstream.default = Reply(text="ok")
    fleet = router(*(replica(f"r{i}", up.transport) for i, up in enumerate(scripted)))
    async with app_gateway(scripted[0], fleet=fleet) as gw:
        for n in range(12):  # a different opening each time: only the header ties them
            await gw.client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": f"prompt {n}"}],
                extra_headers={"x-claude-code-session-id": "one-session"},
            )
    assert sorted(len(up.chat_requests) for up in scripted) == [0, 0, 0, 12]


# -- a raw ASGI WebSocket turn -----------------------------------------------------------------


async def socket_turn(app: Any, message: dict[str, Any]) -> list[dict[str, Any]]:
    """One `response.create` over a WebSocket, driven as raw ASGI; the events it got."""
    offered = [
        {"type": "websocket.connect"},
        {"type": "websocket.receive", "text": json.dumps(message)},
    ]
    events: list[dict[str, Any]] = []
    finished = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if offered:
            return offered.pop(0)
        await finished.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(sent: dict[str, Any]) -> None:
        if sent["type"] == "websocket.send":
            event = orjson.loads(sent["text"])
            events.append(event)
            if event["type"] in ("response.completed", "response.failed", "error"):
                finished.set()

    await asyncio.wait_for(app(websocket_scope(), receive, send), 10)
    return events
