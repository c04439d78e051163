"""Per-key rate limits and token budgets (`store/quotas.py`, `server/gate/quotas.py`), through the
app in process, on SQLite and on PostgreSQL, with two replicas sharing one database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import openai
import pytest

from tests.minutes import start_in_a_fresh_minute_if_needed_async
from toolwire.server.app import create_app
from toolwire.server.main import compose
from toolwire.server.responses.service import ResponsesService
from toolwire.store.database import Store
from toolwire.testing import Reply, ScriptedUpstream
from toolwire.testing.asgi import StreamingASGITransport

BASE = "http://127.0.0.1"
#: what the scripted upstream reports for every call
USAGE = {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}


@dataclass
class Replica:
    store: Store
    http: httpx.AsyncClient


@asynccontextmanager
async def replicas(url: str, count: int) -> AsyncIterator[list[Replica]]:
    """`count` apps on one database (each its own engine and service: replicas)."""
    upstream = ScriptedUpstream.in_process()
    upstream.default = Reply(text="ok", usage=USAGE)
    made: list[tuple[Replica, StreamingASGITransport, ResponsesService]] = []
    try:
        for _ in range(count):
            store = await Store.open(url)
            adapter = upstream.adapter(max_retries=0)
            app = create_app(await compose(upstream=adapter, store=store))
            service: ResponsesService = app.state.responses
            transport = StreamingASGITransport(app)
            http = httpx.AsyncClient(transport=transport, base_url=BASE, timeout=60)
            made.append((Replica(store, http), transport, service))
        yield [replica for replica, _, _ in made]
    finally:
        for replica, transport, _ in made:
            await transport.shutdown()
            await replica.http.aclose()
            await replica.store.close()


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def test_64_racing_requests_overspend_a_budget_by_at_most_one_reservation(
    database_url: str,
) -> None:
    budget = 1000
    async with replicas(database_url, 2) as (one, two):
        _, key = await one.store.keys.create("team", budget=budget, budget_period="day")
        body = {"model": "m", "input": "hi", "max_output_tokens": 100}

        async def ask(replica: Replica) -> httpx.Response:
            return await replica.http.post("/v1/responses", json=body, headers=auth(key))

        answers = await asyncio.gather(*(ask(one if i % 2 else two) for i in range(64)))
        # replica two gives its unused lease back (it would within a flush of going idle;
        # until then it counts as taken, and replica one could not use it)
        await two.store.quotas.flush()
        raced = (await one.store.quotas.usage()).popitem()[1].budget_used
        # then one at a time until refused: settled reservations gave their excess back
        for _ in range(64):
            answers.append(await ask(one))
            if answers[-1].status_code == 429:
                break
        used = (await one.store.quotas.usage()).popitem()[1].budget_used

    granted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert len(granted) + len(refused) == len(answers), {a.status_code for a in answers}
    spent = sum(a.json()["usage"]["total_tokens"] for a in granted)
    # the reservation of one call: the transcript's estimate + max_output_tokens (about 150)
    one_reservation = 200
    assert 0 < raced <= budget + one_reservation
    assert spent <= budget + one_reservation
    # reservations settle: what the key used is what the upstream reported, not the estimates
    assert used == spent
    assert spent >= budget - one_reservation, "the budget was refused well before it was spent"
    error = refused[0].json()["error"]
    assert error["code"] == "insufficient_quota"
    assert error["type"] == "insufficient_quota"
    assert int(refused[0].headers["retry-after"]) > 0
    assert refused[0].headers["x-should-retry"] == "false"


async def test_requests_per_minute_refused_in_openai_shape_with_headers(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/toolwire.db"
    await start_in_a_fresh_minute_if_needed_async(10)
    async with replicas(url, 1) as (replica,):
        _, key = await replica.store.keys.create("team", rpm=2, tpm=100_000)
        _, other = await replica.store.keys.create("other")  # no limits: not affected
        client = openai.AsyncOpenAI(
            base_url=BASE + "/v1", api_key=key, max_retries=0, http_client=replica.http
        )
        for _ in range(2):
            assert (await client.responses.create(model="m", input="hi")).output_text == "ok"
        with pytest.raises(openai.RateLimitError) as refused:
            await client.responses.create(model="m", input="hi")
        unlimited = await replica.http.post(
            "/v1/responses", json={"model": "m", "input": "hi"}, headers=auth(other)
        )
    error = refused.value
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert error.type == "requests"
    headers = error.response.headers
    assert headers["x-ratelimit-limit-requests"] == "2"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-reset-requests"].endswith("s")
    assert headers["x-ratelimit-limit-tokens"] == "100000"
    assert int(headers["x-ratelimit-remaining-tokens"]) == 100_000 - 2 * 50
    assert 1 <= int(headers["retry-after"]) <= 60
    assert unlimited.status_code == 200


async def test_tokens_per_minute_on_the_chat_and_compaction_doors(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/toolwire.db"
    async with replicas(url, 1) as (replica,):
        _, key = await replica.store.keys.create("team", tpm=300)
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}
        first = await replica.http.post("/v1/chat/completions", json=chat, headers=auth(key))
        compact = {"model": "m", "input": [{"role": "user", "content": "summarize me"}]}
        # the compaction reserves its default output (1024 tokens): more than is left
        refused = await replica.http.post("/v1/responses/compact", json=compact, headers=auth(key))
        big = {**chat, "max_tokens": 400}
        too_big = await replica.http.post("/v1/chat/completions", json=big, headers=auth(key))
    assert first.status_code == 200, first.text
    for answer in (refused, too_big):
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"]["code"] == "rate_limit_exceeded"
        assert answer.json()["error"]["type"] == "tokens"
        assert answer.headers["x-ratelimit-limit-tokens"] == "300"
        assert int(answer.headers["x-ratelimit-remaining-tokens"]) == 300 - 50


async def test_a_limit_changed_by_update_applies_and_usage_is_listed(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/toolwire.db"
    await start_in_a_fresh_minute_if_needed_async(10)
    async with replicas(url, 1) as (replica,):
        replica.store.quotas.ttl = 0  # a running server sees changes within this cache time
        record, key = await replica.store.keys.create("team", rpm=1)
        body = {"model": "m", "input": "hi"}
        assert (await replica.http.post("/v1/responses", json=body, headers=auth(key))).is_success
        second = await replica.http.post("/v1/responses", json=body, headers=auth(key))
        assert second.status_code == 429
        assert await replica.store.keys.update("team", rpm=0, budget=10_000) == 1
        third = await replica.http.post("/v1/responses", json=body, headers=auth(key))
        usage = (await replica.store.quotas.usage())[record.id]
    assert third.status_code == 200
    assert usage.budget_used == 50


async def test_a_refusal_in_a_fresh_minute_does_not_refuse_the_next_request(
    tmp_path: object,
) -> None:
    url = f"sqlite:///{tmp_path}/toolwire.db"
    async with replicas(url, 1) as (replica,):
        _, key = await replica.store.keys.create("team", tpm=300)
        big = {"model": "m", "input": "hi", "max_output_tokens": 1000}
        small = {"model": "m", "input": "hi", "max_output_tokens": 50}
        refused = await replica.http.post("/v1/responses", json=big, headers=auth(key))
        granted = await replica.http.post("/v1/responses", json=small, headers=auth(key))
    assert refused.status_code == 429
    assert "Requested 10" in refused.json()["error"]["message"]
    assert granted.status_code == 200, granted.text


async def test_the_messages_door_counts_against_the_key_and_refuses_in_anthropic_shape(
    tmp_path: object,
) -> None:
    """The Anthropic door admits each request like the others: the key's requests per minute
    run out, and the refusal is Anthropic's `rate_limit_error` with the same headers."""
    url = f"sqlite:///{tmp_path}/toolwire.db"
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    await start_in_a_fresh_minute_if_needed_async(10)
    async with replicas(url, 1) as (replica,):
        _, key = await replica.store.keys.create("team", rpm=1)
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        first = await replica.http.post("/v1/messages", json=body, headers=headers)
        refused = await replica.http.post("/v1/messages", json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["content"][0]["text"] == "ok"
    assert refused.status_code == 429
    assert refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert refused.headers["x-ratelimit-limit-requests"] == "1"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
