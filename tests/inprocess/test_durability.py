"""Durability in process: deadlines, disconnects, expiring fallbacks, failed writes, and
replicas (two services on one database) sweeping, resuming and cancelling each other's runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa

from tests.inprocess_gateway import AppGateway, app_gateway, sse_events
from toolwire import tool
from toolwire.loop.state import LoopSettings
from toolwire.server.main import compose
from toolwire.server.responses.durable import DurabilitySettings
from toolwire.server.responses.service import ResponsesService
from toolwire.store.database import Store
from toolwire.store.engine import execute
from toolwire.store.runs import RunChange
from toolwire.store.tables import runs
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.base import TurnRequest

TEXT = {"choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]}
FAST = DurabilitySettings(
    heartbeat_seconds=0.1, lease_seconds=0.5, poll_seconds=0.05, cancel_wait_seconds=3.0
)


async def stream(gw: AppGateway, body: dict[str, Any], wait: float = 5.0) -> list[dict[str, Any]]:
    response = await gw.http.post("/v1/responses", json={**body, "stream": True}, timeout=wait)
    return sse_events(response.content)


# -- deadlines ------------------------------------------------------------------------------


async def test_an_upstream_that_trickles_bytes_but_no_event_hits_the_idle_deadline(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Chunks([b"d", b"a", b"t", b"a"] * 50, delay=0.05, done=False))
    async with app_gateway(fake_upstream, idle_timeout=0.3) as gw:
        started = time.monotonic()
        events = await stream(gw, {"model": "m", "input": "x"})
        assert time.monotonic() - started < 3
        final = events[-1]["response"]
        assert final["status"] == "failed"
        # error.code on a response object comes from OpenAI's ResponseErrorCode enum
        assert final["error"]["code"] == "server_error"
        assert "event" in final["error"]["message"]
        assert (await gw.client.responses.retrieve(final["id"])).status == "failed"


async def test_a_silent_upstream_hits_the_idle_deadline(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Chunks([TEXT], delay=30))
    async with app_gateway(fake_upstream, idle_timeout=0.2) as gw:
        response = await gw.http.post("/v1/responses", json={"model": "m", "input": "x"})
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_idle_timeout"


async def test_a_response_past_its_overall_deadline_ends_incomplete(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Chunks([TEXT] * 200, delay=0.02))
    async with app_gateway(fake_upstream, settings=LoopSettings(deadline=0.3)) as gw:
        events = await stream(gw, {"model": "m", "input": "x"})
        final = events[-1]["response"]
        assert events[-1]["type"] == "response.incomplete"
        assert final["incomplete_details"]["reason"] == "max_output_tokens"
        assert final["incomplete_details"]["toolwire_reason"] == "response_deadline"
        assert final["output"][0]["content"][0]["text"].startswith("word word")


# -- disconnects and fallbacks ---------------------------------------------------------------


async def test_a_non_streaming_client_that_leaves_cancels_its_run(gw: AppGateway) -> None:
    gw.upstream.add(Chunks([TEXT] * 200, delay=0.02))
    request = asyncio.create_task(gw.http.post("/v1/responses", json={"model": "m", "input": "x"}))
    await wait_for(lambda: asyncio.sleep(0, result=bool(gw.upstream.chat_requests)))
    await asyncio.sleep(0.05)
    request.cancel()
    await gw.idle()
    status = await gw.store.read(
        lambda connection: connection.execute(sa.text("SELECT status FROM responses")).scalar_one()
    )
    assert status == "cancelled"
    assert gw.upstream.remaining == 0 and len(gw.upstream.chat_requests) == 1


async def test_an_html_page_with_status_200_is_an_error_not_a_lasting_fallback(
    gw: AppGateway,
) -> None:
    page = Body("<html><body>Gateway portal</body></html>", headers={"content-type": "text/html"})
    gw.upstream.add(page, Reply(text="streamed again"))
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    failed = await stream(gw, {"model": "m", "input": "x", "tools": tools})
    assert failed[-1]["response"]["status"] == "failed"
    assert "HTML" in failed[-1]["response"]["error"]["message"]
    assert not gw.adapter.refuses_streamed_tools
    ok = await stream(gw, {"model": "m", "input": "x", "tools": tools})
    assert ok[-1]["response"]["status"] == "completed"
    assert gw.upstream.chat_requests[-1].body["stream"] is True


async def test_a_learned_fallback_expires(fake_upstream: ScriptedUpstream) -> None:
    adapter = fake_upstream.adapter(fallback_seconds=0.2, max_retries=0)
    fake_upstream.add(Chunks([], done=False), Reply(text="whole"), Reply(text="streamed"))
    spec = ToolSpec("f", "", {"type": "object"})
    turn = TurnRequest(model="m", transcript=[UserMessage("x")], tools=[spec], stream=True)
    try:
        [_ async for _ in adapter.stream_turn(turn)]
        assert adapter.refuses_streamed_tools
        await asyncio.sleep(0.25)
        assert not adapter.refuses_streamed_tools
        [_ async for _ in adapter.stream_turn(turn)]
        bodies = [r.body["stream"] for r in fake_upstream.chat_requests]
        assert bodies == [True, False, True]
    finally:
        await adapter.aclose()


async def test_a_final_write_that_fails_is_response_failed_not_a_cut_stream(
    gw: AppGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = gw.store.save_response

    async def failing(body: dict[str, Any], **kwargs: Any) -> bool:
        if body["status"] == "completed":
            raise sa.exc.OperationalError("UPDATE", {}, Exception("database is locked"))
        return await original(body, **kwargs)

    monkeypatch.setattr(gw.store, "save_response", failing)
    gw.upstream.add(Reply(text="lost?"))
    events = await stream(gw, {"model": "m", "input": "x"})
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    assert events[-1]["response"]["error"]["code"] == "server_error"
    assert "could not be stored" in events[-1]["response"]["error"]["message"]


async def test_a_stream_finalized_elsewhere_first_is_not_told_it_completed(
    gw: AppGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica took this one for dead (its heartbeat late on a loaded machine) and
    finalized the response `failed` just before the final write: the client is told what is
    stored, never `completed` over a stored `failed`."""
    original = gw.store.save_response

    async def swept_first(body: dict[str, Any], **kwargs: Any) -> bool:
        if body["status"] == "completed":
            error = {"code": "server_error", "message": "lost its lease"}
            await gw.store.runs.finalize(body["id"], "failed", error, body["created_at"])
        return await original(body, **kwargs)

    monkeypatch.setattr(gw.store, "save_response", swept_first)
    gw.upstream.add(Reply(text="answered, but too late"))
    events = await stream(gw, {"model": "m", "input": "x"})
    assert [e["type"] for e in events][-2:] == ["error", "response.failed"]
    stored = await gw.store.get_response(events[-1]["response"]["id"])
    assert stored is not None and stored["status"] == "failed"


