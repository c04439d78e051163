"""The operator role and the `/ui` JSON: operator keys see every tenant and read `/metrics`,
tenant keys only their own; revoking the last key keeps the server closed; history from
before the first key stays reachable; the lists count and page truly; the overview counts
what toolwire repaired, from the stored timelines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from toolwire.observe.setup import Observability
from toolwire.server.app import create_app
from toolwire.server.gate.security import Security
from toolwire.server.main import compose
from toolwire.store.database import Store
from toolwire.testing import Chunks, Reply, ScriptedUpstream
from toolwire.testing.asgi import StreamingASGITransport

BASE = "http://127.0.0.1"


@dataclass
class Served:
    store: Store
    http: httpx.AsyncClient
    upstream: ScriptedUpstream


@asynccontextmanager
async def served(url: str) -> AsyncIterator[Served]:
    """The app as `toolwire serve` builds it (with /metrics and /ui), in process; the key
    cache off so keys made by the test count at once."""
    upstream = ScriptedUpstream.in_process()
    upstream.default = Reply(text="ok")
    store = await Store.open(url)
    adapter = upstream.adapter(
        max_retries=1, initial_backoff=0.01, max_backoff=0.02, name="lab-gpu"
    )
    observability = Observability(upstream_name="lab-gpu")
    runtime = await compose(upstream=adapter, store=store, observe=observability.observe)
    app = create_app(
        runtime,
        security=Security(key_cache_seconds=0),
        observability=observability,
    )
    transport = StreamingASGITransport(app)
    http = httpx.AsyncClient(transport=transport, base_url=BASE, timeout=60)
    try:
        yield Served(store, http, upstream)
    finally:
        await transport.shutdown()
        await http.aclose()
        await adapter.aclose()
        await store.close()


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def ask(s: Served, key: str | None, text: str) -> str:
    headers = auth(key) if key else {}
    answer = await s.http.post("/v1/responses", json={"model": "m", "input": text}, headers=headers)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


async def test_operator_sees_every_tenant_and_history_from_before_keys(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 't.db'}") as s:
        early = await ask(s, None, "asked before any key existed")
        _, red = await s.store.keys.create("red")
        _, blue = await s.store.keys.create("blue")
        _, boss = await s.store.keys.create("boss", operator=True)
        mine = await ask(s, red, "red's question\nsecond line")
        theirs = await ask(s, blue, "blue's question")

        async def ids(key: str, query: str = "") -> list[str]:
            listing = await s.http.get("/ui/api/responses" + query, headers=auth(key))
            assert listing.status_code == 200, listing.text
            return [row["id"] for row in listing.json()["data"]]

        assert await ids(red) == [mine]
        assert set(await ids(boss)) == {early, mine, theirs}
        assert await ids(boss, "?key=none") == [early]
        blue_id = next(k.id for k in await s.store.keys.listing() if k.name == "blue")
        assert await ids(boss, f"?key={blue_id}") == [theirs]
        # a tenant's ?key= is ignored: it never widens what it sees
        assert await ids(red, "?key=none") == [mine]
        run = await s.http.get(f"/ui/api/responses/{early}", headers=auth(boss))
        assert run.json()["input_items"][0]["content"][0]["text"] == "asked before any key existed"
        assert (
            await s.http.get(f"/ui/api/responses/{theirs}", headers=auth(red))
        ).status_code == 404
        row = (await s.http.get("/ui/api/responses", headers=auth(red))).json()["data"][0]
        assert row["input"] == "red's question"
        assert row["key_name"] == "red"

        # /metrics and the keys page: operators only, 403 in the OpenAI shape for a tenant
        refused = await s.http.get("/metrics", headers=auth(red))
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "operator_key_required"
        assert (await s.http.get("/metrics", headers=auth(boss))).status_code == 200
        assert (await s.http.get("/ui/api/keys", headers=auth(red))).status_code == 403
        keys = (await s.http.get("/ui/api/keys", headers=auth(boss))).json()["data"]
        assert {k["name"]: k["operator"] for k in keys} == {
            "red": False,
            "blue": False,
            "boss": True,
        }
        me = (await s.http.get("/ui/api/me", headers=auth(red))).json()
        assert me == {**me, "operator": False, "key_name": "red", "keys_in_use": True}


async def test_revoking_the_last_key_does_not_reopen_the_server(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 't.db'}") as s:
        _, key = await s.store.keys.create("only")
        await ask(s, key, "hello")
        assert await s.store.keys.revoke("only") == 1
        anonymous = await s.http.post("/v1/responses", json={"model": "m", "input": "hi"})
        listing = await s.http.get("/ui/api/responses")
        metrics = await s.http.get("/metrics")
    for answer in (anonymous, listing, metrics):
        assert answer.status_code == 401, answer.text
        assert "revoked" in answer.json()["error"]["message"]


async def test_the_list_counts_and_pages_through_everything(database_url: str) -> None:
    async with served(database_url) as s:
        await asyncio.gather(*(ask(s, None, f"question {i}") for i in range(121)))
        await ask(s, None, "the needle in it")
        first = (await s.http.get("/ui/api/responses?limit=50")).json()
        seen = [row["id"] for row in first["data"]]
        offset = 50
        while True:
            page = (await s.http.get(f"/ui/api/responses?limit=50&offset={offset}")).json()
            seen += [row["id"] for row in page["data"]]
            offset += 50
            if not page["has_more"]:
                break
        found = (await s.http.get("/ui/api/responses?q=NEEDLE")).json()
        failed = (await s.http.get("/ui/api/responses?status=failed")).json()
        other_model = (await s.http.get("/ui/api/responses?model=nope")).json()
        this_model = (await s.http.get("/ui/api/responses?model=m&limit=1")).json()
        percent = (await s.http.get("/ui/api/responses?q=%25")).json()  # LIKE's wildcard, escaped
    assert first["total"] == 122 and len(first["data"]) == 50 and first["has_more"]
    assert len(seen) == len(set(seen)) == 122
    assert found["total"] == 1 and found["data"][0]["input"] == "the needle in it"
    assert failed["total"] == 0 and other_model["total"] == 0
    assert this_model["total"] == 122
    assert percent["total"] == 0


def broken_stream() -> Chunks:
    """Arguments streamed whole in one delta, then again: the assembler repairs it."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunk = {
        **base,
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{**call, "function": {"name": "nope", "arguments": "{"}}]},
            }
        ],
    }
    end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return Chunks([chunk, end])


async def test_overview_counts_retries_refusals_and_tokens_per_model(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 't.db'}") as s:
        s.upstream.add(
            Reply(
                text="fine", usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
            )
        )
        await ask(s, None, "plain")
        # a 503 the adapter retries, then an answer
        from toolwire.testing import Body

        s.upstream.add(
            Body({"error": {"message": "busy"}}, status=503),
            Reply(text="after retry"),
        )
        await ask(s, None, "retried")
        # a call to a tool nobody offered: refused, and the model asked again
        s.upstream.add(broken_stream(), Reply(text="done"))
        await ask(s, None, "malformed")
        summary = (await s.http.get("/ui/api/overview")).json()
    total = summary["total"]
    assert total["responses"] == 3
    assert total["retries"] == 1
    assert total["malformed_refused"] >= 1
    assert total["input_tokens"] >= 7
    assert total["latency_p50"] is not None and total["latency_p95"] >= total["latency_p50"]
    (group,) = summary["by_model"]
    assert group["model"] == "m" and group["upstream"] == "lab-gpu" and group["responses"] == 3
    assert sum(summary["series"]["responses"]) == 3
    assert len(summary["series"]["t"]) == len(summary["series"]["retries"]) <= 61
