"""A model call is charged to its key however its stream ends (`server/gate/metering.py`): the
client hangs up after the text and before the usage chunk, the upstream reports no usage, the
stream is cut. On every door (Responses, chat completions, Messages, Gemini), streamed and not, on
SQLite and PostgreSQL, with two replicas on one database.

The attack (issue 39): a key with a 3,000-token daily budget streamed answers and hung up after
the last text delta; the budget stayed at 1,050 while the upstream produced 10,500 tokens.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.inprocess_gateway import app_gateway
from toolwire.server.app import create_app
from toolwire.server.gate.quotas import QuotaUpstream
from toolwire.server.main import compose
from toolwire.store.database import Store
from toolwire.testing import Chunks, ScriptedUpstream
from toolwire.testing.asgi import StreamingASGITransport
from toolwire.upstream.base import TurnRequest, Upstream
from toolwire.upstream.events import ModelEvent, TextDelta

BASE = "http://127.0.0.1"
TEXT = "word " * 800  # 4,000 bytes: 1,000 tokens by the estimate (no tokenizer upstream)
OUTPUT_TOKENS = 1000
MOST = 2000  # max output tokens every request asks for


class Watched:
    """The upstream adapter, saying when a turn was asked for (and whether streamed) and when
    its text has come through: by the time the test runs again, the quota wrapper above it has
    seen that text."""

    stream_turn_batches = None  # one event at a time, through `stream_turn`

    def __init__(self, inner: Upstream) -> None:
        self.inner = inner
        self.name = inner.name
        self.called = asyncio.Event()
        self.streamed = True
        self.text_seen = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ModelEvent]:
        self.streamed = request.stream
        self.called.set()
        async for event in self.inner.stream_turn(request):
            yield event
            if isinstance(event, TextDelta):
                self.text_seen.set()


class Gate(threading.Event):
    """The scripted upstream's gate (one per call: opened once the test is done with the call,
    so the thread the upstream waits on is free again), also saying when the upstream has
    reached it (all it sends before the gate is sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.reached.set()
        return super().wait(timeout)


@dataclass
class Replica:
    store: Store
    http: httpx.AsyncClient
    transport: StreamingASGITransport
    watched: Watched
    stack: QuotaUpstream


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@asynccontextmanager
async def replicas(url: str, gates: list[Gate]) -> AsyncIterator[list[Replica]]:
    """Two apps on one database. Their upstream streams `TEXT`, then waits at the last of
    `gates` and is cut off without a usage chunk."""
    upstream = ScriptedUpstream.in_process()
    upstream.default = lambda body: Chunks(
        [chunk({"role": "assistant", "content": ""}), chunk({"content": TEXT}), chunk({}, "stop")],
        gate=gates[-1],
        gate_at=2,
        gate_timeout=10,
        done=False,
        disconnect_after=3,
    )
    made: list[Replica] = []
    async with AsyncExitStack() as stack:
        for _ in range(2):
            store = await Store.open(url)
            stack.push_async_callback(store.close)
            watched = Watched(upstream.adapter(max_retries=0))
            runtime = await compose(upstream=watched, store=store)
            transport = StreamingASGITransport(create_app(runtime))
            stack.push_async_callback(transport.shutdown)
            http = httpx.AsyncClient(transport=transport, base_url=BASE, timeout=30)
            stack.push_async_callback(http.aclose)
            assert isinstance(runtime.upstream, QuotaUpstream)
            made.append(Replica(store, http, transport, watched, runtime.upstream))
        try:
            yield made
        finally:
            for gate in gates:
                gate.set()
            await upstream.transport.shutdown()


REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "responses": ("/v1/responses", {"model": "m", "input": "hi", "max_output_tokens": MOST}),
    "chat": (
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": MOST},
    ),
    "messages": (
        "/v1/messages",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": MOST},
    ),
    "gemini": (
        "/v1beta/models/m:generateContent",
        {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": MOST},
        },
    ),
}