# -- replicas on one database ----------------------------------------------------------------

calls: list[str] = []


@tool
async def slow_step(note: str) -> str:
    """Takes its time."""
    calls.append(note)
    await asyncio.sleep(30)
    return "done"


@asynccontextmanager
async def replica(
    upstream: ScriptedUpstream,
    url: str,
    *,
    start: bool = True,
    settings: DurabilitySettings = FAST,
) -> AsyncIterator[ResponsesService]:
    store = await Store.open(url)
    adapter = upstream.adapter(max_retries=0)
    runtime = await compose(upstream=adapter, store=store, server_tools=[slow_step])
    service = ResponsesService(runtime, settings)
    if start:
        await service.start()
    try:
        yield service
    finally:
        await service.stop()
        await adapter.aclose()
        await store.close()


async def wait_for(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def status_of(store: Store, response_id: str) -> str:
    stored = await store.get_response(response_id)
    assert stored is not None
    return str(stored["status"])


async def test_a_dead_replicas_foreground_response_is_failed_at_start_up(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    async with replica(fake_upstream, database_url, start=False) as dead:
        await dead.store.runs.register("rep_dead", "elsewhere", 1, time.time() - 60)
        running = {
            "id": "resp_fg",
            "object": "response",
            "created_at": 1,
            "status": "in_progress",
            "output": [],
            "background": False,
        }
        await dead.store.save_response(
            running,
            input_items=[],
            conversation_id=None,
            run=RunChange("hold", "rep_dead"),
        )
    async with replica(fake_upstream, database_url) as alive:
        stored = await alive.store.get_response("resp_fg")
        assert stored is not None and stored["status"] == "failed"
        assert stored["error"]["code"] == "server_error"
        assert "lost its lease" in stored["error"]["message"]


async def test_a_background_run_is_resumed_after_its_step_and_no_tool_runs_twice(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    calls.clear()
    fake_upstream.add(
        Reply(text="Working.", tool_calls=[("slow_step", {"note": "one"})]),
        Reply(text="Recovered without running it again."),
    )
    body = {"model": "m", "input": "go", "background": True}
    async with replica(fake_upstream, database_url, start=False) as first:
        queued = await first.start_background(await first.prepare(body), body)
        response_id = queued["id"]
        await wait_for(lambda: asyncio.sleep(0, result=bool(calls)))
        stored = await first.store.get_response(response_id)
        assert stored is not None and stored["output"][-1]["status"] == "in_progress"
        # The process dies here: nothing it would still do reaches the database.
        first.recorder.persist = _nothing  # type: ignore[method-assign]
        first.store.runs.release = _nothing  # type: ignore[method-assign]
        gone = runs.update().values(replica_id="rep_gone", updated_at=time.time() - 60)
        await first.store.transact(partial(execute, gone))
        first.background[response_id].cancel()
        await asyncio.gather(*first.background.values(), return_exceptions=True)
    async with replica(fake_upstream, database_url) as second:
        await wait_for(lambda: _finished(second.store, response_id))
        final = await second.store.get_response(response_id)
    assert final is not None and final["status"] == "completed", final
    kinds = [(item["type"], item.get("status")) for item in final["output"]]
    assert kinds == [("message", "completed"), ("mcp_call", "failed"), ("message", "completed")]
    assert "not run again" in final["output"][1]["error"]
    assert calls == ["one"]
    told = fake_upstream.chat_requests[-1].body["messages"][-1]
    assert told["role"] == "tool" and "interrupted" in told["content"]


async def test_a_background_run_goes_back_to_the_queue_when_its_replica_shuts_down(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    """A graceful shutdown is not a cancel: the job is stored as it stands, its lease given
    up, and another replica finishes it."""
    calls.clear()
    fake_upstream.add(
        Reply(text="Working.", tool_calls=[("slow_step", {"note": "one"})]),
        Reply(text="Finished elsewhere."),
    )
    body = {"model": "m", "input": "go", "background": True}
    async with replica(fake_upstream, database_url, start=False) as first:
        queued = await first.start_background(await first.prepare(body), body)
        response_id = queued["id"]
        await wait_for(lambda: asyncio.sleep(0, result=bool(calls)))
    # `first` has shut down here
    async with replica(fake_upstream, database_url, start=False) as probe:
        stored = await probe.store.get_response(response_id)
    assert stored is not None and stored["status"] == "in_progress"
    async with replica(fake_upstream, database_url) as second:
        await wait_for(lambda: _finished(second.store, response_id))
        final = await second.store.get_response(response_id)
    assert final is not None and final["status"] == "completed", final
    assert final["output"][-1]["content"][0]["text"] == "Finished elsewhere."
    assert calls == ["one"]


async def test_cancel_reaches_the_replica_that_runs_the_job(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    calls.clear()
    fake_upstream.add(Reply(tool_calls=[("slow_step", {"note": "long"})]))
    body = {"model": "m", "input": "go", "background": True}
    async with (
        replica(fake_upstream, database_url) as runner,
        replica(fake_upstream, database_url) as other,
    ):
        queued = await runner.start_background(await runner.prepare(body), body)
        await wait_for(lambda: asyncio.sleep(0, result=bool(calls)))
        started = time.monotonic()
        cancelled = await other.cancel(queued["id"])
        assert cancelled["status"] == "cancelled"
        assert time.monotonic() - started < 1.5
        assert (await other.cancel(queued["id"]))["status"] == "cancelled"  # idempotent
        await wait_for(lambda: asyncio.sleep(0, result=not runner.background), seconds=1.0)


async def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


async def _finished(store: Store, response_id: str) -> bool:
    return await status_of(store, response_id) not in ("queued", "in_progress")


async def test_64_concurrent_streams_lose_nothing(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    count = 64
    fake_upstream.add(*[Reply(text=f"answer {n}") for n in range(count * 2)])
    async with app_gateway(fake_upstream) as gw:
        gw.service.store = store = await Store.open(database_url)
        gw.service.replica.store = store
        gw.service.recorder.store = store
        gate = asyncio.Semaphore(count)  # 64 streams at a time, twice over

        async def one(n: int) -> list[dict[str, Any]]:
            async with gate:
                return await stream(gw, {"model": "m", "input": f"q{n}"}, wait=60)

        try:
            results = await asyncio.gather(*[one(n) for n in range(count * 2)])
            finals = [events[-1] for events in results]
            assert all(e["type"] == "response.completed" for e in finals)
            for event in finals:
                assert await status_of(store, event["response"]["id"]) == "completed"
        finally:
            await store.close()


async def test_a_queued_jobs_request_is_sealed_at_rest(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    """The job row must keep the whole request for another replica, MCP credentials included:
    none of it is readable in the table."""
    secret = "sk-mcp-" + "7" * 24
    body = {
        "model": "m",
        "input": "words only the model should read",
        "background": True,
        "tools": [
            {
                "type": "mcp",
                "server_label": "vault",
                "server_url": "https://vault.example/mcp",
                "authorization": secret,
                "headers": {"X-Vault-Token": secret},
            }
        ],
    }
    async with replica(fake_upstream, database_url, start=False) as service:
        service.queue.launch = lambda job, prepared=None: None  # type: ignore[method-assign]
        queued = await service.start_background(await service.prepare(body), body)
        row = await service.store.read(lambda connection: connection.execute(sa.select(runs)).one())
        stored = await service.store.get_response(queued["id"])
    raw = str(row.request)
    assert row.kind == "background" and "sealed_body" in row.request
    assert secret not in raw and "only the model" not in raw
    assert stored is not None and secret not in str(stored)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_on_postgresql_a_cancel_wakes_the_running_replica_without_polling(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    """`NOTIFY` carries the cancel flag to the replica running the job at once: with polling
    every 30 s, the cancel still lands within a few seconds on a loaded machine (milliseconds
    on a quiet one)."""
    calls.clear()
    fake_upstream.add(Reply(tool_calls=[("slow_step", {"note": "long"})]))
    slow = DurabilitySettings(heartbeat_seconds=30, poll_seconds=30, cancel_wait_seconds=20)
    body = {"model": "m", "input": "go", "background": True}
    async with (
        replica(fake_upstream, database_url, settings=slow) as runner,
        replica(fake_upstream, database_url, settings=slow) as other,
    ):
        queued = await runner.start_background(await runner.prepare(body), body)
        await wait_for(lambda: asyncio.sleep(0, result=bool(calls)))
        started = time.monotonic()
        cancelled = await other.cancel(queued["id"])
        elapsed = time.monotonic() - started
        assert cancelled["status"] == "cancelled"
        await wait_for(lambda: asyncio.sleep(0, result=not runner.background), seconds=5.0)
    assert elapsed < 5.0, elapsed


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_on_postgresql_a_job_queued_elsewhere_is_claimed_without_polling(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    fake_upstream.add(Reply(text="picked up"))
    slow = DurabilitySettings(heartbeat_seconds=30, poll_seconds=30)
    no_room = DurabilitySettings(heartbeat_seconds=30, poll_seconds=30, max_background=0)
    body = {"model": "m", "input": "go", "background": True}
    async with (
        replica(fake_upstream, database_url, settings=slow) as worker,
        replica(fake_upstream, database_url, settings=no_room, start=False) as front,
    ):
        queued = await front.start_background(await front.prepare(body), body)
        await wait_for(lambda: _finished(worker.store, queued["id"]), seconds=8.0)
        done = await worker.store.get_response(queued["id"])
    assert done is not None and done["status"] == "completed"
    assert done["output"][-1]["content"][0]["text"] == "picked up"