async def hang_up_after_the_text(
    replica: Replica, gates: list[Gate], door: str, stream: bool, headers: dict[str, str]
) -> bool:
    """The attack: ask, wait until the answer's text has come through (or, for a non-streamed
    upstream call, until the upstream has sent it), hang up."""
    path, body = REQUESTS[door]
    if door == "gemini":  # Gemini streams at its own address (the body has no `stream`)
        path = (
            path.replace(":generateContent", ":streamGenerateContent?alt=sse") if stream else path
        )
        payload = body
    else:
        payload = {**body, "stream": stream}
    watched = replica.watched
    watched.called.clear()
    watched.text_seen.clear()
    gate = Gate()
    gates.append(gate)
    request = replica.http.build_request("POST", path, json=payload, headers=headers)
    sent = asyncio.create_task(replica.http.send(request, stream=True))
    await watched.called.wait()
    await asyncio.to_thread(gate.reached.wait, 10)
    if watched.streamed:
        await watched.text_seen.wait()
    if stream:
        answer = await sent
        assert answer.status_code == 200, await answer.aread()
        await answer.aclose()
    else:
        sent.cancel()  # a non-streamed client that leaves
        with pytest.raises(asyncio.CancelledError):
            await sent
    await replica.transport.wait_idle()
    await replica.stack.settled()
    gate.set()
    return watched.streamed


async def budget_used(store: Store) -> int:
    return (await store.quotas.usage()).popitem()[1].budget_used


async def test_a_call_cut_short_is_charged_what_it_used_on_every_door(database_url: str) -> None:
    gates: list[Gate] = []
    async with replicas(database_url, gates) as (one, two):
        _, key = await one.store.keys.create("team", budget=100_000, budget_period="day")
        headers = {"authorization": f"Bearer {key}", "anthropic-version": "2023-06-01"}
        charged: dict[tuple[str, bool], tuple[int, bool]] = {}
        turn = 0
        for door in REQUESTS:
            for stream in (True, False):
                replica = (one, two)[turn % 2]
                turn += 1
                before = await budget_used(replica.store)
                streamed = await hang_up_after_the_text(replica, gates, door, stream, headers)
                tokens = await budget_used(replica.store) - before
                charged[door, stream] = (tokens, streamed)
    for (door, stream), (tokens, streamed) in charged.items():
        if streamed:
            # the output received (4,000 bytes) and the prompt sent (a few tokens), never
            # more than the call's reservation (prompt estimate + 2,000)
            assert OUTPUT_TOKENS < tokens < OUTPUT_TOKENS + 200, (door, stream, charged)
        else:
            # a whole answer that never arrived (the chat door's one-turn fast path asks for
            # it unstreamed): what the upstream made of it is unknown, so its reservation
            assert MOST < tokens < MOST + 200, (door, stream, charged)


@pytest.mark.parametrize("ending", ["no usage reported", "cut after the text"])
async def test_a_call_the_upstream_never_reported_is_charged_what_was_counted(
    tmp_path: Path, ending: str
) -> None:
    """An upstream that sends no usage, or whose stream is cut after the text (a failed run):
    the call is charged the prompt and the output toolwire counted, not 0."""
    chunks = [chunk({"role": "assistant", "content": ""}), chunk({"content": TEXT})]
    upstream = ScriptedUpstream.in_process()
    if ending == "no usage reported":
        upstream.add(Chunks([*chunks, chunk({}, "stop")]))
    else:
        upstream.add(Chunks(chunks, done=False, disconnect_after=2))
    async with app_gateway(upstream, tmp_path / "t.db", max_retries=0) as gateway:
        _, key = await gateway.store.keys.create("team", budget=100_000, budget_period="day")
        answer = await gateway.http.post(
            "/v1/responses",
            json={"model": "m", "input": "hi", "max_output_tokens": MOST},
            headers={"authorization": f"Bearer {key}"},
        )
        await gateway.idle()
        assert isinstance(gateway.runtime.upstream, QuotaUpstream)
        await gateway.runtime.upstream.settled()
        tokens = await budget_used(gateway.store)
    assert answer.status_code == (200 if ending == "no usage reported" else 502), answer.text
    assert OUTPUT_TOKENS < tokens < OUTPUT_TOKENS + 200
